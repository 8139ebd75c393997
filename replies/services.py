"""Reply-action writes: planning at ingest and every state change through REPLY_TABLE."""

from __future__ import annotations

from datetime import datetime

from conduit.sql import insert_rows
from conduit.statemachine import Outcome, record_created, transition
from replies.contract import REPLY_TABLE, reply_key
from replies.models import ApprovalState, DeliveryState, ReplyAction, ReplyTransition


def reply_actions_plan(
    *, event_key: str, purposes: list[str], canary: bool, actor: str, at: datetime
) -> list[int]:
    """Create one REVIEW_PENDING action per declared purpose for a newly inserted event.

    Called only inside the ingest transaction that inserted the event, so the
    event's own unique key already guarantees this runs once per event_key; the
    unique reply_key constraint guards it a second time. Returns the new ids.
    """
    ids = insert_rows(
        ReplyAction,
        ["reply_key", "event", "purpose", "delivery_state", "approval_state", "canary", "created_at"],
        (
            (reply_key(event_key, purpose), event_key, purpose, DeliveryState.REVIEW_PENDING,
             ApprovalState.REVIEW_PENDING, canary, at)
            for purpose in purposes
        ),
    )
    record_created(
        table=REPLY_TABLE,
        history=ReplyTransition,
        owner_field="action",
        owner_ids=ids,
        path=[DeliveryState.REVIEW_PENDING],
        actor=actor,
        reason_codes=["planned_on_first_receipt"],
        at=at,
    )
    return ids


def reply_action_transition(
    *, action_id: int, to: str, actor: str, reason_code: str, expected: str | None = None,
    where: dict | None = None, extra: dict | None = None, record_lost_race: bool = True,
) -> Outcome:
    """The reply ledger's one transition function."""
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
