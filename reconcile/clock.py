"""Reconciliation's trusted clock: every lease, schedule and report time reads `now()`.

One module so a test holds time still for the scan, the publication and the
poll with one patch (`monkeypatch.setattr(clock, "now", ...)`).
"""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone


def now() -> datetime:
    """The current time, aware, in UTC."""
    return timezone.now()
