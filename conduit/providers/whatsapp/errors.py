"""What a WhatsApp Cloud API error means for a reply, as one table of data (docs/platforms/whatsapp.md#error-meanings).

WhatsApp's codes need no subcode: a code, or a range of codes, has one meaning. The outcomes are
Meta's (conduit.providers.meta.errors): only a row that says "not applied" makes a send safe to
try again, only throttling is retried automatically, HTTP 5xx and every code no row claims are
ambiguous, never retried. The same table names what a `failed` status means for a message the
platform accepted: the reply stays SENT and the failure waits for a person.
"""

from __future__ import annotations

from conduit.providers.base import RECIPIENT_THROTTLED, THROTTLED
from conduit.providers.meta.errors import (
    AMBIGUOUS,
    EVIDENCE_ANSWERS_OF_OUTCOME,
    NOT_APPLIED_FINAL,
    NOT_APPLIED_RETRYABLE,
    Meaning,
    Row,
)

DOCS = "docs/platforms/whatsapp.md#error-meanings"
CLOUD_API = (
    "WhatsApp Cloud API error codes (developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes)"
)


def _row(
    code: int, outcome: str, reason: str, sentence: str, *, to: int | None = None, stop: bool = False
) -> Row:
    return Row(
        code, None, None, Meaning(outcome, reason, sentence, stop, f"{DOCS} ({CLOUD_API})"), code_to=to
    )


def _throttled(code: int, what: str) -> Row:
    return _row(
        code,
        NOT_APPLIED_RETRYABLE,
        THROTTLED,
        f"WhatsApp refused the message for now ({what}); nothing was sent, and the send is retried "
        "once the limit allows it.",
    )


ROWS: tuple[Row, ...] = (
    _throttled(130429, "the phone number's throughput, about 80 messages a second"),
    _row(
        131056,
        NOT_APPLIED_RETRYABLE,
        RECIPIENT_THROTTLED,
        "WhatsApp refused the message for now: too many messages to this one person in a short time "
        "(about one every 6 seconds). Nothing was sent; this reply is retried after a pause, and the "
        "number's replies to other people go on.",
    ),
    _throttled(4, "the app's call limit"),
    _throttled(80007, "the business account's rate limit"),
    _row(
        131047,
        NOT_APPLIED_FINAL,
        "outside_service_window",
        "More than 24 hours have passed since the buyer last wrote: WhatsApp allows only an approved "
        "template now, and nothing was sent. Give the copy a template, or wait for the buyer to write.",
    ),
    _row(
        131026,
        NOT_APPLIED_FINAL,
        "undeliverable",
        "WhatsApp cannot deliver to this number (not on WhatsApp, an old app, or the person has not "
        "accepted the terms): nothing was sent.",
    ),
    _row(
        131049,
        NOT_APPLIED_FINAL,
        "marketing_limited",
        "WhatsApp held back the message to keep the person's marketing messages few: nothing was "
        "delivered. Do not resend it at once.",
    ),
    _row(
        131048,
        NOT_APPLIED_FINAL,
        "spam_limited",
        "WhatsApp limited the number's messages after people reported or blocked them: nothing was sent.",
    ),
    _row(
        131021,
        NOT_APPLIED_FINAL,
        "recipient_is_sender",
        "The reply was addressed to the sending number itself: nothing was sent.",
    ),
    _row(
        131051,
        NOT_APPLIED_FINAL,
        "unsupported_message",
        "WhatsApp does not take this kind of message: nothing was sent.",
    ),
    _row(
        132000,
        NOT_APPLIED_FINAL,
        "template_refused",
        "WhatsApp refused the template (unknown, not approved in this language, paused, or its "
        "parameters do not fit): nothing was sent. Check the template's name, language and parameters.",
        to=132999,
    ),
    _row(
        100,
        NOT_APPLIED_FINAL,
        "invalid_parameter",
        "WhatsApp refused the message's parameters (an address or a part it cannot read): nothing was sent.",
    ),
    _row(
        131008,
        NOT_APPLIED_FINAL,
        "invalid_parameter",
        "WhatsApp answered that a required part of the message was missing: nothing was sent.",
    ),
    _row(
        131009,
        NOT_APPLIED_FINAL,
        "invalid_parameter",
        "WhatsApp refused a value of the message: nothing was sent.",
    ),
    _row(
        190,
        NOT_APPLIED_FINAL,
        "token_invalid",
        "Meta refused the source's access token (invalid or expired): nothing was sent. A person must "
        "replace the token; the source's sends stop until then.",
        stop=True,
    ),
    _row(
        10,
        NOT_APPLIED_FINAL,
        "permission_missing",
        "The token lacks the permission to send for this number (whatsapp_business_messaging): "
        "nothing was sent. The account's owner must grant it.",
        stop=True,
    ),
    _row(
        200,
        NOT_APPLIED_FINAL,
        "permission_missing",
        "Meta refused the call for lack of a permission (codes 200-299): nothing was sent.",
        to=299,
        stop=True,
    ),
    _row(
        131005,
        NOT_APPLIED_FINAL,
        "permission_missing",
        "Access denied: the permission to send for this number was not granted or was revoked: "
        "nothing was sent. The account's owner must grant it again.",
        stop=True,
    ),
    _row(
        3,
        NOT_APPLIED_FINAL,
        "capability_missing",
        "The app lacks the capability to call the Cloud API (code 3): nothing was sent. The app "
        "needs WhatsApp's product and its review.",
        stop=True,
    ),
    _row(
        131031,
        NOT_APPLIED_FINAL,
        "account_locked",
        "WhatsApp has locked the business account (a policy or a verification): nothing was sent. "
        "Its owner must resolve it in WhatsApp Manager; the source's sends stop until then.",
        stop=True,
    ),
    _row(
        131042,
        NOT_APPLIED_FINAL,
        "payment_problem",
        "WhatsApp refused the message over the business's payment method: nothing was sent. Its owner "
        "must fix the payment settings; the source's sends stop until then.",
        stop=True,
    ),
    _row(
        133010,
        NOT_APPLIED_FINAL,
        "number_not_registered",
        "The phone number is not registered with the Cloud API: nothing was sent; the source's sends "
        "stop until its owner registers it.",
        stop=True,
    ),
    _row(
        131000,
        AMBIGUOUS,
        "whatsapp_unknown_error",
        "WhatsApp answered that something went wrong: the message may or may not have gone out. Wait "
        "for its status before anything is sent again.",
    ),
    _row(
        131016,
        AMBIGUOUS,
        "whatsapp_unavailable",
        "WhatsApp answered that its service is unavailable: the message may or may not have gone out. "
        "Wait for its status before anything is sent again.",
    ),
)

