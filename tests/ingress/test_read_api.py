"""The token-authenticated read API: events with reply actions, quarantine receipts."""

import pytest

from tests.conftest import fixture_body

pytestmark = pytest.mark.usefixtures("sandbox_source")
NORTHSTAR_KEY = "sandbox-social:acct_test_01:comment.created:evt_test_0042"


def test_requires_a_token(client):
    for url in ("/api/events/", "/api/quarantine/"):
        response = client.get(url)
        assert response.status_code == 401
        assert response.json()["code"] == "not_authenticated"


def test_event_by_key_with_its_reply_actions(api, deliver):
    deliver(fixture_body("comment__northstar"))
    deliver(fixture_body("comment__northstar"))
    response = api.get("/api/events/", {"event_key": NORTHSTAR_KEY})
    assert response.status_code == 200
    (event,) = response.json()["results"]
    assert set(event) == {
        "event_key",
        "source",
        "event_state",
        "reconcile_status",
        "seen_count",
        "first_received_at",
        "last_received_at",
        "trigger_match",
        "trigger_rule_version",
        "trigger_campaign",
        "trigger_campaign_version",
        "canary",
        "reply_actions",
    }
    assert (event["event_key"], event["event_state"], event["seen_count"], event["source"]) == (
        NORTHSTAR_KEY,
        "RECORD_READY",
        2,
        "sandbox",
    )
    # The campaign that matched it: the sandbox source's every-post one, at its first version.
    from replies.models import Campaign

    every_post = Campaign.objects.get(source__name="sandbox", account_default=True)
    assert (event["trigger_campaign"], event["trigger_campaign_version"]) == (
        every_post.pk,
        every_post.version,
    )
    # Each event's reconcile_status is served (no scan yet: UNRECONCILED).
    assert event["reconcile_status"] == "UNRECONCILED"
    from ingress.models import InboundEvent

    InboundEvent.objects.filter(event_key=NORTHSTAR_KEY).update(reconcile_status="SOURCE_UNVERIFIED")
    (event,) = api.get("/api/events/", {"event_key": NORTHSTAR_KEY}).json()["results"]
    assert event["reconcile_status"] == "SOURCE_UNVERIFIED"
    assert [a["purpose"] for a in event["reply_actions"]] == ["private_delivery", "public_ack"]
    assert set(event["reply_actions"][0]) == {"reply_key", "purpose", "approval_state", "delivery_state"}
    assert "CHECKLIST" not in response.content.decode()  # message content is not served


def test_events_filter_by_source_and_state_and_page(api, deliver):
    deliver(fixture_body("comment__northstar"))
    deliver(fixture_body("comment__batch"))
    assert len(api.get("/api/events/", {"state": "CLOSED_NO_REPLY"}).json()["results"]) == 1
    assert len(api.get("/api/events/", {"source": "elsewhere"}).json()["results"]) == 0
    first = api.get("/api/events/", {"page_size": 2}).json()
    assert len(first["results"]) == 2 and first["next"]
    rest = api.get(first["next"]).json()
    assert len(rest["results"]) == 1 and rest["next"] is None
    bad = api.get("/api/events/", {"state": "NOPE"})
    assert bad.status_code == 400 and bad.json()["code"] == "invalid"
    assert "state" in bad.json()["errors"]


def test_quarantine_list(api, deliver):
    deliver(fixture_body("comment__missing_post_id"))
    (receipt,) = api.get("/api/quarantine/", {"source": "sandbox", "state": "QUARANTINED"}).json()["results"]
    assert receipt["reason_code"] == "missing_identity" and receipt["source"] == "sandbox"
    assert set(receipt) >= {"receipt_id", "reason_code", "received_at", "source"}


def test_read_api_refuses_writes(api):
    assert api.post("/api/events/", {}).status_code == 405
