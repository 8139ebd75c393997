"""The sender: approval, claim, every transport outcome, the sweeper, unknown-send resolution."""

from datetime import timedelta

import pytest
from django.utils import timezone

from replies.models import CanarySinkRecord, ReplyAction, ReplyTransition, SendAttempt
from replies.sender import due_action_ids, replies_sweep, reply_send
from replies.services import (
    reply_approve,
    reply_close,
    unknown_authorize_retry,
    unknown_confirm_sent,
)
from tests.conftest import fail_next, provider_calls


def approve(action) -> None:
    result = reply_approve(action_id=action.pk, actor="reviewer_test")
    assert result.ok, result.message


def state_of(action) -> str:
    action.refresh_from_db()
    return action.delivery_state


def test_approval_without_copy_is_refused_and_says_what_is_missing(wire, planned):
    wire(copies=False)
    action, _ = planned()
    result = reply_approve(action_id=action.pk, actor="reviewer_test")
    assert not result.ok
    assert "no approved copy for purpose 'public_ack' in campaign 'sandbox: every post'" in result.message
    assert state_of(action) == "REVIEW_PENDING"


def test_approval_records_actor_copy_and_queues_the_send_on_commit(
    wire, planned, provider, monkeypatch, django_capture_on_commit_callbacks
):
    from replies import sender

    queued = []
    monkeypatch.setattr(sender, "enqueue_send", queued.append)
    wire(provider())
    action, _ = planned()
    with django_capture_on_commit_callbacks(execute=True):
        approve(action)
    action.refresh_from_db()
    assert (action.delivery_state, action.approval_state, action.approved_by) == (
        "APPROVED",
        "APPROVED",
        "reviewer_test",
    )
    assert (action.copy_version, action.channel) == ("v1", "public_ack")
    assert action.approved_at is not None
    assert queued == [action.pk]
    again = reply_approve(action_id=action.pk, actor="reviewer_test")
    assert not again.ok and "not in the declared transition table" in again.message


def test_a_receipt_is_stored_then_sent_with_the_reply_key_as_idempotency_key(wire, planned, provider):
    state = provider()
    wire(state)
    action, _ = planned()
    approve(action)
    assert reply_send(action_id=action.pk) == "SENT"
    action.refresh_from_db()
    assert action.provider_reply_id.startswith("rcpt_test_")
    assert state.receipts[action.reply_key] == action.provider_reply_id  # keyed by Idempotency-Key
    attempt = SendAttempt.objects.get(action=action)
    assert (attempt.attempt_number, attempt.transport, attempt.http_status) == (1, "response_received", 201)
    assert state.applied == {action.reply_key: 1}
    assert reply_send(action_id=action.pk) == "not_claimed"
    assert state.applied == {action.reply_key: 1}


def test_nothing_can_be_claimed_twice(wire, planned, provider):
    wire(provider())
    action, _ = planned()
    approve(action)
    reply_send(action_id=action.pk)
    for stuck in (
        "SENDING",
        "SENT",
        "SUPPRESSED_TEST",
        "CLOSED_NO_REPLY",
        "SEND_STATUS_UNKNOWN",
        "REVIEW_PENDING",
    ):
        ReplyAction.objects.filter(pk=action.pk).update(delivery_state=stuck)
        assert reply_send(action_id=action.pk) == "not_claimed", stuck
    assert SendAttempt.objects.filter(action=action).count() == 1


