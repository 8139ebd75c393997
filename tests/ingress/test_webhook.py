"""POST /webhooks/<source>/: every documented status, body and ledger effect."""

import json

import pytest

from ingress.models import Delivery, EventTransition, InboundEvent, QuarantineReceipt, Source
from replies.models import ReplyAction, ReplyTransition
from tests.conftest import SECRET_ENV, fixture_body, sign

NORTHSTAR_KEY = "sandbox-social:acct_test_01:comment.created:evt_test_0042"
pytestmark = pytest.mark.usefixtures("sandbox_source")


def test_accepted_creates_one_record_two_replies_and_their_transitions(deliver):
    response = deliver(fixture_body("comment__northstar"), delivery_id="msg_test_d1")
    assert response.status_code == 200
    assert response.json() == {
        "delivery_id": "msg_test_d1",
        "results": [{"index": 0, "result": "accepted", "event_key": NORTHSTAR_KEY}],
    }
    event = InboundEvent.objects.get()
    assert (event.event_state, event.seen_count, event.trigger_match, event.canary) == (
        "RECORD_READY",
        1,
        True,
        False,
    )
    assert event.trigger_rule_version == 1
    assert sorted(ReplyAction.objects.values_list("purpose", "delivery_state")) == [
        ("private_delivery", "REVIEW_PENDING"),
        ("public_ack", "REVIEW_PENDING"),
    ]
    assert list(EventTransition.objects.values_list("prior_state", "next_state", "actor")) == [
        (None, "RECEIVED", "system:ingest"),
        ("RECEIVED", "RECORD_READY", "system:ingest"),
    ]
    assert ReplyTransition.objects.filter(prior_state=None, next_state="REVIEW_PENDING").count() == 2
    assert Delivery.objects.get().event_keys == [NORTHSTAR_KEY]


def test_redelivery_of_the_same_delivery_id_counts_as_seen_and_answers_duplicate(deliver):
    body = fixture_body("comment__northstar")
    deliver(body, delivery_id="msg_test_same")
    response = deliver(body, delivery_id="msg_test_same")
    assert response.status_code == 200
    assert response.json()["results"] == [{"index": 0, "result": "duplicate", "event_key": NORTHSTAR_KEY}]
    assert InboundEvent.objects.get().seen_count == 2
    assert Delivery.objects.get().seen_count == 2
    assert ReplyAction.objects.count() == 2


def test_same_delivery_id_with_another_body_is_quarantined(deliver):
    deliver(fixture_body("comment__northstar"), delivery_id="msg_test_reused")
    response = deliver(fixture_body("comment__no_trigger"), delivery_id="msg_test_reused")
    assert response.status_code == 202
    body = response.json()
    assert body["results"][0]["reason_code"] == "delivery_conflict"
    receipt = QuarantineReceipt.objects.get(receipt_id=body["receipt_ids"][0])
    assert (receipt.reason_code, receipt.authenticated, receipt.state) == (
        "delivery_conflict",
        True,
        "QUARANTINED",
    )
    assert InboundEvent.objects.count() == 1
    assert InboundEvent.objects.get().seen_count == 1


def test_same_event_key_with_a_different_payload_keeps_the_first_envelope(deliver):
    deliver(fixture_body("comment__northstar"))
    first = InboundEvent.objects.get()
    response = deliver(fixture_body("comment__changed_payload"))
    assert response.status_code == 202
    result = response.json()["results"][0]
    assert (result["result"], result["reason_code"], result["event_key"]) == (
        "quarantined",
        "identity_conflict",
        NORTHSTAR_KEY,
    )
    after = InboundEvent.objects.get()
    assert (after.payload_hash, after.seen_count, after.last_received_at) == (
        first.payload_hash,
        1,
        first.last_received_at,
    )
    receipt = QuarantineReceipt.objects.get()
    assert (receipt.event_key, receipt.event_index) == (NORTHSTAR_KEY, 0)
    assert ReplyAction.objects.count() == 2


