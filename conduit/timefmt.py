"""ISO 8601 in one spelling: UTC written with a trailing Z, as reports and decision requests carry it."""

from __future__ import annotations

from datetime import datetime


def iso_z(value: datetime | None) -> str | None:
    """`value` as ISO 8601 with `+00:00` written `Z`; None stays None."""
    return value.isoformat().replace("+00:00", "Z") if value else None
