"""Standard Webhooks v1 proof over the raw body bytes: strict secrets, signature lists with rotation.

Why not the `standardwebhooks` package's `verify`: it decodes the body as UTF-8
text before signing (an authentic body that is not UTF-8 cannot be verified,
and its failure looks like a forgery), treats the `whsec_` prefix as optional,
decodes the secret's base64 loosely, and raises on the first malformed entry of
a signature list, so one bad entry during key rotation hides a good one. The
scheme itself is one HMAC-SHA256; the package stays the oracle our tests
check these functions against.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re

SECRET_PREFIX = "whsec_"
# A signature list entry: "<version>,<base64>". Anything else is malformed and skipped.
_ENTRY = re.compile(r"(v[0-9a-z]{1,8}),([A-Za-z0-9+/]+={0,2})")
MAX_ENTRIES = 16


class SecretInvalid(ValueError):
    """The configured secret is not a strict `whsec_<base64>` value."""


def secret_key(secret: str) -> bytes:
    """The HMAC key of a `whsec_` secret: the prefix is required and the base64 strict."""
    if not secret.startswith(SECRET_PREFIX):
        raise SecretInvalid("the source secret must start with whsec_")
    encoded = secret[len(SECRET_PREFIX) :]
    try:
        key = base64.b64decode(encoded.encode("ascii"), validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError):
        raise SecretInvalid("the source secret is not strict base64 after whsec_") from None
    if not key:
        raise SecretInvalid("the source secret is empty")
    return key


def _signed_content(delivery_id: str, timestamp: str, body: bytes) -> bytes:
    return f"{delivery_id}.{timestamp}.".encode("utf-8") + body


def signature(*, key: bytes, delivery_id: str, timestamp: str, body: bytes) -> str:
    """One `v1,<base64>` entry over exactly these bytes."""
    digest = hmac.new(key, _signed_content(delivery_id, timestamp, body), hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def well_formed_entries(header: str) -> list[tuple[str, bytes]]:
    """(version, signature bytes) for each well-formed entry of a space-separated list.

    Malformed entries (bad base64, no comma, empty from a double space) are
    skipped: a list is judged by the entries that can be read.
    """
    entries: list[tuple[str, bytes]] = []
    for raw in header.split(" ")[: MAX_ENTRIES * 4]:
        match = _ENTRY.fullmatch(raw)
        if match is None:
            continue
        try:
            entries.append((match[1], base64.b64decode(match[2], validate=True)))
        except (binascii.Error, ValueError):
            continue
        if len(entries) >= MAX_ENTRIES:
            break
    return entries


def matches(
    *, key: bytes, delivery_id: str, timestamp: str, body: bytes, entries: list[tuple[str, bytes]]
) -> bool:
    """True when any v1 entry is the HMAC of these bytes (constant-time compare each)."""
    expected = hmac.new(key, _signed_content(delivery_id, timestamp, body), hashlib.sha256).digest()
    found = False
    for version, candidate in entries:
        if version == "v1" and hmac.compare_digest(expected, candidate):
            found = True
    return found
