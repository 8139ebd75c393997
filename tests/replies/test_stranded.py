"""Exhausted or stopped FAILED_BEFORE_SEND: capped retries, incurable codes, the stranded-sends queue."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone

from replies import selectors, sender
from replies.contract import (
    BACKOFF_CAP_SECONDS,
    INCURABLE_FAILURES,
    MAX_AUTOMATIC_ATTEMPTS,
)
from replies.models import ReplyAction, ReplyTransition, SendAttempt
from replies.selectors import sends_stranded
from replies.sender import deliver, due_action_ids, reply_send
from replies.services import reply_approve, stranded_retry_now
from tests.conftest import fail_next


def approve(action) -> None:
    result = reply_approve(action_id=action.pk, actor="reviewer_test")
    assert result.ok, result.message


def make_due(action) -> None:
    ReplyAction.objects.filter(pk=action.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=1))


@pytest.fixture
def live_transport(monkeypatch):
    """A live transport name that stays switched off: every send fails live_send_disabled."""
    from django.conf import settings as django_settings

    from conduit.providers import registry
    from conduit.providers.base import Capabilities, Receipt, Transport

    class LiveTest(Transport):
        name, live = "live_test", True
        capabilities = Capabilities(idempotency_key=True, receipt_lookup=True)

        def send(self, reply):
            return Receipt(provider_reply_id="rcpt_test_live", http_status=200)

    monkeypatch.setitem(registry.TRANSPORTS, "live_test", LiveTest)
    monkeypatch.setattr(django_settings, "CONDUIT_LIVE_SEND", False)


def test_an_exhausted_failure_before_send_keeps_retrying_at_the_capped_interval_under_the_same_key(
    wire, planned, provider
):
    """docs/replies.md#stranded: FAILED_BEFORE_SEND -> "Retry under the same keys";
    docs/concepts/acceptance.md#checks: "A failure before transport
    retries under the same keys". Exhaustion must not be a dead end."""
    state = provider()
    wire(state)
    action, _ = planned()
    approve(action)
    fail_next(state, "refuse", MAX_AUTOMATIC_ATTEMPTS + 2)
    for attempt in range(1, MAX_AUTOMATIC_ATTEMPTS + 3):
        before = timezone.now()
        assert reply_send(action_id=action.pk) == "FAILED_BEFORE_SEND", attempt
        action.refresh_from_db()
        assert action.next_attempt_at is not None, f"attempt {attempt} scheduled no retry"
        if attempt >= MAX_AUTOMATIC_ATTEMPTS:
            wait = (action.next_attempt_at - before).total_seconds()
            assert BACKOFF_CAP_SECONDS - 1 <= wait <= BACKOFF_CAP_SECONDS + 5
            assert action.pk in sends_stranded().values_list("pk", flat=True)  # visible to a person
        else:
            assert action.pk not in sends_stranded().values_list("pk", flat=True)
        assert action.pk not in due_action_ids()
        make_due(action)
        assert action.pk in due_action_ids()
    assert reply_send(action_id=action.pk) == "SENT"
    assert state.applied == {action.reply_key: 1}  # one reply key, applied once
    numbers = list(SendAttempt.objects.filter(action=action).values_list("attempt_number", flat=True))
    assert numbers == list(range(1, MAX_AUTOMATIC_ATTEMPTS + 4))
    assert not sends_stranded().exists()


def test_an_incurable_failure_stops_automatic_retries_and_names_its_code(wire, planned, live_transport):
    """Retrying cannot cure live_send_disabled: no automatic attempt; the queue says which code stopped it."""
    wire(None, transport_name="live_test", live_send_enabled=False)
    action, _ = planned()
    approve(action)
    assert reply_send(action_id=action.pk) == "FAILED_BEFORE_SEND"
    action.refresh_from_db()
    assert (action.last_error_code, action.next_attempt_at, action.attempt_count) == (
        "live_send_disabled",
        None,
        1,
    )
    assert action.pk not in due_action_ids(now=timezone.now() + timedelta(days=365))
    assert list(sends_stranded()) == [action]
    why = selectors.stranded_why(action)
    assert (
        why.startswith("stopped by live_send_disabled: ") and INCURABLE_FAILURES["live_send_disabled"] in why
    )


def test_positive_control_without_the_incurable_guard_the_same_failure_is_rescheduled(
    wire, planned, live_transport, monkeypatch
):
    """Break the guard on purpose: the stop above is the guard's doing, not an accident."""
    monkeypatch.setattr(deliver, "failure_is_incurable", lambda code: False)
    wire(None, transport_name="live_test", live_send_enabled=False)
    action, _ = planned()
    approve(action)
    assert reply_send(action_id=action.pk) == "FAILED_BEFORE_SEND"
    action.refresh_from_db()
    assert action.next_attempt_at is not None
    assert not sends_stranded().exists()


def test_incurable_codes_are_declared_with_why_and_transient_ones_are_not():
    for code, why in INCURABLE_FAILURES.items():
        assert code == code.lower() and " " not in code and len(why) > 20, code
    for transient in (
        "connect_failed",
        "provider_refused_429",
        "capability_discovery_failed",
        "transport_or_copy_unavailable",
    ):
        assert transient not in INCURABLE_FAILURES


