"""Stored tokens kept alive by the hourly refresh: an Instagram Login token refreshed keeps sends
going across its old expiry (the simulator's clock moved, not waited); a refused one stops the
source's sends, raises the alert's gauge and the front page's count, and reconnecting resumes each
waiting send once. A Facebook token is inspected: its expiry and scopes recorded, refusal marked."""

from __future__ import annotations

from datetime import timedelta

import pytest
from cryptography.fernet import Fernet
from django.utils import timezone

from console.metrics import LedgerCollector
from ingress.models import SourceCredential
from ingress.selectors import source_config
from ingress.services import source_reauthorized
from ingress.services.credentials import credential_store, credentials_expiring, credentials_refresh
from replies.models import ReplyAction
from replies.sender import reply_send, reply_send_next
from tests.providers.meta.integration.conftest import TOKEN_ENV
from tests.providers.meta.sending.conftest import applied, approved_comment, meta_source, sim

DAY = 24 * 3600
MEDIA = "17800000000000029"


@pytest.fixture
def keys(settings):
    settings.CONDUIT_CREDENTIAL_KEYS = (Fernet.generate_key().decode(),)


def _token(graph, **registration) -> str:
    return sim(graph, "/_sim/tokens", registration)["token"]


@pytest.fixture
def instagram(graph, db, keys, monkeypatch):
    """An Instagram Login source whose only token is the stored one, a day and more old, expiring
    in 2 days on the simulator (which from now refuses any token it did not issue)."""
    source = meta_source(graph, kind="instagram", purposes={"public_ack": "meta-comment-reply"})
    monkeypatch.delenv(TOKEN_ENV)
    token = _token(graph, expires_in=2 * DAY, issued_at=graph.state.now() - 25 * 3600)
    credential_store(
        source_id=source.pk,
        token=token,
        actor="owner_test",
        issued_at=timezone.now() - timedelta(hours=25),
        expires_at=timezone.now() + timedelta(days=2),
    )
    return source


def _approved(graph, deliver, source, comment: str):
    return approved_comment(graph, deliver, source, comment, MEDIA)


def _gauge(name: str) -> float:
    for family in LedgerCollector().collect():
        if family.name == name:
            return family.samples[0].value
    raise AssertionError(f"no gauge {name}")


def test_a_refreshed_token_keeps_sends_going_across_its_old_expiry(instagram, graph, deliver):
    assert reply_send(action_id=_approved(graph, deliver, instagram, "17900000000000301").pk) == "SENT"
    before = SourceCredential.objects.get()

    assert credentials_refresh() == {instagram.name: "refreshed"}
    after = SourceCredential.objects.get()
    assert after.last_four != before.last_four and after.stored_by == "system:token-refresh"
    assert timedelta(days=59) < after.expires_at - timezone.now() <= timedelta(days=60)
    assert graph.state.refreshes == 1

    sim(graph, "/_sim/clock", {"advance_seconds": 3 * DAY})  # past the old token's expiry
    assert reply_send(action_id=_approved(graph, deliver, instagram, "17900000000000302").pk) == "SENT"
    assert applied(graph)["public"] == {"17900000000000301": 1, "17900000000000302": 1}
    # Refreshed a moment ago: the next run asks nothing of Meta.
    assert credentials_refresh() == {instagram.name: "kept"}
    assert graph.state.refreshes == 1


def test_positive_control_unrefreshed_the_old_token_dies_at_its_expiry(instagram, graph, deliver):
    """What the test above relies on: past its expiry the simulator refuses the old token (190/463)."""
    sim(graph, "/_sim/clock", {"advance_seconds": 3 * DAY})
    assert (
        reply_send(action_id=_approved(graph, deliver, instagram, "17900000000000303").pk)
        == "FAILED_BEFORE_SEND"
    )
    instagram.refresh_from_db()
    assert instagram.needs_reauth and applied(graph)["public"] == {}


def test_a_token_younger_than_a_day_is_not_refreshed(graph, db, keys, monkeypatch):
    source = meta_source(graph, kind="instagram", purposes={"public_ack": "meta-comment-reply"})
    credential_store(source_id=source.pk, token=_token(graph, expires_in=60 * DAY), actor="owner_test")
    assert credentials_refresh() == {source.name: "kept"}
    assert graph.state.refreshes == 0
    # A day later it is.
    assert credentials_refresh(now=timezone.now() + timedelta(hours=24, minutes=1)) == {
        source.name: "refreshed"
    }


