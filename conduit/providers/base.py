"""What a platform provides, in small protocols: a source adapter (proof, parsing, the field map),
a source reader (pages for reconciliation) and a transport (one send, one receipt lookup).

Plain dataclasses in and out; no ORM and no app: apps import providers, never the reverse.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, Mapping

from conduit.canonical import sha256_hex

# An occurred_at_original starting so is a stand-in time (the platform sent none with the
# item); a read of the source that shows the item's own time corrects it, never conflicts.
APPROXIMATE = "approx:"
# Identifiers are preserved exactly but bounded, so keys stay indexable.
MAX_REF_LENGTH = 200
# Seed 004's default bound on one encoded page.
MAX_PAGE_BYTES = 8 * 1024 * 1024


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object naming one key twice has no single meaning (parsers keep the first or the last)."""
    document = dict(pairs)
    if len(document) != len(pairs):
        raise ValueError("an object repeats a key")
    return document


def strict_json(body: bytes) -> Any:
    """A webhook body as JSON, strictly: UTF-8 only (json.loads(bytes) would also guess UTF-16
    and UTF-32), no NaN or Infinity, no object repeating a key.

    Raises ValueError (which covers UnicodeDecodeError and integers past the
    interpreter's digit limit) or RecursionError (nesting past its depth).
    """
    return json.loads(body.decode("utf-8"), parse_constant=_reject_constant, object_pairs_hook=_unique_keys)


class ProofError(Exception):
    """The source proof failed; `code` is stable and safe to return and log."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


class SecretUnavailable(Exception):
    """The source's secret is missing or malformed in the environment (operator error)."""


@dataclass(frozen=True)
class SourceConfig:
    """The trusted configuration an adapter may read; never taken from a payload."""

    name: str
    source_system: str
    account_ref: str
    event_types: frozenset[str]
    contract_version: str
    canary: bool
    # The token a reader presents to the platform, read from the environment variable the
    # source names (never stored); empty where the platform needs none.
    access_token: str = field(default="", repr=False)
    # When the account was connected: what occurred before is history, not new work.
    connected_at: datetime | None = None


@dataclass(frozen=True)
class Proof:
    delivery_id: str


@dataclass(frozen=True)
class Observation:
    """One event mapped onto the event contract (seed 000 step 1)."""

    index: int
    source_system: str
    source_account_ref: str
    source_event_id: str
    event_type: str
    conversation_ref: str
    message_ref: str
    sender_ref: str
    occurred_at: datetime
    occurred_at_original: str
    payload_hash: str
    contract_version: str
    canary: bool
    text: str = field(repr=False)

    def contract_values(self) -> dict[str, Any]:
        """The event contract's fields (not the batch index, not the retained text)."""
        return {name: getattr(self, name) for name in _contract_names()}

    # Computed once per observation (ingest and a scan's staging read it several times); a frozen
    # dataclass still takes it, as cached_property writes the instance's __dict__ directly.
    @functools.cached_property
    def event_key(self) -> str:
        return event_key(
            source_system=self.source_system,
            source_account_ref=self.source_account_ref,
            event_type=self.event_type,
            source_event_id=self.source_event_id,
            conversation_ref=self.conversation_ref,
            message_ref=self.message_ref,
        )


@functools.cache
def _contract_names() -> tuple[str, ...]:
    return tuple(f.name for f in fields(Observation) if f.name not in ("index", "text"))


@dataclass(frozen=True)
class Rejection:
    """Input that must go to quarantine; `index` is None when the whole body failed."""

    index: int | None
    reason_code: str
    detail: str


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


def reply_text_digest(text: str | None) -> str:
    """SHA-256 of a reply's text with its whitespace collapsed ("" for no text): the one form in
    which an approved copy and the account's own item read back are compared."""
    collapsed = " ".join(text.split()) if isinstance(text, str) else ""
    # surrogatepass: a lone surrogate (hostile input) still digests, never raises.
    return sha256_hex(collapsed.encode("utf-8", "surrogatepass")) if collapsed else ""


