"""The claim's record and its lock: what a claim leaves behind before any transport code runs."""

from datetime import timedelta

import pytest
from django.db import OperationalError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from ingress.models import InboundEvent, Source
from replies.models import ReplyAction, ReplyRoute, ReplyTransition, SendAttempt, SendBudget
from replies.sender import reply_send, reply_send_next
from replies.sender.claim import _claim, _lock_next, due_action_ids
from tests.conftest import account_campaign
from tests.rules.conftest import AT, lock_held_elsewhere

pytestmark = pytest.mark.django_db
CLAIM_EVIDENCE = "claimed; request about to be written"


def _claimed(make_action, now, *, locked: bool, canary: bool) -> tuple[ReplyAction, ReplyAction]:
    """A due FAILED_BEFORE_SEND action with two attempts behind it, claimed one way or the other."""
    action = make_action(
        "FAILED_BEFORE_SEND",
        canary=canary,
        attempt_count=2,
        next_attempt_at=now - timedelta(seconds=1),
        last_error_code="connection_refused",
    )
    if locked:  # reply_send_next: the locking read, then the claim in its transaction
        with transaction.atomic():
            held = _lock_next(now)
            assert held.pk == action.pk
            assert _claim(held, now, locked=True)
    else:  # reply_send: an unlocked read, then the compare-and-set
        held = ReplyAction.objects.get(pk=action.pk)
        assert _claim(held, now)
    return action, held


@pytest.mark.parametrize("locked", [False, True], ids=["read", "locked"])
def test_a_claim_commits_sending_and_a_sent_attempt_numbered_as_the_ledger_counts(make_action, locked):
    """docs/replies.md#sender: "the claim makes each send at-most-once: one compare-and-set APPROVED →
    SENDING (or a due FAILED_BEFORE_SEND → SENDING), committed with a `SendAttempt` row written as
    `sent` before any transport code runs." The attempt is the action's third (two before it), and
    the action object the transport boundary then gets is the row as claimed: SENDING, count 3
    (the attempt's outcome is later written to attempt number `action.attempt_count`)."""
    now = timezone.now()
    action, held = _claimed(make_action, now, locked=locked, canary=False)
    row = ReplyAction.objects.get(pk=action.pk)
    assert (row.delivery_state, row.attempt_count, row.sending_since, row.next_attempt_at) == (
        "SENDING",
        3,
        now,
        None,
    )
    assert (held.delivery_state, held.attempt_count) == ("SENDING", 3)
    attempts = list(
        SendAttempt.objects.filter(action=action).values_list(
            "attempt_number", "transport", "evidence", "transport_name", "at"
        )
    )
    assert attempts == [(3, "sent", CLAIM_EVIDENCE, "sandbox", now)]
    history = list(
        ReplyTransition.objects.filter(action=action).values_list(
            "prior_state", "next_state", "actor", "reason_code", "refused"
        )
    )
    assert history == [("FAILED_BEFORE_SEND", "SENDING", "system:sender", "claimed", False)]


@pytest.mark.parametrize("locked", [False, True], ids=["read", "locked"])
def test_a_canary_claim_counts_no_attempt_and_writes_no_attempt_row(make_action, locked):
    """_claim: "A canary makes no transport attempt, so it counts none." The count stays 2 in the
    row and in the object the sender goes on with."""
    now = timezone.now()
    action, held = _claimed(make_action, now, locked=locked, canary=True)
    row = ReplyAction.objects.get(pk=action.pk)
    assert (row.delivery_state, row.attempt_count) == ("SENDING", 2)
    assert (held.delivery_state, held.attempt_count) == ("SENDING", 2)
    assert not SendAttempt.objects.filter(action=action).exists()


