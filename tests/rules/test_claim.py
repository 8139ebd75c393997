"""The sender's claim rule: only APPROVED and due FAILED_BEFORE_SEND actions can ever be claimed."""

from datetime import timedelta

import pytest
from django.utils import timezone

from replies.models import DeliveryState, ReplyTransition
from replies.sender import due_action_ids, reply_send
from tests.rules.conftest import lock_held_elsewhere

pytestmark = pytest.mark.django_db
NEVER_CLAIMABLE = [
    "REVIEW_PENDING",
    "SENDING",
    "SENT",
    "SEND_STATUS_UNKNOWN",
    "SUPPRESSED_TEST",
    "CLOSED_NO_REPLY",
]


def test_due_actions_are_approved_and_failed_past_their_backoff_oldest_first(make_action):
    """docs/concepts/ledgers.md#claim: "The sender claims an approved row with one atomic transition from APPROVED
    to SENDING. A row already in SENDING, SENT, SUPPRESSED_TEST, or CLOSED_NO_REPLY cannot be
    claimed again." REVIEW_PENDING is the approval gate; SEND_STATUS_UNKNOWN is never retried
    automatically (docs/concepts/event-contract.md#invariants)."""
    now = timezone.now()
    never = [make_action(state) for state in NEVER_CLAIMABLE]
    approved = make_action("APPROVED")
    failed_due = make_action("FAILED_BEFORE_SEND", next_attempt_at=now - timedelta(seconds=1))
    failed_now = make_action("FAILED_BEFORE_SEND", next_attempt_at=now)
    failed_later = make_action("FAILED_BEFORE_SEND", next_attempt_at=now + timedelta(seconds=30))
    approved_last = make_action("APPROVED")
    ids = due_action_ids(now=now)
    assert ids == [approved.pk, failed_due.pk, failed_now.pk, approved_last.pk]
    assert not {a.pk for a in never} & set(ids)
    assert failed_later.pk not in ids
    assert due_action_ids(now=now, limit=2) == [approved.pk, failed_due.pk]


@pytest.mark.parametrize("state", NEVER_CLAIMABLE)
def test_an_action_outside_the_claimable_states_is_not_claimed_and_nothing_is_recorded(make_action, state):
    """Not an attempted move either: reply_send returns before asking the ledger for SENDING."""
    action = make_action(state)
    assert reply_send(action_id=action.pk) == "not_claimed"
    action.refresh_from_db()
    assert (action.delivery_state, action.attempt_count) == (state, 0)
    assert not ReplyTransition.objects.filter(action=action).exists()


def test_a_failed_action_before_its_backoff_is_not_claimed(make_action):
    action = make_action("FAILED_BEFORE_SEND", next_attempt_at=timezone.now() + timedelta(minutes=5))
    assert reply_send(action_id=action.pk) == "not_claimed"
    action.refresh_from_db()
    assert action.delivery_state == DeliveryState.FAILED_BEFORE_SEND
    assert not ReplyTransition.objects.filter(action=action).exists()


def test_the_next_claim_takes_the_oldest_due_action_and_nothing_else(make_action):
    """reply_send_next: "Claim the oldest due action no other worker holds". Canary actions keep
    the transport out of it: their claim ends in SUPPRESSED_TEST with no external send."""
    from replies.sender import reply_send_next

    now = timezone.now()
    for state in NEVER_CLAIMABLE:
        make_action(state, canary=True)
    make_action("FAILED_BEFORE_SEND", canary=True, next_attempt_at=now + timedelta(minutes=5))
    first = make_action("FAILED_BEFORE_SEND", canary=True, next_attempt_at=now - timedelta(seconds=1))
    second = make_action("APPROVED", canary=True)
    assert reply_send_next() == (first.pk, "SUPPRESSED_TEST")
    assert reply_send_next() == (second.pk, "SUPPRESSED_TEST")
    assert reply_send_next() is None
    history = list(ReplyTransition.objects.filter(action=first).values_list("prior_state", "next_state"))
    assert history == [("FAILED_BEFORE_SEND", "SENDING"), ("SENDING", "SUPPRESSED_TEST")]


@pytest.mark.django_db(transaction=True)
def test_the_next_claim_skips_a_row_another_worker_holds_without_waiting(make_action):
    """reply_send_next: "workers draining together never wait on or contend for the same row"."""
    from replies.models import ReplyAction
    from replies.sender import reply_send_next

    held = make_action("APPROVED", canary=True)
    free = make_action("APPROVED", canary=True)
    with lock_held_elsewhere(lambda: ReplyAction.objects.select_for_update().filter(pk=held.pk).get()):
        assert reply_send_next() == (free.pk, "SUPPRESSED_TEST")
    held.refresh_from_db()
    assert held.delivery_state == "APPROVED"
