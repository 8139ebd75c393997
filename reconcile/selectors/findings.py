"""Reads of the findings a person closes: the retry-candidate and unexpected-receipt queues."""

from __future__ import annotations

from django.db.models import QuerySet

# Findings a person closes: one open row per reply and kind (reconcile migration 0006).
# Kinds a person acknowledges once per action state (NO_STATUS: a sent reply the platform never
# reported on).
RECEIPT_KINDS = ("UNEXPECTED_RECEIPT", "UNKNOWN_RECEIPT", "NO_STATUS")
PERSON_KINDS = ("RETRY_CANDIDATE", *RECEIPT_KINDS)
UNEXPECTED_RECEIPTS_QUEUE = "unexpected_receipts"


def open_retry_candidates() -> QuerySet:
    """Undecided RETRY_CANDIDATE findings whose action still waits in SEND_STATUS_UNKNOWN:
    the retry-candidate queue, doctor and the report's summary count the same rows."""
    from reconcile.models import Finding

    return Finding.objects.filter(
        kind="RETRY_CANDIDATE", decision="", action__delivery_state="SEND_STATUS_UNKNOWN"
    )


def open_unexpected_receipts() -> QuerySet:
    """Unacknowledged receipts the provider shows for a reply Conduit closed, has not sent, or
    never planned (UNEXPECTED_RECEIPT, UNKNOWN_RECEIPT): the admin queue and doctor read these."""
    from reconcile.models import Finding

    return Finding.objects.filter(kind__in=RECEIPT_KINDS, decision="")
