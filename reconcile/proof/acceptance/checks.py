"""The acceptance checks on the sandbox platform, in the order of docs/concepts/acceptance.md#checks.

Each returns a list of failures (empty: the row holds).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from conduit.standins import testkit
from ingress.models import Delivery, EventTransition, InboundEvent, QuarantineReceipt
from ingress.services import event_transition
from replies.contract import reply_key
from replies.models import ReplyAction, SendAttempt


def event_identity(h: Any) -> list[str]:
    """Two deliveries of the same fixture leave exactly one event row and seen_count of two.

    Run for the Northstar fixture (which plans replies) and for a fixture whose
    trigger does not match (where the event key is the only guard).
    """
    failures = []
    for fixture, key in (
        ("comment__northstar", h.NORTHSTAR_KEY),
        ("comment__no_trigger", "sandbox-social:acct_test_01:comment.created:evt_test_0043"),
    ):
        body = h.fixture_body(fixture)
        statuses = [h.deliver(body).status_code, h.deliver(body).status_code]
        if statuses != [200, 200]:
            failures.append(f"{fixture}: deliveries answered {statuses}, expected [200, 200]")
        rows = list(InboundEvent.objects.filter(event_key=key))
        if len(rows) != 1:
            failures.append(f"{fixture}: expected exactly one event row, found {len(rows)}")
        elif rows[0].seen_count != 2:
            failures.append(f"{fixture}: expected seen_count 2, found {rows[0].seen_count}")
    return failures


def reply_identity(h: Any) -> list[str]:
    """Reprocessing leaves exactly one row for each declared reply_key."""
    body = h.fixture_body("comment__northstar")
    h.deliver(body, delivery_id="msg_test_reprocess")
    h.deliver(body, delivery_id="msg_test_reprocess")
    h.deliver(body)
    failures = []
    for purpose in h.PURPOSES:
        expected = reply_key(h.NORTHSTAR_KEY, purpose)
        keys = list(
            ReplyAction.objects.filter(event_id=h.NORTHSTAR_KEY, purpose=purpose).values_list(
                "reply_key", flat=True
            )
        )
        if keys != [expected]:
            failures.append(f"{purpose}: expected one row keyed {expected[:12]}…, found {len(keys)} {keys}")
    return failures


def source_proof(h: Any) -> list[str]:
    """A fixture with invalid proof enters QUARANTINED and creates zero reply actions."""
    body = h.fixture_body("comment__northstar")
    headers = h.sign(body)
    headers["webhook-signature"] = h.sign(
        body, secret="whsec_" + base64.b64encode(b"forged-signer-key-000000000000").decode()
    )["webhook-signature"]
    response = h.deliver(body, headers=headers)
    failures = []
    if response.status_code != 401:
        failures.append(f"invalid proof answered {response.status_code}, expected 401")
    if not QuarantineReceipt.objects.filter(reason_code="invalid_signature", state="QUARANTINED").exists():
        failures.append("no QUARANTINED receipt for the invalid proof")
    if ReplyAction.objects.exists() or InboundEvent.objects.exists():
        failures.append("invalid proof created an event or reply actions")
    return failures


def required_fields(h: Any) -> list[str]:
    """Removing each stable identity field in turn quarantines the receipt, zero reply actions."""
    failures = []
    for name, fixture in h.IDENTITY_FIXTURES.items():
        before = QuarantineReceipt.objects.count()
        response = h.deliver(h.fixture_body(fixture))
        if response.status_code != 202:
            failures.append(f"without {name}: answered {response.status_code}, expected 202")
        if QuarantineReceipt.objects.filter(state="QUARANTINED").count() != before + 1:
            failures.append(f"without {name}: no QUARANTINED receipt")
    if InboundEvent.objects.exists() or ReplyAction.objects.exists():
        failures.append("input without stable identity created events or reply actions")
    return failures


def _everything_that_sends(action_id: int) -> None:
    """What could ever send: the queue's task (redelivered), the schedule's picks, the sweeper
    (with no lease left) and a drain worker."""
    from replies import tasks
    from replies.sender import due_action_ids, reply_send_next

    tasks.send_reply(action_id)
    for due in due_action_ids():
        tasks.send_reply(due)
    with testkit.send_leases_expired():
        tasks.sweep_sending()
    tasks.send_reply(action_id)
    while reply_send_next():
        pass


def approval_gate(h: Any) -> list[str]:
    """An action in REVIEW_PENDING produces zero transport calls."""
    action = h.planned()
    _everything_that_sends(action.pk)
    action.refresh_from_db()
    failures = []
    if h.provider_calls():
        failures.append(f"an unapproved action reached the transport {h.provider_calls()} time(s)")
    if action.delivery_state != "REVIEW_PENDING":
        failures.append(f"an unapproved action moved to {action.delivery_state}")
    return failures


def _approve(action: ReplyAction) -> None:
    from replies.services import reply_approve

    with testkit.nothing_queued():
        result = reply_approve(action_id=action.pk, actor="reviewer_test")
    if not result.ok:
        raise RuntimeError(result.message)


def safe_retry(h: Any) -> list[str]:
    """A failure before transport retries under the same keys."""
    from replies.sender import reply_send

    action = h.planned()
    _approve(action)
    h.fail_next("refuse")
    first = reply_send(action_id=action.pk)
    testkit.action_due_now(action.pk)
    second = reply_send(action_id=action.pk)
    failures = []
    if (first, second) != ("FAILED_BEFORE_SEND", "SENT"):
        failures.append(f"expected FAILED_BEFORE_SEND then SENT, got {first} then {second}")
    numbers = list(SendAttempt.objects.filter(action=action).values_list("attempt_number", flat=True))
    if numbers != [1, 2]:
        failures.append(f"expected attempts 1 and 2 on one action, found {numbers}")
    with h.state.lock:
        if h.state.applied != {action.reply_key: 1}:
            failures.append(
                f"the provider applied {h.state.applied}, expected once under {action.reply_key[:12]}…"
            )
    if ReplyAction.objects.filter(event=action.event, purpose=action.purpose).count() != 1:
        failures.append("the retry created another action")
    return failures


def _parked_not_retried(action: ReplyAction, reached: str) -> list[str]:
    """What an ambiguous send must leave: SEND_STATUS_UNKNOWN after one attempt, nothing retried."""
    action.refresh_from_db()
    failures = []
    if reached != "SEND_STATUS_UNKNOWN" or action.delivery_state != "SEND_STATUS_UNKNOWN":
        failures.append(f"expected SEND_STATUS_UNKNOWN, reached {reached} and ended {action.delivery_state}")
    attempts = SendAttempt.objects.filter(action=action).count()
    if attempts != 1:
        failures.append(f"{attempts} transport attempts, expected 1: the ambiguous send was retried")
    return failures


def ambiguous_send(h: Any) -> list[str]:
    """A simulated lost receipt enters SEND_STATUS_UNKNOWN and produces no automatic retry."""
    from replies.sender import reply_send

    action = h.planned()
    _approve(action)
    h.fail_next("error_after_accept")
    reached = reply_send(action_id=action.pk)
    _everything_that_sends(action.pk)
    failures = _parked_not_retried(action, reached)
    if h.provider_calls() != 1:
        failures.append(f"the provider applied it {h.provider_calls()} times, expected once")
    return failures


def reconciliation(h: Any) -> list[str]:
    """A missing local event re-enters through normal ingest and creates no duplicate action.

    The provider holds the Northstar event and a second one whose webhook never
    came. After a complete scan (and again after a second one) each event has
    exactly one row and each declared purpose exactly one action, keyed as
    derived here independently, held at review; nothing reached the transport.
    """
    northstar = json.loads(h.fixture_body("comment__northstar"))["events"][0]
    missed = {
        **northstar,
        "id": "evt_test_0044",
        "comment_id": "msg_test_0044",
        "created_at": "2026-01-15T14:35:00Z",
    }
    h.state.hold(h.source.account_ref, [northstar, missed])
    h.deliver(h.fixture_body("comment__northstar"))
    missed_key = "sandbox-social:acct_test_01:comment.created:evt_test_0044"
    failures = []
    for attempt in ("first", "second"):
        outcome = h.scan()
        if outcome.state != "published":
            return failures + [f"{attempt} scan ended {outcome.state}, expected published"]
        for key in (h.NORTHSTAR_KEY, missed_key):
            rows = InboundEvent.objects.filter(event_key=key).count()
            if rows != 1:
                failures.append(f"{attempt} scan: {rows} rows for {key}, expected 1")
            for purpose in h.PURPOSES:
                keys = list(
                    ReplyAction.objects.filter(event_id=key, purpose=purpose).values_list(
                        "reply_key", flat=True
                    )
                )
                if keys != [reply_key(key, purpose)]:
                    failures.append(
                        f"{attempt} scan: {purpose} of {key[-12:]} has keys {keys}, "
                        f"expected only {reply_key(key, purpose)[:12]}…"
                    )
        total = ReplyAction.objects.count()
        if total != 2 * len(h.PURPOSES):
            failures.append(f"{attempt} scan: {total} reply actions, expected {2 * len(h.PURPOSES)}")
    recovered = InboundEvent.objects.filter(event_key=missed_key).first()
    if recovered is None:
        return failures + ["the missing event was not recovered"]
    if recovered.reconcile_status != "MATCHED":
        failures.append(f"the recovered event is {recovered.reconcile_status}, expected MATCHED")
    states = set(ReplyAction.objects.filter(event=recovered).values_list("delivery_state", flat=True))
    if states != {"REVIEW_PENDING"}:
        failures.append(f"the recovered event's replies are {states}, expected held at REVIEW_PENDING")
    if not any(
        missed_key in d.event_keys for d in Delivery.objects.filter(delivery_id__startswith="reconcile:")
    ):
        failures.append("the missing event did not come through the ingest path (no delivery row)")
    if h.provider_calls():
        failures.append(f"reconciliation sent replies: {h.state.applied}")
    return failures


def canary() -> list[str]:
    """Two canary deliveries produce the exact expected rows and zero external calls.

    Runs `manage.py canary`'s own function; needs the reserved account free or
    owned by the canary source. Every failed expectation is a failure.
    """
    from reconcile.proof.canary import CanaryRefused, canary_run

    try:
        result = canary_run(actor="system:acceptance")
    except CanaryRefused as exc:
        return [f"the canary refused to run: {exc}"]
    return [f"{e.name}: expected {e.expected}, found {e.found}" for e in result.expectations if not e.ok]


def state_model(h: Any) -> list[str]:
    """An undeclared transition is rejected and recorded in its owning ledger."""
    h.deliver(h.fixture_body("comment__no_trigger"))
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