def test_refused_before_accepting_backs_off_then_retries_under_the_same_key(wire, planned, provider):
    state = provider()
    wire(state)
    action, _ = planned()
    approve(action)
    fail_next(state, "refuse")
    assert reply_send(action_id=action.pk) == "FAILED_BEFORE_SEND"
    action.refresh_from_db()
    assert action.last_error_code == "provider_refused_429"
    assert action.next_attempt_at > timezone.now()
    assert reply_send(action_id=action.pk) == "not_claimed"  # backoff not yet over
    assert action.pk not in due_action_ids()
    ReplyAction.objects.filter(pk=action.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    assert reply_send(action_id=action.pk) == "SENT"
    attempts = list(SendAttempt.objects.filter(action=action).values_list("transport", "http_status"))
    assert attempts == [("response_received", 429), ("response_received", 201)]
    assert state.applied == {action.reply_key: 1}


def test_provider_unreachable_is_not_sent(wire, planned):
    wire(None)  # nothing listens on 127.0.0.1:9, so not even its capabilities can be discovered
    action, _ = planned()
    approve(action)
    assert reply_send(action_id=action.pk) == "FAILED_BEFORE_SEND"
    attempt = SendAttempt.objects.get(action=action)
    assert (attempt.transport, attempt.evidence) == ("not_sent", "capability_discovery_failed")


def test_automatic_attempts_back_off_to_the_cap_and_never_stop_for_a_curable_failure(wire, planned):
    wire(None)
    action, _ = planned()
    approve(action)
    from replies.contract import (
        BACKOFF_CAP_SECONDS,
        MAX_AUTOMATIC_ATTEMPTS,
        backoff_seconds,
    )

    for _ in range(MAX_AUTOMATIC_ATTEMPTS + 1):
        ReplyAction.objects.filter(pk=action.pk).update(next_attempt_at=timezone.now())
        assert reply_send(action_id=action.pk) == "FAILED_BEFORE_SEND"
    action.refresh_from_db()
    assert action.attempt_count == MAX_AUTOMATIC_ATTEMPTS + 1 and action.next_attempt_at is not None
    assert [backoff_seconds(n) for n in range(1, MAX_AUTOMATIC_ATTEMPTS + 2)] == [
        5,
        10,
        20,
        40,
        BACKOFF_CAP_SECONDS,
        BACKOFF_CAP_SECONDS,
    ]


@pytest.mark.parametrize(
    "mode, code, transport, http_status",
    [
        ("timeout_after_accept", "timeout_after_request", "sent", None),
        ("drop_after_accept", "connection_lost_after_request", "sent", None),
        ("error_after_accept", "provider_error_503", "response_received", 503),
    ],
)
def test_ambiguous_outcomes_park_in_unknown_and_nothing_retries_them(
    wire, planned, provider, settings, mode, code, transport, http_status
):
    state = provider(hang_seconds=1.5)
    wire(state)
    action, _ = planned()
    approve(action)
    fail_next(state, mode)
    assert reply_send(action_id=action.pk) == "SEND_STATUS_UNKNOWN"
    action.refresh_from_db()
    assert action.last_error_code == code
    attempt = SendAttempt.objects.get(action=action)
    assert (attempt.transport, attempt.http_status) == (transport, http_status)
    assert provider_calls(state) == 1
    # The sweeper, the schedule and the queue's own redelivery all run: nothing resends.
    settings.CONDUIT_SEND_LEASE_SECONDS = 0
    replies_sweep()
    assert action.pk not in due_action_ids()
    assert reply_send(action_id=action.pk) == "not_claimed"
    assert state_of(action) == "SEND_STATUS_UNKNOWN"
    assert provider_calls(state) == 1


def test_sweeper_parks_a_stale_sending_row_and_leaves_a_fresh_one(wire, planned, provider, settings):
    wire(provider())
    stale, fresh = planned()
    now = timezone.now()
    ReplyAction.objects.filter(pk=stale.pk).update(
        delivery_state="SENDING", sending_since=now - timedelta(seconds=300)
    )
    ReplyAction.objects.filter(pk=fresh.pk).update(delivery_state="SENDING", sending_since=now)
    settings.CONDUIT_SEND_LEASE_SECONDS = 120
    assert replies_sweep() == 1
    assert (state_of(stale), state_of(fresh)) == ("SEND_STATUS_UNKNOWN", "SENDING")
    history = ReplyTransition.objects.filter(action=stale).last()
    assert (history.actor, history.reason_code) == ("system:sweeper", "worker_lease_expired")


def test_a_receipt_that_arrives_after_the_lease_expired_still_lands(wire, planned, provider, monkeypatch):
    from conduit.providers.sandbox.transport import SandboxTransport

    state = provider()
    wire(state)
    action, _ = planned()
    approve(action)
    real_send = SandboxTransport.send

    def slow_send(self, reply):
        receipt = real_send(self, reply)
        ReplyAction.objects.filter(pk=action.pk).update(
            delivery_state="SEND_STATUS_UNKNOWN"
        )  # swept meanwhile
        return receipt

    monkeypatch.setattr(SandboxTransport, "send", slow_send)
    assert reply_send(action_id=action.pk) == "SENT"
    action.refresh_from_db()
    assert action.provider_reply_id
    assert ReplyTransition.objects.filter(action=action, reason_code="receipt_after_lease_expired").exists()


def test_canary_guard_writes_the_sink_and_opens_no_socket(wire, planned, provider, monkeypatch):
    import socket

    state = provider()
    wire(state)
    action, _ = planned()
    # A source's canary flag is fixed at registration; what the sender reads is the action's flag.
    ReplyAction.objects.filter(pk=action.pk).update(canary=True)
    approve(action)

    def no_network(*args, **kwargs):
        raise AssertionError("a canary action tried to open a connection")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    assert reply_send(action_id=action.pk) == "SUPPRESSED_TEST"
    sink = CanarySinkRecord.objects.get()
    assert (sink.reply_key, sink.purpose, sink.copy_version) == (action.reply_key, "public_ack", "v1")
    action.refresh_from_db()
    assert action.attempt_count == 0 and not SendAttempt.objects.exists()
    assert provider_calls(state) == 0


@pytest.fixture
def live_transport(monkeypatch):
    """Register a fake live transport; `built` records every construction."""
    from conduit.providers import registry
    from conduit.providers.base import Capabilities, Receipt, Transport

    built = []

    class LiveTest(Transport):
        name, live = "live_test", True
        capabilities = Capabilities(idempotency_key=True, receipt_lookup=True)

        def __init__(self, url, timeout):
            built.append(url)

        def send(self, reply):
            return Receipt(provider_reply_id="rcpt_test_live", http_status=200)

    monkeypatch.setitem(registry.TRANSPORTS, "live_test", LiveTest)
    return built


def test_canary_aimed_at_a_live_transport_fails_closed_before_any_transport_code(
    wire, planned, live_transport, live_ready
):
    wire(None, transport_name="live_test", live_send_enabled=True)
    action, _ = planned()
    ReplyAction.objects.filter(pk=action.pk).update(canary=True)  # the flag the guard reads
    approve(action)
    assert reply_send(action_id=action.pk) == "SUPPRESSED_TEST"
    action.refresh_from_db()
    assert action.last_error_code == "canary_aimed_at_live_transport"
    assert live_transport == [] and not CanarySinkRecord.objects.exists()


@pytest.mark.parametrize("env, flag", [("off", True), ("on", False), ("off", False)])
def test_live_transports_stay_off_unless_environment_and_owner_both_say_on(
    wire, planned, live_transport, settings, env, flag, live_ready
):
    settings.CONDUIT_LIVE_SEND = env == "on"
    wire(None, transport_name="live_test", live_send_enabled=flag)
    action, _ = planned()
    approve(action)
    assert reply_send(action_id=action.pk) == "FAILED_BEFORE_SEND"
    action.refresh_from_db()
    assert action.last_error_code == "live_send_disabled"
    assert live_transport == []
    assert SendAttempt.objects.get(action=action).transport == "not_sent"


def test_with_both_switches_on_the_live_transport_is_used(
    wire, planned, live_transport, settings, live_ready
):
    settings.CONDUIT_LIVE_SEND = True
    wire(None, transport_name="live_test", live_send_enabled=True)
    action, _ = planned()
    approve(action)
    assert reply_send(action_id=action.pk) == "SENT"
    assert len(live_transport) == 1


def _unknown(state, wire, planned):
    wire(state)
    action, _ = planned()
    approve(action)
    fail_next(state, "error_after_accept")
    assert reply_send(action_id=action.pk) == "SEND_STATUS_UNKNOWN"
    return action


def test_operator_confirms_a_verified_send_with_its_receipt(wire, planned, provider):
    action = _unknown(provider(), wire, planned)
    assert not unknown_confirm_sent(action_id=action.pk, actor="op_test", provider_reply_id=" ").ok
    result = unknown_confirm_sent(action_id=action.pk, actor="op_test", provider_reply_id="rcpt_test_manual")
    assert result.ok
    action.refresh_from_db()
    assert (action.delivery_state, action.provider_reply_id) == ("SENT", "rcpt_test_manual")


def test_retry_after_lookup_finds_the_receipt_and_never_resends(wire, planned, provider):
    state = provider()
    action = _unknown(state, wire, planned)  # the provider applied it, then answered 503
    result = unknown_authorize_retry(action_id=action.pk, actor="op_test")
    assert result.ok and "found the provider's receipt" in result.message
    action.refresh_from_db()
    assert action.delivery_state == "SENT" and action.provider_reply_id == state.receipts[action.reply_key]
    assert provider_calls(state) == 1


def test_retry_after_lookup_without_receipt_is_approved_under_the_same_key(wire, planned, provider):
    state = provider()
    action = _unknown(state, wire, planned)
    with state.lock:  # the provider lost it: no receipt
        state.receipts.clear()
        state.applied.clear()
    result = unknown_authorize_retry(action_id=action.pk, actor="op_test")
    assert result.ok and "retry authorized" in result.message
    assert state_of(action) == "APPROVED"
    assert reply_send(action_id=action.pk) == "SENT"
    assert state.applied == {action.reply_key: 1}


@pytest.mark.parametrize("idempotency_key", [True, False])
def test_without_receipt_lookup_a_retry_is_refused(wire, planned, provider, idempotency_key):
    state = provider(idempotency_key=idempotency_key, receipt_lookup=False)
    action = _unknown(state, wire, planned)
    result = unknown_authorize_retry(action_id=action.pk, actor="op_test")
    assert not result.ok and "no receipt lookup" in result.message
    assert state_of(action) == "SEND_STATUS_UNKNOWN"
    assert reply_close(action_id=action.pk, actor="op_test").ok
    assert state_of(action) == "CLOSED_NO_REPLY"


# Reply routes: each action goes out through its own (source, purpose) route.


def _route(purpose: str, **changes):
    from replies.models import ReplyRoute
    from replies.services import reply_route_update

    route = ReplyRoute.objects.get(purpose=purpose)
    return reply_route_update(route_id=route.pk, changes=changes) if changes else route


def test_each_purpose_goes_out_through_its_own_route(wire, planned, provider):
    """One source, public acknowledgement through one provider, private delivery through another;
    the locking claim (reply_send_next) and the direct send (reply_send) both follow the route."""
    from replies.sender import reply_send_next

    public_side, private_side = provider(), provider()
    wire(public_side)
    _route("private_delivery", target_url=private_side.url)
    public, private = planned()
    approve(public)
    approve(private)
    assert reply_send(action_id=public.pk) == "SENT"
    assert reply_send_next() == (private.pk, "SENT")
    assert list(public_side.receipts) == [public.reply_key]
    assert list(private_side.receipts) == [private.reply_key]
    assert provider_calls(public_side) == provider_calls(private_side) == 1
    assert set(SendAttempt.objects.values_list("transport_name", flat=True)) == {"sandbox"}


def test_the_canary_guard_reads_the_actions_own_route(wire, planned, live_transport):
    """The canary never reaches a live transport (docs/concepts/canary.md#guard): the guard asks whether the route this
    action would take is live, so a live route for one purpose does not taint the other."""
    wire(None)
    _route("private_delivery", transport_name="live_test")
    public, private = planned()
    ReplyAction.objects.update(canary=True)
    approve(public)
    approve(private)
    assert reply_send(action_id=public.pk) == reply_send(action_id=private.pk) == "SUPPRESSED_TEST"
    public.refresh_from_db()
    private.refresh_from_db()
    assert (public.last_error_code, private.last_error_code) == ("", "canary_aimed_at_live_transport")
    assert list(CanarySinkRecord.objects.values_list("purpose", "transport_name")) == [
        ("public_ack", "sandbox")
    ]
    assert live_transport == []


def test_without_a_route_approval_is_refused_and_a_send_stops_as_misconfigured(wire, planned):
    from replies.models import ReplyRoute
    from replies.selectors import approval_missing

    wire(None)
    public, private = planned()
    ReplyRoute.objects.filter(purpose="public_ack").delete()
    result = reply_approve(action_id=public.pk, actor="reviewer_test")
    assert not result.ok and "no reply route for purpose 'public_ack'" in result.message
    assert "no reply route" in approval_missing(
        ReplyAction.objects.select_related("event__source").get(pk=public.pk)
    )
    approve(private)
    ReplyRoute.objects.filter(purpose="private_delivery").delete()  # removed after approval
    assert reply_send(action_id=private.pk) == "FAILED_BEFORE_SEND"
    private.refresh_from_db()
    assert (private.last_error_code, private.next_attempt_at) == ("transport_misconfigured", None)
    assert SendAttempt.objects.get(action=private).transport_name == ""


def test_unknown_send_resolution_looks_up_the_actions_own_route(wire, planned, provider):
    """The receipt lookup asks the provider the action was sent through, not another route's."""
    private_side = provider()
    wire(None)  # public_ack's route points nowhere reachable
    _route("private_delivery", target_url=private_side.url)
    _, private = planned()
    approve(private)
    fail_next(private_side, "error_after_accept")
    assert reply_send(action_id=private.pk) == "SEND_STATUS_UNKNOWN"
    result = unknown_authorize_retry(action_id=private.pk, actor="op_test")
    assert result.ok and "found the provider's receipt" in result.message
    assert state_of(private) == "SENT"
