"""The sender's one-statement claim and finish: two statements a send, every guarantee kept."""

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from ingress.models import Source
from replies.models import ReplyAction, ReplyTransition, SendAttempt, SendBudget
from replies.sender import reply_send, reply_send_next
from replies.services import reply_approve
from tests.conftest import fail_next


@pytest.fixture
def approved_pair(wire, planned, provider):
    """Both Northstar actions APPROVED, their (source, purpose) budget rows already in place (the
    first send of an account writes them), so each claim can take the one-statement path."""
    state = provider()
    source = wire(state)
    actions = planned()
    for action in actions:
        assert reply_approve(action_id=action.pk, actor="reviewer_test").ok
        SendBudget.objects.get_or_create(
            source=source, purpose=action.purpose, defaults={"limit": None, "window_seconds": 3600}
        )
    return state, source, actions


def history(action) -> list[tuple]:
    return list(
        ReplyTransition.objects.filter(action=action)
        .order_by("id")
        .values_list("prior_state", "next_state", "actor", "reason_code", "refused")
    )


def test_a_send_is_two_statements_claim_and_finish(approved_pair):
    """Claim and attempt row together, finish in one statement (docs/internals.md#sender). Done
    apart it is 14 statements
    (BEGIN, the lock, a needs_reauth read, the budget row's insert and lock, the move, its history,
    the attempt, COMMIT; then BEGIN, the attempt's evidence, the move, its history, COMMIT)."""
    from replies.selectors import approved_copy

    state, source, (public, _) = approved_pair
    public.refresh_from_db()
    approved_copy(
        source_id=source.pk, purpose=public.purpose, copy_version=public.copy_version
    )  # kept per process
    from replies.sender import claim

    claim._claim_sql(by_id=False)  # the claim's SQL is compiled once per process
    with CaptureQueriesContext(connection) as queries:
        assert reply_send_next() == (public.pk, "SENT")
    assert len(queries.captured_queries) == 2, [q["sql"][:60] for q in queries.captured_queries]
    public.refresh_from_db()
    assert (public.delivery_state, public.attempt_count, public.sending_since) == ("SENT", 1, None)
    assert public.provider_reply_id == state.receipts[public.reply_key]
    assert history(public)[-2:] == [
        ("APPROVED", "SENDING", "system:sender", "claimed", False),
        ("SENDING", "SENT", "system:sender", "receipt_stored", False),
    ]
    attempt = SendAttempt.objects.get(action=public)
    assert (
        attempt.attempt_number,
        attempt.transport,
        attempt.http_status,
        attempt.evidence,
        attempt.transport_name,
    ) == (1, "response_received", 201, "receipt", "sandbox")


def test_the_attempt_row_is_written_sent_with_the_claim_before_any_transport_code(approved_pair, monkeypatch):
    """docs/internals.md#sender: "A SendAttempt row ... written as `sent` ... before the call": at the moment the
    transport is called, the claim, its history and the attempt row are committed together."""
    from conduit.providers.sandbox.transport import SandboxTransport

    _, _, (public, _) = approved_pair
    seen = {}
    real = SandboxTransport.send

    def spying(self, reply):
        row = ReplyAction.objects.get(reply_key=reply.reply_key)
        seen["state"] = row.delivery_state
        seen["attempt"] = list(
            SendAttempt.objects.filter(action=row).values_list("attempt_number", "transport")
        )
        seen["claimed"] = history(row)[-1][:2]
        return real(self, reply)

    monkeypatch.setattr(SandboxTransport, "send", spying)
    assert reply_send(action_id=public.pk) == "SENT"
    assert seen == {"state": "SENDING", "attempt": [(1, "sent")], "claimed": ("APPROVED", "SENDING")}


def test_an_ambiguous_send_parks_in_unknown_and_no_claim_takes_it_again(approved_pair):
    """docs/replies.md#outcomes: "A timeout after the external request creates SEND_STATUS_UNKNOWN";
    docs/concepts/acceptance.md#checks: "Ambiguous
    send: A simulated lost receipt enters SEND_STATUS_UNKNOWN and produces no automatic retry"."""
    state, _, (public, private) = approved_pair
    fail_next(state, "drop_after_accept")
    assert reply_send(action_id=public.pk) == "SEND_STATUS_UNKNOWN"
    assert reply_send(action_id=public.pk) == "not_claimed"
    assert reply_send_next() == (private.pk, "SENT")
    assert reply_send_next() is None
    public.refresh_from_db()
    assert (public.delivery_state, public.attempt_count) == ("SEND_STATUS_UNKNOWN", 1)
    assert state.applied == {public.reply_key: 1, private.reply_key: 1}
    assert SendAttempt.objects.get(action=public).evidence == "connection_lost_after_request"


