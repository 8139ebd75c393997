"""Canonical JSON and SHA-256: the one way Conduit hashes payloads and derives keys."""

import hashlib
import json
from typing import Any

# The one encoder, built once: json.dumps with these arguments builds this same encoder on
# every call and then calls its encode(); encode() keeps no state between calls, so one
# instance serves every thread. The bytes are the same; a source read hashes every event.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no insignificant whitespace, UTF-8 (not ASCII-escaped)."""
    return _CANONICAL.encode(value).encode("utf-8")


def sha256_hex(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def payload_hash(value: Any) -> str:
    """SHA-256 of the canonical JSON of an accepted payload."""
    return sha256_hex(canonical_json(value))
