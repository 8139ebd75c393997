"""Words for people: what each state and reason code means, in one line, where a person reads it.

A state's label is its choice's label on the model (`get_delivery_state_display()`); its
meaning is here, keyed by the stored value. A reason code without a label of its own reads
as its words ("closed_by_reviewer" is "Closed by reviewer"). Stored values never change:
the API, the logs and the metrics keep them.
"""

from __future__ import annotations

from django.utils.html import format_html

MEANINGS: dict[str, str] = {
    "REVIEW_PENDING": "A person decides: approve the text shown, or close it without a reply.",
    "APPROVED": "Approved; a worker sends it once, under its reply key.",
    "SENDING": "A worker is sending it now.",
    "SENT": "The platform accepted it; its receipt is recorded.",
    "FAILED_BEFORE_SEND": "Nothing left Conduit; it is retried later, or waits for a person if it cannot be.",
    "SEND_STATUS_UNKNOWN": (
        "The send was attempted and its answer lost: it may have reached the customer. "
        "Never resent blindly; a person or the receipt lookup settles it."
    ),
    "SUPPRESSED_TEST": "A canary's or test source's reply: recorded, never sent to anyone.",
    "CLOSED_NO_REPLY": "Closed: no reply goes out for it.",
    "RECEIVED": "Recorded; its replies are being planned.",
    "RECORD_READY": "Recorded and answered by a campaign: its replies are planned.",
    "UNRECONCILED": "No scan of the platform has compared it yet.",
    "MATCHED": "A scan found it on the platform as recorded.",
    "SOURCE_UNVERIFIED": "A complete scan did not find it on the platform (deleted or hidden there); kept.",
    "QUARANTINED": "Refused input kept for a person to dismiss or correct.",
    "DISMISSED": "A person dismissed it.",
    "CORRECTED": "A person corrected it at the source.",
}

REASONS: dict[str, str] = {
    "planned": "Planned by a campaign",
    "record_ready": "Replies planned",
    "no_trigger": "No campaign matched",
    "accepted": "Received",
    "closed_by_reviewer": "Closed by a reviewer",
    "closed_not_a_buyer": "Closed by a reviewer: not a buyer's question",
    "closed_answered_elsewhere": "Closed by a reviewer: already answered elsewhere",
    "closed_copy_does_not_fit": "Closed by a reviewer: the reply's text did not fit",
    "closed_by_operator": "Closed by an operator",
    "closed_stranded_by_operator": "Closed by an operator after it was stuck",
    "confirmed_sent_by_operator": "Marked sent by an operator, with the platform's receipt",
    "receipt_found_on_lookup": "Sent: the platform showed its receipt when asked",
    "retry_authorized_after_lookup": "Retry authorized: the platform did not show it",
    "retry_now_by_operator": "Retried by an operator",
    "window_expired": "The platform's reply window closed",
    "transport_timeout": "The platform did not answer in time",
    "live_send_disabled": "Live sending is off",
    "worker_lease_expired": "A worker stopped mid-send",
    "catch_up_planned": "Planned by a campaign's catch-up",
    "status_seen": "Sent: the platform reported the message's status",
    "outside_service_window": "Past the platform's free-form window, and no template",
}


def meaning(value: str) -> str:
    """One line on what the state `value` means ("" for a value with none)."""
    return MEANINGS.get(value, "")


def reason_label(code: str) -> str:
    """A reason code in words."""
    if not code:
        return ""
    return REASONS.get(code) or code.replace("_", " ").capitalize()


def state_html(label: str, value: str):
    """A state's label with its meaning underneath, for a page a person reads."""
    line = meaning(value)
    if not line:
        return label
    return format_html('{}<span class="conduit-meaning">{}</span>', label, line)
