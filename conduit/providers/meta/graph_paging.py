"""Graph paging: the position of the next page as Meta gave it, and whether a request carries one."""

from __future__ import annotations

from typing import Mapping
from urllib.parse import parse_qsl, urlsplit

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
