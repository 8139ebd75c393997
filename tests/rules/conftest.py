"""Fixtures for the rule tests: ledger rows made directly, in any state."""

from datetime import datetime, timezone

import pytest

from ingress.models import InboundEvent
from replies.models import ReplyAction

AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


@pytest.fixture
def make_action(sandbox_source):
    counter = iter(range(10_000))

    def _make(state: str, **fields) -> ReplyAction:
        n = next(counter)
        event = InboundEvent.objects.create(
            event_key=f"evt_test_{n}", source=sandbox_source, source_system="sandbox_social",
            source_account_ref="acct_test_01", source_event_id=f"evt_test_{n}",
            event_type="comment.created", conversation_ref="post_test", message_ref=f"c_{n}",
            sender_ref="user_test", occurred_at=AT, occurred_at_original="2026-01-02T03:04:05Z",
            payload_hash="0" * 64, contract_version="1", canary=False, trigger_rule_version=1,
            trigger_match=True, event_state="RECORD_READY", first_received_at=AT, last_received_at=AT,
        )
        return ReplyAction.objects.create(
            reply_key=f"{n:064d}", event=event, purpose="public_ack", delivery_state=state,
            created_at=AT, **fields,
        )

    return _make
