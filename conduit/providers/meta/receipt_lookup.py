"""Receipt lookup for the Meta transports: reading the Graph back for the reply a send may have left.

Meta has no idempotency key: a lookup reads the comment (its thread, or its
private reply conversation) and answers a MetaReceipt when the reply shows,
None when a complete read shows it absent, and raises MetaAmbiguous when it
cannot tell. Each transport's `lookup` calls one of the two lookups here;
what a lookup allows next is the recovery table's (docs/concepts/ledgers.md#recovery).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from conduit.providers.base import OutboundReply, Receipt
from conduit.providers.meta import errors
from conduit.providers.meta.graph import GraphCallFailed, GraphError, graph_request, next_params
from conduit.providers.meta.reply_outcomes import (
    _GRAPH_ID,
    PRIVATE_REPLY_CONVERSATION,
    REPLY_READ_BACK,
    MetaAmbiguous,
    MetaReceipt,
    _id_of,
)

if TYPE_CHECKING:
    from conduit.providers.meta.transport import _MetaReplyTransport

# A read-back page of replies is at most 50 comments.
LOOKUP_MAX_BYTES = 1024 * 1024
# Replies per page (Meta's cap on comment edges) and pages a lookup reads before it
# gives up: a thread longer than this cannot show absence, so the lookup cannot tell.
LOOKUP_PAGE_SIZE = 50
LOOKUP_MAX_PAGES = 40


def _text(value: Any) -> str:
    return " ".join(value.split()) if isinstance(value, str) else ""


def _cannot_tell(code: str, sentence: str) -> MetaAmbiguous:
    return MetaAmbiguous(code, sentence=sentence)


def _read(transport: _MetaReplyTransport, path: str, params: dict[str, str]) -> dict:
    if not transport._token:
        raise _cannot_tell("graph_token_unavailable", "The source has no access token: no lookup.")
    try:
        return graph_request(
            method="GET",
            base_url=transport.url,
            path=path,
            params=params,
            access_token=transport._token,
            timeout=transport.timeout,
            max_bytes=LOOKUP_MAX_BYTES,
        ).document
    except GraphError as error:
        # A read that failed shows nothing either way, whatever the code.
        raise MetaAmbiguous(
            f"lookup_failed_{errors.meaning(error.status, error.code, error.subcode).reason}",
            http_status=error.status,
            response=True,
            sentence="The read of the comment failed: no answer either way.",
        ) from None
    except GraphCallFailed as failure:
        raise MetaAmbiguous(
            f"lookup_failed_{failure.kind}",
            sentence="The read of the comment failed: no answer either way.",
        ) from None


def _lookup_target(reply_key: str, reply: OutboundReply | None) -> str:
    if reply is None or reply.reply_key != reply_key:
        # The reply key alone names no comment: without the reply there is nothing to read.
        raise _cannot_tell(
            "lookup_needs_reply",
            "A Meta lookup needs the reply (its comment and text), not only its key.",
        )
    if not _GRAPH_ID.fullmatch(reply.message_ref or ""):
        raise _cannot_tell("reply_target_invalid", "The reply's comment id is not a Graph id.")
    return reply.message_ref


def comment_reply_lookup(
    transport: _MetaReplyTransport, reply_key: str, reply: OutboundReply | None
) -> Receipt | None:
    """A public reply, read back from the thread (the comment's replies edge, every page): a reply
    by the account carrying the reply's text. A reply to a reply lands on the top-level comment's
    thread, where two actions with the same copy cannot be told apart, so a match is attributed to
    this reply only when the target is the top-level comment, exactly one reply by the account
    carries the text, and nobody else replied in the thread (whose comment could have had its own
    reply with the same copy). Absence, the read complete, is None."""
    target = _lookup_target(reply_key, reply)
    instagram = transport.object == "instagram"
    comment = _read(
        transport, quote(target, safe=""), {"fields": "id,parent_id" if instagram else "id,parent{id}"}
    )
    top = _id_of(comment.get("parent_id") if instagram else comment.get("parent")) or target
    fields = "id,text,from{id,username},parent_id" if instagram else "id,message,from{id,name},parent{id}"
    replies = _thread(transport, top, "replies" if instagram else "comments", fields)
    text_key = "text" if instagram else "message"
    mine = [r for r in replies if _id_of(r.get("from")) == transport.account_ref]
    matching = [r for r in mine if _text(r.get(text_key)) == _text(reply.text)]
    if not matching:
        return None  # the whole thread was read: no reply by the account carries this text
    others = [r for r in replies if _id_of(r.get("from")) != transport.account_ref]
    if len(matching) == 1 and top == target and not others and _id_of(matching[0].get("id")):
        return MetaReceipt(
            provider_reply_id=_id_of(matching[0].get("id")), http_status=200, evidence=REPLY_READ_BACK
        )
    raise _cannot_tell(
        "lookup_reply_not_attributable",
        "The thread holds a reply by the account with this text, but it cannot be told "
        "apart from another reply's: verify the thread by hand.",
    )


def _thread(transport: _MetaReplyTransport, top: str, edge: str, fields: str) -> list[dict]:
    """Every reply on the top-level comment's thread, every page, or cannot tell."""
    replies: list[dict] = []
    params = {"fields": fields, "limit": str(LOOKUP_PAGE_SIZE)}
    for _ in range(LOOKUP_MAX_PAGES):
        document = _read(transport, f"{quote(top, safe='')}/{edge}", params)
        data = document.get("data")
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise _cannot_tell("lookup_unreadable", "The thread's replies could not be read.")
        replies.extend(data)
        try:
            following = next_params(document)
        except ValueError:
            raise _cannot_tell("lookup_unreadable", "The thread's next page could not be followed.") from None
        if following is None:
            return replies
        params = {"fields": fields, "limit": str(LOOKUP_PAGE_SIZE), **following}
    raise _cannot_tell(
        "lookup_thread_too_long",
        f"The thread holds more than {LOOKUP_MAX_PAGES * LOOKUP_PAGE_SIZE} replies: verify it by hand.",
    )


def private_reply_lookup(
    transport: _MetaReplyTransport, reply_key: str, reply: OutboundReply | None
) -> Receipt | None:
    """A private reply on Facebook, read back from the comment's `private_reply_conversation`:
    it shows a private reply exists (at most one per comment, so it is this one); its absence is
    not taken as proof (a server that does not know the field omits it too), so the lookup then
    cannot tell."""
    target = _lookup_target(reply_key, reply)
    comment = _read(transport, quote(target, safe=""), {"fields": "id,private_reply_conversation"})
    conversation = _id_of(comment.get("private_reply_conversation"))
    if conversation:
        return MetaReceipt(
            provider_reply_id=conversation, http_status=200, evidence=PRIVATE_REPLY_CONVERSATION
        )
    raise _cannot_tell(
        "lookup_cannot_tell",
        "The comment shows no private reply conversation, which does not prove none was "
        "sent: verify the conversation by hand.",
    )
