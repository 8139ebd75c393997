"""What reading a source back provides: pages of its events and receipts, the failures of a page,
and each event family's declared recovery (docs/concepts/reconciliation.md#families)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conduit.providers.base import Observation, OwnItem, Rejection, SourceConfig

# The default bound on one encoded page (docs/concepts/reconciliation.md#limits).
MAX_PAGE_BYTES = 8 * 1024 * 1024


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
    # The page's size as read off the wire, so a scan can bound what it stages
    # (docs/concepts/reconciliation.md#limits).
    size_bytes: int = 0
    # Self-authored items the read showed (receipt evidence, never events).
    own: list[OwnItem] = field(default_factory=list)


# docs/concepts/reconciliation.md#page-failures: "a message of at most 256 bytes on one line".
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

    # The classes of docs/concepts/reconciliation.md#page-failures: timeout (no page within the
    # page timeout), cancelled (the page call was cut short by the task's deadline or a shutdown), transport, protocol, provider and
    # unauthored; and credentials: the source's token was refused, a person must re-authorise it.
    CLASSES = ("timeout", "cancelled", "transport", "provider", "protocol", "unauthored", "credentials")

    def __init__(
        self, error_class: str, code: str, message: str, *, retry_after: float | None = None
    ) -> None:
        if error_class not in self.CLASSES:
            raise ValueError(f"unknown page error class {error_class!r}")
        message = one_line(message)
        super().__init__(message)
        self.error_class = error_class
        self.code = code[:64]
        self.message = message
        # Seconds the provider asked us to wait (a throttling answer), or None.
        self.retry_after = retry_after


# How far reading the source back recovers one event family (docs/concepts/reconciliation.md#families:
# "Every family must be declared recoverable or include a concrete loss limitation").
COMPLETE = "complete"  # the read shows every item: a missing one is recovered, an absent one unverified
LIMITED = "limited"  # the read recovers what it shows, but shows not everything: absence proves nothing
NOT_RECOVERABLE = "none"  # the read never shows this family: its loss limitation says what is lost
RECOVERY = (COMPLETE, LIMITED, NOT_RECOVERABLE)


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
            raise ValueError(
                f"{self.event_type}: a family not completely recoverable names its loss limitation"
            )

    def as_dict(self) -> dict[str, str]:
        return {
            "event_type": self.event_type,
            "recovery": self.recovery,
            "limitation": self.limitation,
            "answers": self.answers or "nothing",
        }


@dataclass(frozen=True)
class PostSummary:
    """One of an account's posts, as a person picks it for a campaign: by what it is, not its id."""

    id: str
    caption: str  # its text's start; "" when it has none
    permalink: str
    published_at: datetime | None
    kind: str  # the platform's word for it (IMAGE, REELS, a Page post...)
    thumbnail: str = ""  # an https:// image of it where the platform gives one


class PostsUnavailable(Exception):
    """The platform's posts could not be listed; the message says why, in Conduit's words."""


class SourceReader:
    """Base for reading one platform's source evidence, page by page
    (docs/concepts/reconciliation.md#page-protocol).

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
        self,
        *,
        config: SourceConfig,
        base_url: str,
        since: datetime | None,
        until: datetime | None,
        cursor: str | None,
        limit: int,
        timeout: float,
        checkpoint: datetime | None = None,
        max_bytes: int = MAX_PAGE_BYTES,
    ) -> SourcePage:
        """One page of the source's events in [since, until) (or after `cursor`).

        Raises PageFailure. A new generation (no cursor) receives the last
        complete checkpoint; a page larger than `max_bytes` is refused while it
        is read, never buffered whole.
        """
        raise NotImplementedError(".read_page() must be overridden.")

    def recent_posts(
        self, *, config: SourceConfig, base_url: str, limit: int, timeout: float
    ) -> list[PostSummary]:
        """The account's most recent posts or media, newest first (at most `limit`).
        Raises PostsUnavailable."""
        raise PostsUnavailable("this platform does not list its posts: give their ids")
