"""The canonical event ledger after ingest: its transition function, reconcile marks, time corrections."""

from __future__ import annotations

import logging
from datetime import datetime

from conduit.providers.base import APPROXIMATE
from conduit.statemachine import Outcome, transition, transition_many
from ingress.contract import EVENT_TABLE, RECONCILE_TABLE
from ingress.models import EventTransition, InboundEvent, Source

logger = logging.getLogger("conduit.ingress")


def event_transition(
    *,
    event_id: int,
    to: str,
    actor: str,
    reason_code: str,
    expected: str | None = None,
    at: datetime | None = None,
) -> Outcome:
    """The canonical event ledger's one transition function."""
    return transition(
        table=EVENT_TABLE,
        model=InboundEvent,
        history=EventTransition,
        owner_field="event",
        pk=event_id,
        to=to,
        actor=actor,
        reason_code=reason_code,
        state_field="event_state",
        expected=expected,
        at=at,
    )


MARK_CHUNK = 2000


def _events_moved(*, table, ids: list[int], state_field: str, **move) -> int:
    """`transition_many` over the events `ids`, MARK_CHUNK at a time: how many moved."""
    return sum(
        transition_many(
            table=table,
            model=InboundEvent,
            history=EventTransition,
            owner_field="event",
            pks=ids[start : start + MARK_CHUNK],
            state_field=state_field,
            **move,
        )
        for start in range(0, len(ids), MARK_CHUNK)
    )


def events_reopen_for_replies(*, event_ids: list[int], actor: str, at: datetime) -> int:
    """A person's catch-up planned replies for these closed records (no campaign answered them
    when they arrived): CLOSED_NO_REPLY -> RECORD_READY, each move recorded. Returns how many moved."""
    return _events_moved(
        table=EVENT_TABLE,
        ids=event_ids,
        state_field="event_state",
        to="RECORD_READY",
        actor=actor,
        reason_code="catch_up_planned",
        at=at,
    )


def events_occurred_at_correct(*, source: Source, observed, actor: str) -> int:
    """Replace stand-in times (conduit.providers.base.APPROXIMATE) with the item's own time a
    read of the source showed: a correction of metadata, never an identity conflict.

    `observed` is a queryset of rows with event_key, payload_hash, occurred_at and
    occurred_at_original (a scan's staging); only rows with the same key and
    payload hash correct an event. Returns how many events were corrected.
    """
    from django.db.models import Exists, OuterRef, Subquery

    shown = observed.filter(event_key=OuterRef("event_key"), payload_hash=OuterRef("payload_hash")).exclude(
        occurred_at_original__startswith=APPROXIMATE
    )
    corrected = (
        InboundEvent.objects.filter(source=source, occurred_at_original__startswith=APPROXIMATE)
        .filter(Exists(shown))
        .update(
            occurred_at=Subquery(shown.values("occurred_at")[:1]),
            occurred_at_original=Subquery(shown.values("occurred_at_original")[:1]),
        )
    )
    if corrected:
        logger.info("occurred_at corrected source=%s events=%s actor=%s", source.name, corrected, actor)
    return corrected


def events_reconcile_mark(*, events, to: str, actor: str, reason_code: str, at: datetime) -> int:
    """Move the events of a queryset to reconcile status `to`: the status's transition function.

    Each move is checked against RECONCILE_TABLE and recorded in the event's
    history; every event in the set gets `reconciled_at`. Returns how many moved.
    """
    # Those already in `to` only get the time; the rest get it with their move (one write each).
    events.filter(reconcile_status=to).update(reconciled_at=at)
    ids = list(events.exclude(reconcile_status=to).order_by("pk").values_list("pk", flat=True))
    return _events_moved(
        table=RECONCILE_TABLE,
        ids=ids,
        state_field="reconcile_status",
        to=to,
        actor=actor,
        reason_code=reason_code,
        at=at,
        extra={"reconciled_at": at},
    )
