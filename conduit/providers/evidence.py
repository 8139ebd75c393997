"""Receipt evidence a body or a read holds besides events: what the account itself authored
(OwnItem) and what the platform reported of a message the account sent (StatusItem)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from conduit.canonical import sha256_hex


@dataclass(frozen=True)
class OwnItem:
    """Something the account itself authored (its comment, the echo of its message).

    Receipt evidence for replies Conduit sent, never an inbound event: nothing
    is planned for it.
    """

    index: int
    kind: str  # comment | message
    provider_id: str
    parent_ref: str  # the comment it answers, or the person a message went to
    correlation: str  # what the platform echoed back for correlation (Messenger's metadata)
    occurred_at: datetime
    # reply_text_digest of the item's text: a receipt is matched to the approved copy by it, so a
    # reply a person wrote by hand is never taken for Conduit's. Text itself is never kept.
    text_digest: str = ""


@dataclass(frozen=True)
class StatusItem:
    """What the platform says became of a message the account sent (WhatsApp's `statuses[]`):
    receipt evidence for the reply that sent it, never an inbound event.

    `correlation` is what the send asked to be echoed back (the reply key); `error_code` the
    platform's first error code on a failure ("" otherwise). No recipient address is kept.
    """

    index: int
    provider_id: str
    status: str  # sent | delivered | read | failed (or another the platform adds)
    occurred_at: datetime
    correlation: str = ""
    error_code: str = ""


def reply_text_digest(text: str | None) -> str:
    """SHA-256 of a reply's text with its whitespace collapsed ("" for no text): the one form in
    which an approved copy and the account's own item read back are compared."""
    collapsed = " ".join(text.split()) if isinstance(text, str) else ""
    # surrogatepass: a lone surrogate (hostile input) still digests, never raises.
    return sha256_hex(collapsed.encode("utf-8", "surrogatepass")) if collapsed else ""
