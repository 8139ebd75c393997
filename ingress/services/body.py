"""What one accepted body writes, decided in Python, and the two writers that write it."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Callable, Sequence

from conduit.providers.base import NOT_CONTRACT, Observation, Parsed
from conduit.providers.registry import get_adapter
from conduit.sql import insert_rows, upsert_counting
from conduit.statemachine import creation_rows, history_columns
from ingress.contract import EVENT_TABLE
from ingress.hooks import Match, reply_planner, trigger_rules
from ingress.models import Delivery, EventState, EventTransition, InboundEvent, Source
from ingress.services.results import EventResult
from ingress.writes import DELIVERY_COLUMNS, DELIVERY_UPSERT, EVENT_UPSERT, Refused, body_write


class _Refusal(Exception):
    """A member the ledgers refuse, found while writing: everything the body wrote is taken back."""

    def __init__(
        self, parsed: Parsed, invalid: list[tuple[int | None, str, str]], quarantine: dict | None = None
    ) -> None:
        super().__init__(invalid[0][1])
        self.parsed, self.invalid, self.quarantine = parsed, invalid, quarantine


DELIVERY_CONFLICT = (None, "delivery_conflict", "this delivery id was first accepted with a different body")
EVENT_COLUMNS = [
    "event_key",
    "source",
    *(f.name for f in fields(Observation) if f.name not in NOT_CONTRACT),
    "trigger_rule_version",
    "trigger_match",
    "trigger_campaign",
    "trigger_campaign_version",
    "parent_ref",
    "event_state",
    "reconcile_status",
    "first_received_at",
    "last_received_at",
    "seen_count",
    "message_text",
    "sender_handle",
    "reply_address",
]


@dataclass
class _Body:
    """What a body writes, decided in Python before either writer runs."""

    delivery: tuple
    ordered: list[tuple[str, Observation]]  # sorted by key: concurrent bodies lock shared keys in one order
    events: list[list]  # EVENT_COLUMNS order
    history: list[tuple]  # the new events' history rows, the event's key as owner
    ready: list[Observation]  # planned if new: RECORD_READY
    purposes_of: Callable[[Observation], Sequence[str]]  # the purposes planned for each of them
    match_of: Callable[[Observation], Match]  # the campaign each of them matched


def _body(
    *,
    source: Source,
    first_of: dict[str, Observation],
    delivery_id: str,
    body_hash: str,
    at: datetime,
    actor: str,
) -> _Body:
    # What occurred before the account was connected is history: recorded, never planned.
    # Platform times are whole seconds: the second of connection counts as after it.
    connected = source.connected_at.replace(microsecond=0) if source.connected_at is not None else None
    ordered = sorted(first_of.items())
    events, records, ready = [], [], []
    purposes_for = reply_planner().purposes_for(source)
    rules = trigger_rules().rules(source)
    adapter = get_adapter(source.adapter)
    matches: dict[str, Match] = {}
    planned: dict[str, tuple[str, ...]] = {}
    for key, observation in ordered:
        history = connected is not None and observation.occurred_at < connected
        match = rules.match(observation)
        trigger = match is not None
        # A family no reply answers (an edit, a removal) or no route can answer plans nothing;
        # a campaign answers with its own purposes (none named: every purpose the source declares).
        answering = purposes_for(observation.event_type)
        if match is not None and match.purposes:
            answering = tuple(p for p in answering if p in match.purposes)
        answerable = bool(answering) or (
            not source.purposes and bool(adapter.family(observation.event_type).answers)
        )
        final_state = (
            EventState.RECORD_READY if trigger and not history and answerable else EventState.CLOSED_NO_REPLY
        )
        # The event contract's fields, as the dataclass declares them (one list for ingest,
        # staging and replay); the text is kept apart, as retained content.
        events.append(
            [
                key,
                source.pk,
                *observation.contract_values().values(),
                rules.version,
                trigger,
                match.campaign_id if match is not None else None,
                match.campaign_version if match is not None else None,
                observation.parent_ref,
                final_state,
                "UNRECONCILED",
                at,
                at,
                1,
                observation.text,
                observation.handle,
                observation.address,
            ]
        )
        # Each record is written once, already in the state its plan puts it in; its
        # history walks the declared moves: created -> RECEIVED -> final state.
        if final_state == EventState.RECORD_READY:
            ready.append(observation)
            matches[key], planned[key] = match, answering
            reason = "reply_plan_created"
        elif history:
            reason = "before_connection"
        else:
            reason = "trigger_not_matched" if not trigger else "no_reply_answers"
        records.append((key, [EventState.RECEIVED, final_state], ["source_proof_passed", reason]))
    return _Body(
        delivery=(source.pk, delivery_id, body_hash, sorted(first_of), at, at, 1),
        ordered=ordered,
        events=events,
        ready=ready,
        purposes_of=lambda o: planned[o.event_key],
        match_of=lambda o: matches[o.event_key],
        history=creation_rows(table=EVENT_TABLE, records=records, actor=actor, at=at),
    )


def _conflicts(parsed: Parsed, indexes: list[int | None]) -> _Refusal:
    return _Refusal(
        parsed,
        [
            (index, "identity_conflict", "this event key was first accepted with a different payload")
            for index in indexes
        ],
    )


def _events_write(
    *, source: Source, body: _Body, actor: str, at: datetime, parsed: Parsed
) -> dict[int, EventResult]:
    """The body's writes, set-based, one statement per table: the delivery, the events, their
    history, and the new events' replies through the registered planner (ingress.hooks: the
    reply ledger is replies' to write), whatever the number of events (SQLite, and a body a JSON
    parameter cannot carry; PostgreSQL writes it in one: ingress.writes).

    Each row is inserted or, held already under its unique key with the same
    content, counted as seen again (`upsert_counting`). Raises _Refusal when
    the delivery id or an event key is held with different content: the caller
    takes back everything written here.
    """
    if not upsert_counting(Delivery, DELIVERY_COLUMNS, [body.delivery], **DELIVERY_UPSERT):
        raise _Refusal(Parsed([], []), [DELIVERY_CONFLICT])
    # Same key: converge only when the payload is the one first accepted.
    held = upsert_counting(InboundEvent, EVENT_COLUMNS, body.events, **EVENT_UPSERT)
    conflicts = [o.index for key, o in body.ordered if (key,) not in held]
    if conflicts:
        raise _conflicts(parsed, conflicts)
    new = {key for key, _ in body.ordered if held[(key,)][1] == 1}
    ids = {key: held[(key,)][0] for key in new}
    insert_rows(
        EventTransition,
        history_columns("event"),
        [(ids[row[0]], *row[1:]) for row in body.history if row[0] in new],
    )
    ready = [o for o in body.ready if o.event_key in new]
    if ready:
        reply_planner().write(
            observations=ready,
            adapter=source.adapter,
            purposes=list(source.purposes),
            actor=actor,
            at=at,
            match_of=body.match_of,
            purposes_of=body.purposes_of,
        )
    return {
        o.index: EventResult(o.index, "accepted" if key in new else "duplicate", key)
        for key, o in body.ordered
    }


def _events_write_at_once(
    *,
    source: Source,
    body: _Body,
    actor: str,
    at: datetime,
    parsed: Parsed,
) -> dict[int, EventResult] | None:
    """`_events_write` as one statement on PostgreSQL (ingress.writes); None where it cannot carry the body."""
    planner = reply_planner()
    actions, fill_later = planner.rows(
        observations=body.ready,
        adapter=source.adapter,
        purposes=list(source.purposes),
        at=at,
        match_of=body.match_of,
        purposes_of=body.purposes_of,
    )
    try:
        written = body_write(
            source=source,
            delivery=body.delivery,
            events=body.events,
            event_columns=EVENT_COLUMNS,
            event_history=body.history,
            actions=actions,
            plan=planner,
            action_history=planner.history_row(actor=actor, at=at),
        )
    except Refused as refused:
        if refused.delivery:
            raise _Refusal(Parsed([], []), [DELIVERY_CONFLICT]) from None
        raise _conflicts(parsed, [body.ordered[n][1].index for n in refused.members]) from None
    if written is None:
        return None
    held, planned = written
    # Only the actions of events this body inserted were planned.
    planner.after_write(
        action_ids=[
            planned[actions[position][0]] for position in fill_later if actions[position][0] in planned
        ]
    )
    return {
        o.index: EventResult(o.index, "accepted" if held[key][1] == 1 else "duplicate", key)
        for key, o in body.ordered
    }
