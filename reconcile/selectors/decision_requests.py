"""Replay-decision requests read from the reply ledger: an action, its route and its attempts."""

from __future__ import annotations

from typing import Any, Iterable

from django.db.models import Prefetch, QuerySet

from conduit.canonical import payload_hash
from conduit.providers.registry import transport_class
from conduit.timefmt import iso_z
from replies.models import ReplyAction, ReplyRoute, SendAttempt
from replies.selectors import action_route
from replies.transports import transport_for

MAX_REQUEST_ATTEMPTS = 50


def reply_digest(action: ReplyAction) -> str:
    """SHA-256 of the planned reply: copy version, channel and target."""
    event = action.event
    return payload_hash(
        {
            "copy_version": action.copy_version,
            "channel": action.channel,
            "target": {"conversation_ref": event.conversation_ref, "message_ref": event.message_ref},
        }
    )


def _decision_request(
    action: ReplyAction, route: ReplyRoute | None, *, dedupe: str, attempts: Iterable[SendAttempt]
) -> dict[str, Any]:
    """The `deliver` request (docs/concepts/replay-decisions.md#request) from the action, its
    route's transport, its newest attempts (oldest first) and `dedupe`."""
    rows = []
    for attempt in attempts:
        row: dict[str, Any] = {"transport": attempt.transport, "at": iso_z(attempt.at)}
        if attempt.http_status is not None:
            row["http_status"] = attempt.http_status
        if attempt.evidence:
            row["evidence"] = attempt.evidence[:4000]
        rows.append(row)
    return {
        "decision": "replay",
        "proposal": {"operation": "deliver", "key": action.reply_key, "digest": reply_digest(action)},
        "destination": {
            "name": (route.transport_name if route is not None else "unrouted")[:200],
            "mode": "event",
            "dedupe": dedupe,
        },
        "attempts": rows,
    }


def reply_decision_request(action: ReplyAction) -> dict[str, Any]:
    """The `deliver` decision request for one reply action's own ledger
    (docs/concepts/replay-decisions.md#unknown-sends).

    `dedupe` is `verified` only when the transport honours idempotency keys; a
    transport that cannot be built (live sending off, provider unreachable) is
    taken as not deduplicating, the conservative reading. Building the
    transport may ask the provider (the sandbox discovers its capabilities over
    HTTP): for one action's page or the API, never a changelist.
    """
    route = action_route(action)
    try:
        dedupe = "verified" if transport_for(route).capabilities.idempotency_key else "none"
    except Exception:  # no route, live sending off, provider unreachable
        dedupe = "none"
    newest = SendAttempt.objects.filter(action=action).order_by("-attempt_number")[:MAX_REQUEST_ATTEMPTS]
    return _decision_request(action, route, dedupe=dedupe, attempts=list(newest)[::-1])


def declared_dedupe(transport_name: str) -> str:
    """`verified` when the transport's class declares idempotency keys: no instance, no network.

    A transport that discovers its capabilities per instance (the sandbox)
    declares the conservative ones on its class, so it reads `none` here.
    """
    try:
        cls = transport_class(transport_name)
    except KeyError:
        return "none"
    return "verified" if cls.capabilities.idempotency_key else "none"


def reply_decision_request_declared(action: ReplyAction) -> dict[str, Any]:
    """The decision request from what is already loaded: the transport class's declared
    capabilities, and the action's `attempts` and its source's `reply_routes` as prefetched for a
    changelist page (see `with_decision_inputs`): no query per row, no call."""
    route = next((r for r in action.event.source.reply_routes.all() if r.purpose == action.purpose), None)
    attempts = sorted(action.attempts.all(), key=lambda a: a.attempt_number)[-MAX_REQUEST_ATTEMPTS:]
    dedupe = declared_dedupe(route.transport_name) if route is not None else "none"
    return _decision_request(action, route, dedupe=dedupe, attempts=attempts)


def with_decision_inputs(actions: QuerySet) -> QuerySet:
    """`actions` with what `reply_decision_request_declared` reads: two prefetch queries a page."""
    return actions.select_related("event__source").prefetch_related(
        Prefetch("attempts", queryset=SendAttempt.objects.order_by("attempt_number")),
        "event__source__reply_routes",
    )
