"""What a Meta reply comes to: a MetaReceipt with the evidence that shows the reply exists,
MetaNotSent or MetaAmbiguous; and the Graph ids a transport puts in a path or keeps."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from conduit.providers.base import MAX_REF_LENGTH, Ambiguous, NotSent, Receipt

# Graph ids as Meta sends them: digits (Instagram, 17-18 of them), <page>_<post> and
# <post>_<comment> (Facebook), `m_...` Messenger mids and base64url-like Instagram message ids
# of about 164 characters (`aWdf...`, the private reply's `message_id`), up to the event
# contract's bound on a ref; anything else is not an id this transport puts in a path or keeps.
_GRAPH_ID = re.compile(r"[0-9A-Za-z_.:\-=]{1,%d}" % MAX_REF_LENGTH)


# Evidence a receipt carries: what shows the reply exists.
REPLY_CREATED = "reply_created"  # Meta answered the write with the new id
ALREADY_REPLIED = "already_replied"  # Meta answered that the comment already holds a reply
REPLY_READ_BACK = "reply_read_back"  # the comment's replies show it (lookup)
PRIVATE_REPLY_CONVERSATION = "private_reply_conversation"  # the comment's private reply conversation (lookup)


@dataclass(frozen=True)
class MetaReceipt(Receipt):
    """A receipt with the evidence that shows the reply exists (one of the constants above)."""

    evidence: str = REPLY_CREATED
    # Seconds the account should pause although this send succeeded: Meta's usage header said the
    # account is near its limit (the sender pauses the account's sends for it).
    retry_after: float | None = None


class MetaNotSent(NotSent):
    """Meta applied nothing. `retryable`: trying again can help (throttling, a connection that never
    opened); `stop_source`: the source's sends must stop until a person acts (a dead token);
    `retry_after`: seconds Meta announced; `sentence`: what a person reads."""

    def __init__(
        self,
        code: str,
        *,
        http_status: int | None = None,
        reached: bool = False,
        retryable: bool = False,
        stop_source: bool = False,
        retry_after: float | None = None,
        sentence: str = "",
    ) -> None:
        super().__init__(code, http_status=http_status, reached=reached)
        self.retryable = retryable
        self.stop_source = stop_source
        self.retry_after = retry_after
        self.sentence = sentence


class MetaAmbiguous(Ambiguous):
    """Meta may hold the reply (or a lookup cannot tell): `sentence` is what a person reads."""

    def __init__(
        self, code: str, *, http_status: int | None = None, response: bool = False, sentence: str = ""
    ) -> None:
        super().__init__(code, http_status=http_status, response=response)
        self.sentence = sentence


def _id_of(value: Any) -> str:
    """An id from a Graph value: the string itself, or a node's `id`."""
    if isinstance(value, dict):
        value = value.get("id")
    return value if isinstance(value, str) and _GRAPH_ID.fullmatch(value) else ""
