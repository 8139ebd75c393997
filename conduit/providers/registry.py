"""Platforms by name: one registry of adapter and transport classes.

Whether a transport is live is its class attribute (`Transport.live`), read
without building it, so no network is needed to know.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache

from conduit.loopback import loopback_address
from conduit.providers.base import SharedCallback, SourceAdapter, Transport
from conduit.providers.login import AccountLogin
from conduit.providers.meta.adapters import MetaInstagramAdapter, MetaPageAdapter
from conduit.providers.meta.login import LOGINS as META_LOGINS
from conduit.providers.meta.transport import MetaCommentReplyTransport, MetaPrivateReplyTransport
from conduit.providers.sandbox.transport import SandboxTransport
from conduit.providers.sandbox.webhook import SandboxSocialAdapter
from conduit.providers.whatsapp.adapter import MetaWhatsAppAdapter
from conduit.providers.whatsapp.transport import MetaWhatsAppTransport

ADAPTERS: dict[str, type[SourceAdapter]] = {
    cls.name: cls
    for cls in (SandboxSocialAdapter, MetaInstagramAdapter, MetaPageAdapter, MetaWhatsAppAdapter)
}
TRANSPORTS: dict[str, type[Transport]] = {
    cls.name: cls
    for cls in (SandboxTransport, MetaCommentReplyTransport, MetaPrivateReplyTransport, MetaWhatsAppTransport)
}


def transports_for(adapter: str) -> dict[str, type[Transport]]:
    """The transports a route of a source of that adapter may name (`Transport.adapters`)."""
    return {name: cls for name, cls in TRANSPORTS.items() if cls.adapters is None or adapter in cls.adapters}


# The login flows an owner connects accounts through (the admin's Connect buttons), by URL name.
LOGINS: dict[str, type[AccountLogin]] = {cls.name: cls for cls in META_LOGINS}


# Where a reply goes when its source routes it nowhere else and its adapter declares no default.
DEFAULT_TRANSPORT = SandboxTransport.name


def callback_adapters(platform: str | None = None) -> tuple[str, ...]:
    """The adapters whose bodies come through a shared app callback (that platform's, or any)."""
    return tuple(
        name
        for name, cls in ADAPTERS.items()
        if cls.shared_callback is not None and platform in (None, cls.shared_callback.platform)
    )


def shared_callback(platform: str) -> SharedCallback:
    """The app callback a platform's adapters declare (KeyError when none does)."""
    for cls in ADAPTERS.values():
        if cls.shared_callback is not None and cls.shared_callback.platform == platform:
            return cls.shared_callback
    raise _unknown(
        "shared callback",
        platform,
        {c.shared_callback.platform: c for c in ADAPTERS.values() if c.shared_callback},
    )


def private_reply_adapters() -> tuple[str, ...]:
    """The adapters whose private replies must go out within a window of the comment."""
    return tuple(name for name, cls in ADAPTERS.items() if cls.private_reply_window is not None)


def send_budget_default(*, adapter: str, transport_name: str) -> tuple[int | None, int]:
    """The documented (limit, window seconds) for an account's sends through a transport (an
    adapter no longer registered: nothing counted, over an hour)."""
    if adapter not in ADAPTERS:
        return (None, 3600)
    return get_adapter(adapter).default_budget(transport_name)


def _unknown(kind: str, name: str, known: dict) -> KeyError:
    return KeyError(f"unknown {kind} {name!r}; known {kind}s: {', '.join(sorted(known))}")


@cache
def get_adapter(name: str) -> SourceAdapter:
    """The adapter registered under `name` (adapters are stateless: one instance each)."""
    try:
        return ADAPTERS[name]()
    except KeyError:
        raise _unknown("adapter", name, ADAPTERS) from None


def get_login(name: str) -> AccountLogin:
    """The login flow registered under `name` (KeyError naming the known ones otherwise)."""
    try:
        return LOGINS[name]()
    except KeyError:
        raise _unknown("login", name, LOGINS) from None


def adapter_login(adapter: str) -> AccountLogin | None:
    """The login flow whose assets become sources of `adapter` (a reconnect's), if any."""
    return next((cls() for cls in LOGINS.values() if cls.adapter == adapter), None)


def reads_off_host(adapter: str, source_url: str) -> bool:
    """Whether reading a source calls a system outside this host: a live reader at a URL that is
    not loopback (a Meta source pointed at the Graph simulator reads on this host)."""
    return get_adapter(adapter).live and loopback_address(source_url) is None


def transport_class(name: str) -> type[Transport]:
    try:
        return TRANSPORTS[name]
    except KeyError:
        raise _unknown("transport", name, TRANSPORTS) from None


@cache
def evidence_answers() -> dict[str, tuple[str, str]]:
    """Every transport's error table as evidence: a stored reason token -> (answer, rule)."""
    return evidence_table(TRANSPORTS.values())


def evidence_table(transports: Iterable[type[Transport]]) -> dict[str, tuple[str, str]]:
    """The transports' error tables as one: a stored reason token is read without its transport,
    so two tables that share a token must give it the same answer (the first table's rule names it)."""
    table: dict[str, tuple[str, str]] = {}
    for cls in transports:
        for reason, answer in cls.evidence_answers.items():
            known, rule = table.setdefault(reason, (answer, cls.evidence_rule))
            if known != answer:
                raise ValueError(
                    f"the reason {reason!r} is {known} by {rule} and {answer} by {cls.evidence_rule}"
                )
    return table