def test_a_refused_send_backs_off_and_the_claim_waits_for_its_time(approved_pair):
    state, _, (public, private) = approved_pair
    fail_next(state, "refuse")
    assert reply_send(action_id=public.pk) == "FAILED_BEFORE_SEND"
    assert reply_send_next() == (private.pk, "SENT")
    assert reply_send_next() is None  # public waits for its backoff
    ReplyAction.objects.filter(pk=public.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    assert reply_send_next() == (public.pk, "SENT")
    assert list(SendAttempt.objects.filter(action=public).values_list("attempt_number", "transport")) == [
        (1, "response_received"),
        (2, "response_received"),
    ]
    assert history(public)[-2][:2] == ("FAILED_BEFORE_SEND", "SENDING")


def test_a_source_that_needs_reauth_and_a_paused_account_are_not_claimed(approved_pair):
    _, source, (public, private) = approved_pair
    Source.objects.filter(pk=source.pk).update(needs_reauth=True)
    assert reply_send_next() is None
    assert reply_send(action_id=public.pk) == "waiting_reauth"
    Source.objects.filter(pk=source.pk).update(needs_reauth=False)
    SendBudget.objects.filter(source=source).update(paused_until=timezone.now() + timedelta(minutes=5))
    assert reply_send_next() is None
    assert reply_send(action_id=private.pk) == "deferred_budget"
    assert set(ReplyAction.objects.values_list("delivery_state", flat=True)) == {"APPROVED"}


def test_a_counted_budget_is_claimed_in_the_transaction_path_and_counted(approved_pair):
    """A budget with a limit is counted under its row lock in the claim's transaction: the
    one-statement claim leaves such an action to that path."""
    from replies.models import SendBudgetUse

    _, source, (public, private) = approved_pair
    SendBudget.objects.filter(source=source).update(limit=1, window_seconds=3600)
    assert reply_send_next() == (public.pk, "SENT")
    assert reply_send_next() == (private.pk, "SENT")  # private_delivery's own budget
    assert SendBudgetUse.objects.count() == 2
    ReplyAction.objects.filter(pk=public.pk).update(delivery_state="APPROVED")  # bench-style reset
    assert reply_send_next() is None  # public_ack's budget is full: the account waits


def test_a_receipt_after_the_sweeper_parked_the_send_still_lands(approved_pair, monkeypatch):
    """docs/replies.md#outcomes: "A receipt that arrives after the sweeper parked the row still lands
    (SEND_STATUS_UNKNOWN -> SENT)"."""
    from conduit.providers.sandbox.transport import SandboxTransport
    from replies.sender import replies_sweep

    _, _, (public, _) = approved_pair
    real = SandboxTransport.send

    def slow(self, reply):
        receipt = real(self, reply)
        assert replies_sweep(now=timezone.now() + timedelta(days=1)) == 1
        return receipt

    monkeypatch.setattr(SandboxTransport, "send", slow)
    assert reply_send(action_id=public.pk) == "SENT"
    assert [h[3] for h in history(public)[-3:]] == [
        "claimed",
        "worker_lease_expired",
        "receipt_after_lease_expired",
    ]


@pytest.mark.django_db(transaction=True)
def test_a_receipt_lands_when_the_sweeper_commits_while_finish_waits(approved_pair, monkeypatch):
    """Same guarantee as test_a_receipt_after_the_sweeper_parked_the_send_still_lands, but the
    sweeper's move is still uncommitted when the finish statement starts (it commits while the
    finish waits on the row lock): the finish must see the parked state, not its statement's
    snapshot, and land the receipt (found by the review pass; it failed before the fix)."""
    from conduit.providers.sandbox.transport import SandboxTransport
    from replies.ledger import reply_action_transition
    from replies.models import DeliveryState as S

    _, _, (public, _) = approved_pair
    real = SandboxTransport.send
    locked = threading.Event()
    errors = []

    def sweeper(action_id):
        try:
            with transaction.atomic():
                outcome = reply_action_transition(
                    action_id=action_id,
                    to=S.SEND_STATUS_UNKNOWN,
                    actor="system:sweeper",
                    reason_code="worker_lease_expired",
                    expected=S.SENDING,
                    record_lost_race=False,
                    extra={"sending_since": None, "last_error_code": "worker_lease_expired"},
                )
                assert outcome.applied
                locked.set()
                time.sleep(1.0)  # the finish statement starts and waits on this row lock
        except Exception as exc:  # pragma: no cover
            errors.append(exc)
            locked.set()
        finally:
            connection.close()

    threads = []

    def slow(self, reply):
        receipt = real(self, reply)
        t = threading.Thread(target=sweeper, args=(public.pk,))
        t.start()
        threads.append(t)
        assert locked.wait(10)
        return receipt

    monkeypatch.setattr(SandboxTransport, "send", slow)
    state = reply_send(action_id=public.pk)
    for t in threads:
        t.join()
    assert not errors
    public.refresh_from_db()
    hist = list(
        ReplyTransition.objects.filter(action=public).order_by("id").values_list("reason_code", flat=True)
    )
    assert (state, public.delivery_state) == ("SENT", "SENT"), (state, public.delivery_state, hist)
    assert hist[-1] == "receipt_after_lease_expired"
