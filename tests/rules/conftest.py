"""Fixtures for the rule tests: ledger rows made directly, in any state."""

import contextlib
import threading
from datetime import datetime, timezone
from typing import Callable, Iterator

import pytest
from django.db import connection, connections, transaction

from ingress.models import InboundEvent
from replies.models import ReplyAction
from tests.conftest import account_campaign

AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


@pytest.fixture
def make_action(sandbox_source):
    counter = iter(range(10_000))

    def _make(state: str, **fields) -> ReplyAction:
        n = next(counter)
        event = InboundEvent.objects.create(
            event_key=f"evt_test_{n}",
            source=sandbox_source,
            source_system="sandbox_social",
            source_account_ref="acct_test_01",
            source_event_id=f"evt_test_{n}",
            event_type="comment.created",
            conversation_ref="post_test",
            message_ref=f"c_{n}",
            sender_ref="user_test",
            occurred_at=AT,
            occurred_at_original="2026-01-02T03:04:05Z",
            payload_hash="0" * 64,
            contract_version="1",
            canary=False,
            trigger_rule_version=1,
            trigger_match=True,
            event_state="RECORD_READY",
            first_received_at=AT,
            last_received_at=AT,
        )
        return ReplyAction.objects.create(
            reply_key=f"{n:064d}",
            event=event,
            purpose="public_ack",
            campaign=account_campaign(sandbox_source),
            campaign_version=1,
            delivery_state=state,
            created_at=AT,
            **fields,
        )

    return _make


@contextlib.contextmanager
def lock_held_elsewhere(lock_row: Callable[[], object], *, lock_timeout: str = "3s") -> Iterator[None]:
    """Run the block while another connection (a thread) holds whatever `lock_row` locks, in an
    open transaction; this connection waits at most `lock_timeout` for any lock it needs."""
    locked, release, failures = threading.Event(), threading.Event(), []

    def holder() -> None:
        try:
            with transaction.atomic():
                lock_row()
                locked.set()
                release.wait(15)
        except BaseException as exc:  # reported below
            failures.append(exc)
        finally:
            locked.set()
            connections.close_all()

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert locked.wait(15)
        with connection.cursor() as cursor:
            cursor.execute(f"SET lock_timeout = '{lock_timeout}'")
        yield
    finally:
        release.set()
        thread.join(15)
        with connection.cursor() as cursor:
            cursor.execute("RESET lock_timeout")
    assert not failures
