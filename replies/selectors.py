"""Read-side questions about reply actions that more than one surface asks (admin, doctor)."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from replies.contract import MAX_AUTOMATIC_ATTEMPTS
from replies.models import DeliveryState, ReplyAction


def stranded_q() -> Q:
    """FAILED_BEFORE_SEND that needs a person's eye: exhausted, or stopped for good.

    Exhausted: MAX_AUTOMATIC_ATTEMPTS or more attempts failed before send; the
    sender still retries it at the capped interval. Stopped: its last failure is
    one retrying cannot cure (replies.contract.INCURABLE_FAILURES), so no
    automatic attempt is scheduled (next_attempt_at is empty).
    """
    return Q(delivery_state=DeliveryState.FAILED_BEFORE_SEND) & (
        Q(attempt_count__gte=MAX_AUTOMATIC_ATTEMPTS) | Q(next_attempt_at__isnull=True)
    )


def sends_stranded() -> QuerySet[ReplyAction]:
    """The FAILED_BEFORE_SEND actions that are exhausted or stopped, oldest first."""
    return ReplyAction.objects.filter(stranded_q()).order_by("id")
