"""The sandbox provider's applied state: what it applied per reply key, the events each account
holds for reconciliation to read, the failures planted for the next sends or page reads, and the
SQLite file that keeps what was applied and held across restarts.

The HTTP server in simulators.sandbox answers from it; every change is made under the state's lock.
"""

from __future__ import annotations

import base64
import bisect
import json
import sqlite3
import threading
import uuid
from datetime import datetime, timezone

SEND_MODES = ("ok", "refuse", "timeout_after_accept", "drop_after_accept", "error_after_accept")
# page_error answers 503 with the provider's own code; page_timeout hangs past the
# reader's timeout; page_malformed answers a body that is not a page.
PAGE_MODES = ("page_error", "page_timeout", "page_malformed")
MODES = SEND_MODES + PAGE_MODES


def _event_id(item: dict) -> str:
    return str(item.get("id") or item.get("comment_id") or "")


def _sort_key(item: dict) -> tuple[float, str]:
    try:
        at = datetime.fromisoformat(str(item.get("created_at"))).timestamp()
    except (ValueError, TypeError):
        at = 0.0
    return at, _event_id(item)


def _encode_cursor(scan_id: str, position: tuple[float, str]) -> str:
    raw = json.dumps({"s": scan_id, "t": position[0], "k": position[1]}).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _decode_cursor(cursor: str) -> tuple[str, tuple[float, str]]:
    data = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    return str(data["s"]), (float(data["t"]), str(data["k"]))


class SourceEvents:
    """One account's events, kept sorted by (created_at, id) for keyset paging."""

    def __init__(self) -> None:
        self.items: dict[str, dict] = {}
        self.order: list[tuple[float, str]] = []

    def add(self, item: dict) -> None:
        key = _event_id(item)
        if key in self.items:
            self.remove(key)
        self.items[key] = item
        bisect.insort(self.order, _sort_key(item))

    def remove(self, key: str) -> bool:
        item = self.items.pop(key, None)
        if item is None:
            return False
        position = _sort_key(item)
        index = bisect.bisect_left(self.order, position)
        if index < len(self.order) and self.order[index] == position:
            del self.order[index]
        return True


STATE_SCHEMA = """
CREATE TABLE IF NOT EXISTS applied (reply_key TEXT PRIMARY KEY, times INTEGER NOT NULL, receipt TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS targets (message_ref TEXT NOT NULL, reply_key TEXT NOT NULL,
                                    position INTEGER NOT NULL, PRIMARY KEY (message_ref, reply_key));
CREATE TABLE IF NOT EXISTS events (account TEXT NOT NULL, event_id TEXT NOT NULL, item TEXT NOT NULL,
                                   PRIMARY KEY (account, event_id));
"""


class StateFile:
    """The provider's durable state in one SQLite file: written through on every change.

    Every call is made under ProviderState.lock, so one connection shared by the
    server's threads is safe; each change is its own committed transaction, so a
    provider killed at any moment reopens with every reply it acknowledged.
    """

    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")  # a receipt the provider answered survives a crash
        self.db.executescript(STATE_SCHEMA)

    def load(self, state: "ProviderState") -> None:
        for key, times, receipt in self.db.execute("SELECT reply_key, times, receipt FROM applied"):
            state.applied[key], state.receipts[key] = times, receipt
        for ref, key in self.db.execute("SELECT message_ref, reply_key FROM targets ORDER BY position"):
            state.targets.setdefault(ref, []).append(key)
        for account, item in self.db.execute("SELECT account, item FROM events ORDER BY rowid"):
            state.sources.setdefault(account, SourceEvents()).add(json.loads(item))

    def applied(self, reply_key: str, times: int, receipt: str, message_ref: str) -> None:
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO applied VALUES (?, ?, ?)", (reply_key, times, receipt))
            if message_ref:
                self.db.execute(
                    "INSERT OR IGNORE INTO targets VALUES (?, ?, (SELECT COUNT(*) FROM targets))",
                    (message_ref, reply_key),
                )

    def held(self, account: str, items: list[dict]) -> None:
        with self.db:
            self.db.executemany(
                "INSERT OR REPLACE INTO events VALUES (?, ?, ?)",
                [(account, _event_id(item), json.dumps(item)) for item in items],
            )

    def removed(self, account: str, event_id: str) -> None:
        with self.db:
            self.db.execute("DELETE FROM events WHERE account = ? AND event_id = ?", (account, event_id))

    def close(self) -> None:
        self.db.close()


