"""The live-send gate every transport lookup passes through, and what enabling it requires.

Transports themselves are the platforms' (conduit.providers); this is replies'
side: building a reply route's transport, and refusing a live one unless the
environment (CONDUIT_LIVE_SEND) and the route's owner both say on. The owner may
turn the route's flag on only while the acceptance contract passed on this code
version and a person authorised the source's account connection
(live_enable_refusals; docs/concepts/acceptance.md#live).
"""

from __future__ import annotations

import os
import threading

from django.conf import settings

from conduit.loopback import credential_url_refusal
from conduit.providers.base import Transport
from conduit.providers.registry import get_adapter, transport_class
from replies.hooks import live_send_gate_refusal
from replies.models import ReplyRoute


class LiveSendDisabled(Exception):
    """A live transport was asked for while the environment or the route forbids it."""


def live_send_allowed(route: ReplyRoute) -> bool:
    return settings.CONDUIT_LIVE_SEND and route.live_send_enabled


def connection_refusal(route: ReplyRoute) -> str:
    """Why the route's source may not act as its account live ("" once a person authorised it)."""
    source = route.source
    if source.connection_authorized_at is None:
        return (
            f"the account connection of source {source.name!r} has not been authorised by a person "
            "(an owner: Ingress > Sources, action Authorize account connection)"
        )
    return ""


def live_enable_refusals(route: ReplyRoute) -> list[str]:
    """Why the route's live flag may not be turned on now, each missing requirement in words:
    the acceptance contract's (the gate reconcile registers) and the account connection's."""
    refusals = []
    acceptance = live_send_gate_refusal(route)
    if acceptance:
        refusals.append(f"acceptance: {acceptance}")
    connection = connection_refusal(route)
    if connection:
        refusals.append(f"connection: {connection}")
    return refusals


def is_live(name: str) -> bool:
    """Whether a transport name is live, read off its class (no network). KeyError if unknown.

    Conservative: a Meta transport is live whatever its URL (route_is_live knows the route)."""
    return transport_class(name).live


def route_url_refusal(transport_name: str, target_url: str) -> str:
    """Why a route's transport may not take the source's token to `target_url`, or ""."""
    hosts = transport_class(transport_name).credential_hosts
    if hosts is None:
        return ""
    refusal = credential_url_refusal(target_url, hosts)
    return f"the source's access token would be sent there: {refusal}" if refusal else ""


def route_is_live(route: ReplyRoute) -> bool:
    """Whether the route's transport calls a system off this host: a Meta transport at the
    loopback Graph simulator does not."""
    cls = transport_class(route.transport_name)
    live_for = getattr(cls, "live_for", None)
    return live_for(route.target_url) if live_for is not None else cls.live


# Transports kept per thread (and process) so their connections stay alive from send to send.
KEPT_TRANSPORTS = 32
_kept = threading.local()


def _kept_transports() -> dict:
    if getattr(_kept, "pid", None) != os.getpid():  # a forked child starts with none of its parent's
        _kept.pid, _kept.transports = os.getpid(), {}
    return _kept.transports


def transport_for(route: ReplyRoute) -> Transport:
    """The route's transport; a live one only when both switches say on (asked on every call).

    A transport class that keeps a connection alive (`kept_alive`) and acts as no account is
    built once per (class, address, options) in each thread and handed back on later calls,
    refreshed as a new build would be; any other is built on every call.
    """
    cls = transport_class(route.transport_name)
    # A transport acting with the source's token is never built towards another host.
    refusal = route_url_refusal(route.transport_name, route.target_url)
    if refusal:
        raise ValueError(refusal)
    if route_is_live(route) and not live_send_allowed(route):
        raise LiveSendDisabled(
            f"transport {route.transport_name!r} is live: set CONDUIT_LIVE_SEND=on and have an owner "
            "enable live sending for the reply route"
        )
    options = {"timeout": settings.CONDUIT_TRANSPORT_TIMEOUT_SECONDS}
    if getattr(cls, "kept_alive", False) and not getattr(cls, "source_bound", False):
        kept = _kept_transports()
        key = (cls, route.target_url, tuple(sorted(options.items())))
        transport = kept.get(key)
        if transport is not None:
            transport.refresh()
            return transport
        transport = cls(route.target_url, **options)
        if len(kept) >= KEPT_TRANSPORTS:
            kept.pop(next(iter(kept))).close()
        kept[key] = transport
        return transport
    if getattr(cls, "source_bound", False):
        # A platform transport acts as the source's account, with its token (the one stored
        # sealed for the source, else the variable it names), and only towards its platform's hosts.
        from ingress.selectors import source_config

        source = route.source
        adapter_object = getattr(get_adapter(source.adapter), "object", None)
        options.update(
            token=source_config(source, with_token=True).access_token,
            account_ref=source.account_ref,
            object=adapter_object,
        )
    return cls(route.target_url, **options)
