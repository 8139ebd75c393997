"""WhatsApp's error shapes: the Graph envelope with `error_data`, and a failed status's `errors[]`.

As recorded (fixtures/meta_whatsapp/recorded/answer_error__*.json): `message` is "(#code) title",
`type` OAuthException, then `code`, `error_data {messaging_product, details}`, `error_subcode`
where Meta sends one (130429's 2494055 in Meta's own example), `fbtrace_id`. A status's error
carries `code`, `title`, `message` (the title again), `error_data {details}` and `href`.
"""

from __future__ import annotations

import secrets

from simulators.meta.errors import GraphError
from simulators.meta.whatsapp_shapes import ERROR_CODES_URL

# code -> (title, details, subcode). Wording as recorded where a recording exists (100, 130429,
# 131026, 131047, 132001, 131049); else Meta's error-codes page (131056, 131048, 131000, 131021, 80007).
WORDING: dict[int, tuple[str, str, int | None]] = {
    100: ("Invalid parameter", "Invalid parameter.", None),
    80007: ("Rate limit issues", "The WhatsApp Business Account has reached its rate limit.", None),
    130429: ("Rate limit hit", "Cloud API message throughput has been reached.", 2494055),
    131000: ("Something went wrong", "Message failed to send because of an unknown error.", None),
    131021: ("Recipient cannot be sender", "Sender and recipient phone number is the same.", None),
    131026: ("Receiver is incapable of receiving this message", "Message Undeliverable.", None),
    131047: (
        "Re-engagement message",
        "Message failed to send because more than 24 hours have passed since the customer last "
        "replied to this number.",
        None,
    ),
    131048: (
        "Spam rate limit hit",
        "Message failed to send because there are restrictions on how many messages can be sent "
        "from this phone number. This may be because too many previous messages were blocked or "
        "flagged as spam.",
        None,
    ),
    131049: (
        "This message was not delivered to maintain healthy ecosystem engagement.",
        "In order to maintain a healthy ecosystem engagement, the message failed to be delivered.",
        None,
    ),
    131056: (
        "(Business Account, Consumer Account) pair rate limit hit",
        "Message failed to send because there were too many messages sent from this phone number "
        "to the same phone number in a short period of time.",
        None,
    ),
    132001: ("Template name does not exist in the translation", "Template name does not exist.", None),
}
# The codes a fault planted on a WhatsApp send answers in WhatsApp's shape; others (190, 4, 2...)
# keep Graph's, as the recorded 190 does.
WHATSAPP_CODES = frozenset(WORDING)


class WhatsAppError(GraphError):
    """A Cloud API refusal in Meta's envelope with WhatsApp's `error_data`."""

    def __init__(
        self,
        code: int,
        *,
        details: str | None = None,
        subcode: int | None = None,
        status: int | None = None,
        message: str | None = None,
    ) -> None:
        title, default_details, default_subcode = WORDING.get(code, ("Error", "", None))
        super().__init__(
            code,
            subcode=default_subcode if subcode is None else subcode,
            status=status or 400,
            message=message or f"(#{code}) {title}",
            type_="OAuthException",
            full=False,
        )
        self.details = details or default_details

    def envelope(self, host: str = "facebook") -> dict:
        error: dict = {
            "message": self.message,
            "type": self.type,
            "code": self.code,
            "error_data": {"messaging_product": "whatsapp", "details": self.details},
        }
        if self.subcode is not None:
            error["error_subcode"] = self.subcode
        error["fbtrace_id"] = "A" + secrets.token_urlsafe(16)[:22]
        return {"error": error}


def invalid(details: str) -> WhatsAppError:
    """(#100) Invalid parameter, saying which: what a sender can act on."""
    return WhatsAppError(100, details=details)


def unknown_number(node: str) -> GraphError:
    """A phone number id nobody registered, as recorded (answer_error__100_unknown_phone_number_id)."""
    return GraphError(
        100,
        subcode=33,
        message=(
            f"Unsupported post request. Object with ID '{node}' does not exist, cannot be loaded due "
            "to missing permissions, or does not support this operation. Please read the Graph API "
            "documentation at https://developers.facebook.com/docs/graph-api"
        ),
    )


def status_error(code: int) -> dict:
    """A failed status's error (webhook_statuses__failed*.json): title and message alike."""
    title, details, _ = WORDING.get(code, ("Message failed to send", "Message failed to send.", None))
    return {
        "code": code,
        "title": title,
        "message": title,
        "error_data": {"details": details},
        "href": ERROR_CODES_URL,
    }
