"""Hooks the apps built on replies register in their AppConfig.ready: replies asks them, never imports them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from replies.models import ReplyRoute

# Why a route may not go live now, in words ("" when it may): reconcile registers the acceptance
# gate (docs/concepts/acceptance.md#live), replies cannot read acceptance runs itself.
LiveSendGate = Callable[["ReplyRoute"], str]

_GATES: list[LiveSendGate] = []


def live_send_gate_register(gate: LiveSendGate) -> None:
    """Register the acceptance gate routes ask before going live (reconcile does, in its
    AppConfig.ready); a second call replaces it."""
    _GATES[:] = [gate]


def live_send_gate_refusal(route: ReplyRoute) -> str:
    """What the registered gate says of the route; with none registered, a refusal (closed)."""
    if not _GATES:
        return "no acceptance gate registered: the reconcile app registers one in its AppConfig.ready"
    return _GATES[0](route)
