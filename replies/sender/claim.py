"""The claim: which states are claimable and due, and the compare-and-set that takes one to SENDING."""

from __future__ import annotations

from datetime import datetime
from typing import Callable

from django.db import connection, transaction
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone

from conduit.sql import fast_paths, from_row, insert_rows, select_list
from ingress.models import InboundEvent, Source
from replies.contract import REPLY_TABLE
from replies.ledger import history_insert_sql, one_statement_moves, reply_action_transition
from replies.models import AttemptTransport, ReplyAction, ReplyRoute, SendAttempt, SendBudget
from replies.models import DeliveryState as S
from replies.selectors import action_route

SENDER = "system:sender"


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
            action_id=action.pk,
            to=S.SENDING,
            actor=SENDER,
            reason_code="claimed",
            expected=action.delivery_state,
            where=where,
            record_lost_race=False,
            extra={
                "sending_since": now,
                "next_attempt_at": None,
                # A canary makes no transport attempt, so it counts none.
                **({} if action.canary else {"attempt_count": F("attempt_count") + 1}),
            },
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
                [
                    (
                        action.pk,
                        action.attempt_count,
                        now,
                        AttemptTransport.SENT,
                        "claimed; request about to be written",
                        _transport_name(action),
                    )
                ],
            )
    return True


def _lock_next(now: datetime) -> ReplyAction | None:
    """One statement: lock the first free claimable row, read it with its event, source and route.

    The inner SELECT walks the claimable index in id order and locks one row
    (FOR NO KEY UPDATE SKIP LOCKED where the database has it); the outer one
    joins only that row, so a claim costs the same whatever the backlog.
    """
    qn = connection.ops.quote_name
    due, count = _due_sql("c")
    lock = " FOR NO KEY UPDATE SKIP LOCKED" if connection.features.has_select_for_update_skip_locked else ""
    inner_sql = (
        f"SELECT c.{qn('id')} FROM {qn(ReplyAction._meta.db_table)} c WHERE {due} "
        f"ORDER BY c.{qn('id')} LIMIT 1{lock}"
    )
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
        inner_sql = (
            f"SELECT c.{qn('id')} FROM {actions} c WHERE c.{qn('id')} = %s AND {_claimable_sql('c')} "
            f"LIMIT 1 FOR NO KEY UPDATE"
        )
        inner_params = [_ID_MARK] + [_NOW_MARK] * _claimable_sql("c").count("%s")
    else:
        due, due_params = due_sql("c")
        inner_sql = (
            f"SELECT c.{qn('id')} FROM {actions} c WHERE {due} "
            f"ORDER BY c.{qn('id')} LIMIT 1 FOR NO KEY UPDATE SKIP LOCKED"
        )
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
    params = [
        *inner_params,
        S.SENDING.value,
        _NOW_MARK,
        *(str(state) for state in claimable_from),
        _NOW_MARK,
        S.SENDING.value,
        _NOW_MARK,
        SENDER,
        "claimed",
        _NOW_MARK,
        AttemptTransport.SENT.value,
        "claimed; request about to be written",
    ]
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
    paused = SendBudget.objects.filter(
        source__events__event_key=OuterRef("event_id"), purpose=OuterRef("purpose"), paused_until__gt=now
    )
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
    arms = " OR ".join(
        f"({a}.delivery_state = '{state}'" + (f" AND {cond.format(a=a)})" if cond else ")")
        for state, cond in CLAIMABLE_SQL.items()
    )
    return f"{a}.delivery_state IN ({states}) AND ({arms})"


def _due_sql(a: str) -> tuple[str, int]:
    """_due on the actions row `a`: the SQL and how many params it takes (each is now).

    OFFSET 0 keeps each NOT EXISTS a per-row check: pulled up into anti-joins, the planner
    (which cannot know how few sources need re-auth or accounts are paused) sorts the whole
    backlog to find its first row; as checks, the claim walks the claimable index in id order
    and stops at the first due row, whatever the backlog."""
    fence = " OFFSET 0" if fast_paths(connection) else ""
    events, sources, budgets = (m._meta.db_table for m in (InboundEvent, Source, SendBudget))
    sql = (
        f"{_claimable_sql(a)} "
        f"AND NOT EXISTS (SELECT 1 FROM {events} e JOIN {sources} s ON s.id = e.source_id "
        f"WHERE e.event_key = {a}.event_key AND s.needs_reauth{fence}) "
        f"AND NOT EXISTS (SELECT 1 FROM {budgets} b JOIN {events} e ON e.source_id = b.source_id "
        f"WHERE e.event_key = {a}.event_key AND b.purpose = {a}.purpose AND b.paused_until > %s{fence})"
    )
    return sql, sql.count("%s")
