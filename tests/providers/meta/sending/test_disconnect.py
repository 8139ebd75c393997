"""Disconnecting an account from the admin (docs/platforms/meta.md#disconnect): the app is unsubscribed
(`DELETE /{id}/subscribed_apps` with the source's token), the token wiped, sends stopped, history
kept; Meta's refusal is shown and changes nothing."""

from __future__ import annotations

import json
import urllib.request

import pytest
from cryptography.fernet import Fernet

from ingress.models import InboundEvent, Source, SourceCredential
from ingress.services import source_disconnect
from ingress.services.credentials import credential_store
from replies.models import ReplyAction
from replies.sender import reply_send_next
from replies.services import reply_approve
from tests.doors.conftest import make_user, sign_in
from tests.providers.meta.integration.conftest import TOKEN_ENV
from tests.providers.meta.sending.conftest import (
    APP_ID,
    IG_ACCOUNT,
    applied,
    ig_comment_body,
    meta_source,
    sim,
)

COMMENT = "17900000000000201"
MEDIA = "17800000000000201"
CHANGELIST = "/admin/ingress/source/"


def subscribed_apps(graph) -> list:
    url = f"{graph.instagram_url}/{IG_ACCOUNT}/subscribed_apps?access_token=graph-token-test-only"
    with urllib.request.urlopen(url, timeout=5) as answer:
        return json.loads(answer.read())["data"]


@pytest.fixture
def connected(graph, db, deliver, settings, monkeypatch):
    """An Instagram account subscribed to the app, its token stored (no variable), and one approved reply."""
    settings.CONDUIT_CREDENTIAL_KEYS = (Fernet.generate_key().decode(),)
    source = meta_source(graph, kind="instagram", purposes={"public_ack": "meta-comment-reply"})
    sim(
        graph,
        "/_sim/subscriptions",
        {"account": IG_ACCOUNT, "app_id": APP_ID, "fields": ["comments", "messages"]},
    )
    credential_store(source_id=source.pk, token="ig-token-test-only-0002", actor="owner_test")
    monkeypatch.delenv(TOKEN_ENV)
    sim(
        graph,
        "/_sim/comments",
        {
            "account": IG_ACCOUNT,
            "media_id": MEDIA,
            "id": COMMENT,
            "text": "price?",
            "from_id": "17841400000000901",
        },
    )
    deliver(ig_comment_body(COMMENT, MEDIA))
    assert reply_approve(action_id=ReplyAction.objects.get().pk, actor="reviewer_test").ok
    assert [a["id"] for a in subscribed_apps(graph)] == [APP_ID]
    return source


def test_the_simulator_answers_an_unsubscribe_as_meta_does(graph, connected):
    request = urllib.request.Request(
        f"{graph.instagram_url}/{IG_ACCOUNT}/subscribed_apps?access_token=t", method="DELETE"
    )
    with urllib.request.urlopen(request, timeout=5) as answer:
        assert answer.status == 200 and json.loads(answer.read()) == {"success": True}
    assert subscribed_apps(graph) == []


def test_disconnecting_unsubscribes_wipes_the_token_keeps_history_and_the_approved_reply_never_goes(
    graph, connected
):
    ok, message = source_disconnect(source_id=connected.pk, actor="owner_test")
    assert ok, message
    log = sim(graph, "/_sim/calls", method="GET")["log"]
    assert {"DELETE"} == {c["method"] for c in log if c["method"] == "DELETE"}
    assert [c["path"] for c in log if c["method"] == "DELETE"] == [
        f"/instagram/v26.0/{IG_ACCOUNT}/subscribed_apps"
    ]
    assert subscribed_apps(graph) == []
    source = Source.objects.get(pk=connected.pk)
    assert source.needs_reauth and not SourceCredential.objects.filter(source=source).exists()
    assert InboundEvent.objects.filter(source=source).count() == 1  # history stays
    # Sends stop: the approved reply is not claimed, not failed, and nothing reaches Meta.
    assert reply_send_next() is None
    action = ReplyAction.objects.get()
    assert (action.delivery_state, action.attempt_count) == ("APPROVED", 0)
    assert applied(graph)["public"] == {}


