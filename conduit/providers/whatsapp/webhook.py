"""WhatsApp Cloud API webhooks: the frozen field map from `messages[]` to the event contract, and
`statuses[]` as receipt evidence.

A body (`object: whatsapp_business_account`) comes through Meta's app callback with Meta's
X-Hub-Signature-256 proof. Its entry is the business account's; each change names the phone
number it is for (`value.metadata.phone_number_id`), the account a source is registered for, and
conduit.providers.meta.webhook_body splits it into one item per message and per status.

The field map (contract version `whatsapp-v1`, frozen: a change is a new version):

| item | event type | key (`meta-whatsapp:<phone number id>:message.created:<wamid>`) | refs |
| --- | --- | --- | --- |
| a message of type text, interactive (button or list reply), button, image, video, audio, document, sticker | message.created | the message `id` (a wamid) | conversation: sender; message: the wamid; sender: `sender_ref(from)` |

Text is `text.body`, the chosen reply's title (`interactive.button_reply` / `list_reply`,
`button.text`) or a medium's caption; no medium itself is fetched or kept. `contacts[].profile.name`
is the handle, buyer content under the retention rule as the text is.

A phone number is not an opaque identifier: the sender ref is a keyed hash of it (or of the
business-scoped `from_user_id` where a message carries no number, whose reply then has no address)
(`sender_ref`: HMAC-SHA256 under the source's `ref_key`, with the phone number id), so keys,
logs, reports and the API never show a number. The number itself, which a reply must be
addressed to, is kept only as the event's reply address: content, purged with the text.

Reactions, system messages (a changed number), unsupported and every other type are Ignored,
counted as `whatsapp.<type>`. Each status (sent, delivered, read, failed) becomes a StatusItem:
the wamid it is about, its time, the `biz_opaque_callback_data` Conduit sent (the reply key) and
the first error code of a failure; the recipient's number is not kept.
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import datetime, timezone
from typing import Any

from conduit.canonical import payload_hash
from conduit.providers.base import (
    Ignored,
    Observation,
    Rejection,
    SecretUnavailable,
    SourceConfig,
    StatusItem,
    handle_of,
)
from conduit.providers.meta.webhook import MetaWebhookAdapter
from conduit.providers.meta.webhook_body import WHATSAPP_OBJECT
from conduit.providers.meta.webhook_values import _correlation, _ref, _text, counter_name

CONTRACT_VERSION = "whatsapp-v1"
EVENT_TYPES = ("message.created",)
# The message types that are a buyer writing to the business (others are counted and ignored).
TEXT_TYPES = ("text", "interactive", "button")
MEDIA_TYPES = ("image", "video", "audio", "document", "sticker")
STATUSES = ("sent", "delivered", "read", "failed")
# What Conduit sends in biz_opaque_callback_data and what a status may carry back (Meta: 512 bytes).
MAX_CALLBACK_DATA = 512
# A phone number as WhatsApp writes it: digits only, country code first, no "+".
MAX_ADDRESS_LENGTH = 32


def sender_ref(*, key: bytes, account: str, wa_id: str) -> str:
    """The opaque ref of the person with this WhatsApp number, writing to this phone number id."""
    if not key:
        # Without the key a number's hash is a lookup table away from the number: refuse.
        raise SecretUnavailable("no key to make WhatsApp sender refs opaque (SECRET_KEY)")
    digest = hmac.new(key, f"{account}|{wa_id}".encode(), hashlib.sha256).hexdigest()
    return f"wa_{digest[:40]}"


def _seconds(value: Any) -> tuple[datetime, str] | None:
    """WhatsApp's times: unix seconds as a string of digits (an integer taken too), or None."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.isdigit() or not value.isascii() or len(value) > 12:
        return None
    try:
        return datetime.fromtimestamp(int(value), tz=timezone.utc), value
    except (OSError, OverflowError, ValueError):
        return None


def _chosen(interactive: dict) -> dict | None:
    """The button or list row an interactive reply chose, if it is one."""
    chosen = interactive.get("button_reply") or interactive.get("list_reply")
    return chosen if isinstance(chosen, dict) else None


def _words(message: dict, kind: str) -> str | None:
    """What the buyer wrote or chose, as text ("" for a medium without a caption), or None when
    the type's part is not what WhatsApp sends."""
    part = message.get(kind)
    if not isinstance(part, dict):
        return None if kind in ("text", "interactive", "button") else ""
    if kind == "text":
        return _text(part.get("body"))
    if kind == "button":
        return _text(part.get("text"))
    if kind == "interactive":
        chosen = _chosen(part)
        return _text(chosen.get("title")) if chosen else None
    return _text(part.get("caption"))


