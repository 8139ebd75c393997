"""Platforms by name: one registry of adapter and transport classes.

Whether a transport is live is its class attribute (`Transport.live`), read
without building it, so no network is needed to know.
"""

from __future__ import annotations

from functools import cache

from conduit.loopback import loopback_address
from conduit.providers.base import SourceAdapter, Transport
from conduit.providers.meta.adapters import MetaInstagramAdapter, MetaPageAdapter
from conduit.providers.meta.transport import MetaCommentReplyTransport, MetaPrivateReplyTransport
from conduit.providers.sandbox.transport import SandboxTransport
from conduit.providers.sandbox.webhook import SandboxSocialAdapter

ADAPTERS: dict[str, type[SourceAdapter]] = {
    cls.name: cls for cls in (SandboxSocialAdapter, MetaInstagramAdapter, MetaPageAdapter)
}
TRANSPORTS: dict[str, type[Transport]] = {
    cls.name: cls for cls in (SandboxTransport, MetaCommentReplyTransport, MetaPrivateReplyTransport)
}


def _unknown(kind: str, name: str, known: dict) -> KeyError:
    return KeyError(f"unknown {kind} {name!r}; known {kind}s: {', '.join(sorted(known))}")


@cache
def get_adapter(name: str) -> SourceAdapter:
    """The adapter registered under `name` (adapters are stateless: one instance each)."""
    try:
        return ADAPTERS[name]()
    except KeyError:
        raise _unknown("adapter", name, ADAPTERS) from None


def reads_off_host(adapter: str, source_url: str) -> bool:
    """Whether reading a source calls a system outside this host: a live reader at a URL that is
    not loopback (a Meta source pointed at the Graph simulator reads on this host)."""
    return get_adapter(adapter).live and loopback_address(source_url) is None


def transport_class(name: str) -> type[Transport]:
    try:
        return TRANSPORTS[name]
    except KeyError:
        raise _unknown("transport", name, TRANSPORTS) from None