def test_sends_stranded_holds_only_exhausted_or_stopped_failures_before_send(wire, planned, provider):
    state = provider()
    wire(state)
    backing_off, other = planned()
    for action in (backing_off, other):
        approve(action)
        fail_next(state, "refuse")
        assert reply_send(action_id=action.pk) == "FAILED_BEFORE_SEND"
    assert not sends_stranded().exists()  # one attempt, retry scheduled: not stranded yet
    ReplyAction.objects.filter(pk=other.pk).update(attempt_count=MAX_AUTOMATIC_ATTEMPTS)
    assert [a.pk for a in sends_stranded()] == [other.pk]
    ReplyAction.objects.filter(pk=backing_off.pk).update(next_attempt_at=None)
    assert [a.pk for a in sends_stranded()] == sorted([backing_off.pk, other.pk])
    ReplyAction.objects.filter(pk=other.pk).update(delivery_state="SEND_STATUS_UNKNOWN")
    assert [a.pk for a in sends_stranded()] == [backing_off.pk]


def member(username: str, *groups: str) -> User:
    user = User.objects.create_user(username, password="unused-test-password", is_staff=True)
    for name in groups:
        user.groups.add(Group.objects.get(name=name))
    return user


def act(client, action: str, rows, **extra):
    return client.post(
        "/admin/replies/strandedsendqueue/",
        {"action": action, "_selected_action": [r.pk for r in rows], **extra},
        follow=True,
    )


@pytest.fixture
def stranded(wire, planned, live_transport):
    """Two approved replies stopped by live_send_disabled."""
    source = wire(None, transport_name="live_test", live_send_enabled=False)
    actions = planned()
    for action in actions:
        approve(action)
        assert reply_send(action_id=action.pk) == "FAILED_BEFORE_SEND"
    return source, actions


def test_the_stranded_queue_shows_last_evidence_and_retry_now_needs_confirmation_and_keeps_the_key(
    client, stranded, monkeypatch, django_capture_on_commit_callbacks
):
    """docs/replies.md#stranded: FAILED_BEFORE_SEND -> "Retry under the same keys": a person's retry reuses the reply key."""
    _, (action, other) = stranded
    queued = []
    monkeypatch.setattr(sender, "enqueue_send", queued.append)
    client.force_login(member("operator_test", "operators"))
    page = client.get("/admin/replies/strandedsendqueue/").content.decode()
    assert action.reply_key[:12] in page and "stopped by live_send_disabled" in page
    assert "attempt 1 at" in page and "not_sent" in page and "live_send_disabled" in page
    detail = client.get(f"/admin/replies/strandedsendqueue/{action.pk}/change/").content.decode()
    assert "why it waits for a person" in detail.lower() and "last evidence" in detail.lower()
    assert "stopped by live_send_disabled" in detail

    assert b"Confirm" in act(client, "retry_now", [action]).content
    action.refresh_from_db()
    assert action.delivery_state == "FAILED_BEFORE_SEND"  # nothing before the confirmation

    key = action.reply_key
    with django_capture_on_commit_callbacks(execute=True):
        act(client, "retry_now", [action], confirm="yes")
    action.refresh_from_db()
    assert (action.delivery_state, action.reply_key, action.next_attempt_at) == ("APPROVED", key, None)
    assert queued == [action.pk]
    last = ReplyTransition.objects.filter(action=action).last()
    assert (last.prior_state, last.next_state, last.actor, last.reason_code) == (
        "FAILED_BEFORE_SEND",
        "APPROVED",
        "operator_test",
        "retry_now_by_operator",
    )
    assert [a.pk for a in sends_stranded()] == [other.pk]


def test_close_without_reply_from_the_stranded_queue_needs_confirmation(client, stranded):
    _, (action, _) = stranded
    client.force_login(member("operator_test", "operators"))
    assert b"Confirm" in act(client, "close", [action]).content
    action.refresh_from_db()
    assert action.delivery_state == "FAILED_BEFORE_SEND"
    act(client, "close", [action], confirm="yes")
    action.refresh_from_db()
    assert action.delivery_state == "CLOSED_NO_REPLY"
    last = ReplyTransition.objects.filter(action=action).last()
    assert (last.actor, last.reason_code) == ("operator_test", "closed_stranded_by_operator")


def test_without_the_permission_nothing_is_retried_or_closed(client, stranded):
    _, (action, _) = stranded
    client.force_login(member("reviewer_test", "reviewers"))
    assert client.get("/admin/replies/strandedsendqueue/").status_code == 403
    act(client, "retry_now", [action], confirm="yes")
    act(client, "close", [action], confirm="yes")
    action.refresh_from_db()
    assert action.delivery_state == "FAILED_BEFORE_SEND"


def test_retry_now_is_refused_once_the_sender_holds_the_action(wire, planned, provider):
    state = provider()
    wire(state)
    action, _ = planned()
    approve(action)
    fail_next(state, "refuse")
    reply_send(action_id=action.pk)
    ReplyAction.objects.filter(pk=action.pk).update(delivery_state="SENDING")
    result = stranded_retry_now(action_id=action.pk, actor="operator_test")
    assert not result.ok
    action.refresh_from_db()
    assert action.delivery_state == "SENDING"
