"""The Meta transports: a public comment reply and a private reply through the Graph API, each sent at most once.

    meta-comment-reply   Instagram  POST /{ig-comment-id}/replies   message=<text>        -> {"id"}
                         Facebook   POST /{comment-id}/comments     message=<text>        -> {"id"}
    meta-private-reply   both       POST /{node}/messages  recipient={"comment_id"}, message={"text"[, "metadata"]}
                                                                     -> {"recipient_id", "message_id"}

The reply's target is `OutboundReply.message_ref` (the comment id of a comment
event, conduit.providers.meta.webhook). The private reply's node is the
account that received the comment (`account_ref`), or `send_node` where the
token is a Page token for an Instagram account (Instagram through Facebook
Login sends from `/{page-id}/messages`). On Messenger `message.metadata`
carries the reply key, which the message echo returns (the correlation key;
Meta has no idempotency key). Instagram's metadata is undocumented: not sent.

Outcomes (docs/replies.md#outcomes): an answer with an id is a Receipt; a Graph error means
what conduit.providers.meta.errors says (not applied -> MetaNotSent with
`retryable`, already replied -> MetaReceipt with that evidence, anything else
-> Ambiguous); a request that may have left the process but got no readable
answer is Ambiguous; a connection that never opened is NotSent(reached=False).
The outcomes are conduit.providers.meta.reply_outcomes'; the receipt lookups,
conduit.providers.meta.receipt_lookup's.

Live unless the Graph URL is loopback (the Graph simulator): `live_for(url)`.
"""

from __future__ import annotations

import json
from types import MappingProxyType
from urllib.parse import quote, urlsplit

from conduit.loopback import loopback_address
from conduit.providers.base import (
    ANSWERS_COMMENT,
    Ambiguous,
    Capabilities,
    NotSent,
    OutboundReply,
    Receipt,
    Transport,
)
from conduit.providers.meta import errors
from conduit.providers.meta.graph import GRAPH_HOSTS, GraphCallFailed, GraphError, graph_request
from conduit.providers.meta.receipt_lookup import comment_reply_lookup, private_reply_lookup

# The outcomes and their evidence are read from here too (the sender's tests, planted faults).
from conduit.providers.meta.reply_outcomes import (  # noqa: F401
    _GRAPH_ID,
    ALREADY_REPLIED,
    PRIVATE_REPLY_CONVERSATION,
    REPLY_CREATED,
    REPLY_READ_BACK,
    MetaAmbiguous,
    MetaNotSent,
    MetaReceipt,
    _id_of,
)

TIMEOUT_SECONDS = 10.0
# A write's answer is a few ids.
SEND_MAX_BYTES = 64 * 1024
OBJECTS = ("instagram", "page")


def graph_host(url: str) -> str:
    """ "instagram" for the Instagram Graph host (or the simulator's /instagram prefix), else "facebook"."""
    parts = urlsplit(url)
    if parts.hostname == "graph.instagram.com" or parts.path.strip("/").split("/")[:1] == ["instagram"]:
        return "instagram"
    return "facebook"


def graph_url_checked(url: str, what: str) -> str:
    """`url` without its trailing slash, if a transport may talk to it: https:// with a host, or
    http:// on this host (a simulator). `what` names the transport in the refusal."""
    parts = urlsplit(url)
    if not (parts.scheme == "https" and parts.hostname) and loopback_address(url) is None:
        raise ValueError(f"{what} talks to an https:// Graph URL, or http:// on this host")
    return url.rstrip("/")


