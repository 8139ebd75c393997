"""Platforms by name: one registry of adapter and transport classes.

Whether a transport is live is its class attribute (`Transport.live`), read
without building it, so no network is needed to know.
"""

from __future__ import annotations

from functools import cache

from conduit.providers.base import SourceAdapter, Transport
from conduit.providers.meta.webhook import MetaInstagramWebhook, MetaPageWebhook
from conduit.providers.sandbox.transport import SandboxTransport
from conduit.providers.sandbox.webhook import SandboxSocialAdapter

ADAPTERS: dict[str, type[SourceAdapter]] = {
    cls.name: cls for cls in (SandboxSocialAdapter, MetaInstagramWebhook, MetaPageWebhook)
}
TRANSPORTS: dict[str, type[Transport]] = {cls.name: cls for cls in (SandboxTransport,)}


def _unknown(kind: str, name: str, known: dict) -> KeyError:
    return KeyError(f"unknown {kind} {name!r}; known {kind}s: {', '.join(sorted(known))}")


@cache
def get_adapter(name: str) -> SourceAdapter:
    """The adapter registered under `name` (adapters are stateless: one instance each)."""
    try:
        return ADAPTERS[name]()
    except KeyError:
        raise _unknown("adapter", name, ADAPTERS) from None


def transport_class(name: str) -> type[Transport]:
    try:
        return TRANSPORTS[name]
    except KeyError:
        raise _unknown("transport", name, TRANSPORTS) from None