@dataclass(frozen=True)
class Parsed:
    observations: list[Observation]
    rejections: list[Rejection]
    # Self-authored items, recorded as evidence.
    own: list[OwnItem] = field(default_factory=list)
    # Updates outside the source's allowlist (unsubscribed fields, other event types),
    # counted by name and otherwise ignored.
    ignored: Counter = field(default_factory=Counter)


@dataclass(frozen=True)
class Ignored:
    """An update outside the allowlist: counted under `name`, never quarantined."""

    index: int
    name: str


@dataclass(frozen=True)
class ProviderReceipt:
    """A reply the provider shows applied to a source event (lookup by target)."""

    reply_key: str
    provider_reply_id: str
    event_key: str


@dataclass(frozen=True)
class SourcePage:
    """One page of a source read: its events normalized, and the replies applied to them."""

    scan_id: str
    observations: list[Observation]
    rejections: list[Rejection]
    receipts: list[ProviderReceipt]
    next_cursor: str | None
    complete: bool
    # The page's size as read off the wire, so a scan can bound what it stages (seed 004).
    size_bytes: int = 0
    # Self-authored items the read showed (receipt evidence, never events).
    own: list[OwnItem] = field(default_factory=list)


# Seed 004: "a message of at most 256 bytes on one line".
MAX_FAILURE_MESSAGE_BYTES = 256


def one_line(message: str, max_bytes: int = MAX_FAILURE_MESSAGE_BYTES) -> str:
    """`message` on one line (every run of whitespace or control characters one space), cut to
    `max_bytes` of UTF-8 at a character boundary, never inside a character."""
    printable = "".join(c if c.isprintable() else " " for c in message)
    line = " ".join(printable.split())
    encoded = line.encode("utf-8", "replace")  # a lone surrogate becomes "?"
    return encoded[:max_bytes].decode("utf-8", "ignore").rstrip()


class PageFailure(Exception):
    """A source page that could not be read.

    `error_class` and `code` are safe to store; `message` is one line of at most 256 bytes
    Conduit wrote itself. Provider text and credentials never enter any of them.
    """

    # Seed 004's classes: timeout (no page within the page timeout), cancelled (the page call
    # was cut short by the task's deadline or a shutdown), transport, protocol, provider and
    # unauthored; and credentials: the source's token was refused, a person must re-authorise it.
    CLASSES = ("timeout", "cancelled", "transport", "provider", "protocol", "unauthored", "credentials")

    def __init__(self, error_class: str, code: str, message: str, *, retry_after: float | None = None) -> None:
        if error_class not in self.CLASSES:
            raise ValueError(f"unknown page error class {error_class!r}")
        message = one_line(message)
        super().__init__(message)
        self.error_class = error_class
        self.code = code[:64]
        self.message = message
        # Seconds the provider asked us to wait (a throttling answer), or None.
        self.retry_after = retry_after


def event_key(
    *,
    source_system: str,
    source_account_ref: str,
    event_type: str,
    source_event_id: str,
    conversation_ref: str,
    message_ref: str,
) -> str:
    """Seed 000 step 1: the provider event id when there is one, else a hash of stable refs.

    Receipt time, display names and message text never enter a key.
    """
    if source_event_id:
        return f"{source_system}:{source_account_ref}:{event_type}:{source_event_id}"
    return sha256_hex(
        "|".join((source_system, source_account_ref, event_type, conversation_ref, message_ref))
    )


# What can go wrong turning hostile bytes into values: undecodable or unencodable
# text, numbers past float or digit limits, calendar overflow, nesting past the
# interpreter's depth. These are refusals of the input, never outages.
INPUT_ERRORS = (ValueError, OverflowError, RecursionError)

# The event contract's storage bounds: an observation past them is refused here,
# at the adapter's boundary, not by the database at write time.
MAX_EVENT_KEY_LENGTH = 512
MAX_EVENT_TYPE_LENGTH = 64
_REF_FIELDS = ("source_event_id", "conversation_ref", "message_ref", "sender_ref", "source_account_ref")


