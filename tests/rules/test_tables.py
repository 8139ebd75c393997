"""The declared transition tables: exactly the moves the state model allows, nothing more."""

import itertools
from datetime import datetime, timezone

import pytest

from conduit.statemachine import Outcome, TransitionRefused, TransitionTable
from ingress.contract import EVENT_TABLE, QUARANTINE_TABLE
from ingress.models import EventState, QuarantineState
from replies.contract import REPLY_TABLE
from replies.models import DeliveryState

# The state model as docs/concepts/ledgers.md#transitions documents it (None = created).
DECLARED = {
    "event": {
        (None, "RECEIVED"),
        ("RECEIVED", "RECORD_READY"),
        ("RECEIVED", "CLOSED_NO_REPLY"),
        ("RECORD_READY", "CLOSED_NO_REPLY"),
        ("CLOSED_NO_REPLY", "RECORD_READY"),  # a person's catch-up (docs/concepts/campaigns.md#catch-up)
    },
    "quarantine": {
        (None, "QUARANTINED"),
        ("QUARANTINED", "DISMISSED"),
        ("QUARANTINED", "CORRECTED"),
    },
    "reply": {
        (None, "REVIEW_PENDING"),
        ("REVIEW_PENDING", "APPROVED"),
        ("REVIEW_PENDING", "CLOSED_NO_REPLY"),
        ("APPROVED", "SENDING"),
        ("APPROVED", "CLOSED_NO_REPLY"),
        ("SENDING", "SENT"),
        ("SENDING", "FAILED_BEFORE_SEND"),
        ("SENDING", "SEND_STATUS_UNKNOWN"),
        ("SENDING", "SUPPRESSED_TEST"),
        ("FAILED_BEFORE_SEND", "SENDING"),
        ("FAILED_BEFORE_SEND", "APPROVED"),
        ("FAILED_BEFORE_SEND", "CLOSED_NO_REPLY"),
        ("SEND_STATUS_UNKNOWN", "SENT"),
        ("SEND_STATUS_UNKNOWN", "APPROVED"),
        ("SEND_STATUS_UNKNOWN", "CLOSED_NO_REPLY"),
        ("SENT", "SEND_STATUS_UNKNOWN"),
    },
}
TABLES = {
    "event": (EVENT_TABLE, EventState),
    "quarantine": (QUARANTINE_TABLE, QuarantineState),
    "reply": (REPLY_TABLE, DeliveryState),
}


@pytest.mark.parametrize("ledger", sorted(TABLES))
def test_every_pair_of_states_is_allowed_exactly_when_the_state_model_declares_it(ledger):
    """docs/concepts/ledgers.md#refused-transitions: "Reject and log any transition outside the declared state model"."""
    table, states = TABLES[ledger]
    assert table.ledger == ledger
    for prior, nxt in itertools.product([None, *states.values], states.values):
        assert table.allows(prior, nxt) == ((prior, nxt) in DECLARED[ledger]), (prior, nxt)


def test_a_claimed_or_finished_reply_cannot_be_claimed_again():
    """docs/concepts/ledgers.md#claim: "A row already in SENDING, SENT, SUPPRESSED_TEST, or CLOSED_NO_REPLY
    cannot be claimed again." Nor may an uncertain send be retried without a person."""
    for prior in ("SENDING", "SENT", "SUPPRESSED_TEST", "CLOSED_NO_REPLY", "SEND_STATUS_UNKNOWN"):
        assert not REPLY_TABLE.allows(prior, "SENDING")
    assert REPLY_TABLE.allows("APPROVED", "SENDING")


def test_declare_freezes_the_moves_it_is_given():
    table = TransitionTable.declare("demo", iter([(None, "A"), ("A", "B")]))
    assert table.ledger == "demo"
    assert table.moves == frozenset({(None, "A"), ("A", "B")})
    assert table.allows(None, "A") and table.allows("A", "B")
    assert not table.allows("B", "A") and not table.allows(None, "B")


AT = datetime(2026, 1, 1, tzinfo=timezone.utc)


def test_an_applied_outcome_says_which_move_it_made_and_why():
    outcome = Outcome(
        ledger="reply", applied=True, prior="APPROVED", next="SENDING", reason_code="claim", at=AT
    )
    assert outcome.message == "reply: APPROVED -> SENDING (claim)"
    assert outcome.raise_if_refused() is outcome


def test_a_refused_outcome_names_the_undeclared_move_and_raises_with_itself():
    outcome = Outcome(
        ledger="event",
        applied=False,
        prior="CLOSED_NO_REPLY",
        next="RECORD_READY",
        reason_code="manual_reopen",
        at=AT,
    )
    assert outcome.message == (
        "event: the move CLOSED_NO_REPLY -> RECORD_READY is not in the declared transition table; "
        "the record stays CLOSED_NO_REPLY"
    )
    with pytest.raises(TransitionRefused) as refused:
        outcome.raise_if_refused()
    assert refused.value.outcome is outcome
    assert str(refused.value) == outcome.message
