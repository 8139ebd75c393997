"""Retention of the one piece of content reconciliation holds: the text of staged source events."""

from __future__ import annotations

from datetime import datetime, timedelta

from ingress.models import Source
from reconcile import clock
from reconcile.models import StagedEvent


def staging_purge(*, now: datetime | None = None, dry_run: bool = False) -> int:
    """Staged source text and handles of scans older than their source's retention period (a scan left
    SCANNING that long holds content nothing else keeps): blanked, the scan kept."""
    now = now or clock.now()
    total = 0
    for source in Source.objects.all():
        stale = StagedEvent.objects.filter(
            run__source=source,
            run__created_at__lt=now - timedelta(days=source.retention_days),
        ).exclude(text="", handle="", address="")
        total += stale.count() if dry_run else stale.update(text="", handle="", address="")
    return total