def contract_refusal(observation: Observation) -> Rejection | None:
    """Why an observation cannot be stored as the event contract says, or None.

    Every adapter's observations pass through here, so a new platform cannot
    hand the ledger a value the database would refuse.
    """
    index = observation.index
    for name in _REF_FIELDS:
        value = getattr(observation, name)
        if len(value) > MAX_REF_LENGTH or (value and not value.isprintable()):
            return Rejection(index, "invalid_identity", f"{name} is too long or not printable")
    if not observation.event_type or len(observation.event_type) > MAX_EVENT_TYPE_LENGTH \
            or not observation.event_type.isprintable():
        return Rejection(index, "invalid_identity", f"the event type exceeds {MAX_EVENT_TYPE_LENGTH} characters")
    if len(observation.event_key) > MAX_EVENT_KEY_LENGTH:
        return Rejection(index, "invalid_identity", f"the event key exceeds {MAX_EVENT_KEY_LENGTH} characters")
    if observation.occurred_at.tzinfo is None or len(observation.occurred_at_original) > 64:
        return Rejection(index, "invalid_occurred_at", "occurred_at must be an aware time")
    try:
        observation.text.encode("utf-8")
        observation.occurred_at_original.encode("utf-8")
    except UnicodeEncodeError:
        return Rejection(index, "invalid_body", "the event holds text that is not valid Unicode")
    if "\x00" in observation.text:
        return Rejection(index, "invalid_body", "the event text holds a NUL character")
    return None


# How far reading the source back recovers one event family (seed 004: "Every family must be
# declared recoverable or include a concrete loss limitation").
COMPLETE = "complete"  # the read shows every item: a missing one is recovered, an absent one unverified
LIMITED = "limited"  # the read recovers what it shows, but shows not everything: absence proves nothing
NOT_RECOVERABLE = "none"  # the read never shows this family: its loss limitation says what is lost
RECOVERY = (COMPLETE, LIMITED, NOT_RECOVERABLE)

# What a reply to an event answers: a transport declares which of these it can serve.
ANSWERS_COMMENT = "comment"
ANSWERS_MESSAGE = "message"


@dataclass(frozen=True)
class Family:
    """One event family of a platform: how reading back recovers it, what it loses, and what a
    reply to it would answer ("" = nothing: an edit, a hide or a removal never plans a reply)."""

    event_type: str
    recovery: str
    limitation: str = ""
    answers: str = ""

    def __post_init__(self) -> None:
        if self.recovery not in RECOVERY:
            raise ValueError(f"recovery is one of {RECOVERY}")
        if self.recovery != COMPLETE and not self.limitation:
            raise ValueError(f"{self.event_type}: a family not completely recoverable names its loss limitation")

    def as_dict(self) -> dict[str, str]:
        return {"event_type": self.event_type, "recovery": self.recovery, "limitation": self.limitation,
                "answers": self.answers or "nothing"}


class SourceReader:
    """Base for reading one platform's source evidence, page by page (seed 004).

    Mixed into a platform's adapter, whose `normalize` it uses, so a page's
    events get the webhook's own keys and hashes.
    """

    # Whether reading this source's evidence calls a system outside Conduit's host.
    live: bool = True
    # The transports whose receipts a complete read shows (absence then means "missing"); None:
    # every transport's, as where the provider keeps receipts by reply key. An action routed
    # through another transport is "not compared", never "missing".
    receipt_transports: frozenset[str] | None = None

    def read_page(
        self, *, config: SourceConfig, base_url: str, since: datetime | None,
        until: datetime | None, cursor: str | None, limit: int, timeout: float,
        checkpoint: datetime | None = None, max_bytes: int = MAX_PAGE_BYTES,
    ) -> SourcePage:
        """One page of the source's events in [since, until) (or after `cursor`).

        Raises PageFailure. A new generation (no cursor) receives the last
        complete checkpoint; a page larger than `max_bytes` is refused while it
        is read, never buffered whole.
        """
        raise NotImplementedError(".read_page() must be overridden.")


