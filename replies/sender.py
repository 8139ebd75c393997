"""Approval, the at-most-once sender, the SENDING sweeper and unknown-send resolution.

The queue is at-least-once; the claim (APPROVED -> SENDING, committed before
any transport code runs) and the reply key make each send at-most-once. A
SendAttempt row is written as `sent` in the claim's transaction, before the
call, so a worker that dies mid-call leaves the pessimistic evidence behind.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Callable

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from conduit.providers.base import Ambiguous, NotSent, OutboundReply
from conduit.sql import from_row, insert_rows, select_list, update_rows
from conduit.statemachine import Outcome
from replies.contract import INCURABLE_FAILURES, backoff_seconds, failure_is_incurable
from replies.models import (
    ApprovalState,
    AttemptTransport,
    CanarySinkRecord,
    ReplyAction,
    ReplyCopy,
    SendAttempt,
)
from replies.models import (
    DeliveryState as S,
)
from replies.services import reply_action_transition
from replies.transports import LiveSendDisabled, is_live, transport_for

logger = logging.getLogger("conduit.replies")

SENDER = "system:sender"
SWEEPER = "system:sweeper"


@dataclass(frozen=True)
class Result:
    """What a person-facing operation did, in words fit for an admin message."""

    ok: bool
    message: str


def _refused(outcome: Outcome) -> Result:
    return Result(False, outcome.message)


@lru_cache(maxsize=4096)
def approved_copy(*, source_id: int, purpose: str, copy_version: str) -> ReplyCopy:
    """One approved copy version. Versions are never edited, so caching one is exact."""
    return ReplyCopy.objects.get(source_id=source_id, purpose=purpose, copy_version=copy_version)


def copy_current(*, source_id: int, purpose: str) -> ReplyCopy | None:
    return ReplyCopy.objects.filter(source_id=source_id, purpose=purpose).order_by("-id").first()


def _no_copy(action: ReplyAction) -> str:
    return (
        f"no approved copy for purpose {action.purpose!r} on source "
        f"{action.event.source.name!r}: add one under Replies > Reply copies"
    )


def copy_missing(action: ReplyAction) -> str:
    """Why this action cannot be approved yet, or "" when nothing is missing."""
    if copy_current(source_id=action.event.source_id, purpose=action.purpose) is None:
        return _no_copy(action)
    return ""


def reply_copy_create(*, source_id: int, purpose: str, channel: str, text: str, actor: str) -> tuple[ReplyCopy, bool]:
    """Record approved copy; an identical current text changes nothing. Returns (copy, created)."""
    from ingress.models import Source

    text, channel = text.strip(), channel.strip()
    if not text or not channel:
        raise ValueError("approved copy needs a channel and a text")
    with transaction.atomic():
        source = Source.objects.select_for_update().get(pk=source_id)  # serializes versions
        if purpose not in source.purposes:
            raise ValueError(f"{purpose!r} is not a declared purpose of source {source.name!r}")
        current = copy_current(source_id=source_id, purpose=purpose)
        if current and (current.text, current.channel) == (text, channel):
            return current, False
        count = ReplyCopy.objects.filter(source_id=source_id, purpose=purpose).count()
        return ReplyCopy.objects.create(
            source=source, purpose=purpose, channel=channel, text=text,
            copy_version=f"v{count + 1}", created_by=actor,
        ), True


def enqueue_send(action_id: int) -> None:
    """Hand one send to the django-q2 queue, by id."""
    from django_q.tasks import async_task

    async_task("replies.tasks.send_reply", action_id, group="send")


def reply_approve(*, action_id: int, actor: str, reason_code: str = "approved_by_reviewer") -> Result:
    """REVIEW_PENDING -> APPROVED with the current approved copy; enqueue the send on commit."""
    with transaction.atomic():
        action = ReplyAction.objects.select_related("event__source").get(pk=action_id)
        if action.delivery_state == S.REVIEW_PENDING:
            copy = copy_current(source_id=action.event.source_id, purpose=action.purpose)
            if copy is None:
                return Result(False, f"cannot approve: {_no_copy(action)}")
            extra = {
                "approval_state": ApprovalState.APPROVED, "approved_by": actor,
                "approved_at": timezone.now(), "copy_version": copy.copy_version,
                "channel": copy.channel,
            }
        else:
            extra = {}
        outcome = reply_action_transition(
            action_id=action_id, to=S.APPROVED, actor=actor, reason_code=reason_code,
            expected=S.REVIEW_PENDING, extra=extra,
        )
        if not outcome.applied:
            return _refused(outcome)
        transaction.on_commit(lambda: enqueue_send(action_id))
    return Result(True, f"approved with copy {extra['copy_version']}; the send is queued")


def reply_close(
    *, action_id: int, actor: str, reason_code: str = "closed_without_reply", expected: str | None = None
) -> Result:
    """Close without reply, from any state REPLY_TABLE lets close (not SENDING or SENT).

    `expected`: close only from that state (a queue closes only what it shows).
    """
    with transaction.atomic():
        outcome = reply_action_transition(
            action_id=action_id, to=S.CLOSED_NO_REPLY, actor=actor, reason_code=reason_code,
            expected=expected, extra={"next_attempt_at": None},
        )
    return Result(True, "closed without reply") if outcome.applied else _refused(outcome)


# The only states a sender may claim, each with the condition its claim adds.
# REVIEW_PENDING is absent (the approval gate) and so is SEND_STATUS_UNKNOWN
# (ambiguous sends are never retried automatically).
CLAIMABLE: dict[str, Callable[[datetime], dict]] = {
    S.APPROVED: lambda now: {},
    S.FAILED_BEFORE_SEND: lambda now: {"next_attempt_at__lte": now},
}


def _claim(action: ReplyAction, now: datetime, *, locked: bool = False) -> bool:
    """A claimable state -> SENDING, with its attempt row, committed before any transport code.

    `locked`: the caller holds the row lock from its own read, so the values it
    read are current and need no re-read after the compare-and-set.
    """
    if action.delivery_state not in CLAIMABLE:
        return False
    where = CLAIMABLE[action.delivery_state](now)
    # No savepoint: inside reply_send_next the claim commits with the locking read.
    with transaction.atomic(savepoint=False):
        outcome = reply_action_transition(
            action_id=action.pk, to=S.SENDING, actor=SENDER, reason_code="claimed",
            expected=action.delivery_state, where=where, record_lost_race=False,
            extra={"sending_since": now, "next_attempt_at": None,
                   # A canary makes no transport attempt, so it counts none.
                   **({} if action.canary else {"attempt_count": F("attempt_count") + 1})},
        )
        if not outcome.applied:
            return False
        if locked:
            action.delivery_state = S.SENDING
            action.attempt_count += 0 if action.canary else 1
        else:
            action.refresh_from_db(fields=["attempt_count", "delivery_state"])
        if not action.canary:
            insert_rows(
                SendAttempt,
                ["action", "attempt_number", "at", "transport", "evidence", "transport_name"],
                [(action.pk, action.attempt_count, now, AttemptTransport.SENT,
                  "claimed; request about to be written", action.event.source.transport)],
            )
    return True


def _finish(action: ReplyAction, *, to: str, reason: str, attempt: dict, extra: dict) -> str:
    """Record the attempt's evidence and move SENDING -> `to` in one transaction.

    If the sweeper already parked the action (this worker outlived its lease),
    a receipt still lands: SEND_STATUS_UNKNOWN -> SENT; any other outcome
    leaves it parked for a person.
    """
    with transaction.atomic():
        if attempt:
            update_rows(
                SendAttempt, assign=attempt,
                where={"action": action.pk, "attempt_number": action.attempt_count},
            )
        outcome = reply_action_transition(
            action_id=action.pk, to=to, actor=SENDER, reason_code=reason, expected=S.SENDING,
            extra={"sending_since": None, **extra}, record_lost_race=False,
        )
        if not outcome.applied and outcome.prior == S.SEND_STATUS_UNKNOWN and to == S.SENT:
            outcome = reply_action_transition(
                action_id=action.pk, to=S.SENT, actor=SENDER, reason_code="receipt_after_lease_expired",
                expected=S.SEND_STATUS_UNKNOWN, extra=extra,
            )
    state = to if outcome.applied else outcome.prior
    logger.info("send action=%s reply_key=%s state=%s code=%s", action.pk, action.reply_key, state, reason)
    return state


def reply_send(*, action_id: int) -> str:
    """Claim one action and take it through the transport boundary. Returns the state reached.

    Safe to call any number of times for the same id: only a successful claim
    reaches the transport, and only APPROVED or due FAILED_BEFORE_SEND can be claimed.
    """
    action = ReplyAction.objects.select_related("event__source").get(pk=action_id)
    now = timezone.now()
    if not _claim(action, now):
        return "not_claimed"
    return _deliver(action, now)


def reply_send_next() -> tuple[int, str] | None:
    """Claim the oldest due action no other worker holds, and send it. None when none is due.

    The row is locked with SELECT ... FOR NO KEY UPDATE SKIP LOCKED, ordered by
    id, and claimed by the same compare-and-set as reply_send, so workers
    draining together never wait on or contend for the same row.
    """
    now = timezone.now()
    with transaction.atomic():
        action = _lock_next(now)
        if action is None or not _claim(action, now, locked=True):
            return None
    return action.pk, _deliver(action, now)


def _lock_next(now: datetime) -> ReplyAction | None:
    """One statement: lock the first free claimable row, read it with its event and source.

    The inner SELECT walks the claimable index in id order and locks one row
    (FOR NO KEY UPDATE SKIP LOCKED where the database has it); the outer one
    joins only that row, so a claim costs the same whatever the backlog.
    """
    from ingress.models import InboundEvent, Source

    inner = (
        ReplyAction.objects.select_for_update(skip_locked=True, no_key=True)
        .filter(_due(now)).order_by("id").values("id")[:1]
    )
    inner_sql, params = inner.query.sql_with_params()
    qn = connection.ops.quote_name
    sql = (
        f"SELECT {select_list(ReplyAction, 'a')}, {select_list(InboundEvent, 'e')}, "
        f"{select_list(Source, 's')} FROM {qn(ReplyAction._meta.db_table)} a "
        f"JOIN {qn(InboundEvent._meta.db_table)} e ON e.{qn('event_key')} = a.{qn('event_key')} "
        f"JOIN {qn(Source._meta.db_table)} s ON s.{qn('id')} = e.{qn('source_id')} "
        f"WHERE a.{qn('id')} = ({inner_sql})"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    action, rest = from_row(ReplyAction, row)
    event, rest = from_row(InboundEvent, rest)
    event.source, _ = from_row(Source, rest)
    action.event = event
    return action


def _deliver(action: ReplyAction, now: datetime) -> str:
    """The transport boundary for a claimed action (state SENDING)."""
    source = action.event.source

    # The transport boundary. The canary guard comes first, before any transport code.
    if action.canary:
        if is_live(source.transport):
            logger.error("canary action=%s aimed at live transport %s: refused", action.pk, source.transport)
            return _finish(action, to=S.SUPPRESSED_TEST, reason="canary_aimed_at_live_transport",
                           attempt={}, extra={"last_error_code": "canary_aimed_at_live_transport"})
        with transaction.atomic():
            CanarySinkRecord.objects.create(
                action=action, reply_key=action.reply_key, purpose=action.purpose,
                channel=action.channel, copy_version=action.copy_version,
                transport_name=source.transport, at=now,
            )
            return _finish(action, to=S.SUPPRESSED_TEST, reason="canary_suppressed", attempt={}, extra={})

    def not_sent(code: str, *, http_status: int | None = None, reached: bool = False) -> str:
        # Seed 000: FAILED_BEFORE_SEND -> "Retry under the same keys". Past
        # MAX_AUTOMATIC_ATTEMPTS the backoff stays at its cap; only a failure
        # retrying cannot cure stops the automatic attempts (a person decides).
        automatic = not failure_is_incurable(code)
        return _finish(
            action, to=S.FAILED_BEFORE_SEND, reason=code,
            attempt={"transport": AttemptTransport.RESPONSE_RECEIVED if reached else AttemptTransport.NOT_SENT,
                     "http_status": http_status, "evidence": code},
            extra={"last_error_code": code,
                   "next_attempt_at": now + timedelta(seconds=backoff_seconds(action.attempt_count))
                   if automatic else None},
        )

    try:
        transport = transport_for(source)
        copy = approved_copy(source_id=source.pk, purpose=action.purpose, copy_version=action.copy_version)
    except LiveSendDisabled:
        return not_sent("live_send_disabled")
    except (KeyError, ValueError):  # an unknown transport name or an address it refuses
        return not_sent("transport_misconfigured")
    except ReplyCopy.DoesNotExist:
        return not_sent("approved_copy_missing")
    except Exception:  # building a transport or reading copy never sends a reply
        logger.exception("send action=%s: transport or copy unavailable", action.pk)
        return not_sent("transport_or_copy_unavailable")
    reply = OutboundReply(
        reply_key=action.reply_key, event_key=action.event_id, purpose=action.purpose,
        channel=action.channel, copy_version=action.copy_version, text=copy.text,
        conversation_ref=action.event.conversation_ref, message_ref=action.event.message_ref,
    )
    try:
        receipt = transport.send(reply)
    except NotSent as exc:
        return not_sent(exc.code, http_status=exc.http_status, reached=exc.reached)
    except Ambiguous as exc:
        return _finish(
            action, to=S.SEND_STATUS_UNKNOWN, reason=exc.code,
            attempt={"transport": AttemptTransport.RESPONSE_RECEIVED if exc.response else AttemptTransport.SENT,
                     "http_status": exc.http_status, "evidence": exc.code},
            extra={"last_error_code": exc.code},
        )
    except Exception:  # anything else: the request may have left; never guess
        logger.exception("send action=%s ended in an unexpected error", action.pk)
        return _finish(
            action, to=S.SEND_STATUS_UNKNOWN, reason="unexpected_error",
            attempt={"evidence": "unexpected_error"}, extra={"last_error_code": "unexpected_error"},
        )
    return _finish(
        action, to=S.SENT, reason="receipt_stored",
        attempt={"transport": AttemptTransport.RESPONSE_RECEIVED, "http_status": receipt.http_status,
                 "evidence": "receipt"},
        extra={"provider_reply_id": receipt.provider_reply_id, "last_error_code": ""},
    )


def due_action_ids(*, limit: int = 100, now: datetime | None = None) -> list[int]:
    """APPROVED actions and FAILED_BEFORE_SEND ones whose backoff has passed, oldest first."""
    now = now or timezone.now()
    return list(ReplyAction.objects.filter(_due(now)).order_by("id").values_list("id", flat=True)[:limit])


def _due(now: datetime) -> Q:
    due = Q(pk__in=[])
    for state, condition in CLAIMABLE.items():
        due |= Q(delivery_state=state, **condition(now))
    return due


def replies_sweep(*, now: datetime | None = None) -> int:
    """SENDING past the lease (a worker died or hung) -> SEND_STATUS_UNKNOWN. Never resent."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.CONDUIT_SEND_LEASE_SECONDS)
    swept = 0
    stale = ReplyAction.objects.filter(delivery_state=S.SENDING, sending_since__lt=cutoff)
    for action_id in stale.order_by("id").values_list("id", flat=True):
        with transaction.atomic():
            outcome = reply_action_transition(
                action_id=action_id, to=S.SEND_STATUS_UNKNOWN, actor=SWEEPER,
                reason_code="worker_lease_expired", expected=S.SENDING,
                where={"sending_since__lt": cutoff}, record_lost_race=False,
                extra={"sending_since": None, "last_error_code": "worker_lease_expired"},
            )
        swept += outcome.applied
    return swept


