"""Reconciliation helpers: synthetic source events as the sandbox provider holds them."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone


BASE_TIME = datetime(2026, 1, 15, 14, 0, tzinfo=timezone.utc)


def item(n: int, *, text: str = "CHECKLIST please", **changes) -> dict:
    """A synthetic source event, as the provider holds it and a webhook would carry it."""
    event = {
        "id": f"evt_test_{n:06d}", "type": "comment.created", "post_id": "post_test_07",
        "comment_id": f"msg_test_{n:06d}", "from_id": "person_test_09",
        "created_at": (BASE_TIME + timedelta(minutes=n)).isoformat().replace("+00:00", "Z"),
        "text": text,
    }
    event.update(changes)
    return event


def body(*events: dict) -> bytes:
    return json.dumps({"account": "acct_test_01", "events": list(events)}).encode()
