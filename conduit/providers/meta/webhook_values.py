"""The values a Meta body sends, read without trusting them: ids, times, text, an echo's correlation
and the name an ignored update is counted under.

Each reader answers None (or "", or an escaped and bounded name) for what it cannot use; none raises.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

# An Ignored counter's name (ingress's IgnoredUpdate.name holds 64 characters).
MAX_COUNTER_NAME = 64
# What an echo's metadata may carry back (Meta's bound on message.metadata).
MAX_CORRELATION = 1000
# Entry times past this are milliseconds (messaging); before it, seconds (changes).
_MILLISECONDS_FROM = 10**11


def counter_name(*parts: str) -> str:
    """The name an ignored update is counted under, from names a body chose (its object, field,
    item or verb): joined by dots, each unprintable character or lone surrogate as its backslash
    escape (`\\x00`, `\\ud800`), at most 64 characters. A name is only a count's label, so what it
    holds is escaped, never refused: a NUL refused by the store would take the body's events with it."""
    name = ".".join(parts)
    if not name.isprintable():
        name = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in name)
    return name[:MAX_COUNTER_NAME]


def _ref(value: Any) -> str | None:
    """An identifier as Meta sends it (a string, sometimes a number), or None when unusable."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip() or not value.isprintable() or len(value) > 200:
        return None
    return value


def _time(value: Any) -> tuple[datetime, str] | None:
    """Meta's times: unix seconds (changes), milliseconds (messaging) or ISO 8601 (`+0000`), as
    (UTC time, as sent); None for anything else, a time no calendar holds included."""
    try:
        if isinstance(value, int) and not isinstance(value, bool):
            seconds = value / 1000 if value >= _MILLISECONDS_FROM else value
            return datetime.fromtimestamp(seconds, tz=timezone.utc), str(value)
        if isinstance(value, str) and value:
            parsed = datetime.fromisoformat(value)
            if parsed.tzinfo is None:
                return None
            return parsed.astimezone(timezone.utc), value[:64]
    # A number past the calendar raises, by platform and size, OSError (past time_t: not among
    # the input errors the adapter's boundary catches), OverflowError or ValueError; a string
    # ValueError, or OverflowError at the calendar's edges. Each is a time the body lacks.
    except (OSError, OverflowError, ValueError):
        return None
    return None


def _correlation(value: Any) -> str:
    """What an echo carried back for correlation (the metadata Conduit sent), or "" where it holds
    nothing Conduit could have sent: not text, or text no ledger stores (a NUL, a lone surrogate)."""
    if not isinstance(value, str) or "\x00" in value:
        return ""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return ""
    return value[:MAX_CORRELATION]


def _text(value: Any) -> str | None:
    """Text as sent ("" when absent), or None when it is not text."""
    if value is None:
        return ""
    return value if isinstance(value, str) else None
