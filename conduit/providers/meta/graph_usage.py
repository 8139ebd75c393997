"""Meta's X-Business-Use-Case-Usage header: the wait it announces and when an account's usage is
near its limit."""

from __future__ import annotations

import json
from typing import Any

USAGE_HEADER = "X-Business-Use-Case-Usage"
# A wait longer than a day is not a wait a scan should honour literally.
MAX_RETRY_AFTER_SECONDS = 24 * 3600


def _int(value: Any) -> int | None:
    """A count or code as Meta sends it (a number, or its digits), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and 0 <= value < 10**12:
        return value
    if isinstance(value, str) and value.isdigit() and len(value) <= 12:
        return int(value)
    return None


def _usage_entries(header: str | None) -> list[dict]:
    """The usage objects of X-Business-Use-Case-Usage (account ids mapped to lists of them);
    none from a header that is missing, oversized or not that shape."""
    if not header or len(header) > 65536:
        return []
    try:
        usage = json.loads(header)
    except (ValueError, RecursionError):
        return []
    return [
        entry
        for entries in (usage.values() if isinstance(usage, dict) else [])
        if isinstance(entries, list)
        for entry in entries
        if isinstance(entry, dict)
    ]


def retry_after_seconds(header: str | None) -> float | None:
    """The longest `estimated_time_to_regain_access` (minutes) in X-Business-Use-Case-Usage, in seconds.

    A zero wait, or a header that is not that shape, announces nothing.
    """
    minutes = [_int(entry.get("estimated_time_to_regain_access")) for entry in _usage_entries(header)]
    longest = max((m for m in minutes if m), default=0)
    return float(min(longest * 60, MAX_RETRY_AFTER_SECONDS)) if longest else None


# Usage at or above this percentage (call_count, total_cputime or total_time) is near the limit.
USAGE_NEAR_LIMIT_PERCENT = 90
# A near-limit header without Meta's estimate still pauses this long.
USAGE_DEFAULT_PAUSE_SECONDS = 60.0


def usage_pause_seconds(header: str | None) -> float | None:
    """Seconds to pause an account whose successful answer says its usage is near the limit: any
    entry of X-Business-Use-Case-Usage at >= 90 (call_count, total_cputime or total_time) pauses for
    the announced estimated_time_to_regain_access (60 s when none). None when nothing is near."""
    near = any(
        (_int(entry.get(name)) or 0) >= USAGE_NEAR_LIMIT_PERCENT
        for entry in _usage_entries(header)
        for name in ("call_count", "total_cputime", "total_time")
    )
    if not near:
        return None
    return retry_after_seconds(header) or USAGE_DEFAULT_PAUSE_SECONDS
