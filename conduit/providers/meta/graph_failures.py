"""How a Graph call fails: GraphCallFailed, Meta's error envelope read as a GraphError, and what
its codes mean for the caller.

Nothing Meta writes in an error's `message`, `error_user_title` or
`error_user_msg` is kept (it may carry anything, the request included): a
failure keeps the HTTP status, the numeric code and subcode, `is_transient`,
a token-shaped `fbtrace_id`, and the wait Meta announced.
"""

from __future__ import annotations

import http.client
import json
import re
from typing import Mapping

from conduit.providers.meta.errors import message_hint
from conduit.providers.meta.graph_usage import USAGE_HEADER, _int, retry_after_seconds

# Error meanings are data (STYLE habit 14): code -> outcome, with where each row comes from.
# Throttled, not applied: graph-api/guides/error-handling and the rate-limiting BUC table.
THROTTLING_CODES = frozenset(
    {
        4,  # application request limit
        17,  # user request limit
        32,  # Page request limit (Page calls with a user token)
        613,  # calls within one hour exceeded (613/2534040 included)
        80001,  # business use case: Pages
        80002,  # business use case: Instagram
        80006,  # business use case: Messenger
    }
)
# 190: the token is invalid or expired, any subcode (458, 459, 460, 463, 464, 467...; the
# error-handling guide); 104: the call carried no token (recorded answers).
TOKEN_INVALID_CODES = frozenset({104, 190})
# Meta documents only that cursors "must not be stored or assumed valid later"; this
# project assumes an expired one answers 400 code 100 (GraphMethodException) to a
# request that carried `after` (docs/platforms/meta.md#reading-back).
INVALID_PARAMETER_CODE = 100

THROTTLED = "throttled"
TOKEN_INVALID = "token_invalid"
EXPIRED_CURSOR = "expired_cursor"
TRANSIENT = "transient"
FAILED = "failed"

_TRACE_ID = re.compile(r"[A-Za-z0-9_\-]{1,64}")


class GraphCallFailed(Exception):
    """A Graph call that gave no usable answer. `kind` is Conduit's own token, safe to keep.

    kinds: url_refused (not https to one of GRAPH_HOSTS, nor http on this host), timeout, transport
    (no answer: `sent` says whether the request left the process), too_large,
    malformed (the answer is not JSON of the expected shape), graph (GraphError).
    """

    def __init__(self, kind: str, message: str, *, sent: bool = True) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.sent = sent


class GraphError(GraphCallFailed):
    """Meta answered with an error. Only numbers and a token-shaped trace id are kept."""

    def __init__(
        self,
        *,
        status: int,
        code: int | None,
        subcode: int | None,
        is_transient: bool,
        fbtrace_id: str,
        retry_after: float | None,
        had_cursor: bool = False,
        message_hint: str = "",
    ) -> None:
        detail = (
            f"HTTP {status}"
            + (f", code {code}" if code is not None else "")
            + (f"/{subcode}" if subcode is not None else "")
        )
        super().__init__("graph", f"Meta answered {detail}")
        self.status = status
        self.code = code
        self.subcode = subcode
        self.is_transient = is_transient
        self.fbtrace_id = fbtrace_id
        # Seconds Meta announced before access returns (estimated_time_to_regain_access), or None.
        self.retry_after = retry_after
        # Whether the failed request carried a paging position Meta gave (an expired cursor's sign).
        self.had_cursor = had_cursor
        # conduit.providers.meta.errors' own phrase for what Meta's text said ("already replied"),
        # or "": the one thing of the text that is kept.
        self.message_hint = message_hint

    @property
    def meaning(self) -> str:
        return graph_error_meaning(self)


def graph_error_meaning(error: GraphError) -> str:
    """What a Graph error means for the caller: throttled, token_invalid, expired_cursor,
    transient or failed. Unknown codes take the conservative `failed`."""
    if error.code in THROTTLING_CODES:
        return THROTTLED
    if error.code in TOKEN_INVALID_CODES:
        return TOKEN_INVALID
    if error.code == INVALID_PARAMETER_CODE and error.had_cursor:
        return EXPIRED_CURSOR
    if error.status >= 500 or error.is_transient:
        return TRANSIENT
    return FAILED


def graph_error(
    status: int, payload: bytes, headers: Mapping[str, str] | http.client.HTTPMessage, *, had_cursor: bool
) -> GraphError:
    """Meta's error envelope as a GraphError; any shape it may take, never its text."""
    try:
        envelope = json.loads(payload)
        error = envelope.get("error") if isinstance(envelope, dict) else None
    except (ValueError, RecursionError):
        error = None
    error = error if isinstance(error, dict) else {}
    trace = error.get("fbtrace_id")
    text = error.get("message")
    return GraphError(
        status=status,
        code=_int(error.get("code")),
        subcode=_int(error.get("error_subcode")),
        is_transient=error.get("is_transient") is True,
        fbtrace_id=trace if isinstance(trace, str) and _TRACE_ID.fullmatch(trace) else "",
        retry_after=retry_after_seconds(headers.get(USAGE_HEADER)),
        had_cursor=had_cursor,
        message_hint=message_hint(text if isinstance(text, str) else ""),
    )
