"""The Meta source readers' fan-out: Instagram media and Page feed comments, read back from the Graph API.

A scan fans out (Instagram: `/{ig-user-id}/media`, then each media's
`/comments` with nested replies; Page: `/{page-id}/feed`, then each post's
`/comments?filter=stream`), then reads the account's DMs through the
Conversations API (`/{account}/conversations?platform=instagram|messenger`,
then each conversation's newest messages in one call), and the whole fan-out
is ONE resumable Conduit cursor (conduit.providers.meta.scan_cursor). The
two platforms' readers (conduit.providers.meta.platform_readers) say what
each call reads and how an answer's items take the webhook's shape; an
answer's edge and a failed call are read in a page's terms by
conduit.providers.meta.graph_pages.

Each page makes at most MAX_CALLS_PER_PAGE Graph calls, all within the page's
`timeout` and `max_bytes`, and stops once it holds `limit` items; an empty
page with a next cursor is normal. An edge is exhausted only when its answer
has no `paging.next`, never because a page came back short.

A stored Graph position that no longer works (400, code 100, on a request that
carried one; Meta warns cursors must not be kept) is recovered here: the
comments (or replies) of that media/post are re-read from their start, and an
expired list position re-lists from the start, bounded by `until` at the oldest
finished media and skipping the ones just finished. Staging deduplicates what
is read twice by key.

`since`/`until` bound the list (Graph `since`/`until`, unix seconds) and are
applied here to each comment's or message's own time, as [since, until); the
account's own replies are evidence, not events, and are kept whatever their
time. The last complete checkpoint is not used: a complete generation reads
everything the source holds.

DMs: the Conversations API lists conversations newest first and gives the
details of each conversation's 20 newest messages only (the declared loss
limitation of `message.created`); conversation reads are spaced at most
CONVERSATION_CALLS_PER_SECOND apart (Instagram documents about 2 calls a
second). A token that may not read conversations (Meta refuses the list with
a permission or capability code) skips the phase: comments still reconcile.
"""

from __future__ import annotations

import logging
import math
import secrets
import time
from datetime import datetime
from urllib.parse import quote

from conduit.providers.base import MAX_PAGE_BYTES, PageFailure, SourceConfig, SourcePage, SourceReader
from conduit.providers.meta.graph import EXPIRED_CURSOR, GraphCallFailed, GraphError, graph_get

# An answer's edge, times and failures (the platforms' readers and the tests import them from here too).
from conduit.providers.meta.graph_pages import _author, _edge, _failure, _malformed, _when  # noqa: F401

# The scan position's names are read from here too (tests, the recorded-answer checks).
from conduit.providers.meta.scan_cursor import (  # noqa: F401
    COMMENTS_PHASE,
    CONVERSATIONS_PHASE,
    _id,
    _position,
    _Scan,
)

logger = logging.getLogger("conduit.reconcile")

MAX_CALLS_PER_PAGE = 8
LIST_PAGE_SIZE = 20  # media/posts per list call: their ids ride in the cursor
COMMENTS_PAGE_MAX = 50  # Instagram's maximum for comment edges
RECENT_FINISHED = 20
MAX_CURSOR_RECOVERIES = 50
# A page stops calling once less than this share of its time is left, rather than miss its deadline.
RESERVE_TIME_SHARE = 0.25
# The Conversations API: details of the 20 newest messages of a conversation (Meta's limit), and
# Instagram's documented pace of about 2 calls a second.
CONVERSATION_MESSAGES = 20
CONVERSATIONS_PAGE_SIZE = 25
CONVERSATION_CALLS_PER_SECOND = 2.0
# Codes with which Meta refuses a token the conversations edge (no messaging permission or
# capability, or the edge "cannot be loaded due to missing permissions"): the DM phase is skipped.
_CONVERSATIONS_REFUSED = frozenset({3, 10, 100, *range(200, 300)})


