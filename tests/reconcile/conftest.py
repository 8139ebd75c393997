"""Reconciliation fixtures: a sandbox provider that also holds the synthetic source's events."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from tests.conftest import fixture_body

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


def northstar() -> dict:
    return json.loads(fixture_body("comment__northstar"))["events"][0]


@pytest.fixture
def source_side(provider, wire):
    """(state, source): a provider wired as the sandbox source's transport and read side."""
    state = provider()
    source = wire(state)

    def hold(*events: dict) -> None:
        from replies.sandbox_provider import SourceEvents

        with state.lock:
            store = state.sources.setdefault(source.account_ref, SourceEvents())
            for event in events:
                store.add(dict(event))

    state.hold = hold
    return state, source


@pytest.fixture
def scan(db):
    """Run one complete scan of a source in the foreground: pages until published."""
    from reconcile.services import reconcile_page

    def _scan(source, *, max_pages: int = 1000, **window):
        for _ in range(max_pages):
            outcome = reconcile_page(source=source, trigger="command", actor="tester", **window)
            if outcome.state != "staged":
                return outcome
        raise AssertionError("the scan did not finish")

    return _scan