def test_no_trigger_closes_the_record_without_replies(deliver):
    assert deliver(fixture_body("comment__no_trigger")).status_code == 200
    event = InboundEvent.objects.get()
    assert (event.event_state, event.trigger_match) == ("CLOSED_NO_REPLY", False)
    assert ReplyAction.objects.count() == 0
    assert EventTransition.objects.filter(reason_code="trigger_not_matched").count() == 1


def test_trigger_is_a_whole_word_ignoring_case(deliver):
    response = deliver(fixture_body("comment__batch"))
    assert response.status_code == 200
    states = dict(InboundEvent.objects.values_list("source_event_id", "event_state"))
    assert states == {"evt_test_0045": "RECORD_READY", "evt_test_0046": "CLOSED_NO_REPLY"}


def test_a_batch_with_an_invalid_member_is_refused_whole_with_one_receipt(deliver):
    """docs/concepts/event-contract.md#batches: "validates the whole batch ... Any invalid member rolls back the entire batch,
    including canonical identity ownership." """
    response = deliver(fixture_body("comment__batch_with_bad_member"))
    assert response.status_code == 202
    body = response.json()
    assert [(r["index"], r["result"]) for r in body["results"]] == [(0, "rolled_back"), (1, "quarantined")]
    assert body["results"][1]["reason_code"] == "missing_identity"
    assert body["accepted"] is False
    (receipt_id,) = body["receipt_ids"]
    receipt = QuarantineReceipt.objects.get()
    assert str(receipt.receipt_id) == receipt_id
    assert (receipt.reason_code, receipt.event_index, receipt.authenticated) == ("missing_identity", 1, True)
    assert receipt.invalid_members == [{"index": 1, "reason_code": "missing_identity"}]
    assert InboundEvent.objects.count() == ReplyAction.objects.count() == Delivery.objects.count() == 0


@pytest.mark.parametrize(
    "fixture, reason",
    [
        ("comment__missing_type", "missing_identity"),
        ("comment__missing_post_id", "missing_identity"),
        ("comment__missing_comment_id", "missing_identity"),
        ("comment__missing_from_id", "missing_identity"),
        ("comment__missing_created_at", "missing_identity"),
        ("comment__missing_account", "missing_identity"),
        ("comment__wrong_account", "account_mismatch"),
        ("comment__type_not_allowed", "event_type_not_allowed"),
        ("comment__naive_time", "invalid_occurred_at"),
        ("comment__non_string_identity", "invalid_identity"),
        ("comment__empty_batch", "invalid_body"),
        ("comment__unparsable", "unparsable_body"),
    ],
)
def test_authentic_bad_input_is_quarantined_with_202(deliver, fixture, reason):
    response = deliver(fixture_body(fixture))
    assert response.status_code == 202
    body = response.json()
    assert [r["reason_code"] for r in body["results"]] == [reason]
    receipt = QuarantineReceipt.objects.get()
    assert str(receipt.receipt_id) == body["receipt_ids"][0]
    assert (receipt.reason_code, receipt.authenticated) == (reason, True)
    assert InboundEvent.objects.count() == 0
    assert ReplyAction.objects.count() == 0


def test_identity_with_a_nul_character_is_quarantined_not_a_server_error(deliver):
    body = fixture_body("comment__northstar").replace(b"post_test_07", b"post\\u0000test")
    response = deliver(body)
    assert response.status_code == 202
    assert response.json()["results"][0]["reason_code"] == "invalid_identity"


@pytest.mark.parametrize(
    "mutate, code",
    [
        (lambda h: h.update({"webhook-signature": "v1,AAAA"}), "invalid_signature"),
        (lambda h: h.pop("webhook-signature"), "missing_proof_headers"),
        (lambda h: h.update({"webhook-signature": "garbage"}), "malformed_proof_headers"),
        (lambda h: h.update({"webhook-timestamp": "12ab"}), "malformed_proof_headers"),
        (lambda h: h.update({"webhook-timestamp": "1000000000"}), "stale_timestamp"),
        (lambda h: h.update({"webhook-timestamp": "9999999999"}), "future_timestamp"),
    ],
)
def test_bad_proof_is_401_with_a_quarantine_receipt_and_no_replies(deliver, mutate, code):
    body = fixture_body("comment__northstar")
    headers = sign(body)
    mutate(headers)
    response = deliver(body, headers=headers)
    assert response.status_code == 401
    payload = response.json()
    assert payload["code"] == code
    receipt = QuarantineReceipt.objects.get(receipt_id=payload["receipt_id"])
    assert (receipt.reason_code, receipt.authenticated, receipt.delivery_id) == (code, False, "")
    assert InboundEvent.objects.count() == ReplyAction.objects.count() == Delivery.objects.count() == 0


