"""Buyer content answers no question without its permission: no filter, search, ordering or API
parameter may turn a guess about a content column into a row count.

The hole this closes: `?message_text__startswith=...` on Ingress > Inbound events was accepted
(Django allows lookups on a model's own fields), so a reviewer without
`ingress.view_message_content` recovered a hidden comment one character at a time.
"""

from __future__ import annotations

import re

import pytest
from django.contrib import admin
from django.contrib.admin import ModelAdmin
from django.contrib.auth.models import Group, Permission, User
from django.db import models

from conduit.content import MESSAGE_CONTENT, ContentField, content_fields, content_in_lookup
from ingress.models import InboundEvent
from reconcile.models import StagedEvent
from tests.conftest import fixture_body

pytestmark = pytest.mark.usefixtures("sandbox_source")

HIDDEN = "CHECKLIST"  # what comment__northstar says; a reviewer must not learn it
CSRF = re.compile(rb'name="csrfmiddlewaretoken" value="[^"]+"')
# Text columns that are not a buyer's words, each with the reason.
NOT_BUYER_CONTENT = {
    ("ingress", "quarantinereceipt", "review_note"): "written by the staff member who reviewed it",
    ("replies", "replycopy", "text"): "the business's approved copy, which reviewers must read",
    (
        "ingress",
        "sourcecredential",
        "sealed_token",
    ): "an access token sealed at rest, never shown or searched",
}


def _login(client, user: User) -> None:
    client.force_login(user)


def _user(
    name: str, *, groups: tuple[str, ...] = (), every_view: bool = False, content: bool = False
) -> User:
    user = User.objects.create_user(name, password="unused-test-password", is_staff=True)
    user.groups.add(*Group.objects.filter(name__in=groups))
    if every_view:
        user.user_permissions.add(
            *Permission.objects.filter(codename__startswith="view_").exclude(
                codename=MESSAGE_CONTENT.split(".")[1]
            )
        )
    if content:
        app_label, codename = MESSAGE_CONTENT.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    return user


def _content_paths(model: type[models.Model], depth: int = 2, prefix: str = "") -> list[str]:
    """Every lookup path from `model` to a content column, through forward relations up to `depth`."""
    paths = []
    for field in model._meta.get_fields():
        if isinstance(field, ContentField):
            paths.append(prefix + field.name)
        elif depth and field.is_relation and field.concrete and (field.many_to_one or field.one_to_one):
            paths += _content_paths(field.related_model, depth - 1, f"{prefix}{field.name}__")
    return paths


@pytest.fixture
def event(deliver):
    deliver(fixture_body("comment__northstar"))
    event = InboundEvent.objects.get()
    assert event.message_text.startswith(HIDDEN)  # the secret is really there to guess at
    return event


def _answer(client, url: str) -> tuple[int, bytes]:
    response = client.get(url)
    return response.status_code, CSRF.sub(b"", response.content)


def test_the_content_columns_are_declared():
    declared = {(f.model._meta.app_label, f.model._meta.model_name, f.name) for f in content_fields()}
    assert declared == {
        ("ingress", "inboundevent", "message_text"),
        ("ingress", "inboundevent", "sender_handle"),
        ("reconcile", "stagedevent", "text"),
        ("reconcile", "stagedevent", "handle"),
        ("ingress", "inboundevent", "payload_hash"),
        ("reconcile", "stagedevent", "payload_hash"),
        ("ingress", "inboundevent", "reply_address"),
        ("reconcile", "stagedevent", "address"),
    }
    # Every other text column says why it is not a buyer's words: a new one cannot slip by.
    from django.apps import apps

    for model in apps.get_models():
        if model._meta.app_label not in ("ingress", "replies", "reconcile"):
            continue
        for field in model._meta.get_fields():
            if isinstance(field, models.TextField) and not isinstance(field, ContentField):
                key = (model._meta.app_label, model._meta.model_name, field.name)
                assert key in NOT_BUYER_CONTENT, f"{key}: declare it a ContentField or say why it is not"


@pytest.mark.parametrize("role", ["reviewers", "operators"])
def test_a_reviewer_and_an_operator_cannot_guess_the_text(client, event, role):
    _login(client, _user(f"{role}_test", groups=(role,)))
    url = "/admin/ingress/inboundevent/?message_text__startswith="
    right, wrong = _answer(client, url + HIDDEN[:3]), _answer(client, url + "zzz")
    assert right[0] == wrong[0] == 400  # a disallowed lookup, for the right guess and the wrong one
    assert right == wrong


def test_the_guess_is_answered_with_the_permission(client, event):
    _login(client, _user("content_reader_test", groups=("reviewers",), content=True))
    url = "/admin/ingress/inboundevent/?message_text__startswith="
    assert client.get(url + HIDDEN[:3]).context["cl"].result_count == 1
    assert client.get(url + "zzz").context["cl"].result_count == 0


