"""The at-most-once sender: claim, deliver, finish, and the SENDING sweeper.

The queue is at-least-once; the claim (APPROVED -> SENDING, committed before
any transport code runs) and the reply key make each send at-most-once. A
SendAttempt row is written as `sent` in the claim's transaction, before the
call, so a worker that dies mid-call leaves the pessimistic evidence behind.
Each action goes out through its own reply route (source + purpose).

One module per step (queue, claim, deliver, budgets, sweep); the names callers use are
re-exported here. `enqueue_send` is looked up here at commit time (replies.services), so a
test that stands in for the queue replaces it on this package."""

from __future__ import annotations

from replies.sender.budgets import (
    BUDGET_SLACK_SECONDS,
    MAX_HELD_PER_CALL,
    THROTTLE_PAUSE_SECONDS,
    account_pause,
    budget_default,
    source_token_refused,
)
from replies.sender.claim import CLAIMABLE, CLAIMABLE_SQL, SENDER, due_action_ids
from replies.sender.deliver import reply_send, reply_send_next
from replies.sender.queue import enqueue_send
from replies.sender.sweep import SWEEPER, replies_sweep

__all__ = [
    "BUDGET_SLACK_SECONDS",
    "CLAIMABLE",
    "CLAIMABLE_SQL",
    "MAX_HELD_PER_CALL",
    "SENDER",
    "SWEEPER",
    "THROTTLE_PAUSE_SECONDS",
    "account_pause",
    "budget_default",
    "due_action_ids",
    "enqueue_send",
    "replies_sweep",
    "reply_send",
    "reply_send_next",
    "source_token_refused",
]
