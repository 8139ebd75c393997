"""Transports by name, and the live-send gate every lookup passes through."""

from __future__ import annotations

import os
from typing import Callable

from django.conf import settings

from replies.transports.base import Transport
from replies.transports.sandbox import SandboxTransport

# name -> factory(source) -> Transport. Live providers register here too.
TRANSPORTS: dict[str, Callable[..., Transport]] = {
    "sandbox": lambda source: SandboxTransport(
        source.transport_url, timeout=settings.CONDUIT_TRANSPORT_TIMEOUT_SECONDS
    ),
}
# Whether a transport name is live, without building it (no network needed).
LIVE: dict[str, bool] = {"sandbox": False}


class LiveSendDisabled(Exception):
    """A live transport was asked for while the environment or the source forbids it."""


def live_send_allowed(source) -> bool:
    return os.environ.get("CONDUIT_LIVE_SEND", "off").lower() == "on" and source.live_send_enabled


def is_live(name: str) -> bool:
    if name not in LIVE:
        raise KeyError(f"unknown transport {name!r}; known: {', '.join(sorted(TRANSPORTS))}")
    return LIVE[name]


def transport_for(source) -> Transport:
    """Build the source's transport; a live one only when both switches say on."""
    if is_live(source.transport) and not live_send_allowed(source):
        raise LiveSendDisabled(
            f"transport {source.transport!r} is live: set CONDUIT_LIVE_SEND=on and have an owner "
            "enable live sending for the source"
        )
    return TRANSPORTS[source.transport](source)
