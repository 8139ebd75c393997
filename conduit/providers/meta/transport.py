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

Outcomes (seed 000): an answer with an id is a Receipt; a Graph error means
what conduit.providers.meta.errors says (not applied -> MetaNotSent with
`retryable`, already replied -> MetaReceipt with that evidence, anything else
-> Ambiguous); a request that may have left the process but got no readable
answer is Ambiguous; a connection that never opened is NotSent(reached=False).

Live unless the Graph URL is loopback (the Graph simulator): `live_for(url)`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from conduit.loopback import loopback_address
from conduit.providers.base import (
    ANSWERS_COMMENT,
    MAX_REF_LENGTH,
    Ambiguous,
    Capabilities,
    NotSent,
    OutboundReply,
    Receipt,
    Transport,
)
from conduit.providers.meta import errors
from conduit.providers.meta.graph import GRAPH_HOSTS, GraphCallFailed, GraphError, graph_request, next_params

TIMEOUT_SECONDS = 10.0
# A write's answer is a few ids; a read-back page of replies is at most 50 comments.
SEND_MAX_BYTES = 64 * 1024
LOOKUP_MAX_BYTES = 1024 * 1024
# Replies per page (Meta's cap on comment edges) and pages a lookup reads before it
# gives up: a thread longer than this cannot show absence, so the lookup cannot tell.
LOOKUP_PAGE_SIZE = 50
LOOKUP_MAX_PAGES = 40
OBJECTS = ("instagram", "page")
# Graph ids as Meta sends them: digits (Instagram, 17-18 of them), <page>_<post> and
# <post>_<comment> (Facebook), `m_...` Messenger mids and base64url-like Instagram message ids
# of about 164 characters (`aWdf...`, the private reply's `message_id`), up to the event
# contract's bound on a ref; anything else is not an id this transport puts in a path or keeps.
_GRAPH_ID = re.compile(r"[0-9A-Za-z_.:\-=]{1,%d}" % MAX_REF_LENGTH)

# Evidence a receipt carries: what shows the reply exists.
REPLY_CREATED = "reply_created"            # Meta answered the write with the new id
ALREADY_REPLIED = "already_replied"        # Meta answered that the comment already holds a reply
REPLY_READ_BACK = "reply_read_back"        # the comment's replies show it (lookup)
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

    def __init__(self, code: str, *, http_status: int | None = None, reached: bool = False,
                 retryable: bool = False, stop_source: bool = False, retry_after: float | None = None,
                 sentence: str = "") -> None:
        super().__init__(code, http_status=http_status, reached=reached)
        self.retryable = retryable
        self.stop_source = stop_source
        self.retry_after = retry_after
        self.sentence = sentence


class MetaAmbiguous(Ambiguous):
    """Meta may hold the reply (or a lookup cannot tell): `sentence` is what a person reads."""

    def __init__(self, code: str, *, http_status: int | None = None, response: bool = False,
                 sentence: str = "") -> None:
        super().__init__(code, http_status=http_status, response=response)
        self.sentence = sentence


def graph_host(url: str) -> str:
    """"instagram" for the Instagram Graph host (or the simulator's /instagram prefix), else "facebook"."""
    parts = urlsplit(url)
    if parts.hostname == "graph.instagram.com" or parts.path.strip("/").split("/")[:1] == ["instagram"]:
        return "instagram"
    return "facebook"


def _text(value: Any) -> str:
    return " ".join(value.split()) if isinstance(value, str) else ""


def _id_of(value: Any) -> str:
    """An id from a Graph value: the string itself, or a node's `id`."""
    if isinstance(value, dict):
        value = value.get("id")
    return value if isinstance(value, str) and _GRAPH_ID.fullmatch(value) else ""


