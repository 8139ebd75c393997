"""The reply ledger's one transition function, below both the sender and the services."""

from __future__ import annotations

from conduit.statemachine import Outcome, transition
from replies.contract import REPLY_TABLE
from replies.models import ReplyAction, ReplyTransition


def reply_action_transition(
    *, action_id: int, to: str, actor: str, reason_code: str, expected: str | None = None,
    where: dict | None = None, extra: dict | None = None, record_lost_race: bool = True,
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
