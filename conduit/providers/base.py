"""What a platform provides, in small protocols: a source adapter (proof, parsing, the field map),
a source reader (pages for reconciliation: conduit.providers.reading) and a transport (one send, one
receipt lookup: conduit.providers.transport); all three are named here.

Plain dataclasses in and out; no ORM and no app: apps import providers, never the reverse.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any, Mapping

from conduit.canonical import sha256_hex

# What a body holds besides events, kept as receipt evidence (a module of its own).
from conduit.providers.evidence import OwnItem, StatusItem, reply_text_digest  # noqa: E402, F401

# A source reader's pages and a transport's sends are modules of their own (reading, transport);
# their names are imported from here as well, as every platform and app does.
from conduit.providers.reading import (  # noqa: F401
    COMPLETE,
    LIMITED,
    MAX_FAILURE_MESSAGE_BYTES,
    MAX_PAGE_BYTES,
    NOT_RECOVERABLE,
    RECOVERY,
    Family,
    PageFailure,
    ProviderReceipt,
    SourcePage,
    SourceReader,
    one_line,
)
from conduit.providers.transport import (  # noqa: F401
    ANSWERS_COMMENT,
    ANSWERS_MESSAGE,
    CALLS,
    RECIPIENT_THROTTLED,
    TEMPLATE,
    TEXT,
    THROTTLED,
    Ambiguous,
    Capabilities,
    NotSent,
    OutboundReply,
    Receipt,
    SendFailure,
    Transport,
    message_form,
    template_valid,
)

# An occurred_at_original starting so is a stand-in time (the platform sent none with the
# item); a read of the source that shows the item's own time corrects it, never conflicts.
APPROXIMATE = "approx:"
# Identifiers are preserved exactly but bounded, so keys stay indexable.
MAX_REF_LENGTH = 200


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
    # The key a platform whose people are named by phone number hashes them with into opaque
    # sender refs (conduit.providers.whatsapp.webhook.sender_ref); never in repr or logs.
    ref_key: bytes = field(default=b"", repr=False)


@dataclass(frozen=True)
class Proof:
    delivery_id: str


@dataclass(frozen=True)
class Observation:
    """One event mapped onto the event contract (docs/concepts/event-contract.md#fields)."""

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
    # The comment it answers ("" on the post): the trigger rules read it, no key or contract does.
    parent_ref: str = field(default="", repr=False)
    # The author's display handle (Instagram's username, a Page commenter's name): buyer content,
    # retained beside the text and purged with it; no key, hash or contract reads it.
    handle: str = field(default="", repr=False)
    # Where a reply is addressed when the sender ref is opaque and the platform needs the real
    # address (a WhatsApp number): buyer content, retained and purged with the text.
    address: str = field(default="", repr=False)

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


NOT_CONTRACT = ("index", "text", "parent_ref", "handle", "address")
MAX_HANDLE_LENGTH = 200


def handle_of(value: Any) -> str:
    """An author's display handle as sent, or "" when absent or not text: a handle is shown and
    searched, never a reason to refuse an event."""
    if not isinstance(value, str):
        return ""
    return value.replace("\x00", "\ufffd")[:MAX_HANDLE_LENGTH]


# an observation's fields the event contract leaves out


@functools.cache
def _contract_names() -> tuple[str, ...]:
    return tuple(f.name for f in fields(Observation) if f.name not in NOT_CONTRACT)


@dataclass(frozen=True)
class Rejection:
    """Input that must go to quarantine; `index` is None when the whole body failed."""

    index: int | None
    reason_code: str
    detail: str


@dataclass(frozen=True)
class Parsed:
    observations: list[Observation]
    rejections: list[Rejection]
    # Self-authored items, recorded as evidence.
    own: list[OwnItem] = field(default_factory=list)
    # Updates outside the source's allowlist (unsubscribed fields, other event types),
    # counted by name and otherwise ignored.
    ignored: Counter = field(default_factory=Counter)
    # What became of messages the account sent, recorded as receipt evidence.
    statuses: list[StatusItem] = field(default_factory=list)


@dataclass(frozen=True)
class Ignored:
    """An update outside the allowlist: counted under `name`, never quarantined."""

    index: int
    name: str


def event_key(
    *,
    source_system: str,
    source_account_ref: str,
    event_type: str,
    source_event_id: str,
    conversation_ref: str,
    message_ref: str,
) -> str:
    """docs/concepts/keys.md#event-key: the provider event id when there is one, else a hash of stable refs.

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
    if (
        not observation.event_type
        or len(observation.event_type) > MAX_EVENT_TYPE_LENGTH
        or not observation.event_type.isprintable()
    ):
        return Rejection(
            index, "invalid_identity", f"the event type exceeds {MAX_EVENT_TYPE_LENGTH} characters"
        )
    if len(observation.event_key) > MAX_EVENT_KEY_LENGTH:
        return Rejection(
            index, "invalid_identity", f"the event key exceeds {MAX_EVENT_KEY_LENGTH} characters"
        )
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
    # The platform's event families (docs/concepts/reconciliation.md#families); a type not declared takes
    # `undeclared_family`'s answer.
    families: tuple[Family, ...] = ()
    # The hosts a source's access token may be sent to (its read URL's, over HTTPS); None when
    # the adapter's reads carry no credential. Plain HTTP on this host (a simulator) always may
    # (conduit.loopback.credential_url_refusal).
    credential_hosts: tuple[str, ...] | None = None
    # The app callback the platform delivers this adapter's bodies through, and the kind of body
    # (`object`) the adapter serves on it; None where each source has its own webhook.
    shared_callback: SharedCallback | None = None
    object: str = ""
    # How long after a comment a private reply to it may still be sent; None where no window holds.
    private_reply_window: timedelta | None = None
    # Documented send limits of an account, by transport name: (sends, window seconds).
    send_budgets: Mapping[str, tuple[int, int]] = MappingProxyType({})
    # The transport each purpose goes through unless routed otherwise (none: every purpose is routed).
    default_routes: Mapping[str, str] = MappingProxyType({})
    # How long after the buyer's last message free-form text may answer them; past it only an
    # approved template may (WhatsApp's customer service window). None: no such window.
    free_form_window: timedelta | None = None

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

    def default_budget(self, transport_name: str) -> tuple[int | None, int]:
        """The documented (limit, window seconds) of an account's sends through a transport; no
        documented number counts nothing (None) over an hour."""
        return self.send_budgets.get(transport_name, (None, 3600))

    def subscription_problem(
        self,
        *,
        account: str,
        app_id: str,
        event_types: frozenset[str],
        base_url: str,
        access_token: str,
        now: datetime,
        timeout: float,
    ) -> str:
        """What stops the platform delivering the account's events through its app callback (its
        subscription, its token's life), in Conduit's words, or "". Read by adapters with a
        shared callback; a platform without one has nothing to check."""
        return ""

    def comment_created_at(
        self, *, base_url: str, comment_ref: str, access_token: str, timeout: float
    ) -> datetime:
        """A comment's real creation time, read from the platform (its private-reply window starts
        there) where its webhook carried only an approximate one."""
        raise NotImplementedError(".comment_created_at() must be overridden.")

    def delivery_failure(self, error_code: str) -> str:
        """What the platform's code on a message it accepted and could not deliver means, in words."""
        return f"The platform could not deliver the message (code {error_code or 'none given'})."

    def parse_delivery(self, *, body: bytes, config: SourceConfig) -> Parsed:
        """`parse` behind the boundary: an input error refuses the whole body, never raises."""
        try:
            return self.parse(body=body, config=config)
        except INPUT_ERRORS as exc:
            return Parsed(
                [], [Rejection(None, "unparsable_body", f"the body could not be read ({type(exc).__name__})")]
            )

    def normalize(self, events: list[Any], account: str, config: SourceConfig) -> Parsed:
        """Map each event onto the contract: the one normalizer for webhooks and source reads."""
        observations: list[Observation] = []
        rejections: list[Rejection] = []
        own: list[OwnItem] = []
        statuses: list[StatusItem] = []
        ignored: Counter = Counter()
        for index, item in enumerate(events):
            try:
                result = self.observe(index, item, account, config)
            except INPUT_ERRORS as exc:
                result = Rejection(
                    index,
                    "invalid_body",
                    f"the event holds a value Conduit cannot represent ({type(exc).__name__})",
                )
            if isinstance(result, Observation):
                result = contract_refusal(result) or result
            if isinstance(result, Ignored):
                ignored[result.name] += 1
            elif isinstance(result, OwnItem):
                own.append(result)
            elif isinstance(result, StatusItem):
                statuses.append(result)
            else:
                (observations if isinstance(result, Observation) else rejections).append(result)
        return Parsed(observations, rejections, own, ignored, statuses)

    def observe(
        self, index: int, item: Any, account: str, config: SourceConfig
    ) -> Observation | Rejection | OwnItem | StatusItem | Ignored:
        """One event of a body or page mapped onto the contract, or why it cannot be."""
        raise NotImplementedError(".observe() must be overridden.")

    def verify(self, *, body: bytes, headers: Mapping[str, str], secret: str, now: datetime) -> Proof:
        raise NotImplementedError(".verify() must be overridden.")

    def parse(self, *, body: bytes, config: SourceConfig) -> Parsed:
        raise NotImplementedError(".parse() must be overridden.")

    def sign(self, *, body: bytes, secret: str, delivery_id: str, at: datetime) -> dict[str, str]:
        """Headers a sender would attach; used by fixtures, the canary and benchmarks."""
        raise NotImplementedError(".sign() must be overridden.")


# The shared callback's names, where adapters and apps have always found them.
from conduit.providers.callbacks import CallbackBody, CallbackEntry, SharedCallback  # noqa: E402, F401