def test_control_without_the_guard_the_row_count_answers_each_guess(client, event, monkeypatch):
    """Positive control: with Django's own lookup_allowed back on the event admin, the guess
    is answered by the row count: the leak the tests above would catch."""
    model_admin = admin.site._registry[InboundEvent]
    monkeypatch.setattr(model_admin, "lookup_allowed", ModelAdmin.lookup_allowed.__get__(model_admin))
    _login(client, _user("reviewer_control_test", groups=("reviewers",)))
    url = "/admin/ingress/inboundevent/?message_text__startswith="
    right, wrong = client.get(url + HIDDEN[:3]), client.get(url + "zzz")
    assert (right.status_code, wrong.status_code) == (200, 200)
    assert (right.context["cl"].result_count, wrong.context["cl"].result_count) == (1, 0)


def _changelists():
    for model, model_admin in admin.site._registry.items():
        paths = _content_paths(model)
        if paths:
            yield model, model_admin, paths


def _walk(client) -> list[str]:
    """Every registered admin, with every path from its model to a content column and each kind
    of lookup: the changelists that were walked. Fails on the first that answers a guess."""
    walked = []
    for model, model_admin, paths in _changelists():
        url = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
        for path in paths:
            for lookup, right, wrong in (
                ("__startswith", HIDDEN[:3], "zzz"),
                ("__contains", HIDDEN, "zzz"),
                ("", "", "zzz"),
                ("__regex", "^C", "^z"),
                ("__gt", "B", "D"),
                ("__isnull", "False", "True"),
            ):
                key = f"{path}{lookup}"
                first, second = (
                    _answer(client, f"{url}?{key}={right}"),
                    _answer(client, f"{url}?{key}={wrong}"),
                )
                assert first[0] == 400, f"{url}?{key}= answered {first[0]}"
                assert first == second, f"{url}?{key}= answers a guess"
                walked.append(f"{url}?{path}")
    return walked


def test_every_admin_refuses_every_lookup_on_every_content_field(client, event):
    """The right guess and a wrong one get the same answer, a refusal, everywhere."""
    _login(client, _user("every_view_test", every_view=True))
    walked = set(_walk(client))
    # The event ledger directly, and through the ledgers that point at events.
    assert {
        "/admin/ingress/inboundevent/?message_text",
        "/admin/replies/replyaction/?event__message_text",
        "/admin/replies/reviewqueue/?event__message_text",
    } <= walked


def test_control_the_walk_fails_without_the_guards(client, event, monkeypatch):
    for model_admin in admin.site._registry.values():
        monkeypatch.setattr(model_admin, "lookup_allowed", ModelAdmin.lookup_allowed.__get__(model_admin))
    _login(client, _user("every_view_control_test", every_view=True))
    # Django refuses a lookup across a relation not in list_filter, so the walk fails at the first
    # admin's own column: the event ledger.
    with pytest.raises(AssertionError, match="inboundevent/.message_text__startswith= answered 200"):
        _walk(client)


def test_no_admin_searches_filters_or_orders_by_content():
    for model, model_admin in admin.site._registry.items():
        for entry in (
            *model_admin.search_fields,
            *model_admin.list_filter,
            *(model_admin.ordering or ()),
            model_admin.date_hierarchy or "",
        ):
            name = entry[0] if isinstance(entry, (tuple, list)) else entry
            if isinstance(name, str) and name:
                assert content_in_lookup(model, name.lstrip("=^@-")) is None, (model, name)
        for column in model_admin.list_display:
            if isinstance(column, str):
                assert content_in_lookup(model, column) is None, (model, column)


def test_a_search_for_the_text_finds_nothing(client, event):
    _login(client, _user("searcher_test", groups=("reviewers",)))
    url = "/admin/ingress/inboundevent/?q="
    assert (
        client.get(url + HIDDEN).context["cl"].result_count
        == client.get(url + "zzz").context["cl"].result_count
    )


def test_the_read_api_takes_no_lookup_on_content(api, event):
    answers = {
        guess: api.get("/api/events/", {"message_text__startswith": guess, "message_text": guess}).json()
        for guess in (HIDDEN[:3], "zzz")
    }
    assert answers[HIDDEN[:3]] == answers["zzz"]
    assert len(answers["zzz"]["results"]) == 1  # the parameter is not a filter at all
    assert HIDDEN.encode() not in str(answers).encode()


def test_the_staged_text_is_content_too():
    assert content_in_lookup(StagedEvent, "text__startswith") is StagedEvent._meta.get_field("text")


def test_the_payload_hash_confirms_no_guess(client, event):
    """A digest of the text confirms a guess as surely as the text: a reviewer may neither filter
    by it nor read it on the event's page."""
    _login(client, _user("hash_guesser_test", groups=("reviewers",)))
    url = "/admin/ingress/inboundevent/?payload_hash="
    right, wrong = _answer(client, url + event.payload_hash), _answer(client, url + "0" * 64)
    assert right[0] == wrong[0] == 400 and right == wrong
    page = client.get(f"/admin/ingress/inboundevent/{event.pk}/change/").content.decode()
    assert event.payload_hash not in page and HIDDEN not in page and "They wrote" not in page
    assert event.event_key in page  # the page itself is served


def test_the_payload_hash_is_shown_with_the_permission(client, event):
    _login(client, _user("hash_reader_test", groups=("reviewers",), content=True))
    page = client.get(f"/admin/ingress/inboundevent/{event.pk}/change/").content.decode()
    assert event.payload_hash in page and HIDDEN in page
