"""Reads that build replay-decision requests from the reply ledger."""

from __future__ import annotations

from typing import Any

from conduit.canonical import payload_hash
from replies.models import ReplyAction, SendAttempt
from replies.transports import transport_for


def reply_digest(action: ReplyAction) -> str:
    """SHA-256 of the planned reply: copy version, channel and target."""
    event = action.event
    return payload_hash({
        "copy_version": action.copy_version, "channel": action.channel,
        "target": {"conversation_ref": event.conversation_ref, "message_ref": event.message_ref},
    })


def reply_decision_request(action: ReplyAction) -> dict[str, Any]:
    """The decision request for one reply action's own ledger (seed 003 `deliver`).

    `dedupe` is `verified` only when the transport honours idempotency keys; a
    transport that cannot be built (live sending off, provider unreachable) is
    taken as not deduplicating, the conservative reading.
    """
    source = action.event.source
    try:
        dedupe = "verified" if transport_for(source).capabilities.idempotency_key else "none"
    except Exception:
        dedupe = "none"
    attempts = []
    for attempt in SendAttempt.objects.filter(action=action).order_by("-attempt_number")[:50][::-1]:
        row: dict[str, Any] = {
            "transport": attempt.transport,
            "at": attempt.at.isoformat().replace("+00:00", "Z"),
        }
        if attempt.http_status is not None:
            row["http_status"] = attempt.http_status
        if attempt.evidence:
            row["evidence"] = attempt.evidence[:4000]
        attempts.append(row)
    return {
        "decision": "replay",
        "proposal": {"operation": "deliver", "key": action.reply_key, "digest": reply_digest(action)},
        "destination": {"name": source.transport[:200], "mode": "event", "dedupe": dedupe},
        "attempts": attempts,
    }