class _MetaReplyTransport(Transport):
    """What both Meta transports share: construction, the one Graph write, and its outcomes."""

    live = True  # the class answer (no URL known): live; an instance knows its URL
    # Built with the source's token, account and object (replies.transports passes them).
    source_bound = True
    credential_hosts = GRAPH_HOSTS
    # Both answer a comment: a public reply under it, or a private reply to its author. Neither
    # answers a DM (a private reply is an answer to a comment, not to a message).
    answers = frozenset({ANSWERS_COMMENT})

    def __init__(self, url: str, *, timeout: float = TIMEOUT_SECONDS, token: str = "", account_ref: str = "",
                 object: str | None = None, send_node: str | None = None) -> None:
        parts = urlsplit(url)
        if not (parts.scheme == "https" and parts.hostname) and loopback_address(url) is None:
            raise ValueError("a Meta transport talks to an https:// Graph URL, or http:// on this host")
        self.url, self.timeout = url.rstrip("/"), timeout
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
            raise MetaNotSent("reply_target_invalid",
                              sentence="The reply's comment id is not a Graph id: nothing was sent.")
        return reply.message_ref

    def send(self, reply: OutboundReply) -> Receipt:
        if not self._token:
            # Nothing left the process; a person must set the source's token variable.
            raise MetaNotSent("graph_token_unavailable", stop_source=True,
                              sentence="The source has no access token in its environment variable: "
                                       "nothing was sent.")
        path, params = self._write(reply)
        try:
            # Kept alive per worker thread and Graph host (conduit.providers.keepalive's guards).
            response = graph_request(method="POST", base_url=self.url, path=path, params=params,
                                     access_token=self._token, timeout=self.timeout, max_bytes=SEND_MAX_BYTES,
                                     keep_alive=True)
        except GraphError as error:
            return self._refused(error, reply)
        except GraphCallFailed as failure:
            raise self._no_answer(failure) from None
        receipt_id = self._receipt_id(response.document)
        if not receipt_id:
            raise MetaAmbiguous("unreadable_receipt", http_status=200, response=True,
                                sentence="Meta answered without the reply's id: it may have been posted.")
        return MetaReceipt(provider_reply_id=receipt_id, http_status=200, evidence=REPLY_CREATED,
                           retry_after=response.usage_pause)

    def _refused(self, error: GraphError, reply: OutboundReply) -> Receipt:
        # graph.py keeps none of Meta's text but `message_hint`, errors' own phrase for it.
        meant = errors.meaning(error.status, error.code, error.subcode, error.message_hint)
        if meant.outcome == errors.ALREADY_REPLIED:
            return MetaReceipt(provider_reply_id=f"already_replied:{reply.message_ref}",
                               http_status=error.status, evidence=ALREADY_REPLIED)
        if meant.applied_nothing:
            raise MetaNotSent(meant.reason, http_status=error.status, reached=True, retryable=meant.retryable,
                              stop_source=meant.stop_source, retry_after=error.retry_after,
                              sentence=meant.sentence)
        raise MetaAmbiguous(meant.reason, http_status=error.status, response=True, sentence=meant.sentence)

    @staticmethod
    def _no_answer(failure: GraphCallFailed) -> NotSent | Ambiguous:
        if not failure.sent:
            if failure.kind == "url_refused":
                return MetaNotSent("graph_url_refused", sentence=failure.message)
            # The connection never opened: nothing left the process, so trying again is safe.
            return MetaNotSent("connect_failed", retryable=True, sentence=failure.message)
        if failure.kind == "timeout":
            return MetaAmbiguous("timeout_after_request", sentence="Meta did not answer in time after the "
                                 "reply was sent: it may have been posted.")
        if failure.kind in ("too_large", "malformed"):
            return MetaAmbiguous("unreadable_receipt", response=True,
                                 sentence="Meta's answer could not be read: the reply may have been posted.")
        return MetaAmbiguous("connection_lost_after_request", sentence="The connection to Meta was lost "
                             "after the reply was sent: it may have been posted.")

    # -- reads for a lookup ---------------------------------------------------------------

    @staticmethod
    def _cannot_tell(code: str, sentence: str) -> MetaAmbiguous:
        return MetaAmbiguous(code, sentence=sentence)

    def _read(self, path: str, params: dict[str, str]) -> dict:
        if not self._token:
            raise self._cannot_tell("graph_token_unavailable", "The source has no access token: no lookup.")
        try:
            return graph_request(method="GET", base_url=self.url, path=path, params=params,
                                 access_token=self._token, timeout=self.timeout,
                                 max_bytes=LOOKUP_MAX_BYTES).document
        except GraphError as error:
            # A read that failed shows nothing either way, whatever the code.
            raise MetaAmbiguous(f"lookup_failed_{errors.meaning(error.status, error.code, error.subcode).reason}",
                                http_status=error.status, response=True,
                                sentence="The read of the comment failed: no answer either way.") from None
        except GraphCallFailed as failure:
            raise MetaAmbiguous(f"lookup_failed_{failure.kind}",
                                sentence="The read of the comment failed: no answer either way.") from None

    def _lookup_target(self, reply_key: str, reply: OutboundReply | None) -> str:
        if reply is None or reply.reply_key != reply_key:
            # The reply key alone names no comment: without the reply there is nothing to read.
            raise self._cannot_tell("lookup_needs_reply",
                                    "A Meta lookup needs the reply (its comment and text), not only its key.")
        if not _GRAPH_ID.fullmatch(reply.message_ref or ""):
            raise self._cannot_tell("reply_target_invalid", "The reply's comment id is not a Graph id.")
        return reply.message_ref


