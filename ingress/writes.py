"""A body's writes as one PostgreSQL statement: delivery, events, their history, reply actions and
theirs, in one round trip (data-modifying WITH queries).

The reply ledger's part of the statement is replies' (the planner registered in ingress.hooks:
`statement_part`); this module composes it with ingress's own. The multi-statement path in
ingress.services.body (`_events_write`) does the same
with one statement per table; SQLite, which has no data-modifying WITH, takes
it, and tests/ingress/test_one_statement.py holds the two to the same rows.
A refusal (the delivery id or an event key held with other content) raises
inside the statement, through the `conduit_refuse` function (migration
ingress 0009), so nothing of the body stays written: in autocommit the
statement's own transaction (or the group it shared, whose bodies then run
alone: conduit.groupcommit), in a caller's transaction its savepoint, is
rolled back. Rows travel as JSON parameters, so the statement's text is the
same for every body and PostgreSQL prepares it once per connection.
"""

from __future__ import annotations

import functools
import json
from typing import Sequence

from django.db import DatabaseError, connection

from conduit.groupcommit import shared_fetchall
from conduit.sql import JsonRows, columns_sql, json_casts, upsert_sql
from conduit.statemachine import history_columns
from ingress.models import Delivery, EventTransition, InboundEvent, Source

REFUSED_STATE = "CDR01"  # the SQLSTATE conduit_refuse raises (migration ingress 0009)


class Refused(Exception):
    """The statement found the delivery id or these members held with other content; it wrote nothing."""

    def __init__(self, delivery: bool, members: list[int]) -> None:
        super().__init__("refused")
        self.delivery, self.members = delivery, members


class SourceChanged(Exception):
    """The source's row no longer reads as it did when this process cached it: nothing was written."""


DELIVERY_COLUMNS = (
    "source",
    "delivery_id",
    "body_hash",
    "event_keys",
    "first_received_at",
    "last_received_at",
    "seen_count",
)
# How a delivery and an event are inserted or counted as seen again (conduit.sql.upsert_counting's
# shape), for both writers: this statement, and ingress.services.body's statement by statement.
DELIVERY_UPSERT = dict(
    conflict=("source", "delivery_id"), same=("body_hash",), count="seen_count", touch=("last_received_at",)
)
EVENT_UPSERT = dict(
    conflict=("event_key",), same=("payload_hash",), count="seen_count", touch=("last_received_at",)
)


@functools.cache
def _statement(event_columns: tuple[str, ...], plan) -> tuple[str, tuple]:
    """The statement's text, and each JSON parameter's rows' encoder (their fields) in parameter order.

    `plan` is the registered reply planner (ingress.hooks): its `statement_part` writes the
    planned actions and their history, joined to the events this statement inserts."""
    qn = connection.ops.quote_name
    d_head, d_tail, d_fields = upsert_sql(Delivery, DELIVERY_COLUMNS, **DELIVERY_UPSERT)
    e_head, e_tail, e_fields = upsert_sql(InboundEvent, event_columns, **EVENT_UPSERT)
    eh_columns, eh_fields = columns_sql(EventTransition, history_columns("event"))
    key = qn(InboundEvent._meta.get_field("event_key").column)
    # Positions in the JSON rows: an event's key is its first value; a history row's first value
    # is its owner's key, resolved here to the new id.
    planned, a_fields, ah_fields = plan.statement_part(events="e", key=key)
    return (
        f"""
WITH src AS (
  SELECT 1 FROM {qn(Source._meta.db_table)} s WHERE s.id = %s AND (%s::text IS NULL OR s::text = %s::text)
), d AS (
  {d_head} SELECT {", ".join(json_casts(d_fields, "r"))} FROM (SELECT %s::jsonb AS e) r
  WHERE EXISTS (SELECT 1 FROM src) {d_tail}
), ev AS (
  SELECT r.e, r.n FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS r(e, n)
), e AS (
  {e_head} SELECT {", ".join(json_casts(e_fields, "r"))} FROM ev r
  WHERE EXISTS (SELECT 1 FROM d) ORDER BY r.n {e_tail}
), eh AS (
  INSERT INTO {qn(EventTransition._meta.db_table)} ({eh_columns})
  SELECT e.id, {", ".join(json_casts(eh_fields[1:], "r", 1))}
  FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS r(e, n) JOIN e ON e.{key} = r.e->>0
  WHERE e.seen_count = 1 ORDER BY r.n
), {planned}, bad AS (
  SELECT r.n FROM ev r LEFT JOIN e ON e.{key} = r.e->>0 WHERE e.id IS NULL
)
SELECT 'e', e.{key}, e.id, e.seen_count FROM e
UNION ALL SELECT 'a', a.reply_key, a.id, NULL FROM a
UNION ALL SELECT 'stale', NULL, NULL, NULL WHERE NOT EXISTS (SELECT 1 FROM src)
UNION ALL SELECT 'refused', conduit_refuse(json_build_object(
    'delivery', NOT EXISTS (SELECT 1 FROM d), 'members', (SELECT json_agg(n ORDER BY n) FROM bad))::text),
  NULL, NULL
  WHERE EXISTS (SELECT 1 FROM src) AND (NOT EXISTS (SELECT 1 FROM d) OR EXISTS (SELECT 1 FROM bad))
""",
        tuple(JsonRows(f) for f in (d_fields, e_fields, eh_fields, a_fields, ah_fields)),
    )