def _handle(contacts: Any, wa_id: str) -> Any:
    """The profile name WhatsApp gives for this sender (`contacts[]`), or None."""
    for contact in contacts if isinstance(contacts, list) else []:
        if isinstance(contact, dict) and contact.get("wa_id") == wa_id:
            profile = contact.get("profile")
            return profile.get("name") if isinstance(profile, dict) else None
    return None


class MetaWhatsAppWebhook(MetaWebhookAdapter):
    name = "meta-whatsapp"
    source_system = "meta-whatsapp"
    object = WHATSAPP_OBJECT
    # A phone number's earlier conversations are not delivered at connection: nothing to backfill.
    backfills = False

    def observe(self, index: int, item: Any, account: str, config: SourceConfig):
        if not isinstance(item, dict):
            return Rejection(index, "invalid_body", "each update must be an object")
        kind, value = item.get("kind"), item.get("value")
        if item.get("field") != "messages" or kind == "change":
            return Ignored(index, counter_name("whatsapp", str(item.get("field") or "other")))
        if not isinstance(value, dict):
            return Rejection(index, "invalid_body", f"each {kind} must be an object")
        if kind == "status":
            return self._status(index, value)
        return self._message(index, value, account, config, item.get("contacts"))

    def _status(self, index: int, value: dict):
        wamid, status = _ref(value.get("id")), value.get("status")
        if wamid is None or not isinstance(status, str) or not status.isidentifier() or len(status) > 32:
            return Rejection(index, "missing_identity", "a status needs the message id and its status")
        when = _seconds(value.get("timestamp"))
        if when is None:
            return Rejection(index, "invalid_occurred_at", "a status needs its timestamp (seconds)")
        errors = value.get("errors") if isinstance(value.get("errors"), list) else []
        first = errors[0] if errors and isinstance(errors[0], dict) else {}
        code = first.get("code")
        code = str(code) if isinstance(code, int) and not isinstance(code, bool) else ""
        return StatusItem(
            index,
            wamid,
            status,
            when[0],
            correlation=_correlation(value.get("biz_opaque_callback_data"))[:MAX_CALLBACK_DATA],
            error_code=code[:16],
        )

    def _message(self, index: int, message: dict, account: str, config: SourceConfig, contacts: Any):
        kind = message.get("type")
        kind = kind if isinstance(kind, str) else "other"
        if kind not in TEXT_TYPES + MEDIA_TYPES:
            return Ignored(index, counter_name("whatsapp", kind))
        part = message.get("interactive")
        if kind == "interactive" and isinstance(part, dict) and not _chosen(part):
            # Another interactive answer than a button or list reply (a Flow's `nfm_reply`, ...):
            # counted, as other types are, never a refusal of the body it came in.
            return Ignored(index, counter_name("whatsapp", "interactive", str(part.get("type") or "other")))
        wamid = _ref(message.get("id"))
        wa_id = _ref(message.get("from")) if message.get("from") is not None else ""
        # A business-scoped user id (`from_user_id`, 2026) names the person where no number is given.
        user_id = _ref(message.get("from_user_id")) if message.get("from_user_id") is not None else ""
        if wamid is None or wa_id is None or user_id is None or not (wa_id or user_id):
            return Rejection(index, "missing_identity", "a message needs its id and from (or from_user_id)")
        if wa_id and (not wa_id.isdigit() or len(wa_id) > MAX_ADDRESS_LENGTH):
            return Rejection(index, "invalid_identity", "from must be a WhatsApp number (digits)")
        when = _seconds(message.get("timestamp"))
        if when is None:
            return Rejection(index, "invalid_occurred_at", "a message needs its timestamp (seconds)")
        text = _words(message, kind)
        if text is None:
            return Rejection(index, "invalid_body", f"a {kind} message must carry its {kind} part")
        if "message.created" not in config.event_types:
            return Ignored(index, "message.created")
        sender = sender_ref(key=config.ref_key, account=account, wa_id=wa_id or f"user:{user_id}")
        return Observation(
            index=index,
            source_system=self.source_system,
            source_account_ref=account,
            source_event_id=wamid,
            event_type="message.created",
            conversation_ref=sender,
            message_ref=wamid,
            sender_ref=sender,
            occurred_at=when[0],
            occurred_at_original=when[1],
            # The hash covers the identity and what was written, never the number itself.
            payload_hash=payload_hash({"id": wamid, "sender": sender, "type": kind, "text": text}),
            contract_version=config.contract_version,
            canary=config.canary,
            text=text.replace("\x00", "\ufffd"),
            handle=handle_of(_handle(contacts, wa_id) if wa_id else None),
            address=wa_id,
        )
