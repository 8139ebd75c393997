"""WhatsApp Cloud API shapes as recorded: wamids, numbers, and the webhook values for messages and
statuses (fixtures/meta_whatsapp/recorded/, described in its PROVENANCE.md)."""

from __future__ import annotations

import base64
import hashlib
import re
import secrets

from simulators.meta.shapes import _hash_digits

WHATSAPP_OBJECT = "whatsapp_business_account"
# Every status error links Meta's error-code page (recorded in each failed status).
ERROR_CODES_URL = "https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes/"
# A wamid is base64 of `1c 18 <len> <number> 15 02 00 <11 outgoing | 12 incoming> 18 <len> <hex id> 00`
# (PROVENANCE.md, "What was replaced"); recorded hex ids: 18 characters outgoing, 20 incoming.
OUTGOING, INCOMING = 0x11, 0x12
HEX_LENGTH = {OUTGOING: 18, INCOMING: 20}
# A number as WhatsApp writes it: country code first, digits only (E.164: at most 15).
WA_ID = re.compile(r"\d{7,15}")
DIALED = re.compile(r"\+?[\d ().-]+")


def wamid(number: str, direction: int) -> str:
    """A fresh wamid of the recorded structure for a message to or from `number` (58 characters
    for an 11-digit number, as recorded)."""
    hex_id = secrets.token_hex(HEX_LENGTH[direction] // 2).upper()
    raw = (
        bytes([0x1C, 0x18, len(number)])
        + number.encode()
        + bytes([0x15, 0x02, 0x00, direction, 0x18, len(hex_id)])
        + hex_id.encode()
        + b"\x00"
    )
    return "wamid." + base64.b64encode(raw).decode()


def wa_id_of(to: object) -> str | None:
    """The WhatsApp id a send's `to` names: its digits ("+1 555-0100" -> "15550100"); None when
    it is no phone number. Recorded: `to` may come as a JSON number."""
    text = str(to) if isinstance(to, (str, int)) and not isinstance(to, bool) else ""
    if not DIALED.fullmatch(text.strip()):
        return None
    digits = re.sub(r"\D", "", text)
    return digits if WA_ID.fullmatch(digits) else None


def display_number(phone_number_id: str) -> str:
    """A display number for a phone number id nobody gave one for: 11 digits, `1555` first."""
    return "1555" + _hash_digits(f"display:{phone_number_id}", 7)


def conversation_key(number: str, wa_id: str, category: str, opened: float) -> str:
    """A conversation id: 32 lowercase hex characters, one per conversation (as recorded)."""
    return hashlib.md5(f"{number}:{wa_id}:{category}:{opened}".encode()).hexdigest()


def metadata(number) -> dict:
    return {"display_phone_number": number["display_phone_number"], "phone_number_id": number["id"]}


def change(number, **value) -> dict:
    """One change of a `messages` webhook: `value` (messaging_product, metadata, then the parts)
    before `field`, as recorded."""
    return {
        "value": {"messaging_product": "whatsapp", "metadata": metadata(number), **value},
        "field": "messages",
    }


def inbound_message(
    *,
    kind: str,
    sender: str,
    id: str,
    timestamp: int,
    text: str,
    payload: str,
    context: dict | None,
    reacted_to: str,
) -> dict:
    """A buyer's message as `messages[]` carries it, in the recorded key order per type."""
    message: dict = {"context": context} if context else {}
    message.update({"from": sender, "id": id, "timestamp": str(timestamp)})
    if kind == "text":
        message.update({"text": {"body": text}, "type": "text"})  # recorded: text before type
    elif kind == "interactive":
        reply = {"id": payload or "reply-1", "title": text}
        message.update(
            {"type": "interactive", "interactive": {"type": "button_reply", "button_reply": reply}}
        )
    elif kind == "button":
        message.update({"type": "button", "button": {"payload": payload or text, "text": text}})
    elif kind == "image":
        image = {"caption": text} if text else {}
        digest = base64.b64encode(hashlib.sha256(id.encode()).digest()).decode()
        image.update(
            {"mime_type": "image/jpeg", "sha256": digest, "id": "1" + _hash_digits(f"media:{id}", 15)}
        )
        message.update({"type": "image", "image": image})
    elif kind == "reaction":
        message.update({"type": "reaction", "reaction": {"message_id": reacted_to, "emoji": text or "👍"}})
    else:
        raise ValueError(f"type {kind!r} is not one the simulator writes")
    return message


def status_item(
    *,
    status: str,
    id: str,
    timestamp: int,
    recipient: str,
    callback_data: str | None,
    conversation: dict | None,
    pricing: dict | None,
    error: dict | None,
) -> dict:
    """One `statuses[]` object, keys in the order of Meta's Status reference and the recordings:
    `biz_opaque_callback_data` (only when the send carried one) after `recipient_id`, then
    `conversation` and `pricing` where the status carries them, `errors` on a failure."""
    item: dict = {"id": id, "status": status, "timestamp": str(timestamp), "recipient_id": recipient}
    if callback_data is not None:
        item["biz_opaque_callback_data"] = callback_data
    if conversation is not None:
        item["conversation"] = conversation
    if pricing is not None:
        item["pricing"] = pricing
    if error is not None:
        item["errors"] = [error]
    return item
