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


def _environment_secrets() -> list[str]:
    return [v for k, v in os.environ.items() if SECRET_NAMES.search(k) and len(v) >= MIN_SECRET_LENGTH]


class BoundaryFilter(logging.Filter):
    """Replace a record that looks like it carries a credential or a message body."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            text = record.getMessage()
        except Exception:  # a malformed record: keep nothing of it
            text = ""
            reason = "unformattable"
        else:
            reason = ""
        if record.exc_info and record.exc_info[1] is not None:
            text += " " + str(record.exc_info[1])
        if not reason:
            if LOOKS_LIKE_CREDENTIAL.search(text) or any(s in text for s in _environment_secrets()):
                reason = "credential"
            elif LOOKS_LIKE_BODY.search(text):
                reason = "message body"
        if reason:
            record.msg = f"[record withheld by the data boundary: it looked like a {reason}]"
            record.args = ()
            record.exc_info = record.exc_text = None
            record.stack_info = None
        return True