def body_write(
    *,
    source: Source,
    delivery: Sequence,
    events: list[Sequence],
    event_columns: Sequence[str],
    event_history: list[Sequence],
    actions: list[Sequence],
    plan,
    action_history: Sequence,
) -> tuple[dict[str, tuple[int, int]], dict[str, int]] | None:
    """Write one body in one statement: ({event key: (id, seen count)}, {reply key: action id}).

    `delivery` is one row in DELIVERY_COLUMNS order; `events` rows in
    `event_columns` order, sorted by key (concurrent bodies lock shared keys in
    one order); `event_history` rows in history_columns order with the event's
    key as owner, written for the events this statement inserts; `actions`
    the rows of `plan`, the registered reply planner (ingress.hooks: the
    reply ledger's tables and its part of the statement come from replies),
    planned for those same events, and each gets `action_history` (one
    history row without its owner). With a source that came from this
    process's cache (`from_cache`), the statement writes only if the source's
    row still reads as `row_text`, else raises SourceChanged. Raises Refused when the delivery id or an event key is held
    with other content (nothing written), and None when a value has no exact
    JSON form (the caller takes the multi-statement path).
    """
    sql, parameters = _statement(tuple(event_columns), plan)
    encoded = [
        parameter.encoded(rows)
        for parameter, rows in zip(parameters, ([delivery], events, event_history, actions, [action_history]))
    ]
    if None in encoded:
        return None
    delivery_json, events_json, event_history_json, actions_json, action_history_json = encoded
    row_text = source.row_text if getattr(source, "from_cache", False) else None
    params = [
        source.pk,
        row_text,
        row_text,
        delivery_json[1:-1],
        events_json,
        event_history_json,
        actions_json,
        action_history_json[1:-1],
    ]
    try:
        # Events are sorted by key: the statement locks them from the first key to the last.
        first, last = (events[0][0], events[-1][0]) if events else ("", "")
        rows = shared_fetchall(sql, params, order=first, last=last)
    except DatabaseError as exc:
        cause = exc.__cause__
        if getattr(cause, "sqlstate", None) != REFUSED_STATE:
            raise
        found = json.loads(cause.diag.message_detail)
        raise Refused(found["delivery"], [n - 1 for n in found["members"] or []]) from None
    held: dict[str, tuple[int, int]] = {}
    planned: dict[str, int] = {}
    for kind, key, pk, count in rows:
        if kind == "stale":
            raise SourceChanged
        if kind == "e":
            held[key] = (pk, count)
        else:
            planned[key] = pk
    return held, planned
