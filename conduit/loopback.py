"""The sandbox's one network rule: it talks only to plain HTTP on this host."""

from __future__ import annotations

from urllib.parse import urlsplit

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def credential_url_refusal(url: str, hosts: tuple[str, ...]) -> str:
    """Why a credential may not be sent to `url`, or "" when it may: HTTPS to one of `hosts` on
    the default port, or plain HTTP on this host (a simulator)."""
    if loopback_address(url) is not None:
        return ""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = -1
    if (
        parts.scheme == "https"
        and parts.hostname in hosts
        and port in (None, 443)
        and not parts.username
        and not parts.password
    ):
        return ""
    return (
        f"credentials go only to https://{' or https://'.join(hosts)} or to http:// on this host "
        "(127.0.0.1, localhost, ::1)"
        if hosts
        else "credentials go only to http:// on this host (127.0.0.1, localhost, ::1)"
    )


def loopback_address(url: str) -> tuple[str, int] | None:
    """(host, port) of an http:// URL on this host, or None for anything else."""
    parts = urlsplit(url)
    if parts.scheme != "http" or parts.hostname not in LOOPBACK_HOSTS:
        return None
    return parts.hostname, parts.port or 80
