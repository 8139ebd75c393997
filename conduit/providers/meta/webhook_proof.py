"""Meta's webhook proof: the X-Hub-Signature-256 HMAC of the exact body under the app secret."""

from __future__ import annotations

import hashlib
import hmac
import re
from typing import Mapping

from conduit.canonical import sha256_hex
from conduit.providers.base import Proof, ProofError, SecretUnavailable

SIGNATURE_HEADER = "x-hub-signature-256"
SIGNATURE = re.compile(r"sha256=([0-9a-fA-F]{64})")


class MetaSecretInvalid(Exception):
    pass


def secret_bytes(secret: str) -> bytes:
    """An app secret as HMAC key bytes: printable ASCII without spaces, at least 16 characters
    (Meta's are 32 hex digits). Anything else is a configuration error, never a weak key."""
    if len(secret) < 16 or not secret.isascii() or not secret.isprintable() or " " in secret:
        raise MetaSecretInvalid("a Meta app secret is printable ASCII of at least 16 characters")
    return secret.encode("ascii")


def signature_header(*, body: bytes, secret: str) -> str:
    """`sha256=<lowercase hex>` of the exact bytes: what Meta sends and the simulator signs."""
    return "sha256=" + hmac.new(secret_bytes(secret), body, hashlib.sha256).hexdigest()


def verify_signature(*, body: bytes, headers: Mapping[str, str], secret: str) -> Proof:
    """The body's Proof; ProofError when the signature is missing, malformed or wrong,
    SecretUnavailable when the configured secret is unusable."""
    try:
        key = secret_bytes(secret)
    except MetaSecretInvalid as exc:
        raise SecretUnavailable(str(exc)) from None
    header = headers.get(SIGNATURE_HEADER, "")
    if not header:
        raise ProofError("missing_proof_headers", "X-Hub-Signature-256 is required")
    match = SIGNATURE.fullmatch(header.strip())
    if match is None:
        raise ProofError("malformed_proof_headers", "X-Hub-Signature-256 must be sha256=<64 hex digits>")
    expected = hmac.new(key, body, hashlib.sha256).hexdigest()
    # Constant time, over the bytes exactly as received.
    if not hmac.compare_digest(expected, match.group(1).lower()):
        raise ProofError("invalid_signature", "the signature does not match the body")
    # Meta sends no delivery id: the body's hash is one. A re-batched retry is
    # another delivery; the per-event keys keep one record per event.
    return Proof(delivery_id="sha256:" + sha256_hex(body))
