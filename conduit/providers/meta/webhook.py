"""Meta webhooks: the adapters and the frozen field maps they hold to.

One Meta app posts every subscribed object (`instagram`, `page`) to one
callback, so the body is split by entry (conduit.providers.meta.webhook_body)
and each entry is routed to the source that owns its account
(ingress.services.meta_webhook_receive); its X-Hub-Signature-256 proof is
conduit.providers.meta.webhook_proof's. Each item of an entry (a change, a
messaging event) is then mapped onto the event contract by `observe`, the one
normalizer the webhook and the Graph read-back (conduit.providers.meta.reader)
share.

The field maps (contract version `meta-v1`, frozen: a change is a new version):

| object.field | item | event type | key (`<adapter>:<account>:<type>:<id>`) | refs |
| --- | --- | --- | --- | --- |
| instagram.comments, instagram.live_comments | a comment | comment.created | comment id | conversation: media id; message: comment id; sender: from.id |
| page.feed, item comment, verb add | a comment | comment.created | comment_id | conversation: post_id; message: comment_id; sender: from.id |
| page.feed, verb edited | an edit | comment.edited | `<comment_id>@<sha256(message)[:16]>` | as above |
| page.feed, verb remove | a removal | comment.removed | comment_id | as above |
| page.feed, verb hide / unhide | a moderation | comment.hidden / comment.unhidden | `<comment_id>@<created_time or entry time>` | as above |
| messaging, standby (both objects); instagram.messages changes | a message | message.created | mid | conversation: sender.id; message: mid; sender: sender.id |

The payload hash covers only what the webhook and the read-back both carry
(ids, author id, text), so the two paths agree on one comment; times are
metadata. An Instagram comment notification carries no creation time: the
entry's `time` stands in, marked approximate in `occurred_at_original`
(`approx:entry.time=<seconds>`), and reconciliation corrects it from the
comment's `timestamp` without a conflict.

Self-authored items (the account's own comments, echoes of its messages) are
returned as OwnItem, receipt evidence, never events, with the digest of their
text (reply_text_digest) so a receipt is matched to the approved copy. Anything
else (another field, item or verb, an event type the source does not allowlist)
is Ignored: counted per source under a name that is escaped and bounded
(`counter_name`), never quarantined.

The boundary: whatever leaves an authentic body holds (a number where a list
goes, a list where a word goes, a time past the calendar, a lone surrogate or
a NUL in a name), each item ends an Observation, an OwnItem, an Ignored or a
Rejection; nothing a body sends raises past `body_split` and `observe`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Mapping

from conduit.canonical import payload_hash, sha256_hex
from conduit.providers.base import (
    APPROXIMATE as APPROXIMATE_MARK,
)
from conduit.providers.base import (
    Ignored,
    Observation,
    OwnItem,
    Parsed,
    Proof,
    Rejection,
    SourceAdapter,
    SourceConfig,
    handle_of,
    reply_text_digest,
)

# The body's bounds and split, and the proof's header, are read from here too (ingress, settings).
from conduit.providers.meta.webhook_body import (  # noqa: F401
    MAX_BODY_BYTES,
    MAX_UPDATES_PER_BODY,
    MetaBody,
    body_split,
)
from conduit.providers.meta.webhook_proof import (  # noqa: F401
    SIGNATURE_HEADER,
    signature_header,
    verify_signature,
)

# The adapters call these by their names in this module (a fault planted in `webhook._time`
# reaches every item they map).
from conduit.providers.meta.webhook_values import _correlation, _ref, _text, _time, counter_name

CONTRACT_VERSION = "meta-v1"
APPROXIMATE = APPROXIMATE_MARK + "entry.time="

COMMENT_VERBS = {
    "add": "comment.created",
    "edited": "comment.edited",
    "remove": "comment.removed",
    "hide": "comment.hidden",
    "unhide": "comment.unhidden",
}
EVENT_TYPES = (
    "comment.created",
    "comment.edited",
    "comment.removed",
    "comment.hidden",
    "comment.unhidden",
    "message.created",
)


def _entry_time(item: dict) -> tuple[datetime, str] | None:
    """The entry's time standing in for an item's own, marked approximate; None without one."""
    entry_time = item.get("entry_time")
    when = _time(entry_time) if isinstance(entry_time, int) else None
    return None if when is None else (when[0], f"{APPROXIMATE}{when[1]}")


class MetaWebhookAdapter(SourceAdapter):
    """What Instagram and Page sources share: the proof, and the messaging map."""

    object: str = ""
    # A connected account's history is recorded, never planned (before_connection).
    backfills = True

    def verify(self, *, body: bytes, headers: Mapping[str, str], secret: str, now: datetime) -> Proof:
        return verify_signature(body=body, headers=headers, secret=secret)

    def sign(
        self, *, body: bytes, secret: str, delivery_id: str = "", at: datetime | None = None
    ) -> dict[str, str]:
        return {"X-Hub-Signature-256": signature_header(body=body, secret=secret)}

    def parse(self, *, body: bytes, config: SourceConfig) -> Parsed:
        """One source's view of a body: its entries only (used by fixtures and tests)."""
        split = body_split(body)
        if isinstance(split, Rejection):
            return Parsed([], [split])
        items = [
            item for entry in split.entries if entry.account == config.account_ref for item in entry.items
        ]
        return self.normalize(items, config.account_ref, config)

    def observe(self, index: int, item: Any, account: str, config: SourceConfig):
        if not isinstance(item, dict):
            return Rejection(index, "invalid_body", "each update must be an object")
        field, value = item.get("field", ""), item.get("value")
        field = field if isinstance(field, str) else ""
        if field in ("messaging", "standby") or (field == "messages" and self.object == "instagram"):
            return self._message(index, value, account, config, item.get("entry_time"))
        return self.change(index, field, value, account, config, item)

    def change(self, index: int, field: str, value: Any, account: str, config: SourceConfig, item: dict):
        return Ignored(index, counter_name(self.object, field))

    def _observation(
        self,
        *,
        index: int,
        account: str,
        config: SourceConfig,
        event_type: str,
        event_id: str,
        conversation: str,
        message: str,
        sender: str,
        occurred: datetime,
        original: str,
        hashed: dict,
        text: str,
        parent: str = "",
        handle: Any = None,
    ) -> Observation:
        return Observation(
            index=index,
            source_system=self.source_system,
            source_account_ref=account,
            source_event_id=event_id,
            event_type=event_type,
            conversation_ref=conversation,
            message_ref=message,
            sender_ref=sender,
            occurred_at=occurred,
            occurred_at_original=original[:64],
            payload_hash=payload_hash(hashed),
            contract_version=config.contract_version,
            canary=config.canary,
            text=text.replace("\x00", "\ufffd"),
            parent_ref=parent,
            handle=handle_of(handle),
        )

    def _message(self, index: int, event: Any, account: str, config: SourceConfig, entry_time: Any):
        if not isinstance(event, dict):
            return Rejection(index, "invalid_body", "each messaging event must be an object")
        message = event.get("message")
        if not isinstance(message, dict):
            # Reads, deliveries, reactions, postbacks: not messages.
            kinds = [
                k for k in ("read", "delivery", "reaction", "postback", "referral", "optin") if k in event
            ]
            return Ignored(index, f"messaging.{kinds[0] if kinds else 'other'}")
        sender = _ref(
            (event.get("sender") or {}).get("id") if isinstance(event.get("sender"), dict) else None
        )
        recipient = _ref(
            (event.get("recipient") or {}).get("id") if isinstance(event.get("recipient"), dict) else None
        )
        mid = _ref(message.get("mid"))
        if sender is None or recipient is None or mid is None:
            return Rejection(index, "missing_identity", "a message needs sender.id, recipient.id and mid")
        when = _time(event.get("timestamp"))
        if when is None:
            return Rejection(index, "invalid_occurred_at", "a message needs its timestamp (milliseconds)")
        text = _text(message.get("text"))
        if text is None:
            return Rejection(index, "invalid_body", "message.text must be a string")
        if message.get("is_echo") is True or sender == account:
            return OwnItem(
                index,
                "message",
                mid,
                recipient,
                _correlation(message.get("metadata")),
                when[0],
                text_digest=reply_text_digest(text),
            )
        if message.get("is_deleted") is True:
            return Ignored(index, "messaging.deleted")
        if "message.created" not in config.event_types:
            return Ignored(index, "message.created")
        return self._observation(
            index=index,
            account=account,
            config=config,
            event_type="message.created",
            event_id=mid,
            conversation=sender,
            message=mid,
            sender=sender,
            occurred=when[0],
            original=when[1],
            hashed={"mid": mid, "sender_id": sender, "recipient_id": recipient, "text": text},
            text=text,
        )


