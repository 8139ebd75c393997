"""Graph's paging as recorded: cursor pages (`cursors`, `next`) and time pages (`/feed`, `/posts`)."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlencode

from simulators.meta.errors import GraphError
from simulators.meta.shapes import parse_time

if TYPE_CHECKING:
    from simulators.meta.state import SimulatorState

DEFAULT_LIMIT = 25


def _limit(query: dict, cap: int, default: int = DEFAULT_LIMIT) -> int:
    try:
        return max(1, min(cap, int(query.get("limit", [str(default)])[0])))
    except ValueError:
        raise GraphError(100, message="(#100) Param limit must be a number") from None


def _key(row) -> tuple[float, int]:
    return (row["created"], row["seq"])


def _page(
    state: SimulatorState,
    rows: list,
    query: dict,
    *,
    newest_first: bool,
    cap: int,
    render,
    base_url: str,
    path: str,
    before: bool = True,
    always: bool = True,
) -> dict:
    """One page of rows by (created, seq), cursor-paged: `paging.cursors.{before,after}` and `next`
    (absent on the last page). `before=False`: only `cursors.after`, and `always=False`: no paging
    at all on a single page (the conversation endpoints, as recorded)."""
    limit = _limit(query, cap)
    ordered = sorted(rows, key=_key, reverse=newest_first)
    after = query.get("after", [""])[0]
    if after:
        position = state.cursor_decode(after)
        ordered = [r for r in ordered if (_key(r) < position if newest_first else _key(r) > position)]
    page, more = ordered[:limit], len(ordered) > limit
    result: dict = {"data": [render(r) for r in page]}
    if page and (always or more or after):
        cursors = {"before": state.cursor_encode(_key(page[0]))} if before else {}
        cursors["after"] = state.cursor_encode(_key(page[-1]))
        paging: dict = {"cursors": cursors}
        if more:
            params = {k: v[0] for k, v in query.items() if k != "after"}
            params["after"] = cursors["after"]
            paging["next"] = f"{base_url}{path}?{urlencode(params)}"
        result["paging"] = paging
    return result


TIME_PAGING_PARAMS = ("since", "until", "__paging_token", "__previous", "after", "before")


def _time_page(
    state: SimulatorState, rows: list, query: dict, *, cap: int, render, base_url: str, path: str
) -> dict:
    """One page of a time-paged list (`/feed`, `/posts`), newest first, as recorded from Meta:
    `paging.previous` = the request with `since=<newest item's time>&__paging_token=..&__previous=1`,
    `paging.next` = the request with `until=<oldest item's time>&__paging_token=..`; no `cursors`;
    no `next` on the last page. `until` alone bounds the list exclusively (Conduit's window); with a
    `__paging_token` it is inclusive and the token places the page edge within that second."""
    limit = _limit(query, cap)
    value = lambda name: query.get(name, [""])[0]
    since = parse_time(value("since")) if value("since") else None
    until = parse_time(value("until")) if value("until") else None
    token = value("__paging_token")
    position = state.paging_token_decode(token) if token else None
    backwards = bool(value("__previous")) and position is not None
    ordered = sorted(rows, key=_key, reverse=True)
    if position is None:
        ordered = [
            r
            for r in ordered
            if (since is None or r["created"] >= since) and (until is None or r["created"] < until)
        ]
    elif backwards:
        ordered = [r for r in ordered if _key(r) > position and (since is None or r["created"] >= since)]
    else:
        ordered = [
            r
            for r in ordered
            if _key(r) < position
            and (until is None or r["created"] <= until)
            and (since is None or r["created"] >= since)
        ]
    page = ordered[-limit:] if backwards else ordered[:limit]
    more = len(ordered) > limit if not backwards else True
    result: dict = {"data": [render(r) for r in page]}
    if page:
        base = [(k, v[0]) for k, v in query.items() if k not in TIME_PAGING_PARAMS]
        kept_since = [("since", value("since"))] if value("since") and not backwards else []
        previous = base + [
            ("since", str(int(page[0]["created"]))),
            ("__paging_token", state.paging_token_encode(_key(page[0]))),
            ("__previous", "1"),
        ]
        paging = {"previous": f"{base_url}{path}?{urlencode(previous)}"}
        if more and not backwards:
            following = (
                base
                + kept_since
                + [
                    ("until", str(int(page[-1]["created"]))),
                    ("__paging_token", state.paging_token_encode(_key(page[-1]))),
                ]
            )
            paging["next"] = f"{base_url}{path}?{urlencode(following)}"
        result["paging"] = paging
    return result
