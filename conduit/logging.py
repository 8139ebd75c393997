"""The data boundary in the logs: a filter that keeps credentials and message bodies out.

Conduit's own log lines are structured as key=value pairs of keys, states,
codes and durations. The filter is the second line: any record, from Conduit
or a library, whose text carries something that looks like a credential or a
message body is reduced to a marker naming its logger and level.
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any

from pythonjsonlogger.json import JsonFormatter

# Names of environment variables whose values are credentials.
SECRET_NAMES = re.compile(r"SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL|API_?KEY|PRIVATE", re.IGNORECASE)
LOOKS_LIKE_CREDENTIAL = re.compile(
    r"whsec_[A-Za-z0-9+/=]{8,}"  # Standard Webhooks secrets
    r"|\b(?:Bearer|Token|Basic)\s+[A-Za-z0-9._~+/=-]{16,}"  # Authorization header values
    r"|(?i:password|passwd|secret|api[_-]?key|access[_-]?token)\s*[=:]\s*\S+"
)
# A message body: a JSON object with a text field, or a text= pair.
LOOKS_LIKE_BODY = re.compile(r"\"text\"\s*:|\btext=|\"events\"\s*:\s*\[")
MIN_SECRET_LENGTH = 8
# Credential values this process knows: secret-named environment variables as the
# filter is configured, and every source secret as it is read (register_secret).
# Matching a small set is cheap; rescanning the environment on every record was not.
_KNOWN_SECRETS: set[str] = set()


def register_secret(value: str) -> None:
    """Withhold any record carrying this value from now on (called where a secret is read)."""
    if len(value) >= MIN_SECRET_LENGTH:
        _KNOWN_SECRETS.add(value)


def boundary_reason(text: str) -> str:
    """Why this text may not leave the process ("credential", "message body"), or "" if it may.

    The one detection behind every exit: the log filter, the JSON formatter's extra
    fields and the error reports (conduit/observability.py).
    """
    if LOOKS_LIKE_CREDENTIAL.search(text) or any(s in text for s in _KNOWN_SECRETS):
        return "credential"
    if LOOKS_LIKE_BODY.search(text):
        return "message body"
    return ""


def boundary_scrub(value: Any) -> Any:
    """A copy of a JSON-like value with every string the boundary refuses replaced by a marker.

    Keys are kept (they are field names, chosen by code); values are judged one string at a time,
    so a report or a log object keeps its shape and everything the boundary allows.
    """
    if isinstance(value, str):
        reason = boundary_reason(value)
        return f"[withheld by the data boundary: {reason}]" if reason else value
    if isinstance(value, dict):
        return {key: boundary_scrub(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [boundary_scrub(item) for item in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    # Anything else would be rendered by its repr downstream: judge that text.
    return boundary_scrub(repr(value))


class BoundaryFilter(logging.Filter):
    """Replace a record that looks like it carries a credential or a message body."""

    def __init__(self, name: str = "") -> None:
        super().__init__(name)
        for key, value in os.environ.items():
            if SECRET_NAMES.search(key):
                register_secret(value)
                # A list of secrets (CONDUIT_CREDENTIAL_KEYS: comma-separated keys): each one alone too.
                for part in value.split(","):
                    register_secret(part.strip())

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: keep nothing of it
            message = ""
            reason = "unformattable"
        else:
            reason = ""
        text = message
        if record.exc_info and record.exc_info[1] is not None:
            text += " " + str(record.exc_info[1])
        if not reason:
            reason = boundary_reason(text)
        if reason:
            record.msg = f"[record withheld by the data boundary: it looked like a {reason}]"
            record.args = ()
            record.exc_info = record.exc_text = None
            record.stack_info = None
        elif _CONTROL.search(message):
            # One record, one line: a value from a request cannot forge another line.
            record.msg = _CONTROL.sub(_escape, message)
            record.args = ()
        return True


# C0 and C1 controls (newlines included), DEL, and the Unicode line and paragraph separators.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _escape(match: re.Match) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


class JsonLineFormatter(JsonFormatter):
    """One JSON object per line (CONDUIT_LOG_FORMAT=json), extra fields judged by the boundary.

    BoundaryFilter on the handler has already judged the message and the exception; a JSON line
    also carries the record's extra fields, which the text format never prints, so they are
    judged here with the same detection.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("rename_fields", {"levelname": "level", "name": "logger", "asctime": "time"})
        super().__init__(*args, **kwargs)

    def process_log_record(self, log_data: dict[str, Any]) -> dict[str, Any]:
        return boundary_scrub(log_data)