class MetaInstagramWebhook(MetaWebhookAdapter):
    name = "meta-instagram"
    source_system = "meta-instagram"
    object = "instagram"
    # Instagram Login's host; an account connected through Facebook Login reads graph.facebook.com.
    graph_host = "https://graph.instagram.com"

    def change(self, index, field, value, account, config, item):
        if field not in ("comments", "live_comments"):
            return Ignored(index, counter_name("instagram", field))
        if not isinstance(value, dict):
            return Rejection(index, "invalid_body", "a comment change needs a value object")
        author = value.get("from") if isinstance(value.get("from"), dict) else {}
        media = value.get("media") if isinstance(value.get("media"), dict) else {}
        comment, sender, media_id = _ref(value.get("id")), _ref(author.get("id")), _ref(media.get("id"))
        if comment is None or sender is None or media_id is None:
            return Rejection(index, "missing_identity", "a comment needs id, from.id and media.id")
        parent = _ref(value.get("parent_id")) if value.get("parent_id") is not None else ""
        if parent is None:
            return Rejection(index, "invalid_identity", "parent_id must be an identifier")
        text = _text(value.get("text"))
        if text is None:
            return Rejection(index, "invalid_body", "text must be a string")
        # The read-back carries the comment's own time; a notification only the entry's.
        if value.get("timestamp") is not None:
            when = _time(value.get("timestamp"))
        else:
            when = _entry_time(item)
        if when is None:
            return Rejection(index, "invalid_occurred_at", "the comment's time is missing or not a time")
        if sender == account:
            return OwnItem(
                index,
                "comment",
                comment,
                parent or media_id,
                "",
                when[0],
                text_digest=reply_text_digest(text),
            )
        if "comment.created" not in config.event_types:
            return Ignored(index, "comment.created")
        return self._observation(
            index=index,
            account=account,
            config=config,
            event_type="comment.created",
            event_id=comment,
            conversation=media_id,
            message=comment,
            sender=sender,
            occurred=when[0],
            original=when[1],
            hashed={
                "id": comment,
                "from_id": sender,
                "media_id": media_id,
                "parent_id": parent,
                "text": text,
            },
            text=text,
            parent=parent,
            handle=author.get("username"),
        )


