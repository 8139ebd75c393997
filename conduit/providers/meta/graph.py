"""A small Graph API client: one bounded HTTP call, Meta's error envelope, and what its codes mean.

Used by the Meta reader (conduit.providers.meta.reader) and, later, the Meta
transports. Plain http.client: `https://` for Meta itself, `http://` only on
this host (the Graph simulator), so a token never crosses a network in the clear.

Nothing Meta writes in an error's `message`, `error_user_title` or
`error_user_msg` is kept (it may carry anything, the request included): a
failure keeps the HTTP status, the numeric code and subcode, `is_transient`,
a token-shaped `fbtrace_id`, and the wait Meta announced.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import ssl
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import parse_qsl, urlencode, urlsplit

from conduit.loopback import credential_url_refusal, loopback_address
from conduit.providers.keepalive import ExchangeFailed, kept_connection
from conduit.providers.meta.errors import message_hint

# Error meanings are data (STYLE habit 14): code -> outcome, with where each row comes from.
# Throttled, not applied: graph-api/guides/error-handling and the rate-limiting BUC table.
THROTTLING_CODES = frozenset({
    4,      # application request limit
    17,     # user request limit
    32,     # Page request limit (Page calls with a user token)
    613,    # calls within one hour exceeded (613/2534040 included)
    80001,  # business use case: Pages
    80002,  # business use case: Instagram
    80006,  # business use case: Messenger
})
# Token invalid or expired, any subcode (458, 459, 460, 463, 464, 467...): error-handling guide.
TOKEN_INVALID_CODE = 190
# Meta documents only that cursors "must not be stored or assumed valid later"; this
# project assumes an expired one answers 400 code 100 (GraphMethodException) to a
# request that carried `after` (META_CONTRACT.md).
INVALID_PARAMETER_CODE = 100

THROTTLED = "throttled"
TOKEN_INVALID = "token_invalid"
EXPIRED_CURSOR = "expired_cursor"
TRANSIENT = "transient"
FAILED = "failed"

USAGE_HEADER = "X-Business-Use-Case-Usage"
# A wait longer than a day is not a wait a scan should honour literally.
MAX_RETRY_AFTER_SECONDS = 24 * 3600
_TRACE_ID = re.compile(r"[A-Za-z0-9_\-]{1,64}")
DEFAULT_MAX_BYTES = 8 * 1024 * 1024


# Meta's Graph hosts: the only places a Meta access token is ever sent (besides a simulator on
# this host, over plain HTTP).
GRAPH_HOSTS = ("graph.facebook.com", "graph.instagram.com")


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

    def __init__(self, *, status: int, code: int | None, subcode: int | None, is_transient: bool,
                 fbtrace_id: str, retry_after: float | None, had_cursor: bool = False,
                 message_hint: str = "") -> None:
        detail = f"HTTP {status}" + (f", code {code}" if code is not None else "") + (
            f"/{subcode}" if subcode is not None else "")
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
    if error.code == TOKEN_INVALID_CODE:
        return TOKEN_INVALID
    if error.code == INVALID_PARAMETER_CODE and error.had_cursor:
        return EXPIRED_CURSOR
    if error.status >= 500 or error.is_transient:
        return TRANSIENT
    return FAILED


def _int(value: Any) -> int | None:
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
        for entry in entries if isinstance(entry, dict)
    ]


def retry_after_seconds(header: str | None) -> float | None:
    """The longest `estimated_time_to_regain_access` (minutes) in X-Business-Use-Case-Usage, in seconds.

    A zero wait, or a header that is not that shape, announces nothing.
    """
    minutes = [_int(entry.get("estimated_time_to_regain_access")) for entry in _usage_entries(header)]
    longest = max((m for m in minutes if m), default=0)
    return float(min(longest * 60, MAX_RETRY_AFTER_SECONDS)) if longest else None


def graph_error(status: int, payload: bytes, headers: Mapping[str, str] | http.client.HTTPMessage,
                *, had_cursor: bool) -> GraphError:
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
        status=status, code=_int(error.get("code")), subcode=_int(error.get("error_subcode")),
        is_transient=error.get("is_transient") is True,
        fbtrace_id=trace if isinstance(trace, str) and _TRACE_ID.fullmatch(trace) else "",
        retry_after=retry_after_seconds(headers.get(USAGE_HEADER)), had_cursor=had_cursor,
        message_hint=message_hint(text if isinstance(text, str) else ""),
    )


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


# Query parameters of a `paging.next` URL that are the caller's own request, not the position:
# the token never rides in a stored cursor, and fields and limit are the reader's to send.
_OWN_PARAMS = frozenset({"access_token", "fields", "limit", "appsecret_proof", "pretty"})
# Parameters that carry a position Meta handed out (cursor, time-based and offset paging).
POSITION_PARAMS = frozenset({"after", "before", "__paging_token", "offset"})
MAX_NEXT_URL = 4096


def _carries_position(params: Mapping[str, str]) -> bool:
    return any(name in params for name in POSITION_PARAMS)


def next_params(document: dict) -> dict[str, str] | None:
    """The position of the page after this one, as Meta gave it: the query parameters of
    `paging.next` but the request's own (token, fields, limit), or None on the last page.

    Graph pages three ways (graph-api/results: cursor, time-based and offset paging); the
    `next` URL is followed as given whichever it is, and `paging.cursors` is never required.
    Raises ValueError when `next` is there but is not a URL whose query can be followed.
    """
    paging = document.get("paging", {})
    if not isinstance(paging, dict):
        raise ValueError("paging is not an object")
    following = paging.get("next")
    if not following:
        return None
    if not isinstance(following, str) or len(following) > MAX_NEXT_URL or not following.isprintable():
        raise ValueError("paging.next is not a URL")
    pairs = parse_qsl(urlsplit(following).query, keep_blank_values=True)
    # A blank parameter (v10 links carry `since&__previous` bare) says nothing: the caller's own stays.
    position = {name: value for name, value in pairs if name not in _OWN_PARAMS and value}
    if not position:
        # A next link with no position of its own would read the same page again.
        cursors = paging.get("cursors")
        after = cursors.get("after") if isinstance(cursors, dict) else None
        if not isinstance(after, str) or not after:
            raise ValueError("paging.next carries no position")
        position = {"after": after}
    return position


@dataclass(frozen=True)
class GraphResponse:
    document: dict
    size_bytes: int
    # Seconds the account should pause: its usage header says it is near the limit (or None).
    usage_pause: float | None = None


def _connection(base_url: str, timeout: float) -> tuple[http.client.HTTPConnection, str]:
    """A connection to the base URL's host and the URL's path prefix; refuses plain http off this host."""
    parts = urlsplit(base_url)
    prefix = parts.path.rstrip("/")
    if parts.scheme == "https" and parts.hostname:
        context = ssl.create_default_context()
        return http.client.HTTPSConnection(parts.hostname, parts.port or 443, timeout=timeout,
                                           context=context), prefix
    address = loopback_address(base_url)
    if address is None:
        raise GraphCallFailed("url_refused", "the Graph URL must be https://, or http:// on this host",
                              sent=False)
    return http.client.HTTPConnection(*address, timeout=timeout), prefix


def _exchange_kept(base_url: str, method: str, path: str, timeout: float, max_bytes: int,
                   ) -> tuple[int, http.client.HTTPMessage, bytes]:
    """The request on this thread's kept-alive connection to the Graph host
    (conduit.providers.keepalive: the sandbox transport's guards), failures as GraphCallFailed."""
    parts = urlsplit(base_url)
    if parts.scheme == "https" and parts.hostname:
        scheme, host, port = "https", parts.hostname, parts.port or 443
    else:
        address = loopback_address(base_url)
        if address is None:
            raise GraphCallFailed("url_refused", "the Graph URL must be https://, or http:// on this host",
                                  sent=False)
        scheme, (host, port) = "http", address
    kept = kept_connection(scheme, host, port, timeout)
    try:
        return kept.exchange(method, path, None, {"Accept": "application/json"}, max_bytes=max_bytes)
    except ExchangeFailed as exc:
        timed_out = isinstance(exc.__cause__, TimeoutError)
        if exc.stage == "connect":  # the connection never opened: nothing left the process
            raise GraphCallFailed("timeout" if timed_out else "transport",
                                  f"the Graph connection failed ({type(exc.__cause__).__name__})",
                                  sent=False) from None
        if exc.stage == "timeout":
            raise GraphCallFailed("timeout", f"no Graph answer within {timeout:g} s") from None
        raise GraphCallFailed("transport", f"the Graph connection failed ({type(exc.__cause__).__name__})",
                              sent=True) from None


def graph_request(
    *, method: str = "GET", base_url: str, path: str, params: Mapping[str, str], access_token: str,
    timeout: float, max_bytes: int = DEFAULT_MAX_BYTES, keep_alive: bool = False,
) -> GraphResponse:
    """One Graph call: `<base_url>/<path>?<params>&access_token=...`, its JSON object back.

    Raises GraphError when Meta answers an error, GraphCallFailed otherwise. The
    answer is read to at most `max_bytes` + 1 bytes: one byte past the limit
    proves it too large without buffering it. The token goes in the query, as
    Meta documents; it is never part of any failure.
    """
    refusal = credential_url_refusal(base_url, GRAPH_HOSTS)
    if refusal:
        # Checked before anything is built: the token never leaves for any other host.
        raise GraphCallFailed("url_refused", f"the Graph URL is refused: {refusal}", sent=False)
    query = urlencode({**params, "access_token": access_token})
    if keep_alive:
        prefix = urlsplit(base_url).path.rstrip("/")
        status, headers, payload = _exchange_kept(base_url, method, f"{prefix}/{path.lstrip('/')}?{query}",
                                                  timeout, max_bytes)
        return _graph_answer(status, headers, payload, max_bytes=max_bytes, had_cursor=_carries_position(params))
    conn, prefix = _connection(base_url, timeout)
    sent = False
    try:
        conn.connect()
        # Connected: from here the request may reach Meta, whatever fails next.
        sent = True
        conn.request(method, f"{prefix}/{path.lstrip('/')}?{query}",
                     headers={"Accept": "application/json"})
        response = conn.getresponse()
        payload = response.read(max_bytes + 1)
    except (socket.timeout, TimeoutError):
        raise GraphCallFailed("timeout", f"no Graph answer within {timeout:g} s", sent=sent) from None
    except (OSError, http.client.HTTPException) as exc:
        raise GraphCallFailed("transport", f"the Graph connection failed ({type(exc).__name__})",
                              sent=sent) from None
    finally:
        conn.close()
    return _graph_answer(response.status, response.headers, payload, max_bytes=max_bytes,
                         had_cursor=_carries_position(params))


def _graph_answer(status: int, headers: http.client.HTTPMessage, payload: bytes, *, max_bytes: int,
                  had_cursor: bool) -> GraphResponse:
    """A whole answer as a GraphResponse, or GraphError / GraphCallFailed."""
    if len(payload) > max_bytes:
        raise GraphCallFailed("too_large", f"the Graph answer exceeds {max_bytes} bytes")
    if status != 200:
        raise graph_error(status, payload, headers, had_cursor=had_cursor)
    try:
        document = json.loads(payload)
    except (ValueError, RecursionError):
        raise GraphCallFailed("malformed", "the Graph answer is not JSON") from None
    if not isinstance(document, dict):
        raise GraphCallFailed("malformed", "the Graph answer is not an object")
    if "error" in document:
        raise graph_error(status, payload, headers, had_cursor=had_cursor)
    return GraphResponse(document, len(payload), usage_pause_seconds(headers.get(USAGE_HEADER)))


def graph_get(*, base_url: str, path: str, params: Mapping[str, str], access_token: str,
              timeout: float, max_bytes: int = DEFAULT_MAX_BYTES) -> GraphResponse:
    """`graph_request` with GET: a read."""
    return graph_request(method="GET", base_url=base_url, path=path, params=params,
                         access_token=access_token, timeout=timeout, max_bytes=max_bytes)