def test_a_claim_from_an_unlocked_read_numbers_its_attempt_from_the_row_not_the_read(make_action):
    """_claim: without the row lock the values read may be stale, so they are re-read after the
    compare-and-set. Between this worker's read (attempt 1 behind it) and its claim, another
    worker claimed the action, failed before sending and put it back: attempt 2 is recorded. This
    claim is attempt 3, never a second attempt 2."""
    now = timezone.now()
    action = make_action("FAILED_BEFORE_SEND", attempt_count=1, next_attempt_at=now - timedelta(seconds=5))
    SendAttempt.objects.create(
        action=action,
        attempt_number=1,
        at=now - timedelta(minutes=2),
        transport="not_sent",
        evidence="connection_refused",
        transport_name="sandbox",
    )
    stale = ReplyAction.objects.get(pk=action.pk)
    ReplyAction.objects.filter(pk=action.pk).update(attempt_count=2)  # the other worker's claim
    SendAttempt.objects.create(
        action=action,
        attempt_number=2,
        at=now - timedelta(minutes=1),
        transport="not_sent",
        evidence="connection_refused",
        transport_name="sandbox",
    )
    assert _claim(stale, now)
    assert (stale.delivery_state, stale.attempt_count) == ("SENDING", 3)
    assert list(SendAttempt.objects.filter(action=action).values_list("attempt_number", "transport")) == [
        (1, "not_sent"),
        (2, "not_sent"),
        (3, "sent"),
    ]


def test_the_claim_inside_the_locking_reads_transaction_adds_no_savepoint(make_action):
    """_claim: "No savepoint: inside reply_send_next the claim commits with the locking read."
    Positive control: an ordinary nested atomic block in the same place is seen as a SAVEPOINT."""
    now = timezone.now()
    make_action("APPROVED")
    with transaction.atomic():
        held = _lock_next(now)
        with CaptureQueriesContext(connection) as claim:
            assert _claim(held, now, locked=True)
        with CaptureQueriesContext(connection) as control:
            with transaction.atomic():
                pass
    assert claim.captured_queries  # the claim did run its statements here
    assert not [q["sql"] for q in claim.captured_queries if "SAVEPOINT" in q["sql"].upper()]
    assert [q["sql"] for q in control.captured_queries if "SAVEPOINT" in q["sql"].upper()]


def test_a_send_reads_the_actions_event_and_source_once(make_action):
    """reply_send reads the action with its event and source (one joined read); the claim's
    re-read after the compare-and-set takes only the columns the claim changed, so it keeps them:
    the send path never reads the event table again."""
    action = make_action("APPROVED", canary=True)
    with CaptureQueriesContext(connection) as ctx:
        assert reply_send(action_id=action.pk) == "SUPPRESSED_TEST"
    event_table = f'FROM "{action.event._meta.db_table}"'
    assert [q["sql"] for q in ctx.captured_queries if event_table in q["sql"]] == []


def test_an_action_without_a_route_for_its_purpose_is_not_sent_and_its_attempt_names_no_transport(
    make_action, caplog
):
    """Each action goes out through its own reply route (source + purpose). With none for its
    purpose the locking read's LEFT JOIN finds nulls: no route, so nothing is sent. docs/replies.md#outcomes: the
    attempt is FAILED_BEFORE_SEND, `not_sent`; the claim's attempt names no transport."""
    action = make_action("APPROVED")
    ReplyRoute.objects.filter(source=action.event.source, purpose=action.purpose).delete()
    with caplog.at_level("WARNING", logger="conduit.replies"):
        assert reply_send_next() == (action.pk, "FAILED_BEFORE_SEND")
    action.refresh_from_db()
    assert (action.delivery_state, action.last_error_code, action.attempt_count) == (
        "FAILED_BEFORE_SEND",
        "transport_misconfigured",
        1,
    )
    assert list(
        SendAttempt.objects.filter(action=action).values_list(
            "attempt_number", "transport", "evidence", "transport_name"
        )
    ) == [(1, "not_sent", "transport_misconfigured", "")]
    assert f"no reply route for purpose {action.purpose}" in caplog.text


def _hold_and_write(lock_row, action_id: int):
    """Hold a lock on the action in another connection (as a draining worker does between its
    locking read and its commit), and try to write a row that references the action here."""
    with lock_held_elsewhere(lock_row, lock_timeout="2s"):
        try:
            with transaction.atomic():
                ReplyTransition.objects.create(
                    action_id=action_id,
                    ledger="reply",
                    prior_state="APPROVED",
                    next_state="APPROVED",
                    at=timezone.now(),
                    actor="acct_test_reviewer",
                    reason_code="note",
                    refused=True,
                )
            return None
        except OperationalError as exc:
            return exc


