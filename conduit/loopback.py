"""The sandbox's one network rule: it talks only to plain HTTP on this host."""

from __future__ import annotations

from urllib.parse import urlsplit

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def loopback_address(url: str) -> tuple[str, int] | None:
    """(host, port) of an http:// URL on this host, or None for anything else."""
    parts = urlsplit(url)
    if parts.scheme != "http" or parts.hostname not in LOOPBACK_HOSTS:
        return None
    return parts.hostname, parts.port or 80
