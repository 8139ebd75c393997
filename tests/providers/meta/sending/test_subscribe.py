"""Subscribing the app to an account's fields, verified: Meta's "success" is read back before the
account counts as subscribed, a refusal is shown as a refusal, and only owners may ask."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission, User

from ingress.models import Source
from ingress.services.subscriptions import source_subscribe
from tests.providers.meta.integration.conftest import APP_ID
from tests.providers.meta.sending.conftest import meta_source, sim


@pytest.fixture
def unsubscribed(graph, db):
    source = meta_source(graph, kind="instagram", purposes={"public_ack": "meta-comment-reply"})
    sim(graph, "/_sim/subscriptions", {"account": source.account_ref, "app_id": APP_ID, "fields": []})
    return source


def _subscribed_fields(graph, source) -> list[str]:
    apps = graph.state.subscribed_apps(source.account_ref)
    return next((a["subscribed_fields"] for a in apps if a["id"] == APP_ID), [])


def test_subscribing_asks_for_the_fields_the_event_types_need_and_reads_them_back(unsubscribed, graph):
    assert source_subscribe(source_id=unsubscribed.pk) == ""
    assert _subscribed_fields(graph, unsubscribed) == ["comments", "messages"]
    calls = [c["path"] for c in sim(graph, "/_sim/calls", method="GET")["log"]]
    assert any(p.endswith(f"/{unsubscribed.account_ref}/subscribed_apps") for p in calls)
    source = Source.objects.get(pk=unsubscribed.pk)
    assert source.subscription_problem == "" and source.subscription_checked_at is not None


def test_a_success_that_subscribed_nothing_is_not_reported_subscribed(unsubscribed, graph, monkeypatch):
    """A peer's subscribe call returned true on failure: Meta's word is read back, not trusted."""
    monkeypatch.setattr(
        graph.state, "subscription_set", lambda **kwargs: None
    )  # answers success, keeps nothing
    problem = source_subscribe(source_id=unsubscribed.pk)
    assert (
        problem
        == f"app {APP_ID} is not subscribed to account {unsubscribed.account_ref}: Meta delivers nothing"
    )
    assert Source.objects.get(pk=unsubscribed.pk).subscription_problem == problem


def test_metas_refusal_is_shown_as_a_refusal_with_its_code(unsubscribed, graph):
    sim(graph, "/_sim/faults", {"mode": "error", "code": 200, "count": 1, "path_contains": "subscribed_apps"})
    problem = source_subscribe(source_id=unsubscribed.pk)
    assert problem.startswith("Meta refused the subscription (code 200")
    assert Source.objects.get(pk=unsubscribed.pk).subscription_problem == problem
    assert _subscribed_fields(graph, unsubscribed) == []


def test_only_owners_subscribe_from_the_admin_and_see_the_verified_result(unsubscribed, graph, client):
    form = {"action": "subscription_verify", "_selected_action": [unsubscribed.pk]}
    editor = User.objects.create_user("editor_test", password="unused-test-password", is_staff=True)
    editor.user_permissions.add(*Permission.objects.filter(codename__in=["view_source", "change_source"]))
    client.force_login(editor)
    assert b"subscription_verify" not in client.get("/admin/ingress/source/").content
    client.post("/admin/ingress/source/", {**form, "confirm": "yes"})
    assert _subscribed_fields(graph, unsubscribed) == []

    owner = User.objects.create_user("owner_test", password="unused-test-password", is_staff=True)
    owner.groups.add(Group.objects.get(name="owners"))
    client.force_login(owner)
    shown = client.post("/admin/ingress/source/", form)
    assert shown.status_code == 200 and b"then reads the subscription back" in shown.content
    done = client.post("/admin/ingress/source/", {**form, "confirm": "yes"}, follow=True)
    assert b"Subscribe the app and verify: 1 done." in done.content
    assert _subscribed_fields(graph, unsubscribed) == ["comments", "messages"]
    # Refused, the owner reads the refusal, not a success.
    sim(graph, "/_sim/faults", {"mode": "error", "code": 200, "count": 1, "path_contains": "subscribed_apps"})
    refused = client.post("/admin/ingress/source/", {**form, "confirm": "yes"}, follow=True).content.decode()
    assert "not subscribed: Meta refused the subscription (code 200, failed)" in refused
    assert "1 done" not in refused