def test_unknown_source_is_404(deliver):
    response = deliver(fixture_body("comment__northstar"), source="nobody")
    assert (response.status_code, response.json()["code"]) == (404, "unknown_source")
    response = deliver(fixture_body("comment__northstar"), source="not.a.slug")
    assert (response.status_code, response.json()["code"]) == (404, "unknown_source")


def test_body_over_one_mebibyte_is_413_before_any_parsing(deliver, settings):
    assert settings.CONDUIT_WEBHOOK_MAX_BYTES == 1024 * 1024
    padding = "x" * (1024 * 1024)
    body = json.dumps({"account": "acct_test_01", "events": [], "pad": padding}).encode()
    response = deliver(body)
    assert (response.status_code, response.json()["code"]) == (413, "payload_too_large")
    assert QuarantineReceipt.objects.count() == InboundEvent.objects.count() == 0


def test_exactly_the_limit_is_read(deliver, settings):
    settings.CONDUIT_WEBHOOK_MAX_BYTES = 4096
    body = fixture_body("comment__northstar")
    body = body.rstrip() + b" " * (4096 - len(body.rstrip()))
    assert len(body) == 4096
    assert deliver(body).status_code == 200


def test_missing_secret_in_the_environment_is_503_and_records_nothing(deliver, monkeypatch):
    monkeypatch.delenv(SECRET_ENV)
    response = deliver(fixture_body("comment__northstar"))
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert response.json()["code"] == "source_secret_unavailable"
    assert QuarantineReceipt.objects.count() == InboundEvent.objects.count() == 0


def test_get_is_not_allowed(client):
    assert client.get("/webhooks/sandbox/").status_code == 405


def test_canary_source_marks_events_and_their_actions(deliver, sandbox_source):
    # The flag is fixed at registration; this test only needs a source that has it.
    Source.objects.filter(pk=sandbox_source.pk).update(canary=True)
    deliver(fixture_body("comment__northstar"))
    assert InboundEvent.objects.get().canary is True
    assert set(ReplyAction.objects.values_list("canary", flat=True)) == {True}


def test_pathologically_nested_json_is_quarantined_not_a_server_error(deliver):
    body = b'{"account": "acct_test_01", "events": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    response = deliver(body)
    assert response.status_code == 202
    assert response.json()["results"][0]["reason_code"] == "unparsable_body"


def test_deeply_nested_event_fields_are_quarantined_not_a_server_error(deliver):
    event = json.loads(fixture_body("comment__northstar"))["events"][0]
    prefix = json.dumps({"account": "acct_test_01", "events": [{**event, "extra": "X"}]})
    for depth in (100, 990, 5000):
        body = prefix.replace('"X"', "[" * depth + "]" * depth).replace("evt_test_0042", f"evt_test_{depth}")
        response = deliver(body.encode())
        assert response.status_code in (200, 202), depth  # accepted or quarantined, never a 500


def test_every_reason_code_is_documented_in_the_http_reference():
    from pathlib import Path

    from ingress.contract import QUARANTINE_CODES

    readme = (Path(__file__).resolve().parents[2] / "docs" / "reference" / "http.md").read_text()
    missing = [code for code in QUARANTINE_CODES if f"`{code}`" not in readme]
    assert missing == []
    for code in ("unknown_source", "payload_too_large", "store_unavailable", "source_secret_unavailable"):
        assert f"`{code}`" in readme or f'"{code}"' in readme, code