class SourceAdapter:
    """Base for one provider: subclasses implement proof, parsing and one event's mapping.

    The base owns the boundary: `parse_delivery` and `normalize` catch input
    errors by class and check every observation against the contract's bounds,
    so nothing a body holds can raise past the adapter.
    """

    name: str = ""
    source_system: str = ""
    # Whether a newly connected account's earlier events are history (recorded, never
    # planned): true of platforms whose accounts arrive with years of comments.
    backfills: bool = False
    # The platform's event families (seed 004's declaration); a type not declared takes
    # `undeclared_family`'s answer.
    families: tuple[Family, ...] = ()
    # The hosts a source's access token may be sent to (its read URL's, over HTTPS); None when
    # the adapter's reads carry no credential. Plain HTTP on this host (a simulator) always may
    # (conduit.loopback.credential_url_refusal).
    credential_hosts: tuple[str, ...] | None = None

    def family(self, event_type: str) -> Family:
        """The declared family of an event type, or the adapter's answer for an undeclared one."""
        for family in self.families:
            if family.event_type == event_type:
                return family
        return self.undeclared_family(event_type)

    def undeclared_family(self, event_type: str) -> Family:
        """An event type the platform does not declare: the conservative answer (never read back,
        never answered). A platform whose event types are the source's own choice overrides it."""
        return Family(event_type, NOT_RECOVERABLE, "an event type this platform does not declare")

    def parse_delivery(self, *, body: bytes, config: SourceConfig) -> Parsed:
        """`parse` behind the boundary: an input error refuses the whole body, never raises."""
        try:
            return self.parse(body=body, config=config)
        except INPUT_ERRORS as exc:
            return Parsed([], [Rejection(None, "unparsable_body",
                                         f"the body could not be read ({type(exc).__name__})")])

    def normalize(self, events: list[Any], account: str, config: SourceConfig) -> Parsed:
        """Map each event onto the contract: the one normalizer for webhooks and source reads."""
        observations: list[Observation] = []
        rejections: list[Rejection] = []
        own: list[OwnItem] = []
        ignored: Counter = Counter()
        for index, item in enumerate(events):
            try:
                result = self.observe(index, item, account, config)
            except INPUT_ERRORS as exc:
                result = Rejection(index, "invalid_body",
                                   f"the event holds a value Conduit cannot represent ({type(exc).__name__})")
            if isinstance(result, Observation):
                result = contract_refusal(result) or result
            if isinstance(result, Ignored):
                ignored[result.name] += 1
            elif isinstance(result, OwnItem):
                own.append(result)
            else:
                (observations if isinstance(result, Observation) else rejections).append(result)
        return Parsed(observations, rejections, own, ignored)

    def observe(
        self, index: int, item: Any, account: str, config: SourceConfig
    ) -> Observation | Rejection | OwnItem | Ignored:
        """One event of a body or page mapped onto the contract, or why it cannot be."""
        raise NotImplementedError(".observe() must be overridden.")

    def verify(
        self, *, body: bytes, headers: Mapping[str, str], secret: str, now: datetime
    ) -> Proof:
        raise NotImplementedError(".verify() must be overridden.")

    def parse(self, *, body: bytes, config: SourceConfig) -> Parsed:
        raise NotImplementedError(".parse() must be overridden.")

    def sign(self, *, body: bytes, secret: str, delivery_id: str, at: datetime) -> dict[str, str]:
        """Headers a sender would attach; used by fixtures, the canary and benchmarks."""
        raise NotImplementedError(".sign() must be overridden.")



# -- transports ---------------------------------------------------------------


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
    """What the provider offers, which decides the recovery path (seed 000 step 3)."""

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


@dataclass(frozen=True)
class Receipt:
    provider_reply_id: str
    http_status: int | None = None


class SendFailure(Exception):
    """A send that returned no receipt; `code` is Conduit's own, safe to store and log."""

    def __init__(self, code: str, *, http_status: int | None = None) -> None:
        super().__init__(code)
        self.code = code
        self.http_status = http_status


class NotSent(SendFailure):
    """Nothing reached the provider, or it answered that it applied nothing: safe to retry."""

    def __init__(self, code: str, *, http_status: int | None = None, reached: bool = False,
                 retryable: bool = True) -> None:
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
