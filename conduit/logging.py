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

# Names of environment variables whose values are credentials.
SECRET_NAMES = re.compile(r"SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL|API_?KEY|PRIVATE", re.IGNORECASE)
LOOKS_LIKE_CREDENTIAL = re.compile(
    r"whsec_[A-Za-z0-9+/=]{8,}"                     # Standard Webhooks secrets
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


class BoundaryFilter(logging.Filter):
    """Replace a record that looks like it carries a credential or a message body."""

    def __init__(self, name: str = "") -> None:
        super().__init__(name)
        for key, value in os.environ.items():
            if SECRET_NAMES.search(key):
                register_secret(value)

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
            if LOOKS_LIKE_CREDENTIAL.search(text) or any(s in text for s in _KNOWN_SECRETS):
                reason = "credential"
            elif LOOKS_LIKE_BODY.search(text):
                reason = "message body"
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
