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
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone

from conduit.metrics import observe_send
from conduit.providers.base import Ambiguous, NotSent
from conduit.sql import from_row, insert_rows, select_list, update_rows
from ingress.models import InboundEvent, Source
from replies.contract import REPLY_TABLE, backoff_seconds, failure_is_incurable
from replies.evidence import reply_evidence_resolve
from replies.ledger import (
    history_insert_sql,
    one_statement_moves,
    reply_action_finish,
    reply_action_transition,
)
from replies.models import (
    AttemptTransport,
    CanarySinkRecord,
    ReplyAction,
    ReplyCopy,
    ReplyRoute,
    SendAttempt,
    SendBudget,
    SendBudgetUse,
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
    """Record the attempt's evidence and move SENDING -> `to`, together (one statement on PostgreSQL).

    If the sweeper already parked the action (this worker outlived its lease),
    a receipt still lands: SEND_STATUS_UNKNOWN -> SENT; any other outcome
    leaves it parked for a person.
    """
    # One statement, atomic by itself: the attempt's evidence, the move and its history
    # (PostgreSQL); elsewhere, or for what it does not take, the same writes in a transaction.
    outcome = reply_action_finish(
        action_id=action.pk, attempt_number=action.attempt_count, to=to, actor=SENDER,
        reason_code=reason, extra={"sending_since": None, **extra}, attempt=attempt,
    )
    if outcome is None:
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
        with transaction.atomic():
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
    now = timezone.now()
    claimed, action = _claim_in_one_statement(now, action_id=action_id)
    if claimed is not None:
        return _deliver(claimed, now)
    if action is None:  # not due (or not PostgreSQL): read it to say why
        action = ReplyAction.objects.select_related("event__source").get(pk=action_id)
    with transaction.atomic():
        held = _held(action, now)
        if held:
            return held
        if not _claim(action, now):
            return "not_claimed"
        _budget_use(action)
    return _deliver(action, now)


def reply_send_next() -> tuple[int, str] | None:
    """Claim the oldest due action no other worker holds, and send it. None when none is due.

    The row is locked with SELECT ... FOR NO KEY UPDATE SKIP LOCKED, ordered by
    id, and claimed by the same compare-and-set as reply_send, so workers
    draining together never wait on or contend for the same row.
    """
    now = timezone.now()
    claimed, _ = _claim_in_one_statement(now)
    if claimed is not None:
        return claimed.pk, _deliver(claimed, now)
    # An action held back by its account's budget pauses that account (in the same transaction),
    # so the next lock skips it and finds another account's work; a few tries at most.
    for _ in range(MAX_HELD_PER_CALL):
        with transaction.atomic():
            action = _lock_next(now)
            if action is None:
                return None
            if _held(action, now):
                continue
            if not _claim(action, now, locked=True):
                return None
            _budget_use(action)
        return action.pk, _deliver(action, now)
    return None


def _lock_next(now: datetime) -> ReplyAction | None:
    """One statement: lock the first free claimable row, read it with its event, source and route.

    The inner SELECT walks the claimable index in id order and locks one row
    (FOR NO KEY UPDATE SKIP LOCKED where the database has it); the outer one
    joins only that row, so a claim costs the same whatever the backlog.
    """
    qn = connection.ops.quote_name
    due, count = _due_sql("c")
    lock = " FOR NO KEY UPDATE SKIP LOCKED" if connection.features.has_select_for_update_skip_locked else ""
    inner_sql = (f"SELECT c.{qn('id')} FROM {qn(ReplyAction._meta.db_table)} c WHERE {due} "
                 f"ORDER BY c.{qn('id')} LIMIT 1{lock}")
    params = [now] * count
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


# --- the claim in one statement -------------------------------------------------------------

# Where `now` (and, by id, the action's id) goes in the claim's params: filled in per call.
_NOW_MARK = object()
_ID_MARK = object()
_claim_sql_cache: dict[tuple, tuple[str, list, list[int]]] = {}


def _claim_sql(*, by_id: bool) -> tuple[str, list, list[int]] | None:
    """The one-statement claim's SQL, its params with `now` marked, and where `now` goes.

    Plain SQL, built once per process (and per `_due_sql`, which tests replace to take a guard
    away): the locking read is `_due_sql`'s rule, kept equal to `_due` by
    tests/replies/test_due_parity.py. None off PostgreSQL (the transaction path claims).
    """
    if not one_statement_moves():
        return None
    due_sql = _due_sql
    key = (by_id, due_sql, connection.vendor)
    if key in _claim_sql_cache:
        return _claim_sql_cache[key]
    qn = connection.ops.quote_name
    actions, events, sources = (qn(m._meta.db_table) for m in (ReplyAction, InboundEvent, Source))
    routes, budgets, attempts = (qn(m._meta.db_table) for m in (ReplyRoute, SendBudget, SendAttempt))
    if by_id:
        # By id (a queue task), only the state decides; the move below checks the source and
        # budget, and an action it leaves goes to the transaction path, which says why.
        inner_sql = (f"SELECT c.{qn('id')} FROM {actions} c WHERE c.{qn('id')} = %s AND {_claimable_sql('c')} "
                     f"LIMIT 1 FOR NO KEY UPDATE")
        inner_params = [_ID_MARK] + [_NOW_MARK] * _claimable_sql('c').count("%s")
    else:
        due, due_params = due_sql("c")
        inner_sql = (f"SELECT c.{qn('id')} FROM {actions} c WHERE {due} "
                     f"ORDER BY c.{qn('id')} LIMIT 1 FOR NO KEY UPDATE SKIP LOCKED")
        inner_params = [_NOW_MARK] * due_params
    claimable_from = [state for state in CLAIMABLE if REPLY_TABLE.allows(state, S.SENDING)]
    returned = select_list(ReplyAction, "a")
    sql = (
        f"WITH next AS (SELECT {returned} FROM {actions} a WHERE a.{qn('id')} = ({inner_sql})), "
        # The move: only what _held would pass without a word (not a canary, its source's token
        # not refused, its budget row holding no count and no pause); anything else is claimed
        # (or refused, with its reason) by the transaction path.
        f"moved AS (UPDATE {actions} a SET {qn('delivery_state')} = %s, {qn('sending_since')} = %s, "
        f"{qn('next_attempt_at')} = NULL, {qn('attempt_count')} = a.{qn('attempt_count')} + 1 FROM next "
        f"WHERE a.{qn('id')} = next.{qn('id')} AND a.{qn('delivery_state')} = next.{qn('delivery_state')} "
        f"AND a.{qn('delivery_state')} IN ({', '.join(['%s'] * len(claimable_from))}) AND NOT a.{qn('canary')} "
        f"AND EXISTS (SELECT 1 FROM {budgets} b JOIN {events} e ON e.{qn('source_id')} = b.{qn('source_id')} "
        f"JOIN {sources} s ON s.{qn('id')} = e.{qn('source_id')} AND NOT s.{qn('needs_reauth')} "
        f"WHERE e.{qn('event_key')} = a.{qn('event_key')} AND b.{qn('purpose')} = a.{qn('purpose')} "
        f"AND b.{qn('limit')} IS NULL AND (b.{qn('paused_until')} IS NULL OR b.{qn('paused_until')} <= %s)) "
        f"RETURNING {returned}), "
        f"history AS ({history_insert_sql(rows_from='moved JOIN next ON next.id = moved.id', id_expr='moved.id', prior_expr='next.delivery_state')}), "
        f"attempt AS (INSERT INTO {attempts} ({qn('action_id')}, {qn('attempt_number')}, {qn('at')}, "
        f"{qn('transport')}, {qn('evidence')}, {qn('transport_name')}) "
        f"SELECT moved.{qn('id')}, moved.{qn('attempt_count')}, %s, %s, %s, COALESCE(r.{qn('transport_name')}, '') "
        f"FROM moved JOIN {events} e ON e.{qn('event_key')} = moved.{qn('event_key')} "
        f"LEFT JOIN {routes} r ON r.{qn('source_id')} = e.{qn('source_id')} AND r.{qn('purpose')} = moved.{qn('purpose')}) "
        # The action as claimed (or, not claimed here, as read), with its event, source and route.
        f"SELECT moved.{qn('id')}, COALESCE(moved.{qn('delivery_state')}, next.{qn('delivery_state')}), "
        f"COALESCE(moved.{qn('attempt_count')}, next.{qn('attempt_count')}), "
        f"COALESCE(moved.{qn('sending_since')}, next.{qn('sending_since')}), "
        f"{select_list(ReplyAction, 'next')}, {select_list(InboundEvent, 'e')}, "
        f"{select_list(Source, 's')}, {select_list(ReplyRoute, 'r')} FROM next "
        f"LEFT JOIN moved ON moved.{qn('id')} = next.{qn('id')} "
        f"JOIN {events} e ON e.{qn('event_key')} = next.{qn('event_key')} "
        f"JOIN {sources} s ON s.{qn('id')} = e.{qn('source_id')} "
        f"LEFT JOIN {routes} r ON r.{qn('source_id')} = s.{qn('id')} AND r.{qn('purpose')} = next.{qn('purpose')}"
    )
    params = [*inner_params, S.SENDING.value, _NOW_MARK, *(str(state) for state in claimable_from), _NOW_MARK,
              S.SENDING.value, _NOW_MARK, SENDER, "claimed",
              _NOW_MARK, AttemptTransport.SENT.value, "claimed; request about to be written"]
    now_at = [i for i, p in enumerate(params) if p is _NOW_MARK]
    _claim_sql_cache[key] = (sql, params, now_at)
    return _claim_sql_cache[key]


def _claim_in_one_statement(
    now: datetime, *, action_id: int | None = None
) -> tuple[ReplyAction | None, ReplyAction | None]:
    """Claim the next free due action (or `action_id`) in one statement: (claimed, read).

    One round trip, atomic as a statement is: the locking read (FOR NO KEY UPDATE, SKIP
    LOCKED when draining), the compare-and-set to SENDING, its history row and the attempt
    row written `sent`, before any transport code runs. It claims only an action whose claim
    _held would allow without a word: no canary, and a budget row with no count and no pause
    (an account's budget is counted under its row lock, in the transaction path). Not claimed
    here, the caller's transaction path decides (it finds no due action, or claims one this
    statement left to it, or says why it is held); `read` is then the due action this
    statement found, with its event, source and route, so that path need not read them again.
    """
    if not one_statement_moves():
        return None, None
    compiled = _claim_sql(by_id=action_id is not None)
    if compiled is None:
        return None, None
    sql, template, now_at = compiled
    params = list(template)
    for i in now_at:
        params[i] = now
    if action_id is not None:
        params[params.index(_ID_MARK)] = action_id
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:  # nothing due
        return None, None
    claimed, state, attempt_count, sending_since = row[:4]
    action, rest = from_row(ReplyAction, row[4:])
    event, rest = from_row(InboundEvent, rest)
    event.source, rest = from_row(Source, rest)
    route, _ = from_row(ReplyRoute, rest)
    action.event = event
    action._reply_route = route if route.pk is not None else None
    if claimed is None:  # due, but left to the transaction path: here is what it would read
        return None, action
    action.delivery_state, action.attempt_count = state, attempt_count
    action.sending_since, action.next_attempt_at = sending_since, None
    return action, None


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
        if getattr(exc, "stop_source", False):
            # A dead token: nothing was applied. The source stops at the next claim; this action
            # waits with it (due again, not stranded) and goes out once a person re-authorises.
            with transaction.atomic():
                source_token_refused(source_id=source.pk, code=exc.code)
                state = _finish(
                    action, to=S.FAILED_BEFORE_SEND, reason=exc.code,
                    attempt={"transport": AttemptTransport.RESPONSE_RECEIVED if exc.reached
                             else AttemptTransport.NOT_SENT, "http_status": exc.http_status, "evidence": exc.code},
                    extra={"last_error_code": exc.code, "next_attempt_at": now},
                )
            return state
        retry_after = getattr(exc, "retry_after", None)
        if retry_after is not None or exc.code == "throttled":
            pause = timedelta(seconds=retry_after if retry_after is not None else THROTTLE_PAUSE_SECONDS)
            account_pause(source_id=source.pk, until=timezone.now() + pause, reason=exc.code)
        return not_sent(exc.code, http_status=exc.http_status, reached=exc.reached, retryable=exc.retryable)
    except Ambiguous as exc:
        state = _finish(
            action, to=S.SEND_STATUS_UNKNOWN, reason=exc.code,
            attempt={"transport": AttemptTransport.RESPONSE_RECEIVED if exc.response else AttemptTransport.SENT,
                     "http_status": exc.http_status, "evidence": exc.code},
            extra={"last_error_code": exc.code},
        )
        return _evidence_already_seen(action) or state
    except Exception:  # anything else: the request may have left; never guess
        logger.exception("send action=%s ended in an unexpected error", action.pk)
        state = _finish(
            action, to=S.SEND_STATUS_UNKNOWN, reason="unexpected_error",
            attempt={"evidence": "unexpected_error"}, extra={"last_error_code": "unexpected_error"},
        )
        return _evidence_already_seen(action) or state
    usage_pause = getattr(receipt, "retry_after", None)
    if usage_pause:
        # The answer's usage header says the account is near its limit: wait as Meta estimates.
        account_pause(source_id=source.pk, until=timezone.now() + timedelta(seconds=usage_pause),
                      reason="usage_near_limit")
    return _finish(
        action, to=S.SENT, reason="receipt_stored",
        attempt={"transport": AttemptTransport.RESPONSE_RECEIVED, "http_status": receipt.http_status,
                 "evidence": "receipt"},
        extra={"provider_reply_id": receipt.provider_reply_id, "last_error_code": ""},
    )


def _evidence_already_seen(action: ReplyAction) -> str:
    """An echo (or the account's own comment) may have arrived while this send was still SENDING,
    when it could not resolve it: look once more now that the action is SEND_STATUS_UNKNOWN.
    Returns the state reached when it resolved the action, else ""."""
    resolved = reply_evidence_resolve(action_id=action.pk)
    return S.SENT if resolved else ""


def due_action_ids(*, limit: int = 100, now: datetime | None = None) -> list[int]:
    """APPROVED actions and FAILED_BEFORE_SEND ones whose backoff has passed, oldest first."""
    now = now or timezone.now()
    return list(ReplyAction.objects.filter(_due(now)).order_by("id").values_list("id", flat=True)[:limit])


def _due(now: datetime) -> Q:
    """Claimable now: a claimable state, its source's token not dead, its account not paused.

    EXISTS subqueries, not joins: the claim's FOR NO KEY UPDATE then locks the action row only.
    """
    due = Q(pk__in=[])
    for state, condition in CLAIMABLE.items():
        due |= Q(delivery_state=state, **condition(now))
    needs_reauth = InboundEvent.objects.filter(event_key=OuterRef("event_id"), source__needs_reauth=True)
    paused = SendBudget.objects.filter(source__events__event_key=OuterRef("event_id"), purpose=OuterRef("purpose"),
                                       paused_until__gt=now)
    return due & ~Exists(needs_reauth) & ~Exists(paused)


# _due as plain SQL, for the claims' locking reads (compiling the ORM's query costs more than the
# statement). tests/replies/test_due_parity.py holds the two to the same rows; change both.
# Per claimable state, the condition its claim adds (CLAIMABLE's), on the row `{a}`; `%s` is now.
CLAIMABLE_SQL: dict[str, str] = {
    S.APPROVED: "",
    S.FAILED_BEFORE_SEND: "{a}.next_attempt_at <= %s",
}


def _claimable_sql(a: str) -> str:
    """A claimable state with its condition, on the actions row `a`; each `%s` is now.

    The state list comes first, as the `reply_action_claimable` index's predicate reads, so
    the planner can walk that index in id order."""
    states = ", ".join(f"'{state}'" for state in CLAIMABLE_SQL)
    arms = " OR ".join(f"({a}.delivery_state = '{state}'" + (f" AND {cond.format(a=a)})" if cond else ")")
                       for state, cond in CLAIMABLE_SQL.items())
    return f"{a}.delivery_state IN ({states}) AND ({arms})"


def _due_sql(a: str) -> tuple[str, int]:
    """_due on the actions row `a`: the SQL and how many params it takes (each is now).

    OFFSET 0 keeps each NOT EXISTS a per-row check: pulled up into anti-joins, the planner
    (which cannot know how few sources need re-auth or accounts are paused) sorts the whole
    backlog to find its first row; as checks, the claim walks the claimable index in id order
    and stops at the first due row, whatever the backlog."""
    fence = " OFFSET 0" if connection.vendor == "postgresql" else ""
    sql = (
        f"{_claimable_sql(a)} "
        f"AND NOT EXISTS (SELECT 1 FROM inbound_events e JOIN ingress_source s ON s.id = e.source_id "
        f"WHERE e.event_key = {a}.event_key AND s.needs_reauth{fence}) "
        f"AND NOT EXISTS (SELECT 1 FROM reply_send_budgets b JOIN inbound_events e ON e.source_id = b.source_id "
        f"WHERE e.event_key = {a}.event_key AND b.purpose = {a}.purpose AND b.paused_until > %s{fence})"
    )
    return sql, sql.count("%s")


# --- token health and shared send budgets ---------------------------------------------------

# Tries reply_send_next makes past actions whose account turns out to be over budget.
MAX_HELD_PER_CALL = 8
# A use counts this long past its window: the claim is dated before the request reaches Meta, so
# without slack two requests a few milliseconds late could meet one window at the provider.
BUDGET_SLACK_SECONDS = 1
# How long a throttling answer without Meta's estimate pauses the account.
THROTTLE_PAUSE_SECONDS = 60
# Documented limits, per (adapter, transport): (sends, window seconds). META.md "limits":
# Instagram private replies to posts and reels 750/hour per account; the Send API about 300/s per
# Page for text. Public comment replies have no documented per-call number: no count, pauses only.
# Messenger's 200 x engaged users per 24 h depends on a number Conduit cannot read: not counted.
DEFAULT_BUDGETS: dict[tuple[str, str], tuple[int, int]] = {
    ("meta-instagram", "meta-private-reply"): (750, 3600),
    ("meta-page", "meta-private-reply"): (300, 1),
}


def budget_default(*, adapter: str, transport_name: str) -> tuple[int | None, int]:
    """The documented (limit, window seconds) for an account's sends through a transport."""
    return DEFAULT_BUDGETS.get((adapter, transport_name), (None, 3600))


def _budget_row(source: Source, purpose: str, transport_name: str) -> SendBudget:
    """The (source, purpose) budget row, created at its documented default on first use, locked."""
    limit, window = budget_default(adapter=source.adapter, transport_name=transport_name)
    insert_rows(SendBudget, ["source", "purpose", "limit", "window_seconds", "pause_reason"],
                [(source.pk, purpose, limit, window, "")], ignore_conflicts=True)
    return SendBudget.objects.select_for_update().get(source_id=source.pk, purpose=purpose)


def _held(action: ReplyAction, now: datetime) -> str:
    """Why this action may not be claimed now ("" when it may). Runs in the claim's transaction.

    A source whose token Meta refused waits (no attempt consumed); an account whose budget is
    full or paused waits too, and is paused until its next free slot so other workers skip it.
    The budget row's lock serialises every worker's count for that account.
    """
    source = action.event.source
    if Source.objects.filter(pk=source.pk, needs_reauth=True).exists():
        return "waiting_reauth"
    if action.canary or action.delivery_state not in CLAIMABLE:
        return ""
    budget = _budget_row(source, action.purpose, _transport_name(action))
    action._budget = budget
    now = timezone.now()  # read under the lock: the last holder's use is dated before it
    if budget.paused_until is not None and budget.paused_until > now:
        return "deferred_budget"
    if budget.limit is None:
        return ""
    span = timedelta(seconds=budget.window_seconds + BUDGET_SLACK_SECONDS)
    in_window = list(SendBudgetUse.objects.filter(budget=budget, at__gt=now - span)
                     .order_by("at").values_list("at", flat=True))
    if len(in_window) < budget.limit:
        return ""
    # Full: the account waits until enough uses leave the window for one more.
    free_at = in_window[len(in_window) - budget.limit] + span
    SendBudget.objects.filter(pk=budget.pk).update(paused_until=free_at, pause_reason="budget_full")
    logger.info("send action=%s deferred: budget %s/%ss full until %s", action.pk, budget.limit,
                budget.window_seconds, free_at.isoformat())
    return "deferred_budget"


def _budget_use(action: ReplyAction) -> None:
    """Count a claimed send against its budget (same transaction as the claim); prune old uses."""
    budget = getattr(action, "_budget", None)
    if budget is None or budget.limit is None:
        return
    now = timezone.now()
    insert_rows(SendBudgetUse, ["budget", "at", "action_id"], [(budget.pk, now, action.pk)])
    span = timedelta(seconds=budget.window_seconds + BUDGET_SLACK_SECONDS)
    SendBudgetUse.objects.filter(budget=budget, at__lte=now - span).delete()


def account_pause(*, source_id: int, until: datetime, reason: str) -> None:
    """Pause every purpose of an account until `until` (Meta throttled it, or its usage is near the
    limit). A pause never shortens one already longer."""
    source = Source.objects.get(pk=source_id)
    purposes = list(dict.fromkeys([*source.purposes,
                                   *ReplyRoute.objects.filter(source_id=source_id).values_list("purpose", flat=True)]))
    for purpose in purposes:
        route = ReplyRoute.objects.filter(source_id=source_id, purpose=purpose).first()
        limit, window = budget_default(adapter=source.adapter,
                                       transport_name=route.transport_name if route else "")
        insert_rows(SendBudget, ["source", "purpose", "limit", "window_seconds", "pause_reason"],
                    [(source_id, purpose, limit, window, "")], ignore_conflicts=True)
    SendBudget.objects.filter(source_id=source_id).filter(
        Q(paused_until__isnull=True) | Q(paused_until__lt=until)
    ).update(paused_until=until, pause_reason=reason[:64])
    logger.warning("send account source=%s paused until %s (%s)", source_id, until.isoformat(), reason)


def source_token_refused(*, source_id: int, code: str) -> None:
    """Meta refused the source's token: mark it needs_reauth so its sends stop at the next claim."""
    updated = Source.objects.filter(pk=source_id, needs_reauth=False).update(needs_reauth=True)
    if updated:
        logger.error("source=%s needs re-authorisation (%s): its sends wait", source_id, code)


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
