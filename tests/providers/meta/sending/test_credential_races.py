"""What the token refresh does when a person, a rotation or another source gets in its way: a
token stored meanwhile is never overwritten or marked refused, a rotation does not make the
refresh throw its new token away, one source's failure never stops the others', and a token Meta
says never expires stops counting as expiring."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from cryptography.fernet import Fernet
from django.utils import timezone

from conduit.providers.meta import tokens
from conduit.providers.meta.graph import GraphResponse
from ingress.models import SourceCredential
from ingress.selectors import source_config
from ingress.services.credentials import (
    credential_store,
    credentials_expiring,
    credentials_refresh,
    credentials_rotate,
)
from ingress.services.subscriptions import subscriptions_check
from tests.providers.meta.sending.conftest import meta_source, sim

DAY = 24 * 3600
OLD, NEW = Fernet.generate_key().decode(), Fernet.generate_key().decode()


@pytest.fixture
def instagram(graph, db, settings):
    settings.CONDUIT_CREDENTIAL_KEYS = (OLD,)
    source = meta_source(graph, kind="instagram", purposes={"public_ack": "meta-comment-reply"})
    token = sim(graph, "/_sim/tokens", {"expires_in": 30 * DAY})["token"]
    credential_store(
        source_id=source.pk, token=token, actor="owner_test", issued_at=timezone.now() - timedelta(days=2)
    )
    return source


def _during_the_call(monkeypatch, meanwhile):
    real = tokens.token_renew

    def renew(**kwargs):
        renewal = real(**kwargs)
        meanwhile()
        return renewal

    monkeypatch.setattr(tokens, "token_renew", renew)


def test_a_refusal_of_the_old_token_does_not_stop_a_source_whose_token_a_person_replaced(
    instagram, graph, monkeypatch
):
    sim(graph, "/_sim/faults", {"mode": "error", "code": 190, "subcode": 460, "status": 400, "count": 1})
    _during_the_call(
        monkeypatch,
        lambda: credential_store(
            source_id=instagram.pk, token="IGQpersonStoredAFreshOne01", actor="owner_test"
        ),
    )
    assert credentials_refresh() == {instagram.name: "replaced_meanwhile"}
    instagram.refresh_from_db()
    assert not instagram.needs_reauth
    assert source_config(instagram, with_token=True).access_token == "IGQpersonStoredAFreshOne01"


def test_positive_control_without_a_person_the_refusal_stops_the_source(instagram, graph):
    sim(graph, "/_sim/faults", {"mode": "error", "code": 190, "subcode": 460, "status": 400, "count": 1})
    assert credentials_refresh() == {instagram.name: "refused"}
    instagram.refresh_from_db()
    assert instagram.needs_reauth


def test_a_rotation_during_the_refresh_keeps_the_refreshed_token(instagram, graph, monkeypatch, settings):
    def rotate():
        settings.CONDUIT_CREDENTIAL_KEYS = (NEW, OLD)
        assert credentials_rotate().resealed == 1

    before = source_config(instagram, with_token=True).access_token
    _during_the_call(monkeypatch, rotate)
    assert credentials_refresh() == {instagram.name: "refreshed"}
    settings.CONDUIT_CREDENTIAL_KEYS = (NEW,)
    assert source_config(instagram, with_token=True).access_token not in ("", before)


def test_one_sources_surprise_never_stops_the_others_refresh(instagram, graph, db, monkeypatch, caplog):
    other = meta_source(graph, kind="page", purposes={"public_ack": "meta-comment-reply"}, name="page-other")
    token = sim(graph, "/_sim/tokens", {"expires_in": 30 * DAY})["token"]
    credential_store(
        source_id=other.pk, token=token, actor="owner_test", issued_at=timezone.now() - timedelta(days=3)
    )
    real = tokens.token_renew

    def renew(**kwargs):
        if kwargs["access_token"] == token:
            raise OverflowError("a malformed expiry")
        return real(**kwargs)

    monkeypatch.setattr(tokens, "token_renew", renew)
    assert credentials_refresh() == {"page-other": "failed", instagram.name: "refreshed"}  # oldest first
    assert "source=page-other token refresh raised" in caplog.text


def test_no_call_starts_past_the_budget(instagram, graph, caplog):
    calls = sim(graph, "/_sim/calls", method="GET")["calls"]
    assert credentials_refresh(budget=-1) == {}
    assert sim(graph, "/_sim/calls", method="GET")["calls"] == calls
    assert f"token refresh stopped at its budget: source={instagram.name}" in caplog.text


def test_a_token_meta_says_never_expires_stops_counting_as_expiring(graph, db, settings):
    settings.CONDUIT_CREDENTIAL_KEYS = (OLD,)
    source = meta_source(graph, kind="page", purposes={"public_ack": "meta-comment-reply"})
    token = sim(graph, "/_sim/tokens", {"expires_in": 400 * DAY})["token"]
    credential_store(
        source_id=source.pk, token=token, actor="owner_test", expires_at=timezone.now() + timedelta(days=1)
    )
    assert credentials_expiring().count() == 1  # as a person stored it
    real_debug = graph.state.token_debug
    graph.state.token_debug = lambda t: {**real_debug(t), "expires_at": 0}  # Meta: a Page token never expires
    assert credentials_refresh() == {source.name: "checked"}
    assert SourceCredential.objects.get().expires_at is None
    assert credentials_expiring().count() == 0
    assert credentials_refresh(now=timezone.now() + timedelta(days=5)) == {
        source.name: "checked"
    }  # never refused


def test_the_token_inspection_presents_the_app_token_when_the_source_has_one(monkeypatch):
    asked = {}

    def graph_get(**call):
        asked.update(call)
        return GraphResponse({"data": {"is_valid": True, "expires_at": 0}}, 40, None)

    monkeypatch.setattr(tokens, "graph_get", graph_get)
    renewal = tokens.token_renew(
        base_url="https://graph.facebook.com/v26.0",
        access_token="EAA_test_page",
        issued_at=timezone.now(),
        now=timezone.now(),
        timeout=5,
        app_token="900000000000001|app-secret-test",
    )
    assert asked["access_token"] == "900000000000001|app-secret-test"
    assert asked["params"] == {"input_token": "EAA_test_page"}
    assert renewal.never_expires and renewal.expires_at is None
    assert "EAA" not in repr(tokens.TokenRenewal("refreshed", access_token="EAA_test_secret"))


def test_one_unreadable_credential_does_not_stop_the_subscription_check_of_the_others(
    instagram, graph, db, settings
):
    page = meta_source(graph, kind="page", purposes={"public_ack": "meta-comment-reply"})
    settings.CONDUIT_CREDENTIAL_KEYS = (NEW,)  # the instagram source's token no longer opens
    found = subscriptions_check(timeout=5)
    assert found[instagram.name] == "the stored access token decrypts under no configured key"
    assert page.name in found


def test_the_log_boundary_withholds_each_credential_key_alone(monkeypatch, caplog):
    from conduit.logging import BoundaryFilter

    monkeypatch.setenv("CONDUIT_CREDENTIAL_KEYS", f"{NEW},{OLD}")
    boundary = BoundaryFilter()
    record = logging.LogRecord("conduit.test", logging.WARNING, __file__, 1, "key %s", (OLD,), None)
    boundary.filter(record)
    assert OLD not in record.getMessage()