class ProviderState:
    def __init__(
        self,
        *,
        idempotency_key: bool,
        receipt_lookup: bool,
        hang_seconds: float,
        state_path: str | None = None,
    ) -> None:
        self.idempotency_key = idempotency_key
        self.receipt_lookup = receipt_lookup
        self.hang_seconds = hang_seconds
        self.lock = threading.Lock()
        self.applied: dict[str, int] = {}
        self.receipts: dict[str, str] = {}
        # What a reply was applied to: message_ref -> reply keys.
        self.targets: dict[str, list[str]] = {}
        self.sources: dict[str, SourceEvents] = {}
        # The account's posts, as a person picks one for a campaign: id -> summary (in memory).
        self.posts: dict[str, dict[str, dict]] = {}
        self.mode, self.remaining, self.latency = "ok", 0, 0.0
        self.page_mode, self.page_remaining, self.page_calls = "ok", 0, 0
        # In memory unless a file is given: then what was applied outlives the process.
        self.store = StateFile(state_path) if state_path else None
        if self.store is not None:
            self.store.load(self)

    def next_mode(self) -> str:
        with self.lock:
            if self.remaining > 0:
                self.remaining -= 1
                return self.mode
            return "ok"

    def fail_next(self, mode: str, count: int = 1) -> None:
        """Fail the next `count` sends as `mode`, or source page reads for a page_* mode."""
        if mode not in MODES:
            raise ValueError(f"mode is one of {MODES}")
        with self.lock:
            if mode in PAGE_MODES:
                self.page_mode, self.page_remaining = mode, count
            else:
                self.mode, self.remaining = mode, count

    def applied_count(self) -> int:
        """Replies applied, all keys together."""
        with self.lock:
            return sum(self.applied.values())

    def next_page_mode(self) -> str:
        with self.lock:
            self.page_calls += 1
            if self.page_remaining > 0:
                self.page_remaining -= 1
                return self.page_mode
            return "ok"

    def apply(self, reply_key: str, idempotency_key: str | None, message_ref: str = "") -> tuple[str, bool]:
        """Apply once per idempotency key when enabled; every time otherwise."""
        with self.lock:
            if self.idempotency_key and idempotency_key and idempotency_key in self.receipts:
                return self.receipts[idempotency_key], False
            receipt = f"rcpt_test_{uuid.uuid4().hex[:16]}"
            # Durable first: a receipt the provider answers with is one it still shows after a restart.
            if self.store is not None:
                self.store.applied(reply_key, self.applied.get(reply_key, 0) + 1, receipt, message_ref)
            self.applied[reply_key] = self.applied.get(reply_key, 0) + 1
            self.receipts[reply_key] = receipt
            if message_ref and reply_key not in self.targets.get(message_ref, ()):
                self.targets.setdefault(message_ref, []).append(reply_key)
            return receipt, True

    def hold(self, account: str, events: list[dict]) -> None:
        """Hold events as the account's own: the synthetic source reconciliation reads."""
        with self.lock:
            if self.store is not None:
                self.store.held(account, events)
            store = self.sources.setdefault(account, SourceEvents())
            for item in events:
                store.add(dict(item))

    def post(self, account: str, posts: list[dict]) -> None:
        """Publish posts on the account: {"id", "caption"?, "kind"?, "published_at"?, "thumbnail"?}."""
        with self.lock:
            held = self.posts.setdefault(account, {})
            for item in posts:
                held[str(item["id"])] = {
                    "id": str(item["id"]),
                    "caption": str(item.get("caption", "")),
                    "kind": str(item.get("kind", "post")),
                    "published_at": str(item.get("published_at") or datetime.now(timezone.utc).isoformat()),
                    "permalink": f"https://sandbox.example.invalid/posts/{item['id']}",
                    "thumbnail": str(item.get("thumbnail", "")),
                }

    def recent_posts(self, account: str, limit: int) -> list[dict]:
        """The account's posts, newest first: those published, and any its events are on."""
        with self.lock:
            posts = dict(self.posts.get(account, {}))
            for item in self.sources.get(account, SourceEvents()).items.values():
                post_id = str(item.get("post_id", ""))
                if post_id and post_id not in posts:
                    posts[post_id] = {
                        "id": post_id,
                        "caption": "",
                        "kind": "post",
                        "published_at": str(item.get("created_at", "")),
                        "permalink": f"https://sandbox.example.invalid/posts/{post_id}",
                    }
        return sorted(posts.values(), key=lambda p: p["published_at"], reverse=True)[:limit]

    def unhold(self, account: str, event_id: str) -> bool:
        """Remove one of the account's events; False when it holds none under the id."""
        with self.lock:
            removed = self.sources.setdefault(account, SourceEvents()).remove(event_id)
            if removed and self.store is not None:
                self.store.removed(account, event_id)
            return removed

    def page(
        self, account: str, *, since: float | None, until: float | None, cursor: str | None, limit: int
    ) -> dict:
        """One page of events in [since, until), oldest first, with the replies applied to each."""
        with self.lock:
            events = self.sources.get(account) or SourceEvents()
            if cursor:
                scan_id, after = _decode_cursor(cursor)
                start = bisect.bisect_right(events.order, after)
            else:
                scan_id = uuid.uuid4().hex
                start = bisect.bisect_left(events.order, (since, "")) if since is not None else 0
            page, index = [], start
            while index < len(events.order) and len(page) < limit:
                position = events.order[index]
                if until is not None and position[0] >= until:
                    break
                item = dict(events.items[position[1]])
                item["replies"] = [
                    {"id": self.receipts[key], "reply_key": key}
                    for key in self.targets.get(str(item.get("comment_id", "")), ())
                ]
                page.append(item)
                index += 1
            more = index < len(events.order) and (until is None or events.order[index][0] < until)
            return {
                "scan_id": scan_id,
                "events": page,
                "next_cursor": _encode_cursor(scan_id, events.order[index - 1]) if more and page else None,
                "complete": not more,
            }
