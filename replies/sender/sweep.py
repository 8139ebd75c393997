"""The sweeper: SENDING past its lease becomes SEND_STATUS_UNKNOWN, never resent."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from replies.ledger import reply_action_transition
from replies.models import DeliveryState as S
from replies.models import ReplyAction

SWEEPER = "system:sweeper"


def replies_sweep(*, now: datetime | None = None) -> int:
    """SENDING past the lease (a worker died or hung) -> SEND_STATUS_UNKNOWN. Never resent."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.CONDUIT_SEND_LEASE_SECONDS)
    swept = 0
    stale = ReplyAction.objects.filter(delivery_state=S.SENDING, sending_since__lt=cutoff)
    for action_id in stale.order_by("id").values_list("id", flat=True):
        with transaction.atomic():
            outcome = reply_action_transition(
                action_id=action_id,
                to=S.SEND_STATUS_UNKNOWN,
                actor=SWEEPER,
                reason_code="worker_lease_expired",
                expected=S.SENDING,
                where={"sending_since__lt": cutoff},
                record_lost_race=False,
                extra={"sending_since": None, "last_error_code": "worker_lease_expired"},
            )
        swept += outcome.applied
    return swept