class _MetaReplyTransport(Transport):
    """What both Meta transports share: construction, the one Graph write, and its outcomes."""

    live = True  # the class answer (no URL known): live; an instance knows its URL
    # Built with the source's token, account and object (replies.transports passes them).
    source_bound = True
    credential_hosts = GRAPH_HOSTS
    # Both answer a comment: a public reply under it, or a private reply to its author. Neither
    # answers a DM (a private reply is an answer to a comment, not to a message).
    answers = frozenset({ANSWERS_COMMENT})
    # They answer Instagram's and Pages' comments, which only those sources have.
    adapters = frozenset({"meta-instagram", "meta-page"})
    # The `http-semantics` evidence model reads Meta's error table through this.
    evidence_rule = "http-semantics/meta-error-table"
    evidence_answers = MappingProxyType(errors.EVIDENCE_ANSWERS)

    def __init__(
        self,
        url: str,
        *,
        timeout: float = TIMEOUT_SECONDS,
        token: str = "",
        account_ref: str = "",
        object: str | None = None,
        send_node: str | None = None,
    ) -> None:
        self.url, self.timeout = graph_url_checked(url, "a Meta transport"), timeout
        self.live = self.live_for(url)
        self.host = graph_host(url)
        # The source's object decides the route; without it the host does (the Instagram host
        # serves Instagram only; the Facebook host is taken for a Page, which is wrong for
        # Instagram through Facebook Login: pass `object`).
        self.object = object or ("instagram" if self.host == "instagram" else "page")
        if self.object not in OBJECTS:
            raise ValueError(f"object is one of {OBJECTS}")
        # Never in repr, logs or failures: graph_request keeps it out of every error.
        self._token = token
        self.account_ref = account_ref
        self.send_node = send_node or account_ref
        self.capabilities = self._instance_capabilities()

    def _instance_capabilities(self) -> Capabilities:
        """What this instance offers (the class attribute is the answer without a URL)."""
        return type(self).capabilities

    @classmethod
    def live_for(cls, url: str) -> bool:
        """Whether a transport at this Graph URL reaches Meta: anything but a loopback http:// URL."""
        return loopback_address(url) is None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.object} at {self.url}>"

    # -- the write ------------------------------------------------------------------------

    def _write(self, reply: OutboundReply) -> tuple[str, dict[str, str]]:
        raise NotImplementedError("._write() must be overridden.")

    def _receipt_id(self, document: dict) -> str:
        raise NotImplementedError("._receipt_id() must be overridden.")

    def _target(self, reply: OutboundReply) -> str:
        if not _GRAPH_ID.fullmatch(reply.message_ref or ""):
            raise MetaNotSent(
                "reply_target_invalid", sentence="The reply's comment id is not a Graph id: nothing was sent."
            )
        return reply.message_ref

    def send(self, reply: OutboundReply) -> Receipt:
        if not self._token:
            # Nothing left the process; a person must set the source's token variable.
            raise MetaNotSent(
                "graph_token_unavailable",
                stop_source=True,
                sentence="The source has no access token in its environment variable: nothing was sent.",
            )
        path, params = self._write(reply)
        try:
            # Kept alive per worker thread and Graph host (conduit.providers.keepalive's guards).
            response = graph_request(
                method="POST",
                base_url=self.url,
                path=path,
                params=params,
                access_token=self._token,
                timeout=self.timeout,
                max_bytes=SEND_MAX_BYTES,
                keep_alive=True,
            )
        except GraphError as error:
            return self._refused(error, reply)
        except GraphCallFailed as failure:
            raise self._no_answer(failure) from None
        receipt_id = self._receipt_id(response.document)
        if not receipt_id:
            raise MetaAmbiguous(
                "unreadable_receipt",
                http_status=200,
                response=True,
                sentence="Meta answered without the reply's id: it may have been posted.",
            )
        return MetaReceipt(
            provider_reply_id=receipt_id,
            http_status=200,
            evidence=REPLY_CREATED,
            retry_after=response.usage_pause,
        )

    def _refused(self, error: GraphError, reply: OutboundReply) -> Receipt:
        # graph.py keeps none of Meta's text but `message_hint`, errors' own phrase for it.
        meant = errors.meaning(error.status, error.code, error.subcode, error.message_hint)
        if meant.outcome == errors.ALREADY_REPLIED:
            return MetaReceipt(
                provider_reply_id=f"already_replied:{reply.message_ref}",
                http_status=error.status,
                evidence=ALREADY_REPLIED,
            )
        if meant.applied_nothing:
            raise MetaNotSent(
                meant.reason,
                http_status=error.status,
                reached=True,
                retryable=meant.retryable,
                stop_source=meant.stop_source,
                retry_after=error.retry_after,
                sentence=meant.sentence,
            )
        raise MetaAmbiguous(meant.reason, http_status=error.status, response=True, sentence=meant.sentence)

    @staticmethod
    def _no_answer(failure: GraphCallFailed) -> NotSent | Ambiguous:
        if not failure.sent:
            if failure.kind == "url_refused":
                return MetaNotSent("graph_url_refused", sentence=failure.message)
            # The connection never opened: nothing left the process, so trying again is safe.
            return MetaNotSent("connect_failed", retryable=True, sentence=failure.message)
        if failure.kind == "timeout":
            return MetaAmbiguous(
                "timeout_after_request",
                sentence="Meta did not answer in time after the reply was sent: it may have been posted.",
            )
        if failure.kind in ("too_large", "malformed"):
            return MetaAmbiguous(
                "unreadable_receipt",
                response=True,
                sentence="Meta's answer could not be read: the reply may have been posted.",
            )
        return MetaAmbiguous(
            "connection_lost_after_request",
            sentence="The connection to Meta was lost after the reply was sent: it may have been posted.",
        )


