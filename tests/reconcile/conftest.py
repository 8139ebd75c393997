"""Reconciliation helpers: synthetic source events as the sandbox provider holds them."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

BASE_TIME = datetime(2026, 1, 15, 14, 0, tzinfo=timezone.utc)


def item(n: int, *, text: str = "CHECKLIST please", **changes) -> dict:
    """A synthetic source event, as the provider holds it and a webhook would carry it."""
    event = {
        "id": f"evt_test_{n:06d}",
        "type": "comment.created",
        "post_id": "post_test_07",
        "comment_id": f"msg_test_{n:06d}",
        "from_id": "person_test_09",
        "created_at": (BASE_TIME + timedelta(minutes=n)).isoformat().replace("+00:00", "Z"),
        "text": text,
    }
    event.update(changes)
    return event


def body(*events: dict) -> bytes:
    return json.dumps({"account": "acct_test_01", "events": list(events)}).encode()


def held_and_delivered(state, deliver):
    """Event 1, held by the provider and delivered by webhook: its public_ack action."""
    from replies.models import ReplyAction

    state.hold_events(item(1))
    assert deliver(body(item(1))).status_code == 200
    return ReplyAction.objects.get(purpose="public_ack")


def approved_and_sent(state, action, mode: str | None = None) -> str:
    """Approve the action and send it once, the provider failing as `mode` if given: the state reached."""
    from replies.sender import reply_send
    from replies.services import reply_approve
    from tests.conftest import fail_next

    reply_approve(action_id=action.pk, actor="reviewer_test")
    if mode:
        fail_next(state, mode)
    return reply_send(action_id=action.pk)
