"""Meta's `signed_request`: how the deauthorize and data deletion callbacks prove they are Meta's.

The value Meta posts (form field `signed_request`) is
`base64url(signature) + "." + base64url(JSON payload)`, padding stripped; the
signature is the raw HMAC-SHA256 of the *encoded* payload (the text after the
dot, as sent) under the app secret, and the payload says so itself
(`"algorithm": "HMAC-SHA256"`) beside `issued_at` (Unix seconds) and `user_id`
(the app-scoped id of the person who removed the app or asked for deletion).
developers.facebook.com/docs/development/create-an-app/app-dashboard/data-deletion-callback.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone

from conduit.providers.base import ProofError, SecretUnavailable, strict_json
from conduit.providers.meta.webhook_proof import MetaSecretInvalid, secret_bytes

ALGORITHM = "HMAC-SHA256"
# A signed request is a few hundred characters; this bounds what is decoded, not what Meta sends.
MAX_CHARS = 4096
BASE64URL = re.compile(r"[A-Za-z0-9_-]+={0,2}")
# Meta's user ids are digits (app-scoped ids run to 17); a string of them, or a JSON number.
USER_ID = re.compile(r"[0-9]{1,32}")


@dataclass(frozen=True)
class SignedUserRequest:
    user_id: str
    issued_at: datetime


def _decode(part: str) -> bytes:
    if not BASE64URL.fullmatch(part):
        raise ProofError("malformed_signed_request", "signed_request parts are base64url")
    try:
        return base64.urlsafe_b64decode(part.rstrip("=") + "=" * (-len(part.rstrip("=")) % 4))
    except (binascii.Error, ValueError):
        raise ProofError("malformed_signed_request", "signed_request parts are base64url") from None


def _encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def signature_of(encoded_payload: str, key: bytes) -> bytes:
    """The raw HMAC-SHA256 of the encoded payload (the text after the dot, as sent)."""
    return hmac.new(key, encoded_payload.encode("ascii"), hashlib.sha256).digest()


def signed_request_payload(value: str, *, secret: str) -> dict:
    """The verified payload of a signed request, whatever it holds.

    ProofError (a stable `code`) when the value is not one, its algorithm is not
    HMAC-SHA256 or its signature is not the secret's; SecretUnavailable when the
    configured secret cannot be a Meta app secret. The signature is compared in
    constant time, and before the payload is parsed: nothing unauthenticated is read.
    """
    try:
        key = secret_bytes(secret)
    except MetaSecretInvalid as exc:
        raise SecretUnavailable(str(exc)) from None
    if not value or len(value) > MAX_CHARS or value.count(".") != 1:
        raise ProofError("malformed_signed_request", "signed_request is <signature>.<payload>")
    encoded_signature, encoded_payload = value.split(".")
    signature = _decode(encoded_signature)
    _decode(encoded_payload)
    expected = signature_of(encoded_payload, key)
    if not hmac.compare_digest(expected, signature):
        raise ProofError("invalid_signature", "the signature does not match the payload")
    try:
        payload = strict_json(_decode(encoded_payload))
    except (ValueError, RecursionError, UnicodeDecodeError):
        raise ProofError("malformed_signed_request", "the signed payload is not JSON") from None
    if not isinstance(payload, dict):
        raise ProofError("malformed_signed_request", "the signed payload is not an object")
    algorithm = payload.get("algorithm")
    if not isinstance(algorithm, str) or algorithm.upper() != ALGORITHM:
        raise ProofError("unsupported_algorithm", f"the payload's algorithm must be {ALGORITHM}")
    return payload


def signed_user_request(value: str, *, secret: str) -> SignedUserRequest:
    """Who the verified request is about and when Meta signed it; ProofError as
    `signed_request_payload`, or `missing_user_id` / `malformed_signed_request`
    when the payload names no user or no time."""
    payload = signed_request_payload(value, secret=secret)
    user_id = payload.get("user_id")
    if isinstance(user_id, int) and not isinstance(user_id, bool):
        user_id = str(user_id)
    if not isinstance(user_id, str) or not USER_ID.fullmatch(user_id):
        raise ProofError("missing_user_id", "the signed payload names no user_id")
    issued_at = payload.get("issued_at")
    if not isinstance(issued_at, int) or isinstance(issued_at, bool) or not 0 < issued_at < 2**33:
        raise ProofError("malformed_signed_request", "the signed payload has no issued_at")
    return SignedUserRequest(user_id=user_id, issued_at=datetime.fromtimestamp(issued_at, tz=timezone.utc))


def signed_request_sign(payload: dict, *, secret: str) -> str:
    """A signed request as Meta makes one (the simulator's and the tests')."""
    encoded = _encode(json.dumps(payload, separators=(",", ":")).encode("utf-8"))
    return f"{_encode(signature_of(encoded, secret_bytes(secret)))}.{encoded}"
