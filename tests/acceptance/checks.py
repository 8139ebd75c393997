"""Seed 000's acceptance checks as functions that report failures instead of asserting.

Each acceptance test asserts its check reports nothing; each positive control
plants a fault and asserts the same check reports failure. A check that stays
green with its guard broken has failed as an instrument.
"""

from __future__ import annotations

from typing import Callable

from ingress.models import EventTransition, InboundEvent, QuarantineReceipt
from ingress.services import event_transition
from replies.contract import reply_key
from replies.models import ReplyAction
from tests.conftest import fixture_body, sign

NORTHSTAR_KEY = "sandbox-social:acct_test_01:comment.created:evt_test_0042"
PURPOSES = ("public_ack", "private_delivery")
IDENTITY_FIXTURES = {
    "type": "comment__missing_type",
    "post_id": "comment__missing_post_id",
    "comment_id": "comment__missing_comment_id",
    "from_id": "comment__missing_from_id",
    "created_at": "comment__missing_created_at",
    "account": "comment__missing_account",
}

Deliver = Callable[..., object]


def event_identity(deliver: Deliver) -> list[str]:
    """Two deliveries of the same fixture leave exactly one event row and seen_count of two.

    Run for the Northstar fixture (which plans replies) and for a fixture whose
    trigger does not match (where the event key is the only guard).
    """
    failures = []
    for fixture, key in (
        ("comment__northstar", NORTHSTAR_KEY),
        ("comment__no_trigger", "sandbox-social:acct_test_01:comment.created:evt_test_0043"),
    ):
        body = fixture_body(fixture)
        statuses = [deliver(body).status_code, deliver(body).status_code]
        if statuses != [200, 200]:
            failures.append(f"{fixture}: deliveries answered {statuses}, expected [200, 200]")
        rows = list(InboundEvent.objects.filter(event_key=key))
        if len(rows) != 1:
            failures.append(f"{fixture}: expected exactly one event row, found {len(rows)}")
        elif rows[0].seen_count != 2:
            failures.append(f"{fixture}: expected seen_count 2, found {rows[0].seen_count}")
    return failures


def reply_identity(deliver: Deliver) -> list[str]:
    """Reprocessing leaves exactly one row for each declared reply_key."""
    body = fixture_body("comment__northstar")
    deliver(body, delivery_id="msg_test_reprocess")
    deliver(body, delivery_id="msg_test_reprocess")
    deliver(body)
    failures = []
    for purpose in PURPOSES:
        expected = reply_key(NORTHSTAR_KEY, purpose)
        rows = ReplyAction.objects.filter(event_id=NORTHSTAR_KEY, purpose=purpose)
        keys = list(rows.values_list("reply_key", flat=True))
        if keys != [expected]:
            failures.append(f"{purpose}: expected one row keyed {expected[:12]}…, found {len(keys)} {keys}")
    return failures


def source_proof(deliver: Deliver) -> list[str]:
    """A fixture with invalid proof enters QUARANTINED and creates zero reply actions."""
    body = fixture_body("comment__northstar")
    headers = sign(body)
    headers["webhook-signature"] = sign(body, secret="whsec_" + "Zm9yZ2VkLXNpZ25lci1rZXktMDAwMDAwMDAwMDAw")[
        "webhook-signature"
    ]
    response = deliver(body, headers=headers)
    failures = []
    if response.status_code != 401:
        failures.append(f"invalid proof answered {response.status_code}, expected 401")
    if not QuarantineReceipt.objects.filter(reason_code="invalid_signature", state="QUARANTINED").exists():
        failures.append("no QUARANTINED receipt for the invalid proof")
    if ReplyAction.objects.exists() or InboundEvent.objects.exists():
        failures.append("invalid proof created an event or reply actions")
    return failures


