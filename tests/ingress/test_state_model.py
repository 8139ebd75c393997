"""The transition tables: declared moves apply, undeclared moves are refused and recorded."""

import pytest

from conduit.statemachine import TransitionRefused
from ingress.contract import EVENT_TABLE, QUARANTINE_TABLE
from ingress.models import EventTransition, InboundEvent, QuarantineReceipt, QuarantineTransition
from ingress.services import event_transition, quarantine_review, quarantine_transition
from replies.contract import REPLY_TABLE
from replies.models import ReplyAction, ReplyTransition
from replies.services import reply_action_transition
from tests.conftest import fixture_body

pytestmark = pytest.mark.usefixtures("sandbox_source")


def test_every_documented_state_is_in_its_ledgers_table():
    assert {n for _, n in EVENT_TABLE.moves} == {"RECEIVED", "RECORD_READY", "CLOSED_NO_REPLY"}
    assert {n for _, n in REPLY_TABLE.moves} == {
        "REVIEW_PENDING",
        "APPROVED",
        "SENDING",
        "SENT",
        "FAILED_BEFORE_SEND",
        "SEND_STATUS_UNKNOWN",
        "SUPPRESSED_TEST",
        "CLOSED_NO_REPLY",
    }
    assert {n for _, n in QUARANTINE_TABLE.moves} == {"QUARANTINED", "DISMISSED", "CORRECTED"}
    # Nothing may be claimed twice: no move leaves SENDING, SENT or SUPPRESSED_TEST for SENDING.
    for prior in ("SENDING", "SENT", "SUPPRESSED_TEST", "CLOSED_NO_REPLY"):
        assert not REPLY_TABLE.allows(prior, "SENDING")
    assert not REPLY_TABLE.allows("SEND_STATUS_UNKNOWN", "SENDING")


def test_undeclared_event_move_is_refused_and_recorded_in_the_event_ledger(deliver):
    deliver(fixture_body("comment__no_trigger"))
    event = InboundEvent.objects.get()
    outcome = event_transition(event_id=event.pk, to="RECEIVED", actor="tester", reason_code="manual_reopen")
    assert not outcome.applied
    assert (outcome.prior, outcome.next) == ("CLOSED_NO_REPLY", "RECEIVED")
    event.refresh_from_db()
    assert event.event_state == "CLOSED_NO_REPLY"
    refusal = EventTransition.objects.get(refused=True)
    assert (refusal.ledger, refusal.prior_state, refusal.next_state, refusal.actor, refusal.reason_code) == (
        "event",
        "CLOSED_NO_REPLY",
        "RECEIVED",
        "tester",
        "manual_reopen",
    )
    with pytest.raises(TransitionRefused, match="not in the declared transition table"):
        outcome.raise_if_refused()
    # The refusal is only in its owning ledger.
    assert not ReplyTransition.objects.filter(refused=True).exists()


def test_undeclared_reply_move_is_refused_and_recorded_in_the_reply_ledger(deliver):
    deliver(fixture_body("comment__northstar"))
    action = ReplyAction.objects.order_by("id").first()
    outcome = reply_action_transition(action_id=action.pk, to="SENDING", actor="worker", reason_code="claim")
    assert not outcome.applied
    action.refresh_from_db()
    assert action.delivery_state == "REVIEW_PENDING"
    refusal = ReplyTransition.objects.get(refused=True)
    assert (refusal.ledger, refusal.action_id, refusal.prior_state, refusal.next_state) == (
        "reply",
        action.pk,
        "REVIEW_PENDING",
        "SENDING",
    )
    assert not EventTransition.objects.filter(refused=True).exists()


def test_compare_and_set_refuses_when_the_row_moved_underneath(deliver):
    deliver(fixture_body("comment__northstar"))
    event = InboundEvent.objects.get()
    outcome = event_transition(
        event_id=event.pk, to="CLOSED_NO_REPLY", actor="t", reason_code="r", expected="RECEIVED"
    )
    assert not outcome.applied and outcome.prior == "RECORD_READY"
    assert EventTransition.objects.filter(refused=True).count() == 1


def test_quarantine_review_moves_once_and_records_the_reviewer(deliver):
    deliver(fixture_body("comment__missing_post_id"))
    receipt = QuarantineReceipt.objects.get()
    with pytest.raises(ValueError, match="note is required"):
        quarantine_review(receipt_id=receipt.pk, outcome="CORRECTED", actor="rev", note=" ")
    done = quarantine_review(receipt_id=receipt.pk, outcome="CORRECTED", actor="rev", note="fixed map")
    assert done.applied
    receipt.refresh_from_db()
    assert (receipt.state, receipt.reviewed_by, receipt.review_note) == ("CORRECTED", "rev", "fixed map")
    assert receipt.reviewed_at is not None
    again = quarantine_transition(receipt_id=receipt.pk, to="DISMISSED", actor="rev", reason_code="x")
    assert not again.applied
    assert QuarantineTransition.objects.filter(receipt=receipt, refused=True).count() == 1


def test_the_database_refuses_a_state_outside_the_model(deliver):
    from django.db import IntegrityError, transaction

    deliver(fixture_body("comment__northstar"))
    with pytest.raises(IntegrityError), transaction.atomic():
        InboundEvent.objects.update(event_state="SOMETHING_ELSE")
    with pytest.raises(IntegrityError), transaction.atomic():
        ReplyAction.objects.update(delivery_state="RESENT")


def test_a_condition_the_thin_update_does_not_take_goes_through_the_orm(deliver):
    from conduit.statemachine import transition
    from ingress.contract import EVENT_TABLE

    deliver(fixture_body("comment__northstar"))
    event = InboundEvent.objects.get()
    outcome = transition(
        table=EVENT_TABLE,
        model=InboundEvent,
        history=EventTransition,
        owner_field="event",
        pk=event.pk,
        to="CLOSED_NO_REPLY",
        actor="t",
        reason_code="r",
        state_field="event_state",
        expected="RECORD_READY",
        where={"seen_count__in": [1]},
    )
    assert outcome.applied
    event.refresh_from_db()
    assert event.event_state == "CLOSED_NO_REPLY"
