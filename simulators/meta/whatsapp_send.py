"""The Cloud API's send, `POST /{phone-number-id}/messages`: checked as Meta checks it, applied
once, answered in the recorded shape, and reported by the statuses the plan says."""

from __future__ import annotations

import json

from simulators.meta.whatsapp_errors import WhatsAppError, invalid, unknown_number
from simulators.meta.whatsapp_shapes import (
    OUTGOING,
    WHATSAPP_OBJECT,
    change,
    conversation_key,
    wa_id_of,
    wamid,
)
from simulators.meta.whatsapp_statuses import plan_rng, plan_sequence, send_statuses

WINDOW_SECONDS = 24 * 3600  # the customer service window: 24 hours from the buyer's last message
MAX_TEXT = 4096  # Meta: a text message's body is at most 4096 characters
MAX_CALLBACK_DATA = 512  # Meta: biz_opaque_callback_data "Maximum 512 characters"


def _decoded(value: object) -> object:
    """A form-encoded send carries its objects as JSON strings, as Graph accepts them."""
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _checked(body: dict) -> dict:
    """What the send asks, or (#100) Invalid parameter saying what was wrong."""
    if body.get("messaging_product") != "whatsapp":
        raise invalid("The parameter messaging_product is required and must be whatsapp.")
    if body.get("recipient_type", "individual") != "individual":
        raise invalid("The parameter recipient_type must be individual.")
    wa_id = wa_id_of(body.get("to"))
    if wa_id is None:
        raise invalid("The parameter to is required: the recipient's phone number, country code first.")
    kind = body.get("type")
    if kind not in ("text", "template"):
        raise invalid(
            "The parameter type is required and must be text or template "
            f"(the simulator sends no {kind!r} messages)."
        )
    callback = body.get("biz_opaque_callback_data")
    if callback is not None and (not isinstance(callback, str) or len(callback) > MAX_CALLBACK_DATA):
        raise invalid(f"biz_opaque_callback_data is a string of at most {MAX_CALLBACK_DATA} characters.")
    context = _decoded(body.get("context"))
    if context is not None and not (
        isinstance(context, dict) and isinstance(context.get("message_id"), str) and context["message_id"]
    ):
        raise invalid("The parameter context must be an object with a message_id.")
    part = _decoded(body.get(kind))
    if kind == "text":
        text = part.get("body") if isinstance(part, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise invalid("The parameter text['body'] is required.")
        if len(text) > MAX_TEXT:
            raise invalid(f"Param text['body'] must be at most {MAX_TEXT} characters long.")
        content: object = text
    else:
        language = part.get("language") if isinstance(part, dict) else None
        if not (
            isinstance(part, dict)
            and isinstance(part.get("name"), str)
            and part["name"]
            and isinstance(language, dict)
            and isinstance(language.get("code"), str)
        ):
            raise invalid("The parameters template['name'] and template['language']['code'] are required.")
        if not isinstance(part.get("components", []), list):
            raise invalid("The parameter template['components'] must be a list.")
        content = part
    return {
        "to": str(body.get("to")),
        "wa_id": wa_id,
        "type": kind,
        "content": content,
        "context": context,
        "callback_data": callback,
    }


class WhatsAppSends:
    """SimulatorState's Cloud API sends."""

    def whatsapp_send(self, *, phone_number_id: str, body: dict) -> dict:
        """Apply one send and queue its statuses; refuse it, applying nothing, as Meta would: an
        unknown number (100/33), a bad body (100), an unknown template (132001), a text with the
        buyer's window closed by the simulator's clock or never opened (131047)."""
        number = self.whatsapp_number(phone_number_id)
        if number is None:
            raise unknown_number(phone_number_id)
        send = _checked(body)
        now = self.now()
        with self._tx():
            if send["type"] == "template":
                name, code = send["content"]["name"], send["content"]["language"]["code"]
                template = self._one(
                    "SELECT * FROM wa_templates WHERE phone_number_id = ? AND name = ? AND language = ?",
                    phone_number_id,
                    name,
                    code,
                )
                if template is None:
                    raise WhatsAppError(132001, details=f"template name ({name}) does not exist in {code}")
                category = template["category"]
            else:
                category = "service"
            opened = self.whatsapp_window_opened(phone_number_id, send["wa_id"])
            window_open = opened is not None and now - opened <= WINDOW_SECONDS
            if send["type"] == "text" and not window_open:
                raise WhatsAppError(131047)
            id = wamid(send["wa_id"], OUTGOING)
            self.db.execute(
                "INSERT INTO wa_sent (id, phone_number_id, wa_id, recipient, type, content, context,"
                " callback_data, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    id,
                    phone_number_id,
                    send["wa_id"],
                    send["to"],
                    send["type"],
                    json.dumps(send["content"]),
                    json.dumps(send["context"]) if send["context"] else None,
                    send["callback_data"],
                    round(now, 3),
                ),
            )
            conversation = self._whatsapp_conversation(phone_number_id, send["wa_id"], category, now)
            plan = self.whatsapp_plan()
            seq = self._next("wa_status_plan_sends")
        order = plan_sequence(plan, plan_rng(plan, seq))
        statuses = send_statuses(
            plan,
            order,
            id=id,
            recipient=send["wa_id"],
            callback_data=send["callback_data"],
            sent_at=int(now),
            category=category,
            free=window_open and category in ("service", "utility"),
            conversation=conversation,
        )
        if statuses and self.subscribed(number["waba_id"], "messages"):
            self._emit_series(
                WHATSAPP_OBJECT,
                number["waba_id"],
                "changes",
                [change(number, statuses=[s]) for s in statuses],
            )
        first = {"id": id, **({"message_status": "accepted"} if send["type"] == "template" else {})}
        return {
            "messaging_product": "whatsapp",
            "contacts": [{"input": send["to"], "wa_id": send["wa_id"]}],
            "messages": [first],
        }

    def _whatsapp_conversation(self, number: str, wa_id: str, category: str, now: float) -> dict:
        """The open conversation of this category with the buyer (conversation-based pricing: one
        lasts 24 hours from the first message billed in it), opened when there is none."""
        key = f"wa_conversation:{number}:{wa_id}:{category}"
        current = json.loads(self._kv(key, "null"))
        if current is None or now >= current["expires"]:
            opened = int(now)
            current = {
                "id": conversation_key(number, wa_id, category, opened),
                "expires": opened + WINDOW_SECONDS,
            }
            self._set_kv(key, json.dumps(current))
        return current