@pytest.mark.parametrize(
    "fault, says",
    [
        ({"mode": "error", "code": 200, "status": 403}, "Meta refused the unsubscribe (code 200"),
        ({"mode": "error", "code": 2, "status": 500}, "Meta refused the unsubscribe (code 2"),
        ({"mode": "drop"}, "may or may not have applied"),
    ],
)
def test_a_failed_unsubscribe_is_the_answer_and_changes_nothing(graph, connected, fault, says):
    sim(graph, "/_sim/faults", {**fault, "count": 1, "method": "DELETE", "path_contains": "subscribed_apps"})
    ok, message = source_disconnect(source_id=connected.pk, actor="owner_test")
    assert not ok and says in message and "nothing changed" in message
    source = Source.objects.get(pk=connected.pk)
    assert not source.needs_reauth and SourceCredential.objects.filter(source=source).exists()
    assert [a["id"] for a in subscribed_apps(graph)] == [APP_ID]


def test_a_token_meta_refuses_cannot_unsubscribe_so_the_source_is_disconnected_and_that_is_said(
    graph, connected
):
    sim(graph, "/_sim/faults", {"mode": "error", "code": 190, "subcode": 460, "status": 400, "count": 1})
    ok, message = source_disconnect(source_id=connected.pk, actor="owner_test")
    assert not ok and "Meta refused the unsubscribe (code 190, token_invalid)" in message
    assert "could not be unsubscribed: disconnected here" in message
    source = Source.objects.get(pk=connected.pk)
    assert source.needs_reauth and not SourceCredential.objects.filter(source=source).exists()
    assert reply_send_next() is None and applied(graph)["public"] == {}


def test_without_a_token_the_source_is_disconnected_and_meta_is_not_asked(graph, connected):
    SourceCredential.objects.filter(source=connected).delete()
    ok, message = source_disconnect(source_id=connected.pk, actor="owner_test")
    assert not ok and "it has no access token, so the app could not be unsubscribed" in message
    assert Source.objects.get(pk=connected.pk).needs_reauth
    assert not [c for c in sim(graph, "/_sim/calls", method="GET")["log"] if c["method"] == "DELETE"]


def test_the_owners_admin_action_asks_first_then_shows_metas_refusal(graph, connected, client):
    sign_in(client, make_user("owner"), verified=False)
    form = {"action": "account_disconnect", "_selected_action": [connected.pk]}
    page = client.post(CHANGELIST, form)
    assert page.status_code == 200 and b"Disconnect account" in page.content
    assert SourceCredential.objects.filter(source=connected).exists()  # asking changed nothing

    sim(graph, "/_sim/faults", {"mode": "error", "code": 200, "status": 403, "count": 1, "method": "DELETE"})
    refused = client.post(CHANGELIST, {**form, "confirm": "yes"}, follow=True)
    shown = " ".join(str(m) for m in refused.context["messages"])
    assert "Meta refused the unsubscribe (code 200" in shown and "nothing changed" in shown
    assert SourceCredential.objects.filter(source=connected).exists()

    done = client.post(CHANGELIST, {**form, "confirm": "yes"}, follow=True)
    assert "Disconnect account: 1 done." in " ".join(str(m) for m in done.context["messages"])
    assert not SourceCredential.objects.filter(source=connected).exists()


def test_an_operator_is_not_offered_the_disconnect(connected, client):
    sign_in(client, make_user("operator"), verified=False)
    response = client.post(CHANGELIST, {"action": "account_disconnect", "_selected_action": [connected.pk]})
    assert response.status_code == 403
    assert SourceCredential.objects.filter(source=connected).exists()


def test_a_token_left_in_its_variable_is_named_for_a_person_to_unset(graph, connected, monkeypatch):
    monkeypatch.setenv(TOKEN_ENV, "graph-token-test-only")
    ok, message = source_disconnect(source_id=connected.pk, actor="owner_test")
    assert not ok and f"its token variable {TOKEN_ENV} still holds a token: unset it" in message
    assert subscribed_apps(graph) == [] and Source.objects.get(pk=connected.pk).needs_reauth
