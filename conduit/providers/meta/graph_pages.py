"""A Graph answer in a source page's terms: an edge's items and where it continues, Meta's times,
an item's author, and a failed Graph call as the PageFailure a scan records."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from conduit.providers.base import PageFailure
from conduit.providers.meta.graph_failures import (
    THROTTLED,
    TOKEN_INVALID,
    TRANSIENT,
    GraphCallFailed,
    GraphError,
)
from conduit.providers.meta.graph_paging import next_params
from conduit.providers.meta.scan_cursor import _position


def _when(value: Any) -> datetime | None:
    """Meta's ISO time (`2026-11-30T10:00:00+0000`) as an aware datetime, or None."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def _malformed(what: str) -> PageFailure:
    return PageFailure("protocol", "malformed_page", f"the Graph answer for {what} is not a list page")


def _edge(document: dict, what: str) -> tuple[list, dict | None]:
    """An edge's items and the position to continue from, or None when `paging.next` is absent."""
    data = document.get("data")
    if not isinstance(data, list) or not isinstance(document.get("paging", {}), dict):
        raise _malformed(what)
    try:
        position = next_params(document)
    except ValueError:
        raise _malformed(what) from None
    if position is not None and not _position(position):
        raise _malformed(what)
    return data, position


def _failure(error: GraphCallFailed, timeout: float, what: str) -> PageFailure:
    """A Graph failure as a page failure: Conduit's words, Meta's numbers, never its text."""
    if isinstance(error, GraphError):
        detail = f"{error.message.removeprefix('Meta answered ')} reading {what}" + (
            f" (fbtrace_id {error.fbtrace_id})" if error.fbtrace_id else ""
        )
        meaning = error.meaning
        if meaning == THROTTLED:
            return PageFailure(
                "provider",
                "graph_throttled",
                f"Meta throttled the read: {detail}",
                retry_after=error.retry_after,
            )
        if meaning == TOKEN_INVALID:
            return PageFailure(
                "credentials",
                "graph_token_invalid",
                f"Meta refused the source's access token: {detail}; re-authorise the source",
            )
        if meaning == TRANSIENT:
            return PageFailure("provider", "graph_unavailable", f"Meta was unavailable: {detail}")
        return PageFailure("provider", "graph_error", f"Meta refused the read: {detail}")
    if error.kind == "timeout":
        return PageFailure("timeout", "page_timeout", f"no page within {timeout:g} s")
    if error.kind == "transport":
        return PageFailure("transport", "connection_failed", error.message)
    if error.kind == "too_large":
        return PageFailure("protocol", "page_too_large", "the page exceeds its byte limit")
    if error.kind == "url_refused":
        return PageFailure("protocol", "graph_url_refused", error.message)
    return PageFailure("protocol", "malformed_page", f"the Graph answer for {what} is not JSON")


def _author(comment: dict, keys: tuple[str, ...]) -> dict:
    author = comment.get("from") if isinstance(comment.get("from"), dict) else {}
    return {key: author[key] for key in keys if key in author}
