"""Retention: the retained message text purged on each source's rule."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.utils import timezone

from ingress.models import InboundEvent, Source

logger = logging.getLogger("conduit.ingress")


def retention_purge(*, now: datetime | None = None, dry_run: bool = False) -> dict[str, int]:
    """Blank the retained message text of events older than their source's retention period.

    Keys, hashes, states and history stay; only the content goes, and the
    time it went is recorded. Returns {source name: events purged (or, with
    dry_run, that would be)}.
    """
    now = now or timezone.now()
    purged: dict[str, int] = {}
    for source in Source.objects.order_by("name"):
        due = InboundEvent.objects.filter(
            source=source,
            first_received_at__lt=now - timedelta(days=source.retention_days),
        ).exclude(message_text="", sender_handle="", reply_address="")
        purged[source.name] = (
            due.count()
            if dry_run
            else due.update(message_text="", sender_handle="", reply_address="", content_purged_at=now)
        )
    if not dry_run:
        logger.info(
            "retention purge %s", " ".join(f"{name}={n}" for name, n in purged.items()) or "no sources"
        )
    return purged