class MetaCommentReplyTransport(_MetaReplyTransport):
    """A public reply on the comment's thread, as the account.

    Lookup reads the thread (the comment's replies edge, every page) for a
    reply by the account carrying the reply's text. A reply to a reply lands
    on the top-level comment's thread, where two actions with the same copy
    cannot be told apart, so a match is attributed to this reply only when the
    target is the top-level comment, exactly one reply by the account carries
    the text, and nobody else replied in the thread (whose comment could have
    had its own reply with the same copy). Absence, the read complete, is None.
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
        target = self._lookup_target(reply_key, reply)
        instagram = self.object == "instagram"
        comment = self._read(quote(target, safe=""), {"fields": "id,parent_id" if instagram else "id,parent{id}"})
        top = _id_of(comment.get("parent_id") if instagram else comment.get("parent")) or target
        fields = ("id,text,from{id,username},parent_id" if instagram
                  else "id,message,from{id,name},parent{id}")
        replies = self._thread(top, "replies" if instagram else "comments", fields)
        text_key = "text" if instagram else "message"
        mine = [r for r in replies if _id_of(r.get("from")) == self.account_ref]
        matching = [r for r in mine if _text(r.get(text_key)) == _text(reply.text)]
        if not matching:
            return None  # the whole thread was read: no reply by the account carries this text
        others = [r for r in replies if _id_of(r.get("from")) != self.account_ref]
        if len(matching) == 1 and top == target and not others and _id_of(matching[0].get("id")):
            return MetaReceipt(provider_reply_id=_id_of(matching[0].get("id")), http_status=200,
                               evidence=REPLY_READ_BACK)
        raise self._cannot_tell("lookup_reply_not_attributable",
                                "The thread holds a reply by the account with this text, but it cannot be told "
                                "apart from another reply's: verify the thread by hand.")

    def _thread(self, top: str, edge: str, fields: str) -> list[dict]:
        """Every reply on the top-level comment's thread, every page, or cannot tell."""
        replies: list[dict] = []
        params = {"fields": fields, "limit": str(LOOKUP_PAGE_SIZE)}
        for _ in range(LOOKUP_MAX_PAGES):
            document = self._read(f"{quote(top, safe='')}/{edge}", params)
            data = document.get("data")
            if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
                raise self._cannot_tell("lookup_unreadable", "The thread's replies could not be read.")
            replies.extend(data)
            try:
                following = next_params(document)
            except ValueError:
                raise self._cannot_tell("lookup_unreadable", "The thread's next page could not be followed.") \
                    from None
            if following is None:
                return replies
            params = {"fields": fields, "limit": str(LOOKUP_PAGE_SIZE), **following}
        raise self._cannot_tell("lookup_thread_too_long",
                                f"The thread holds more than {LOOKUP_MAX_PAGES * LOOKUP_PAGE_SIZE} replies: "
                                "verify it by hand.")


class MetaPrivateReplyTransport(_MetaReplyTransport):
    """A private reply to the comment's author (one per comment, within 7 days of the comment).

    Lookup: on Facebook the comment's `private_reply_conversation` shows a
    private reply exists (at most one per comment, so it is this one); its
    absence is not taken as proof (a server that does not know the field
    omits it too), so the lookup then cannot tell. On Instagram the only read
    is the Conversations API (the 20 newest messages with details, about 2
    calls a second, no echoed metadata to match): declared as no lookup.
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
            raise MetaNotSent("send_node_invalid",
                              sentence="The source's account id is not a Graph id: nothing was sent.")
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
        target = self._lookup_target(reply_key, reply)
        comment = self._read(quote(target, safe=""), {"fields": "id,private_reply_conversation"})
        conversation = _id_of(comment.get("private_reply_conversation"))
        if conversation:
            return MetaReceipt(provider_reply_id=conversation, http_status=200,
                               evidence=PRIVATE_REPLY_CONVERSATION)
        raise self._cannot_tell("lookup_cannot_tell",
                                "The comment shows no private reply conversation, which does not prove none was "
                                "sent: verify the conversation by hand.")
