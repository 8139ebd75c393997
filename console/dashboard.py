"""The admin's front page of work: what waits for a person, counted cheaply, oldest first.

Read-only. Each row is one count and one "oldest" read. The reply queues read the
(delivery_state, -id) index; findings, quarantine, stranded sends and scan errors reuse
the selectors `doctor` already counts with, so the front page and `doctor` agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Min, QuerySet


@dataclass(frozen=True)
class WorkRow:
    """One queue on the front page."""

    key: str  # stable token, used by tests and as the row's CSS id
    label: str
    meaning: str  # one line: what waiting here means and what a person does
    count: int
    oldest: datetime | None
    url: str  # "" when the viewer may not open the queue


def _oldest(rows: QuerySet, field: str) -> datetime | None:
    return rows.order_by().aggregate(oldest=Min(field))["oldest"]


def _oldest_by_id(rows: QuerySet, field: str) -> datetime | None:
    # Rows are created in time order: the lowest id is the oldest, read from the state index.
    first = rows.order_by("id").values_list(field, flat=True)[:1]
    return first[0] if first else None


def work_counts() -> list[dict]:
    """Each queue's count and oldest item, without URLs or permissions (the admin adds those)."""
    from ingress.models import QuarantineReceipt, QuarantineState, Source
    from ingress.services.credentials import credentials_expiring
    from reconcile.models import ScanState
    from reconcile.selectors import open_retry_candidates, open_unexpected_receipts
    from replies.models import DeliveryState, ReplyAction
    from replies.selectors import sends_stranded

    pending = ReplyAction.objects.filter(delivery_state=DeliveryState.REVIEW_PENDING)
    unknown = ReplyAction.objects.filter(delivery_state=DeliveryState.SEND_STATUS_UNKNOWN)
    quarantined = QuarantineReceipt.objects.filter(state=QuarantineState.QUARANTINED)
    candidates = open_retry_candidates()
    unexpected = open_unexpected_receipts()
    stranded = sends_stranded()
    failed = ScanState.objects.exclude(last_error_code="")
    credentials = failed.filter(last_error_class="credentials").count()
    attention = Source.objects.exclude(subscription_problem="")
    expiring = credentials_expiring()
    return [
        {
            "key": "review_pending",
            "label": "Replies to review",
            "meaning": "Planned replies waiting for a person to approve or close.",
            "count": pending.count(),
            "oldest": _oldest_by_id(pending, "created_at"),
        },
        {
            "key": "unknown_sends",
            "label": "Unknown sends",
            "meaning": "Sends that may or may not have reached the customer: a person checks, then decides.",
            "count": unknown.count(),
            "oldest": _oldest_by_id(unknown, "created_at"),
        },
        {
            "key": "quarantine",
            "label": "Quarantine",
            "meaning": "Webhook bodies refused (bad signature, no identity, conflicting copy): dismiss or correct.",
            "count": quarantined.count(),
            "oldest": _oldest(quarantined, "received_at"),
        },
        {
            "key": "retry_candidates",
            "label": "Retry candidates",
            "meaning": "Reconciliation found no receipt for an unknown send: retry under the same key, or close.",
            "count": candidates.count(),
            "oldest": _oldest(candidates, "report__created_at"),
        },
        {
            "key": "unexpected_receipts",
            "label": "Unexpected receipts",
            "meaning": "The platform shows a reply Conduit closed, has not sent or never planned: look, then "
            "acknowledge.",
            "count": unexpected.count(),
            "oldest": _oldest(unexpected, "report__created_at"),
        },
        {
            "key": "stranded_sends",
            "label": "Stranded sends",
            "meaning": "Replies that failed before leaving and are no longer retried by themselves.",
            "count": stranded.count(),
            "oldest": _oldest_by_id(stranded, "created_at"),
        },
        {
            "key": "failed_scans",
            "label": "Failed scans",
            "meaning": (
                f"Sources whose last page read failed; {credentials} need their access token re-authorised."
                if credentials
                else "Sources whose last page read failed."
            ),
            "count": failed.count(),
            "oldest": _oldest(failed, "last_error_at"),
        },
        {
            "key": "sources_attention",
            "label": "Sources needing attention",
            "meaning": "Meta no longer delivers this account's notifications (subscription problem).",
            "count": attention.count(),
            "oldest": _oldest(attention, "subscription_checked_at"),
        },
        {
            "key": "tokens_expiring",
            "label": "Access tokens expiring",
            "meaning": "Accounts whose stored access token expires within 7 days, or did: the hourly "
            "refresh could not renew it, so reconnect the account before its sends stop.",
            "count": expiring.count(),
            "oldest": _oldest(expiring, "expires_at"),
        },
    ]
