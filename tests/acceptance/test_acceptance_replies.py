"""Seed 000 acceptance rows covered by the sender, each with its positive control."""

from datetime import timedelta

import pytest
from django.utils import timezone

from replies.models import ReplyAction, SendAttempt
from replies.sender import due_action_ids, reply_approve, reply_send, reply_send_next
from tests.conftest import fail_next, provider_calls


def run_everything_that_sends(action_id: int, settings) -> None:
    """What could ever send: the queue's task (redelivered), the schedule's picks, the sweeper,
    and a drain worker."""
    from replies import tasks

    tasks.send_reply(action_id)
    for due in due_action_ids():  # what the send_due schedule queues
        tasks.send_reply(due)
    settings.CONDUIT_SEND_LEASE_SECONDS = 0
    tasks.sweep_sending()
    tasks.send_reply(action_id)
    while reply_send_next():
        pass


def approval_gate(action, state, settings) -> list[str]:
    """An action in REVIEW_PENDING produces zero transport calls."""
    run_everything_that_sends(action.pk, settings)
    action.refresh_from_db()
    failures = []
    if provider_calls(state):
        failures.append(f"an unapproved action reached the transport {provider_calls(state)} time(s)")
    if action.delivery_state != "REVIEW_PENDING":
        failures.append(f"an unapproved action moved to {action.delivery_state}")
    return failures


def safe_retry(action, state) -> list[str]:
    """A failure before transport retries under the same keys."""
    reply_approve(action_id=action.pk, actor="reviewer_test")
    fail_next(state, "refuse")
    first = reply_send(action_id=action.pk)
    ReplyAction.objects.filter(pk=action.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    second = reply_send(action_id=action.pk)
    action.refresh_from_db()
    failures = []
    if (first, second) != ("FAILED_BEFORE_SEND", "SENT"):
        failures.append(f"expected FAILED_BEFORE_SEND then SENT, got {first} then {second}")
    numbers = list(SendAttempt.objects.filter(action=action).values_list("attempt_number", flat=True))
    if numbers != [1, 2]:
        failures.append(f"expected attempts 1 and 2 on one action, found {numbers}")
    with state.lock:
        if state.applied != {action.reply_key: 1}:
            failures.append(f"the provider applied {state.applied}, expected once under {action.reply_key[:12]}…")
    if ReplyAction.objects.filter(event=action.event, purpose=action.purpose).count() != 1:
        failures.append("the retry created another action")
    return failures


def ambiguous_send(action, state, settings) -> list[str]:
    """A simulated lost receipt enters SEND_STATUS_UNKNOWN and produces no automatic retry."""
    reply_approve(action_id=action.pk, actor="reviewer_test")
    fail_next(state, "error_after_accept")
    reached = reply_send(action_id=action.pk)
    run_everything_that_sends(action.pk, settings)
    action.refresh_from_db()
    failures = []
    if reached != "SEND_STATUS_UNKNOWN" or action.delivery_state != "SEND_STATUS_UNKNOWN":
        failures.append(f"expected SEND_STATUS_UNKNOWN, reached {reached} and ended {action.delivery_state}")
    attempts = SendAttempt.objects.filter(action=action).count()
    if attempts != 1:
        failures.append(f"{attempts} transport attempts, expected 1: the ambiguous send was retried")
    if provider_calls(state) != 1:
        failures.append(f"the provider applied it {provider_calls(state)} times, expected once")
    return failures


@pytest.fixture
def ready(provider, wire, planned):
    state = provider()
    wire(state)
    action, _ = planned()
    return action, state


def test_approval_gate(ready, settings):
    assert approval_gate(*ready, settings) == []


def test_safe_retry(ready):
    assert safe_retry(*ready) == []


def test_ambiguous_send(ready, settings):
    assert ambiguous_send(*ready, settings) == []


def _plant(monkeypatch, state: str) -> None:
    from conduit.statemachine import TransitionTable
    from replies import sender

    monkeypatch.setitem(sender.CLAIMABLE, state, lambda now: {})
    original = TransitionTable.allows
    monkeypatch.setattr(
        TransitionTable, "allows", lambda self, p, n: original(self, p, n) or (p, n) == (state, "SENDING")
    )


def test_control_approval_gate_fails_when_the_approval_check_is_bypassed(ready, settings, monkeypatch):
    _plant(monkeypatch, "REVIEW_PENDING")
    assert approval_gate(*ready, settings) != []


def test_control_ambiguous_send_fails_when_unknown_sends_may_retry(ready, settings, monkeypatch):
    _plant(monkeypatch, "SEND_STATUS_UNKNOWN")
    failures = ambiguous_send(*ready, settings)
    assert "2 transport attempts, expected 1: the ambiguous send was retried" in failures


def test_control_safe_retry_fails_when_a_retry_mints_a_new_key(ready, monkeypatch):
    from replies.transports.sandbox import SandboxTransport

    real_send = SandboxTransport.send

    def new_key_each_time(self, reply):
        import dataclasses
        import uuid

        return real_send(self, dataclasses.replace(reply, reply_key=uuid.uuid4().hex))

    monkeypatch.setattr(SandboxTransport, "send", new_key_each_time)
    assert safe_retry(*ready) != []