def required_fields(deliver: Deliver) -> list[str]:
    """Removing each stable identity field in turn quarantines the receipt, zero reply actions."""
    failures = []
    for field, fixture in IDENTITY_FIXTURES.items():
        before = QuarantineReceipt.objects.count()
        response = deliver(fixture_body(fixture))
        if response.status_code != 202:
            failures.append(f"without {field}: answered {response.status_code}, expected 202")
        if QuarantineReceipt.objects.filter(state="QUARANTINED").count() != before + 1:
            failures.append(f"without {field}: no QUARANTINED receipt")
    if InboundEvent.objects.exists() or ReplyAction.objects.exists():
        failures.append("input without stable identity created events or reply actions")
    return failures


def state_model(deliver: Deliver) -> list[str]:
    """An undeclared transition is rejected and recorded in its owning ledger."""
    deliver(fixture_body("comment__no_trigger"))
    event = InboundEvent.objects.get(source_event_id="evt_test_0043")
    outcome = event_transition(
        event_id=event.pk, to="RECEIVED", actor="acceptance", reason_code="undeclared_probe"
    )
    event.refresh_from_db()
    failures = []
    if outcome.applied or event.event_state != "CLOSED_NO_REPLY":
        failures.append(f"undeclared move applied: event is {event.event_state}")
    if not EventTransition.objects.filter(
        event=event, refused=True, prior_state="CLOSED_NO_REPLY", next_state="RECEIVED"
    ).exists():
        failures.append("the refusal is not recorded in the event ledger")
    return failures


def reconciliation(deliver: Deliver, *, hold: Callable[..., None], scan: Callable, source, provider_state) -> list[str]:
    """A missing local event re-enters through normal ingest and creates no duplicate action.

    The provider holds the Northstar event and a second one whose webhook never
    came. After a complete scan (and again after a second one) each event has
    exactly one row and each declared purpose exactly one action, keyed as
    derived here independently, held at review; nothing reached the transport.
    """
    import json

    from ingress.models import Delivery

    northstar = json.loads(fixture_body("comment__northstar"))["events"][0]
    missed = {**northstar, "id": "evt_test_0044", "comment_id": "msg_test_0044",
              "created_at": "2026-01-15T14:35:00Z"}
    hold(northstar, missed)
    deliver(fixture_body("comment__northstar"))
    missed_key = "sandbox-social:acct_test_01:comment.created:evt_test_0044"
    failures = []
    for attempt in ("first", "second"):
        outcome = scan(source)
        if outcome.state != "published":
            failures.append(f"{attempt} scan ended {outcome.state}, expected published")
            return failures
        for key in (NORTHSTAR_KEY, missed_key):
            rows = InboundEvent.objects.filter(event_key=key).count()
            if rows != 1:
                failures.append(f"{attempt} scan: {rows} rows for {key}, expected 1")
            for purpose in PURPOSES:
                keys = list(ReplyAction.objects.filter(event_id=key, purpose=purpose)
                            .values_list("reply_key", flat=True))
                if keys != [reply_key(key, purpose)]:
                    failures.append(f"{attempt} scan: {purpose} of {key[-12:]} has keys {keys}, "
                                    f"expected only {reply_key(key, purpose)[:12]}…")
        total = ReplyAction.objects.count()
        if total != 2 * len(PURPOSES):
            failures.append(f"{attempt} scan: {total} reply actions, expected {2 * len(PURPOSES)}")
    recovered = InboundEvent.objects.filter(event_key=missed_key).first()
    if recovered is None:
        return failures + ["the missing event was not recovered"]
    if recovered.reconcile_status != "MATCHED":
        failures.append(f"the recovered event is {recovered.reconcile_status}, expected MATCHED")
    states = set(ReplyAction.objects.filter(event=recovered).values_list("delivery_state", flat=True))
    if states != {"REVIEW_PENDING"}:
        failures.append(f"the recovered event's replies are {states}, expected held at REVIEW_PENDING")
    if not Delivery.objects.filter(delivery_id__startswith="reconcile:", event_keys__contains=[missed_key]).exists():
        failures.append("the missing event did not come through the ingest path (no delivery row)")
    with provider_state.lock:
        if provider_state.applied:
            failures.append(f"reconciliation sent replies: {provider_state.applied}")
    return failures