def test_a_refused_token_stops_sends_alerts_and_reconnecting_resumes_each_waiting_send_once(
    instagram, graph, deliver, admin_client
):
    waiting = [_approved(graph, deliver, instagram, f"1790000000000031{i}") for i in range(2)]
    sim(graph, "/_sim/faults", {"mode": "error", "code": 190, "subcode": 460, "status": 400, "count": 1})
    assert credentials_refresh() == {instagram.name: "refused"}
    instagram.refresh_from_db()
    assert instagram.needs_reauth
    assert reply_send_next() is None  # the source's sends wait, no attempt used
    assert all(ReplyAction.objects.get(pk=a.pk).delivery_state == "APPROVED" for a in waiting)
    assert _gauge("conduit_sources_needing_reauth") == 1
    assert credentials_refresh() == {}  # a source waiting for a person is not asked again

    # A token Meta refuses does not clear the flag: the reconnect makes a Graph call with it first.
    credential_store(source_id=instagram.pk, token="IGQnotIssuedByMeta000000000", actor="owner_test")
    with pytest.raises(ValueError, match=r"stays waiting: Meta refused the access token \(190\)"):
        source_reauthorized(source_id=instagram.pk, actor="owner_test")
    instagram.refresh_from_db()
    assert instagram.needs_reauth and reply_send_next() is None

    # Reconnect: the new token stored, then the flag cleared; each waiting send goes out once.
    credential_store(source_id=instagram.pk, token=_token(graph, expires_in=60 * DAY), actor="owner_test")
    source_reauthorized(source_id=instagram.pk, actor="owner_test")
    while reply_send_next() is not None:
        pass
    assert applied(graph)["public"] == {"17900000000000310": 1, "17900000000000311": 1}
    assert _gauge("conduit_sources_needing_reauth") == 0


def test_a_token_past_its_stored_expiry_is_refused_without_asking_meta(instagram, graph):
    SourceCredential.objects.update(expires_at=timezone.now() - timedelta(minutes=1))
    calls = sim(graph, "/_sim/calls", method="GET")["calls"]
    assert credentials_refresh() == {instagram.name: "refused"}
    assert sim(graph, "/_sim/calls", method="GET")["calls"] == calls
    instagram.refresh_from_db()
    assert instagram.needs_reauth


def test_a_token_stored_by_a_person_meanwhile_is_not_overwritten_by_the_refresh(
    instagram, graph, monkeypatch
):
    from conduit.providers.meta import tokens

    real = tokens.token_renew

    def renew_while_a_person_reconnects(**kwargs):
        renewal = real(**kwargs)
        credential_store(source_id=instagram.pk, token="EAApersonStoredThisOne0000x9q", actor="owner_test")
        return renewal

    monkeypatch.setattr(tokens, "token_renew", renew_while_a_person_reconnects)
    assert credentials_refresh() == {instagram.name: "replaced_meanwhile"}
    assert source_config(instagram, with_token=True).access_token == "EAApersonStoredThisOne0000x9q"


def test_expiring_tokens_are_counted_on_the_front_page_and_by_the_gauge(instagram, admin_client):
    assert credentials_expiring().count() == 1  # 2 days left
    assert _gauge("conduit_access_tokens_expiring") == 1
    page = admin_client.get("/admin/").content.decode()
    assert 'id="work-tokens_expiring"' in page and "Access tokens expiring" in page
    listed = admin_client.get("/admin/ingress/source/?attention=token").content.decode()
    assert instagram.name in listed
    SourceCredential.objects.update(expires_at=timezone.now() + timedelta(days=30))
    assert credentials_expiring().count() == 0 and _gauge("conduit_access_tokens_expiring") == 0


def test_a_facebook_token_is_inspected_its_expiry_and_scopes_recorded(graph, db, keys):
    source = meta_source(graph, kind="page", purposes={"public_ack": "meta-comment-reply"})
    expires = int(graph.state.now()) + 40 * DAY
    token = _token(graph, expires_at=expires, scopes=["pages_manage_engagement", "pages_read_engagement"])
    credential_store(source_id=source.pk, token=token, actor="owner_test")
    assert credentials_refresh() == {source.name: "checked"}
    credential = SourceCredential.objects.get()
    assert int(credential.expires_at.timestamp()) == expires
    assert credential.scopes == ["pages_manage_engagement", "pages_read_engagement"]
    assert graph.state.refreshes == 0

    sim(graph, "/_sim/tokens", {"token": token, "expires_at": expires, "valid": False})
    assert credentials_refresh() == {source.name: "refused"}
    source.refresh_from_db()
    assert source.needs_reauth
