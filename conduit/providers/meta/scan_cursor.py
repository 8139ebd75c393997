"""The Meta readers' scan position: ONE resumable Conduit cursor for the whole fan-out, `m2.` +
urlsafe base64 (no padding) of compact JSON holding

| key | meaning |
| --- | --- |
| `s` | the scan id, minted on the generation's first page and returned on every page |
| `n` | the page counter: every cursor of a generation differs (staging refuses a cycle) |
| `p` | the phase: 0 comments, 1 conversations (DMs) |
| `m`, `e`, `u` | the list's next position, whether the list is exhausted, the list's `until` after a restart |
| `q` | media/posts (or conversations) listed but not yet read: `[id, unix seconds or null]` |
| `c`, `a`, `d` | the media/post being read, its comments' next position, whether its comments are exhausted |
| `r`, `b` | Instagram comments whose replies overflowed the inline list, and the next position of the first one's `/replies` |
| `k`, `w` | the last media/posts finished (skipped when the list is re-read) and the oldest finished time |
| `x` | how many expired cursors this generation has recovered from |

A position is the query of Graph's `paging.next` as given (graph.next_params):
`after` for cursor paging, `until` and `__paging_token` for the time-based
paging of `/feed` and `/posts`, `offset` for offset paging; `paging.cursors`
is never required. (`m1.` cursors, which held bare `after` values, are read
as cursor positions.)
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any

from conduit.providers.base import MAX_REF_LENGTH, PageFailure

CURSOR_PREFIX = "m2."
OLD_CURSOR_PREFIX = "m1."
MAX_CURSOR_BYTES = 4096  # the token bound of docs/concepts/reconciliation.md#limits
MAX_ID_LENGTH = MAX_REF_LENGTH  # Instagram message ids run to about 164 characters
MAX_POSITION_PARAMS = 8
MAX_POSITION_VALUE = 1024
COMMENTS_PHASE, CONVERSATIONS_PHASE = 0, 1


@dataclass
class _Scan:
    """The fan-out's position: what the Conduit cursor carries (see the module docstring)."""

    s: str
    n: int = 0
    p: int = COMMENTS_PHASE
    m: dict | None = None
    e: bool = False
    u: int | None = None
    q: list = field(default_factory=list)
    c: list | None = None
    a: dict | None = None
    d: bool = False
    r: list = field(default_factory=list)
    b: dict | None = None
    k: list = field(default_factory=list)
    w: int | None = None
    x: int = 0

    @property
    def phase_done(self) -> bool:
        return self.e and not self.q and self.c is None and not self.r

    @property
    def finished(self) -> bool:
        return self.p == CONVERSATIONS_PHASE and self.phase_done

    def next_phase(self) -> None:
        """The comments are all read: the conversations are listed next, from their start."""
        self.p, self.m, self.e, self.u, self.k, self.w = CONVERSATIONS_PHASE, None, False, None, [], None

    def encode(self) -> str:
        for _ in range(2):
            text = json.dumps(self.__dict__, separators=(",", ":"), sort_keys=True)
            cursor = CURSOR_PREFIX + base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")
            if len(cursor) <= MAX_CURSOR_BYTES:
                return cursor
            # The skip list is an optimisation: without it a list restart re-reads a little more.
            self.k = []
        raise PageFailure(
            "protocol", "graph_cursor_too_long", f"the scan position exceeds {MAX_CURSOR_BYTES} bytes"
        )

    @classmethod
    def decode(cls, cursor: str) -> _Scan:
        refused = PageFailure("protocol", "cursor_unreadable", "the scan cursor is not one this reader wrote")
        old = cursor.startswith(OLD_CURSOR_PREFIX)
        if not (cursor.startswith(CURSOR_PREFIX) or old) or len(cursor) > MAX_CURSOR_BYTES:
            raise refused
        body = cursor[len(CURSOR_PREFIX) :]
        try:
            state = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
            if old and isinstance(state, dict):
                # An m1 cursor held bare `after` values: the same positions, in today's form.
                state = {
                    **state,
                    **{
                        key: {"after": state[key]}
                        for key in ("m", "a", "b")
                        if isinstance(state.get(key), str)
                    },
                }
            scan = cls(**state)
        except (ValueError, TypeError, binascii.Error, RecursionError):
            raise refused from None

        def parent(entry: Any) -> bool:
            return (
                isinstance(entry, list)
                and len(entry) == 2
                and _id(entry[0]) is not None
                and (entry[1] is None or isinstance(entry[1], int))
            )

        if not (
            isinstance(scan.s, str)
            and scan.s
            and isinstance(scan.n, int)
            and isinstance(scan.x, int)
            and scan.p in (COMMENTS_PHASE, CONVERSATIONS_PHASE)
            and all(v is None or _position(v) for v in (scan.m, scan.a, scan.b))
            and all(v is None or isinstance(v, int) for v in (scan.u, scan.w))
            and isinstance(scan.q, list)
            and all(parent(entry) for entry in scan.q)
            and (scan.c is None or parent(scan.c))
            and all(isinstance(v, list) and all(_id(i) for i in v) for v in (scan.r, scan.k))
        ):
            raise refused
        return scan


def _position(value: Any) -> bool:
    """Whether a stored position is one this reader wrote: a small map of query strings."""
    return (
        isinstance(value, dict)
        and 0 < len(value) <= MAX_POSITION_PARAMS
        and all(
            isinstance(k, str)
            and isinstance(v, str)
            and len(k) <= 64
            and len(v) <= MAX_POSITION_VALUE
            and k.isprintable()
            and v.isprintable()
            for k, v in value.items()
        )
    )


def _id(value: Any) -> str | None:
    """A Graph id fit for a path and the cursor, or None."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if (
        isinstance(value, str)
        and 0 < len(value) <= MAX_ID_LENGTH
        and value.isprintable()
        and "/" not in value
    ):
        return value
    return None