SERVER_ERROR = Meaning(
    AMBIGUOUS,
    "whatsapp_server_error",
    "WhatsApp's server failed while handling the message (HTTP 5xx): it may or may not have gone out. "
    "Wait for its status before anything is sent again.",
    source=f"{DOCS}: HTTP 5xx is ambiguous",
)
UNKNOWN = Meaning(
    AMBIGUOUS,
    "whatsapp_unknown_code",
    "WhatsApp refused the message with an error Conduit does not know: it may or may not have gone "
    "out. Wait for its status before anything is sent again.",
    source=f"{DOCS}: every other code -> SEND_STATUS_UNKNOWN",
)

_BY_CODE = {row.code: row for row in ROWS if row.code_to is None}
_RANGES = [row for row in ROWS if row.code_to is not None]


def meaning(status: int | None, code: int | None) -> Meaning:
    """The meaning of one error answer (or of a failed status's code, `status` None)."""
    if status is not None and status >= 500:
        return SERVER_ERROR
    row = _BY_CODE.get(code) or next(
        (r for r in _RANGES if code is not None and r.code <= code <= r.code_to), None
    )
    return row.meaning if row is not None else UNKNOWN


# The transport's own reasons (no answer, or nothing left the process), beside the table's.
TRANSPORT_REASONS = {
    "timeout_after_request": AMBIGUOUS,
    "connection_lost_after_request": AMBIGUOUS,
    "unreadable_receipt": AMBIGUOUS,
    "connect_failed": NOT_APPLIED_RETRYABLE,
    "graph_token_unavailable": NOT_APPLIED_FINAL,
    "graph_url_refused": NOT_APPLIED_FINAL,
    "reply_address_missing": NOT_APPLIED_FINAL,
    "outside_service_window": NOT_APPLIED_FINAL,
}
REASON_OUTCOMES: dict[str, str] = {
    **{row.meaning.reason: row.meaning.outcome for row in ROWS},
    SERVER_ERROR.reason: SERVER_ERROR.outcome,
    UNKNOWN.reason: UNKNOWN.outcome,
    **TRANSPORT_REASONS,
}
EVIDENCE_ANSWERS: dict[str, str] = {
    reason: EVIDENCE_ANSWERS_OF_OUTCOME[outcome] for reason, outcome in REASON_OUTCOMES.items()
}


def failure_sentence(error_code: str) -> str:
    """What a `failed` status's code means for the buyer, in words (the message was accepted)."""
    code = int(error_code) if error_code.isdigit() else None
    if code is None:
        return "WhatsApp reported the message failed without a code."
    return f"WhatsApp could not deliver the message (code {code}): {meaning(None, code).sentence}"
