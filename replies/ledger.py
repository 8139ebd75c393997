"""The reply ledger's one transition function, below both the sender and the services."""

from __future__ import annotations

from typing import Any

from django.db import connection, models
from django.utils import timezone

from conduit.sql import fast_paths
from conduit.statemachine import Outcome, transition
from replies.contract import REPLY_TABLE
from replies.models import DeliveryState, ReplyAction, ReplyTransition, SendAttempt


def reply_action_transition(
    *,
    action_id: int,
    to: str,
    actor: str,
    reason_code: str,
    expected: str | None = None,
    where: dict | None = None,
    extra: dict | None = None,
    record_lost_race: bool = True,
) -> Outcome:
    """Every state change of a reply action, checked against REPLY_TABLE and recorded."""
    return transition(
        table=REPLY_TABLE,
        model=ReplyAction,
        history=ReplyTransition,
        owner_field="action",
        pk=action_id,
        to=to,
        actor=actor,
        reason_code=reason_code,
        state_field="delivery_state",
        expected=expected,
        where=where,
        extra=extra,
        record_lost_race=record_lost_race,
    )


# --- the sender's one-statement moves (PostgreSQL) ------------------------------------------
#
# The sender's claim and finish are the hottest writes: each is one statement whose
# data-modifying CTEs make the move, its history row and its attempt row together (one round
# trip, atomic as a statement is). They write exactly what reply_action_transition and the
# attempt helpers write, and only moves REPLY_TABLE declares; anything else (a lost race, an
# undeclared move, another database) goes through reply_action_transition.

HISTORY_COLUMNS = (
    "action_id",
    "ledger",
    "prior_state",
    "next_state",
    "at",
    "actor",
    "reason_code",
    "refused",
)


def one_statement_moves() -> bool:
    """Whether the database takes data-modifying CTEs and row locks (PostgreSQL)."""
    return fast_paths(connection)


def history_insert_sql(*, rows_from: str, id_expr: str, prior_expr: str) -> str:
    """INSERT the history of rows `rows_from` moved: params (next state, at, actor, reason code)."""
    qn = connection.ops.quote_name
    return (
        f"INSERT INTO {qn(ReplyTransition._meta.db_table)} ({', '.join(qn(c) for c in HISTORY_COLUMNS)}) "
        f"SELECT {id_expr}, '{REPLY_TABLE.ledger}', {prior_expr}, %s, %s, %s, %s, false FROM {rows_from}"
    )


def _assignments(model: type[models.Model], values: dict[str, Any]) -> tuple[list[str], list[Any]] | None:
    """`col = %s` for plain values, prepared as the ORM would; None if any value is an expression."""
    qn = connection.ops.quote_name
    sets, params = [], []
    for name, value in values.items():
        if hasattr(value, "resolve_expression"):
            return None
        field = model._meta.get_field(name)
        sets.append(f"{qn(field.column)} = %s")
        params.append(field.get_db_prep_save(value, connection))
    return sets, params


def reply_action_finish(
    *,
    action_id: int,
    attempt_number: int,
    to: str,
    actor: str,
    reason_code: str,
    extra: dict,
    attempt: dict,
) -> Outcome | None:
    """SENDING -> `to` with its history row and the attempt's evidence, in one statement.

    Returns the outcome (applied, or not applied with the state the row holds), or None
    when this path does not apply (not PostgreSQL, an undeclared move, an expression in
    `extra`): the caller then takes reply_action_transition's path.
    """
    if not one_statement_moves() or not REPLY_TABLE.allows(DeliveryState.SENDING, to):
        return None
    action_sets = _assignments(ReplyAction, {"delivery_state": to, **extra})
    attempt_sets = _assignments(SendAttempt, attempt) if attempt else ([], [])
    if action_sets is None or attempt_sets is None:
        return None
    qn = connection.ops.quote_name
    actions, attempts = qn(ReplyAction._meta.db_table), qn(SendAttempt._meta.db_table)
    at = timezone.now()
    params: list[Any] = [*action_sets[1], action_id, DeliveryState.SENDING]
    ctes = [
        (
            f"moved AS (UPDATE {actions} SET {', '.join(action_sets[0])} "
            f"WHERE {qn('id')} = %s AND {qn('delivery_state')} = %s RETURNING {qn('id')})"
        )
    ]
    if attempt:
        # The evidence is written whether or not the move applies (a late receipt still counts).
        ctes.append(
            f"evidence AS (UPDATE {attempts} SET {', '.join(attempt_sets[0])} "
            f"WHERE {qn('action_id')} = %s AND {qn('attempt_number')} = %s)"
        )
        params += [*attempt_sets[1], action_id, attempt_number]
    ctes.append(f"history AS ({history_insert_sql(rows_from='moved', id_expr=qn('id'), prior_expr='%s')})")
    params += [DeliveryState.SENDING, to, at, actor, reason_code]
    sql = f"WITH {', '.join(ctes)} SELECT count(*) FROM moved"
    state_sql = f"SELECT {qn('delivery_state')} FROM {actions} WHERE {qn('id')} = %s"
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        (moved,) = cursor.fetchone()
        if not moved:
            # Read the state in a statement of its own: the move's statement reads the snapshot
            # it started with, which predates a move (the sweeper's) committed while it waited
            # on the row's lock, and the caller decides by that state (a late receipt still lands).
            cursor.execute(state_sql, [action_id])
            row = cursor.fetchone()
    prior = DeliveryState.SENDING if moved else (row[0] if row else None)
    return Outcome(
        ledger=REPLY_TABLE.ledger, applied=bool(moved), prior=prior, next=to, reason_code=reason_code, at=at
    )
