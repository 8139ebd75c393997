"""What a transport provides: one send and one receipt lookup, counted at the boundary, and the
failures between (not sent, ambiguous)."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from types import MappingProxyType
from typing import Any

# What a reply to an event answers: a transport declares which of these it can serve.
ANSWERS_COMMENT = "comment"
ANSWERS_MESSAGE = "message"


# Calls that reached transport code in this process, by (transport name, operation):
# "build" (constructing one, which may discover capabilities over the network),
# "send" and "lookup". The canary counts these; it does not assume them.
CALLS: Counter = Counter()


def _counted(method, operation: str):
    @functools.wraps(method)
    def counted(self, *args, **kwargs):
        CALLS[(self.name, operation)] += 1
        return method(self, *args, **kwargs)

    return counted


@dataclass(frozen=True)
class Capabilities:
    """What the provider offers, which decides the recovery path (docs/concepts/ledgers.md#recovery)."""

    idempotency_key: bool
    receipt_lookup: bool


@dataclass(frozen=True)
class OutboundReply:
    """What the sender hands a transport: keys, destination and approved copy. Never logged."""

    reply_key: str
    event_key: str
    purpose: str
    channel: str
    copy_version: str
    text: str
    conversation_ref: str
    message_ref: str
    # The real address where the sender ref is opaque (a WhatsApp number): content, never logged.
    address: str = field(default="", repr=False)
    # The approved template to send instead of free-form text once `free_form_until` has passed
    # (a platform with a free-form window): {"name", "language", "parameters"}; None: text only.
    template: Mapping | None = None
    # Until when free-form text may go out (the buyer's last message + the platform's window).
    free_form_until: datetime | None = None


# How a reply goes out on a platform with a free-form window (message_form).
TEXT = "text"
TEMPLATE = "template"


def message_form(
    *, free_form_until: datetime | None, template: Mapping | None, now: datetime | None = None
) -> str:
    """How a reply goes out now: TEXT inside the window (or where none holds), TEMPLATE past it
    when the copy has one, "" when it cannot go out at all (past the window, no template)."""
    now = now or datetime.now(timezone.utc)
    if free_form_until is None or now < free_form_until:
        return TEXT
    return TEMPLATE if template_valid(template) else ""


def template_valid(template: Any) -> bool:
    """Whether an approved copy's template names what WhatsApp needs: a name and a language."""
    return (
        isinstance(template, Mapping)
        and isinstance(template.get("name"), str)
        and bool(template["name"].strip())
        and isinstance(template.get("language"), str)
        and bool(template["language"].strip())
        and all(isinstance(p, str) for p in template.get("parameters") or [])
    )


@dataclass(frozen=True)
class Receipt:
    provider_reply_id: str
    http_status: int | None = None


# A NotSent's code for a provider that paces sends: THROTTLED holds the whole account back (every
# worker skips it until the pause ends), RECIPIENT_THROTTLED only the reply to that one person
# (the account's replies to other people go on).
THROTTLED = "throttled"
RECIPIENT_THROTTLED = "recipient_throttled"


class SendFailure(Exception):
    """A send that returned no receipt; `code` is Conduit's own, safe to store and log."""

    def __init__(self, code: str, *, http_status: int | None = None) -> None:
        super().__init__(code)
        self.code = code
        self.http_status = http_status


class NotSent(SendFailure):
    """Nothing reached the provider, or it answered that it applied nothing: safe to retry."""

    def __init__(
        self, code: str, *, http_status: int | None = None, reached: bool = False, retryable: bool = True
    ) -> None:
        super().__init__(code, http_status=http_status)
        # reached: the provider answered (a definitive refusal), versus nothing left the process.
        self.reached = reached
        # Whether trying again can help (a refusal by a closed window or a dead token cannot).
        self.retryable = retryable


class Ambiguous(SendFailure):
    """The provider may have applied the reply: park it, never retry automatically."""

    def __init__(self, code: str, *, http_status: int | None = None, response: bool = False) -> None:
        super().__init__(code, http_status=http_status)
        self.response = response


class Transport:
    """Base for one provider. Subclasses set `name`, `live` and `capabilities`."""

    name: str = ""
    live: bool = True  # a transport is live unless it says otherwise
    capabilities = Capabilities(idempotency_key=False, receipt_lookup=False)
    # What a reply through this transport can answer (ANSWERS_COMMENT, ANSWERS_MESSAGE): planning
    # gives an event only the purposes whose route can answer its family.
    answers: frozenset[str] = frozenset({ANSWERS_COMMENT, ANSWERS_MESSAGE})
    # The adapters whose sources a route may send through this transport (None: any source's).
    adapters: frozenset[str] | None = None
    # What a sent reply leaves on the platform for a read-back to see ("comment" under the comment
    # answered, "message" to its author), matched against the account's own items; "" where the
    # provider keeps receipts by reply key instead.
    leaves: str = ""
    # The hosts a transport acting with the source's token may send to, as SourceAdapter's; None:
    # it carries no credential of the source.
    credential_hosts: tuple[str, ...] | None = None
    # False while a transport that discovers its capabilities could not: it
    # then reports the conservative capabilities and refuses to send.
    discovered: bool = True
    # The rule an evidence answer from this transport's error table is named by, and the table:
    # a reason token this transport stores -> applied | not_applied | not_established.
    evidence_rule: str = ""
    evidence_answers: Mapping[str, str] = MappingProxyType({})
    # How soon the platform reports a status of every message sent (WhatsApp's status webhooks),
    # or None where it reports none: a reply sent longer ago with no status is a finding.
    status_expected_within: timedelta | None = None

    def __init_subclass__(cls, **kwargs) -> None:
        # Every transport's entry points are counted, whoever calls them.
        super().__init_subclass__(**kwargs)
        for operation in ("send", "lookup"):
            if operation in cls.__dict__:
                setattr(cls, operation, _counted(cls.__dict__[operation], operation))
        if "__init__" in cls.__dict__:
            cls.__init__ = _counted(cls.__dict__["__init__"], "build")

    def send(self, reply: OutboundReply) -> Receipt:
        """Deliver once; pass reply.reply_key as the idempotency key when there is one."""
        raise NotImplementedError(".send() must be overridden.")

    def lookup(self, reply_key: str, reply: OutboundReply | None = None) -> Receipt | None:
        """The provider's receipt for this reply key, or None if it has none.

        `reply` is what was sent under the key, for a platform without one (Meta),
        where only the target and the text can find the reply again.
        """
        raise NotImplementedError(".lookup() must be overridden.")