def stranded_why(action: ReplyAction) -> str:
    """Why a FAILED_BEFORE_SEND action waits for a person, in words for the admin."""
    if action.delivery_state != S.FAILED_BEFORE_SEND:
        return ""
    code = action.last_error_code
    if action.next_attempt_at is None:
        why = INCURABLE_FAILURES.get(code, "no automatic attempt is scheduled")
        return f"stopped by {code or 'an unrecorded failure'}: {why}"
    return (f"exhausted: {action.attempt_count} attempts failed before send (last: {code}); "
            f"still retried automatically, next at {action.next_attempt_at:%Y-%m-%d %H:%M:%S %Z}")


def stranded_retry_now(*, action_id: int, actor: str) -> Result:
    """A person's "retry now": FAILED_BEFORE_SEND -> APPROVED under the same reply key, sent at once."""
    with transaction.atomic():
        outcome = reply_action_transition(
            action_id=action_id, to=S.APPROVED, actor=actor, reason_code="retry_now_by_operator",
            expected=S.FAILED_BEFORE_SEND, extra={"next_attempt_at": None},
        )
        if outcome.applied:
            transaction.on_commit(lambda: enqueue_send(action_id))
    if not outcome.applied:
        return _refused(outcome)
    return Result(True, "retry queued under the same reply key")