class MetaPageWebhook(MetaWebhookAdapter):
    name = "meta-page"
    source_system = "meta-page"
    object = "page"
    graph_host = "https://graph.facebook.com"

    def change(self, index, field, value, account, config, item):
        if field != "feed":
            return Ignored(index, counter_name("page", field))
        if not isinstance(value, dict):
            return Rejection(index, "invalid_body", "a feed change needs a value object")
        kind = value.get("item")
        if kind != "comment":
            return Ignored(index, counter_name("page.feed", kind if isinstance(kind, str) else "other"))
        # A verb is looked up only as a string: a list or an object is no verb (and unhashable).
        verb = value.get("verb")
        event_type = COMMENT_VERBS.get(verb) if isinstance(verb, str) else None
        if event_type is None:
            return Ignored(
                index, counter_name("page.feed.comment", verb if isinstance(verb, str) else "other")
            )
        author = value.get("from") if isinstance(value.get("from"), dict) else {}
        comment, post, sender = (
            _ref(value.get("comment_id")),
            _ref(value.get("post_id")),
            _ref(author.get("id")),
        )
        if comment is None or post is None or sender is None:
            return Rejection(index, "missing_identity", "a comment needs comment_id, post_id and from.id")
        parent = _ref(value.get("parent_id")) if value.get("parent_id") is not None else post
        if parent is None:
            return Rejection(index, "invalid_identity", "parent_id must be an identifier")
        text = _text(value.get("message"))
        if text is None:
            return Rejection(index, "invalid_body", "message must be a string")
        # A time sent but unreadable refuses the comment; a comment sent without one takes the entry's.
        created = value.get("created_time")
        when = _time(created) if created is not None else _entry_time(item)
        if when is None:
            return Rejection(index, "invalid_occurred_at", "created_time is missing or not a time")
        if sender == account:
            return (
                OwnItem(index, "comment", comment, parent, "", when[0], text_digest=reply_text_digest(text))
                if event_type == "comment.created"
                else Ignored(index, f"own.{event_type}")
            )
        if event_type not in config.event_types:
            return Ignored(index, event_type)
        event_id = comment
        if event_type == "comment.edited":
            event_id = f"{comment}@{sha256_hex(text)[:16]}"
        elif event_type in ("comment.hidden", "comment.unhidden"):
            event_id = f"{comment}@{when[1].removeprefix(APPROXIMATE)}"
        return self._observation(
            index=index,
            account=account,
            config=config,
            event_type=event_type,
            event_id=event_id,
            conversation=post,
            message=comment,
            sender=sender,
            occurred=when[0],
            original=when[1],
            hashed={
                "comment_id": comment,
                "post_id": post,
                "parent_id": parent,
                "from_id": sender,
                "message": text,
            },
            text=text,
            parent="" if parent == post else parent,
            handle=author.get("name"),
        )