@pytest.mark.django_db(transaction=True)
def test_the_locking_read_does_not_block_rows_that_reference_the_action(make_action):
    """_lock_next: "FOR NO KEY UPDATE SKIP LOCKED": the claimable row is locked against other
    claims, not against rows that merely reference it (a history row, an attempt: their foreign
    key check takes a KEY SHARE lock, which a plain FOR UPDATE would make wait).
    Positive control: the same write waits out its lock timeout behind SELECT ... FOR UPDATE."""
    action = make_action("APPROVED")
    assert _hold_and_write(lambda: _lock_next(timezone.now()), action.pk) is None
    control = _hold_and_write(
        lambda: list(ReplyAction.objects.select_for_update().filter(pk=action.pk)), action.pk
    )
    assert control is not None and "lock timeout" in str(control)


def test_without_skip_locked_the_locking_read_takes_no_row_lock_and_still_finds_the_action(
    make_action, monkeypatch
):
    """`_lock_next` locks with FOR NO KEY UPDATE SKIP LOCKED "where the database has it"; a database
    without SKIP LOCKED (SQLite, the demo's default) gets the plain read, which it can run, and the
    read still returns the first due action."""
    action = make_action("APPROVED")
    monkeypatch.setattr(connection.features, "has_select_for_update_skip_locked", False)
    with CaptureQueriesContext(connection) as queries, transaction.atomic():
        held = _lock_next(timezone.now())
    assert held is not None and held.pk == action.pk
    (read,) = [q["sql"] for q in queries.captured_queries if "reply_actions" in q["sql"]]
    assert " FOR " not in read.upper()


def _action_on(source, n: int, purpose: str, state: str = "APPROVED") -> ReplyAction:
    """An action of `source` (its own event), numbered apart from make_action's."""
    event = InboundEvent.objects.create(
        event_key=f"evt_test_due_{n}",
        source=source,
        source_system="sandbox_social",
        source_account_ref=source.account_ref,
        source_event_id=f"evt_test_due_{n}",
        event_type="comment.created",
        conversation_ref="post_test",
        message_ref=f"c_due_{n}",
        sender_ref="user_test",
        occurred_at=AT,
        occurred_at_original="2026-01-02T03:04:05Z",
        payload_hash="0" * 64,
        contract_version="1",
        canary=False,
        trigger_rule_version=1,
        trigger_match=True,
        event_state="RECORD_READY",
        first_received_at=AT,
        last_received_at=AT,
    )
    return ReplyAction.objects.create(
        reply_key=f"{9000 + n:064d}",
        event=event,
        purpose=purpose,
        campaign=account_campaign(event.source),
        campaign_version=1,
        delivery_state=state,
        created_at=AT,
    )


def _source_like(source, name: str, account_ref: str, **fields):
    copy = Source.objects.get(pk=source.pk)
    copy.pk, copy.name, copy.account_ref = None, name, account_ref
    for field, value in fields.items():
        setattr(copy, field, value)
    copy.save()
    return copy


def test_due_actions_leave_out_only_their_own_sources_reauth_and_their_own_purposes_pause(sandbox_source):
    """`send_due` queues what is due (docs/replies.md#sender): a claimable state, its own source's
    token not waiting for re-authorisation (docs/platforms/meta.md: `needs_reauth`), its own
    account not paused for its purpose (`paused_until` still ahead, docs/platforms/meta.md: "A
    throttling answer pauses the whole account"). A pause of another account, of another purpose, or one that has passed holds nothing
    back; a source needing re-authorisation holds back only its own actions."""
    now = timezone.now()
    stopped = _source_like(sandbox_source, "due-stopped", "acct_test_02", needs_reauth=True)
    paused = _source_like(sandbox_source, "due-paused", "acct_test_03")
    SendBudget.objects.create(source=paused, purpose="public_ack", paused_until=now + timedelta(minutes=5))
    SendBudget.objects.create(
        source=sandbox_source, purpose="private_delivery", paused_until=now - timedelta(minutes=5)
    )
    ok_ack = _action_on(sandbox_source, 1, "public_ack")
    ok_after_pause = _action_on(sandbox_source, 2, "private_delivery")
    _action_on(stopped, 3, "public_ack")
    _action_on(paused, 4, "public_ack")
    other_purpose = _action_on(paused, 5, "private_delivery")
    _action_on(sandbox_source, 6, "public_ack", state="REVIEW_PENDING")
    assert due_action_ids(now=now) == [ok_ack.pk, ok_after_pause.pk, other_purpose.pk]