def unknown_confirm_sent(*, action_id: int, actor: str, provider_reply_id: str) -> Result:
    """A person verified the provider has the reply: store its receipt, then SENT."""
    provider_reply_id = provider_reply_id.strip()
    if not provider_reply_id:
        return Result(False, "give the provider's receipt id you verified")
    with transaction.atomic():
        outcome = reply_action_transition(
            action_id=action_id, to=S.SENT, actor=actor, reason_code="confirmed_sent_by_operator",
            expected=S.SEND_STATUS_UNKNOWN,
            extra={"provider_reply_id": provider_reply_id[:200], "last_error_code": ""},
        )
    return Result(True, "marked SENT with the receipt you gave") if outcome.applied else _refused(outcome)


def unknown_authorize_retry(*, action_id: int, actor: str) -> Result:
    """Seed 000's recovery table: reconcile first, retry only if the lookup shows no send.

    Idempotency key plus receipt lookup, or receipt lookup alone: look the
    receipt up; found -> attach it and mark SENT; absent -> APPROVED under the
    same reply_key. Without a receipt lookup (idempotency key alone included,
    conservatively) nothing can show that the reply was not applied: refused.
    """
    action = ReplyAction.objects.select_related("event__source").get(pk=action_id)
    if action.delivery_state != S.SEND_STATUS_UNKNOWN:
        return Result(False, f"only SEND_STATUS_UNKNOWN can be retried; this one is {action.delivery_state}")
    try:
        transport = transport_for(action.event.source)
    except (LiveSendDisabled, KeyError, ValueError) as exc:
        return Result(False, f"the transport is unavailable: {exc}")
    if not transport.discovered:
        return Result(False, "the provider's capabilities could not be discovered (is it running?): "
                             "try again when it answers")
    if not transport.capabilities.receipt_lookup:
        return Result(False, "this transport has no receipt lookup, so nothing can show the reply "
                             "was not applied: verify the conversation by hand, then confirm sent or close")
    try:
        receipt = transport.lookup(action.reply_key)
    except (Ambiguous, OSError) as exc:
        return Result(False, f"the receipt lookup failed ({getattr(exc, 'code', type(exc).__name__)}); try again")
    with transaction.atomic():
        if receipt is not None:
            outcome = reply_action_transition(
                action_id=action_id, to=S.SENT, actor=actor, reason_code="receipt_found_on_lookup",
                expected=S.SEND_STATUS_UNKNOWN,
                extra={"provider_reply_id": receipt.provider_reply_id, "last_error_code": ""},
            )
            message = "the lookup found the provider's receipt: marked SENT, nothing resent"
        else:
            outcome = reply_action_transition(
                action_id=action_id, to=S.APPROVED, actor=actor,
                reason_code="retry_authorized_after_lookup", expected=S.SEND_STATUS_UNKNOWN,
            )
            message = "the lookup shows no send: retry authorized under the same reply key"
            if outcome.applied:
                transaction.on_commit(lambda: enqueue_send(action_id))
    return Result(True, message) if outcome.applied else _refused(outcome)
