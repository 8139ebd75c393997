"""The live-send gate every transport lookup passes through.

Transports themselves are the platforms' (conduit.providers); this is replies'
side: building a reply route's transport, and refusing a live one unless the
environment (CONDUIT_LIVE_SEND) and the route's owner both say on.
"""

from __future__ import annotations

from django.conf import settings

from conduit.providers.base import Transport
from conduit.providers.registry import transport_class
from replies.models import ReplyRoute


class LiveSendDisabled(Exception):
    """A live transport was asked for while the environment or the route forbids it."""


def live_send_allowed(route: ReplyRoute) -> bool:
    return settings.CONDUIT_LIVE_SEND and route.live_send_enabled


def is_live(name: str) -> bool:
    """Whether a transport name is live, read off its class (no network). KeyError if unknown."""
    return transport_class(name).live


def transport_for(route: ReplyRoute) -> Transport:
    """Build the route's transport; a live one only when both switches say on."""
    cls = transport_class(route.transport_name)
    if cls.live and not live_send_allowed(route):
        raise LiveSendDisabled(
            f"transport {route.transport_name!r} is live: set CONDUIT_LIVE_SEND=on and have an owner "
            "enable live sending for the reply route"
        )
    return cls(route.target_url, timeout=settings.CONDUIT_TRANSPORT_TIMEOUT_SECONDS)
