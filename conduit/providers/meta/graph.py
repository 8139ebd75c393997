"""A small Graph API client: one bounded HTTP call and its answer.

Used by the Meta reader (conduit.providers.meta.reader) and the Meta
transports. Plain http.client: `https://` for Meta itself, `http://` only on
this host (the Graph simulator), so a token never crosses a network in the clear.
How a call fails and what Meta's codes mean is conduit.providers.meta.graph_failures';
the usage header graph_usage's; the next page's position graph_paging's.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
from dataclasses import dataclass
from typing import Mapping
from urllib.parse import urlencode, urlsplit

from conduit.loopback import credential_url_refusal, loopback_address
from conduit.providers.keepalive import ExchangeFailed, kept_connection

# The failures, usage and paging names are read from here too (the reader, the transports, tests);
# `graph_error` is called by its name here (`_graph_answer`).
from conduit.providers.meta.graph_failures import (  # noqa: F401
    EXPIRED_CURSOR,
    FAILED,
    THROTTLED,
    THROTTLING_CODES,
    TOKEN_INVALID,
    TRANSIENT,
    GraphCallFailed,
    GraphError,
    graph_error,
)
from conduit.providers.meta.graph_paging import _carries_position, next_params  # noqa: F401
from conduit.providers.meta.graph_usage import (  # noqa: F401
    MAX_RETRY_AFTER_SECONDS,
    USAGE_DEFAULT_PAUSE_SECONDS,
    USAGE_HEADER,
    retry_after_seconds,
    usage_pause_seconds,
)

DEFAULT_MAX_BYTES = 8 * 1024 * 1024


# Meta's Graph hosts: the only places a Meta access token is ever sent (besides a simulator on
# this host, over plain HTTP).
GRAPH_HOSTS = ("graph.facebook.com", "graph.instagram.com")


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
        return http.client.HTTPSConnection(
            parts.hostname, parts.port or 443, timeout=timeout, context=context
        ), prefix
    address = loopback_address(base_url)
    if address is None:
        raise GraphCallFailed(
            "url_refused", "the Graph URL must be https://, or http:// on this host", sent=False
        )
    return http.client.HTTPConnection(*address, timeout=timeout), prefix


def _headers(body: bytes | None, bearer: str | None = None) -> dict[str, str]:
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    if bearer:
        headers["Authorization"] = f"Bearer {bearer}"
    return headers


def _exchange_kept(
    base_url: str,
    method: str,
    path: str,
    timeout: float,
    max_bytes: int,
    body: bytes | None = None,
    bearer: str | None = None,
) -> tuple[int, http.client.HTTPMessage, bytes]:
    """The request on this thread's kept-alive connection to the Graph host
    (conduit.providers.keepalive: the sandbox transport's guards), failures as GraphCallFailed."""
    parts = urlsplit(base_url)
    if parts.scheme == "https" and parts.hostname:
        scheme, host, port = "https", parts.hostname, parts.port or 443
    else:
        address = loopback_address(base_url)
        if address is None:
            raise GraphCallFailed(
                "url_refused", "the Graph URL must be https://, or http:// on this host", sent=False
            )
        scheme, (host, port) = "http", address
    kept = kept_connection(scheme, host, port, timeout)
    try:
        return kept.exchange(method, path, body, _headers(body, bearer), max_bytes=max_bytes)
    except ExchangeFailed as exc:
        timed_out = isinstance(exc.__cause__, TimeoutError)
        if exc.stage == "connect":  # the connection never opened: nothing left the process
            raise GraphCallFailed(
                "timeout" if timed_out else "transport",
                f"the Graph connection failed ({type(exc.__cause__).__name__})",
                sent=False,
            ) from None
        if exc.stage == "timeout":
            raise GraphCallFailed("timeout", f"no Graph answer within {timeout:g} s") from None
        raise GraphCallFailed(
            "transport", f"the Graph connection failed ({type(exc.__cause__).__name__})", sent=True
        ) from None


def graph_request(
    *,
    method: str = "GET",
    base_url: str,
    path: str,
    params: Mapping[str, str],
    access_token: str | None,
    timeout: float,
    max_bytes: int = DEFAULT_MAX_BYTES,
    keep_alive: bool = False,
    json_body: Mapping | None = None,
) -> GraphResponse:
    """One Graph call: `<base_url>/<path>?<params>&access_token=...`, its JSON object back
    (`access_token` None: a call that carries none, as a login's code exchange). `json_body` is
    sent as the request's JSON body with the token as `Authorization: Bearer`, as the WhatsApp
    Cloud API documents its messages (every recorded call sends the header, none the parameter).

    Raises GraphError when Meta answers an error, GraphCallFailed otherwise. The
    answer is read to at most `max_bytes` + 1 bytes: one byte past the limit
    proves it too large without buffering it. The token goes in the query, as
    Meta documents; it is never part of any failure.
    """
    refusal = credential_url_refusal(base_url, GRAPH_HOSTS)
    if refusal:
        # Checked before anything is built: the token never leaves for any other host.
        raise GraphCallFailed("url_refused", f"the Graph URL is refused: {refusal}", sent=False)
    body = None if json_body is None else json.dumps(json_body, separators=(",", ":")).encode()
    bearer = access_token if body is not None else None
    in_query = {} if access_token is None or bearer else {"access_token": access_token}
    query = urlencode({**params, **in_query})
    if keep_alive:
        prefix = urlsplit(base_url).path.rstrip("/")
        status, headers, payload = _exchange_kept(
            base_url, method, f"{prefix}/{path.lstrip('/')}?{query}", timeout, max_bytes, body, bearer
        )
        return _graph_answer(
            status, headers, payload, max_bytes=max_bytes, had_cursor=_carries_position(params)
        )
    conn, prefix = _connection(base_url, timeout)
    sent = False
    try:
        conn.connect()
        # Connected: from here the request may reach Meta, whatever fails next.
        sent = True
        conn.request(
            method, f"{prefix}/{path.lstrip('/')}?{query}", body=body, headers=_headers(body, bearer)
        )
        response = conn.getresponse()
        payload = response.read(max_bytes + 1)
    except (socket.timeout, TimeoutError):
        raise GraphCallFailed("timeout", f"no Graph answer within {timeout:g} s", sent=sent) from None
    except (OSError, http.client.HTTPException) as exc:
        raise GraphCallFailed(
            "transport", f"the Graph connection failed ({type(exc).__name__})", sent=sent
        ) from None
    finally:
        conn.close()
    return _graph_answer(
        response.status, response.headers, payload, max_bytes=max_bytes, had_cursor=_carries_position(params)
    )


def _graph_answer(
    status: int, headers: http.client.HTTPMessage, payload: bytes, *, max_bytes: int, had_cursor: bool
) -> GraphResponse:
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


def graph_get(
    *,
    base_url: str,
    path: str,
    params: Mapping[str, str],
    access_token: str | None,
    timeout: float,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> GraphResponse:
    """`graph_request` with GET: a read."""
    return graph_request(
        method="GET",
        base_url=base_url,
        path=path,
        params=params,
        access_token=access_token,
        timeout=timeout,
        max_bytes=max_bytes,
    )
