"""The at-most-once sender: claim, deliver, finish, and the SENDING sweeper.

The queue is at-least-once; the claim (APPROVED -> SENDING, committed before
any transport code runs) and the reply key make each send at-most-once. A
SendAttempt row is written as `sent` in the claim's transaction, before the
call, so a worker that dies mid-call leaves the pessimistic evidence behind.
Each action goes out through its own reply route (source + purpose).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Callable

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from conduit.metrics import observe_send
from conduit.providers.base import Ambiguous, NotSent
from conduit.sql import from_row, insert_rows, select_list, update_rows
from ingress.models import InboundEvent, Source
from replies.contract import backoff_seconds, failure_is_incurable
from replies.ledger import reply_action_transition
from replies.models import (
    AttemptTransport,
    CanarySinkRecord,
    ReplyAction,
    ReplyCopy,
    ReplyRoute,
    SendAttempt,
)
from replies.models import (
    DeliveryState as S,
)
from replies.selectors import action_route, approved_copy, outbound_reply
from replies.transports import LiveSendDisabled, is_live, transport_for

logger = logging.getLogger("conduit.replies")


SENDER = "system:sender"
SWEEPER = "system:sweeper"


def enqueue_send(action_id: int) -> None:
    """Hand one send to the django-q2 queue, by id."""
    from django_q.tasks import async_task

    async_task("replies.tasks.send_reply", action_id, group="send")


# The only states a sender may claim, each with the condition its claim adds.
# REVIEW_PENDING is absent (the approval gate) and so is SEND_STATUS_UNKNOWN
# (ambiguous sends are never retried automatically).
CLAIMABLE: dict[str, Callable[[datetime], dict]] = {
    S.APPROVED: lambda now: {},
    S.FAILED_BEFORE_SEND: lambda now: {"next_attempt_at__lte": now},
}


def _route_of(action: ReplyAction) -> ReplyRoute | None:
    """The action's reply route, read once per send (the claim's lock read joins it)."""
    if not hasattr(action, "_reply_route"):
        action._reply_route = action_route(action)
    return action._reply_route


def _transport_name(action: ReplyAction) -> str:
    route = _route_of(action)
    return route.transport_name if route is not None else ""


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
                  "claimed; request about to be written", _transport_name(action))],
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
    """One statement: lock the first free claimable row, read it with its event, source and route.

    The inner SELECT walks the claimable index in id order and locks one row
    (FOR NO KEY UPDATE SKIP LOCKED where the database has it); the outer one
    joins only that row, so a claim costs the same whatever the backlog.
    """
    inner = (
        ReplyAction.objects.select_for_update(skip_locked=True, no_key=True)
        .filter(_due(now)).order_by("id").values("id")[:1]
    )
    inner_sql, params = inner.query.sql_with_params()
    qn = connection.ops.quote_name
    sql = (
        f"SELECT {select_list(ReplyAction, 'a')}, {select_list(InboundEvent, 'e')}, "
        f"{select_list(Source, 's')}, {select_list(ReplyRoute, 'r')} FROM {qn(ReplyAction._meta.db_table)} a "
        f"JOIN {qn(InboundEvent._meta.db_table)} e ON e.{qn('event_key')} = a.{qn('event_key')} "
        f"JOIN {qn(Source._meta.db_table)} s ON s.{qn('id')} = e.{qn('source_id')} "
        f"LEFT JOIN {qn(ReplyRoute._meta.db_table)} r ON r.{qn('source_id')} = s.{qn('id')} "
        f"AND r.{qn('purpose')} = a.{qn('purpose')} "
        f"WHERE a.{qn('id')} = ({inner_sql})"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    action, rest = from_row(ReplyAction, row)
    event, rest = from_row(InboundEvent, rest)
    event.source, rest = from_row(Source, rest)
    route, _ = from_row(ReplyRoute, rest)
    action.event = event
    action._reply_route = route if route.pk is not None else None  # no route: LEFT JOIN nulls
    return action


@observe_send(transport_of=_transport_name)
def _deliver(action: ReplyAction, now: datetime) -> str:
    """The transport boundary for a claimed action (state SENDING), through the action's route."""
    source = action.event.source
    route = _route_of(action)

    # The transport boundary. The canary guard comes first, before any transport code:
    # is the route this action would go out through live?
    if action.canary:
        if route is not None and is_live(route.transport_name):
            logger.error("canary action=%s aimed at live transport %s: refused", action.pk, route.transport_name)
            return _finish(action, to=S.SUPPRESSED_TEST, reason="canary_aimed_at_live_transport",
                           attempt={}, extra={"last_error_code": "canary_aimed_at_live_transport"})
        with transaction.atomic():
            CanarySinkRecord.objects.create(
                action=action, reply_key=action.reply_key, purpose=action.purpose,
                channel=action.channel, copy_version=action.copy_version,
                transport_name=_transport_name(action), at=now,
            )
            return _finish(action, to=S.SUPPRESSED_TEST, reason="canary_suppressed", attempt={}, extra={})

    def not_sent(code: str, *, http_status: int | None = None, reached: bool = False,
                 retryable: bool = True) -> str:
        # Seed 000: FAILED_BEFORE_SEND -> "Retry under the same keys". Past
        # MAX_AUTOMATIC_ATTEMPTS the backoff stays at its cap; only a failure
        # retrying cannot cure (the contract's, or the transport's own word) stops
        # the automatic attempts (a person decides).
        automatic = retryable and not failure_is_incurable(code)
        return _finish(
            action, to=S.FAILED_BEFORE_SEND, reason=code,
            attempt={"transport": AttemptTransport.RESPONSE_RECEIVED if reached else AttemptTransport.NOT_SENT,
                     "http_status": http_status, "evidence": code},
            extra={"last_error_code": code,
                   "next_attempt_at": now + timedelta(seconds=backoff_seconds(action.attempt_count))
                   if automatic else None},
        )

    if route is None:
        logger.warning("send action=%s: no reply route for purpose %s", action.pk, action.purpose)
        return not_sent("transport_misconfigured")
    try:
        transport = transport_for(route)
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
    reply = outbound_reply(action, copy)
    try:
        receipt = transport.send(reply)
    except NotSent as exc:
        return not_sent(exc.code, http_status=exc.http_status, reached=exc.reached, retryable=exc.retryable)
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
