"""A shared callback: one endpoint per platform app, for every account of the app (a platform's
adapters declare one; conduit.providers.base re-exports these names)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import TYPE_CHECKING, Mapping, Protocol, Sequence

if TYPE_CHECKING:
    from conduit.providers.base import Rejection


class CallbackEntry(Protocol):
    """One entry of a shared callback's body: the account it is for and its items, in the shape the
    account's adapter normalizes."""

    index: int
    account: str
    items: list


class CallbackBody(Protocol):
    """A shared callback's body split: the kind of body (`object`, one adapter of the app serving
    each kind) and its entries in body order."""

    object: str
    entries: Sequence[CallbackEntry]


class SharedCallback:
    """One endpoint per platform app (/webhooks/<platform>/<app id>/): a body verified against the
    secrets of the app's sources and split by entry to the source owning each account.

    A platform whose app posts for many accounts declares one on its adapters
    (`SourceAdapter.shared_callback`, each adapter serving one `object`); the apps
    ask it, never the platform's name.
    """

    platform: str = ""  # the path segment after /webhooks/, and the metrics and log label
    label: str = ""  # how people name the platform, in answers and messages
    app_id: re.Pattern = re.compile(r"[0-9]{1,32}")  # what an app id looks like
    proof_headers: tuple[str, ...] = ()  # the request headers the proof reads
    max_secrets: int = 2  # secrets a source may name at once (two while one is being changed)

    def handshake(self, query: Mapping[str, str]) -> tuple[str, str] | None:
        """(verify token, challenge) of a verification request's query, or None when it is none."""
        raise NotImplementedError(".handshake() must be overridden.")

    def split(self, body: bytes) -> CallbackBody | Rejection:
        """The body's object and entries, or why it cannot be read (a refusal of the whole body)."""
        raise NotImplementedError(".split() must be overridden.")

    def counter_name(self, *parts: str) -> str:
        """The name an ignored update is counted under, escaped and bounded."""
        raise NotImplementedError(".counter_name() must be overridden.")

    def user_request(self, value: str, secret: str) -> tuple[str, datetime]:
        """(user id, signing time) of a signed "app removed"/"delete my data" request; ProofError if not the app's."""
        raise NotImplementedError(".user_request() must be overridden.")

    def unsubscribe(self, *, account: str, base_url: str, token: str, timeout: float) -> tuple[str, bool]:
        """Stop the account's deliveries to the app: ("" or the refusal, whether the token was refused)."""
        raise NotImplementedError(".unsubscribe() must be overridden.")