class _GraphFanOutReader(SourceReader):
    """The fan-out both Meta readers share: a list of parents, then each parent's comments, then
    the account's conversations."""

    live = True  # it reads Meta (tests point it at the loopback simulator)
    # A complete read shows every public reply of the account under the comments it reads; its
    # private replies only where a conversation's newest messages still hold them (not compared).
    receipt_transports = frozenset({"meta-comment-reply"})

    object: str = ""
    field: str = ""
    list_edge: str = ""
    list_fields: str = ""
    list_time: str = ""
    comment_fields: str = ""
    comment_params: dict[str, str] = {}
    conversations_platform: str = ""
    message_fields = "id,created_time,from,to,message"

    # -- per platform --------------------------------------------------------

    def comments_limit(self, room: int) -> int:
        return max(1, min(COMMENTS_PAGE_MAX, room))

    def comment_items(self, comment: dict, parent: list, scan: _Scan) -> list[dict]:
        raise NotImplementedError(".comment_items() must be overridden.")

    def reply_items(self, reply: dict, comment_id: str, parent: list) -> list[dict]:
        return []

    # -- the page --------------------------------------------------------------

    def read_page(
        self,
        *,
        config: SourceConfig,
        base_url: str,
        since: datetime | None,
        until: datetime | None,
        cursor: str | None,
        limit: int,
        timeout: float,
        checkpoint: datetime | None = None,
        max_bytes: int = MAX_PAGE_BYTES,
    ) -> SourcePage:
        token = getattr(config, "access_token", "")
        if not token:
            raise PageFailure(
                "credentials",
                "graph_token_unavailable",
                f"source {config.name} has no access token in its environment variable",
            )
        account = _id(config.account_ref)
        if account is None:
            raise PageFailure(
                "protocol", "graph_account_invalid", "the source's account ref is not a Graph id"
            )
        scan = _Scan.decode(cursor) if cursor else _Scan(s="meta-" + secrets.token_hex(12))
        scan.n += 1
        deadline = time.monotonic() + timeout
        items: list[dict] = []
        size = calls = 0
        last_conversation_call = 0.0
        while True:
            self._settle(scan)
            if scan.finished or calls >= MAX_CALLS_PER_PAGE or len(items) >= limit:
                break
            left = deadline - time.monotonic()
            if calls and (left < timeout * RESERVE_TIME_SHARE or size > max_bytes // 2):
                break  # what was read is kept; the next page continues
            path, params, what = self._next_call(account, scan, since, until, limit - len(items))
            if scan.p == CONVERSATIONS_PHASE:
                wait = last_conversation_call + 1 / CONVERSATION_CALLS_PER_SECOND - time.monotonic()
                if wait > 0:
                    if calls and wait > left - timeout * RESERVE_TIME_SHARE:
                        break  # the pace would cost the deadline: the next page continues
                    time.sleep(wait)
                last_conversation_call = time.monotonic()
                left = deadline - last_conversation_call
            try:
                response = graph_get(
                    base_url=base_url,
                    path=path,
                    params=params,
                    access_token=token,
                    timeout=max(left, 0.001),
                    max_bytes=max_bytes - size,
                )
            except GraphError as error:
                calls += 1
                if error.meaning == EXPIRED_CURSOR:
                    self._recover(scan)
                    continue
                if self._conversations_refused(scan, error):
                    continue
                raise _failure(error, timeout, what) from None
            except GraphCallFailed as error:
                raise _failure(error, timeout, what) from None
            calls += 1
            size += response.size_bytes
            items.extend(self._apply(scan, response.document, what, since, until, account))
        parsed = self.normalize(items, config.account_ref, config)
        complete = scan.finished
        return SourcePage(
            scan_id=scan.s,
            observations=parsed.observations,
            rejections=parsed.rejections,
            receipts=[],
            next_cursor=None if complete else scan.encode(),
            complete=complete,
            size_bytes=size,
            own=parsed.own,
        )

    def _conversations_refused(self, scan: _Scan, error: GraphError) -> bool:
        """The token may not list conversations: the DM phase ends here (comments are unaffected)."""
        if (
            scan.p != CONVERSATIONS_PHASE
            or scan.c is not None
            or scan.q
            or scan.m is not None
            or error.code not in _CONVERSATIONS_REFUSED
        ):
            return False
        logger.warning(
            "meta read scan=%s conversations refused code=%s: DMs not read back", scan.s, error.code
        )
        scan.e = True
        return True

    def _next_call(
        self, account: str, scan: _Scan, since: datetime | None, until: datetime | None, room: int
    ) -> tuple[str, dict[str, str], str]:
        """The one Graph call the scan's position asks for next: (path, params, what it reads)."""
        if scan.p == CONVERSATIONS_PHASE:
            if scan.c is not None:
                # The nested edge's first page is the newest messages; only 20 carry details.
                fields = f"id,messages{{{self.message_fields}}}"
                return quote(scan.c[0], safe=""), {"fields": fields}, "a conversation's messages"
            params = {
                "platform": self.conversations_platform,
                "fields": "id,updated_time",
                "limit": str(CONVERSATIONS_PAGE_SIZE),
                **(scan.m or {}),
            }
            return f"{account}/conversations", params, "the conversation list"
        if scan.r:
            params = {
                "fields": self.reply_fields,
                "limit": str(max(1, min(COMMENTS_PAGE_MAX, room))),
                **(scan.b or {}),
            }
            return f"{quote(scan.r[0], safe='')}/replies", params, "a comment's replies"
        if scan.c is not None:
            params = {
                **self.comment_params,
                "fields": self.comment_fields,
                "limit": str(self.comments_limit(room)),
                **(scan.a or {}),
            }
            return f"{quote(scan.c[0], safe='')}/comments", params, f"a {self.parent_name}'s comments"
        params = {"fields": self.list_fields, "limit": str(LIST_PAGE_SIZE)}
        # Graph bounds are whole seconds: round up, so the second `until` falls in is listed
        # (each comment is then held to the exact window here).
        bound = [math.ceil(until.timestamp())] if until else []
        if scan.u is not None:
            bound.append(scan.u)
        if bound:
            params["until"] = str(min(bound))
        if since:
            params["since"] = str(int(since.timestamp()))
        if scan.m:
            # Meta's own position as given; a time-based `until` in it is older than any bound here.
            params.update(scan.m)
        return f"{account}/{self.list_edge}", params, f"the {self.parent_name} list"

    def _recover(self, scan: _Scan) -> None:
        """An expired Graph cursor: re-read that edge from its start (staging deduplicates)."""
        scan.x += 1
        if scan.x > MAX_CURSOR_RECOVERIES:
            raise PageFailure(
                "provider",
                "graph_cursor_expired",
                f"Meta's cursors expired more than {MAX_CURSOR_RECOVERIES} times in one scan",
            )
        if scan.r:
            scan.b = None
        elif scan.c is not None:
            scan.a = None
        elif scan.p == CONVERSATIONS_PHASE:
            scan.m = None  # conversations list newest first: re-listed, the recently read skipped
        else:
            # Everything listed before was finished: re-list up to the oldest of it.
            scan.m, scan.u = None, (scan.w + 1 if scan.w is not None else None)

    def _settle(self, scan: _Scan) -> None:
        """Moves that need no call: finish a parent whose reads are done, start the next listed one,
        and pass from the comments to the conversations."""
        if not scan.r and scan.c is not None and scan.d:
            parent_id, seconds = scan.c
            scan.k = (scan.k + [parent_id])[-RECENT_FINISHED:]
            if isinstance(seconds, int):
                scan.w = seconds if scan.w is None else min(scan.w, seconds)
            scan.c, scan.a, scan.d = None, None, False
        if not scan.r and scan.c is None and scan.q:
            scan.c, scan.a, scan.d = scan.q.pop(0), None, False
        if scan.p == COMMENTS_PHASE and scan.phase_done:
            scan.next_phase()

    def _apply(
        self,
        scan: _Scan,
        document: dict,
        what: str,
        since: datetime | None,
        until: datetime | None,
        account: str,
    ) -> list[dict]:
        """Move the position past one answer; the items it read, in the window."""
        if scan.p == CONVERSATIONS_PHASE and scan.c is not None:
            items = self._conversation_items(document, account)
            scan.d = True
            return [item for item in items if self._in_window(item, since, until)]
        data, after = _edge(document, what)
        if any(not isinstance(entry, dict) or _id(entry.get("id")) is None for entry in data):
            raise _malformed(what)
        if scan.r:
            comment_id = scan.r[0]
            items = [item for reply in data for item in self.reply_items(reply, comment_id, scan.c)]
            if after:
                scan.b = after
            else:
                scan.r.pop(0)
                scan.b = None
        elif scan.c is not None:
            items = [item for comment in data for item in self.comment_items(comment, scan.c, scan)]
            scan.a, scan.d = after, after is None
        else:
            listed = {entry[0] for entry in scan.q} | set(scan.k)
            time_key = "updated_time" if scan.p == CONVERSATIONS_PHASE else self.list_time
            for entry in data:
                parent_id = _id(entry["id"])
                if parent_id in listed:
                    continue
                at = _when(entry.get(time_key))
                scan.q.append([parent_id, int(at.timestamp()) if at else None])
                listed.add(parent_id)
            scan.m, scan.e = after, after is None
            return []
        for item in items:
            author = item["value"].get("from")
            item["own"] = isinstance(author, dict) and author.get("id") == account
            item["at"] = item["value"].get(self.item_time)
        return [item for item in items if self._in_window(item, since, until)]

    def _conversation_items(self, document: dict, account: str) -> list[dict]:
        """A conversation's newest messages (their details) as messaging items, the webhook's shape."""
        messages = document.get("messages")
        if messages is None:
            return []
        data = messages.get("data") if isinstance(messages, dict) else None
        if not isinstance(data, list) or any(
            not isinstance(m, dict) or _id(m.get("id")) is None for m in data
        ):
            raise _malformed("a conversation's messages")
        items = []
        for message in data[:CONVERSATION_MESSAGES]:
            sender = _author(message, ("id",)).get("id")
            if sender is None:
                continue  # no details (older than the 20 newest): not read back, as declared
            to = message.get("to") if isinstance(message.get("to"), dict) else {}
            people = to.get("data") if isinstance(to.get("data"), list) else []
            first = people[0] if people and isinstance(people[0], dict) else {}
            # An inbound DM goes to the account, as its webhook's recipient.id says; the account's
            # own message goes to the person (the OwnItem's parent).
            recipient = first.get("id") if sender == account else account
            value = {
                "sender": {"id": sender},
                "recipient": {"id": recipient},
                "timestamp": message.get("created_time"),
                "message": {"mid": message["id"], "text": message.get("message")},
            }
            items.append(
                {
                    "object": self.object,
                    "field": "messaging",
                    "value": value,
                    "entry_time": None,
                    "read": True,
                    "at": message.get("created_time"),
                    "own": sender == account,
                }
            )
        return items

    def _in_window(self, item: dict, since: datetime | None, until: datetime | None) -> bool:
        """[since, until) on the item's own time; the account's own items (evidence) always; an
        unreadable time is the normalizer's to refuse."""
        if item.get("own"):
            return True
        at = _when(item.get("at"))
        if at is None:
            return True
        return (since is None or at >= since) and (until is None or at < until)
