"""The live-send gate every transport lookup passes through.

Transports themselves are the platforms' (conduit.providers); this is replies'
side: building a source's transport, and refusing a live one unless the
environment (CONDUIT_LIVE_SEND) and the source's owner both say on.
"""

from __future__ import annotations

from django.conf import settings

from conduit.providers.base import Transport
from conduit.providers.registry import transport_class


class LiveSendDisabled(Exception):
    """A live transport was asked for while the environment or the source forbids it."""


def live_send_allowed(source) -> bool:
    return settings.CONDUIT_LIVE_SEND and source.live_send_enabled


def is_live(name: str) -> bool:
    """Whether a transport name is live, read off its class (no network). KeyError if unknown."""
    return transport_class(name).live


def transport_for(source) -> Transport:
    """Build the source's transport; a live one only when both switches say on."""
    cls = transport_class(source.transport)
    if cls.live and not live_send_allowed(source):
        raise LiveSendDisabled(
            f"transport {source.transport!r} is live: set CONDUIT_LIVE_SEND=on and have an owner "
            "enable live sending for the source"
        )
    return cls(source.transport_url, timeout=settings.CONDUIT_TRANSPORT_TIMEOUT_SECONDS)