class MetaCommentReplyTransport(_MetaReplyTransport):
    """A public reply on the comment's thread, as the account.

    Lookup reads the thread back for a reply by the account carrying the
    reply's text, attributed to this reply only where it cannot be another's
    (conduit.providers.meta.receipt_lookup.comment_reply_lookup).
    """

    name = "meta-comment-reply"
    capabilities = Capabilities(idempotency_key=False, receipt_lookup=True)
    leaves = "comment"

    def _write(self, reply: OutboundReply) -> tuple[str, dict[str, str]]:
        target = quote(self._target(reply), safe="")
        edge = "replies" if self.object == "instagram" else "comments"
        return f"{target}/{edge}", {"message": reply.text}

    def _receipt_id(self, document: dict) -> str:
        return _id_of(document.get("id"))

    def lookup(self, reply_key: str, reply: OutboundReply | None = None) -> Receipt | None:
        return comment_reply_lookup(self, reply_key, reply)


class MetaPrivateReplyTransport(_MetaReplyTransport):
    """A private reply to the comment's author (one per comment, within 7 days of the comment).

    Lookup: on Facebook the comment's `private_reply_conversation`
    (conduit.providers.meta.receipt_lookup.private_reply_lookup). On Instagram
    the only read is the Conversations API (the 20 newest messages with
    details, about 2 calls a second, no echoed metadata to match): declared as
    no lookup.
    """

    name = "meta-private-reply"
    leaves = "message"
    # The class answer is the conservative one; an instance for a Page says what it can do.
    capabilities = Capabilities(idempotency_key=False, receipt_lookup=False)

    def _instance_capabilities(self) -> Capabilities:
        return Capabilities(idempotency_key=False, receipt_lookup=self.object == "page")

    def _write(self, reply: OutboundReply) -> tuple[str, dict[str, str]]:
        target = self._target(reply)
        if not _GRAPH_ID.fullmatch(self.send_node or ""):
            raise MetaNotSent(
                "send_node_invalid", sentence="The source's account id is not a Graph id: nothing was sent."
            )
        message: dict[str, str] = {"text": reply.text}
        if self.object == "page":
            # Messenger returns metadata in the message echo: the reply key correlates it.
            message["metadata"] = reply.reply_key
        # The Send API takes its objects JSON-encoded as parameters.
        return f"{quote(self.send_node, safe='')}/messages", {
            "recipient": json.dumps({"comment_id": target}, separators=(",", ":")),
            "message": json.dumps(message, separators=(",", ":")),
        }

    def _receipt_id(self, document: dict) -> str:
        return _id_of(document.get("message_id"))

    def lookup(self, reply_key: str, reply: OutboundReply | None = None) -> Receipt | None:
        if not self.capabilities.receipt_lookup:
            raise NotImplementedError("Instagram private replies have no receipt lookup here")
        return private_reply_lookup(self, reply_key, reply)
