"""The sandbox provider: a loopback HTTP server that applies replies and can fail on purpose.

It stands in for a social platform's reply API so the sender can be proven
against every outcome that matters: accepted, refused before accepting,
accepted then timed out, accepted then dropped, and 5xx after accepting. It
runs with any capability combination of seed 000's recovery table and counts
what it really applied per reply key, so tests can prove "exactly once".

    POST /replies            apply a reply (Idempotency-Key honoured when enabled); refuses
                             before applying anything with 400 (body not a JSON object with a
                             reply_key), 404 (another path) or 429 (refuse mode)
    GET  /replies/<key>      receipt lookup (404 when none; 501 when disabled)
    GET  /capabilities       {"idempotency_key": bool, "receipt_lookup": bool}
    GET  /applied            {"<reply_key>": times applied, ...}
    POST /control            {"mode": "...", "count": N, "latency_ms": M}: fail the next N sends
                             (page_* modes fail the next N source page reads instead)

It is also the synthetic platform's read side, which reconciliation scans:

    GET    /sources/<account>/events?since=&until=&cursor=&limit=
                             one page of the account's events, oldest first, each with
                             the replies applied to it: {"scan_id", "events", "next_cursor", "complete"}
    POST   /sources/<account>/events      {"events": [...]}: add events (a webhook may never come)
    DELETE /sources/<account>/events/<id> remove one event
    GET    /stats            {"page_calls": N}
"""

from __future__ import annotations

import base64
import bisect
import json
import sqlite3
import threading
import time
import uuid
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

SEND_MODES = ("ok", "refuse", "timeout_after_accept", "drop_after_accept", "error_after_accept")
# page_error answers 503 with the provider's own code; page_timeout hangs past the
# reader's timeout; page_malformed answers a body that is not a page.
PAGE_MODES = ("page_error", "page_timeout", "page_malformed")
MODES = SEND_MODES + PAGE_MODES
MAX_PAGE = 5000


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


def _segments(path: str) -> list[str]:
    """The URL path's segments, unquoted: /sources/acct/events -> ["sources", "acct", "events"]."""
    return [unquote(p) for p in urlsplit(path).path.strip("/").split("/")]


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
                self.db.execute("INSERT OR IGNORE INTO targets VALUES (?, ?, (SELECT COUNT(*) FROM targets))",
                                (message_ref, reply_key))

    def held(self, account: str, items: list[dict]) -> None:
        with self.db:
            self.db.executemany("INSERT OR REPLACE INTO events VALUES (?, ?, ?)",
                                [(account, _event_id(item), json.dumps(item)) for item in items])

    def removed(self, account: str, event_id: str) -> None:
        with self.db:
            self.db.execute("DELETE FROM events WHERE account = ? AND event_id = ?", (account, event_id))

    def close(self) -> None:
        self.db.close()


class ProviderState:
    def __init__(self, *, idempotency_key: bool, receipt_lookup: bool, hang_seconds: float,
                 state_path: str | None = None) -> None:
        self.idempotency_key = idempotency_key
        self.receipt_lookup = receipt_lookup
        self.hang_seconds = hang_seconds
        self.lock = threading.Lock()
        self.applied: dict[str, int] = {}
        self.receipts: dict[str, str] = {}
        # What a reply was applied to: message_ref -> reply keys.
        self.targets: dict[str, list[str]] = {}
        self.sources: dict[str, SourceEvents] = {}
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

    def unhold(self, account: str, event_id: str) -> bool:
        """Remove one of the account's events; False when it holds none under the id."""
        with self.lock:
            removed = self.sources.setdefault(account, SourceEvents()).remove(event_id)
            if removed and self.store is not None:
                self.store.removed(account, event_id)
            return removed

    def page(self, account: str, *, since: float | None, until: float | None,
             cursor: str | None, limit: int) -> dict:
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
            more = index < len(events.order) and (
                until is None or events.order[index][0] < until
            )
            return {
                "scan_id": scan_id,
                "events": page,
                "next_cursor": _encode_cursor(scan_id, events.order[index - 1]) if more and page else None,
                "complete": not more,
            }


def make_handler(state: ProviderState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in separate writes: without TCP_NODELAY a kept-alive client
        # would wait out its delayed ACK (about 40 ms) on every answer.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args) -> None:  # keys and codes only, and quietly
            pass

        def _json(self, status: int, payload: object) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _body(self) -> dict:
            length = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(length) or b"{}")

        def _page(self, account: str, query: dict) -> None:
            mode = state.next_page_mode()
            if state.latency:
                time.sleep(state.latency)
            if mode == "page_error":
                return self._json(503, {"code": "overloaded", "message": "raw-provider-detail-never-recorded"})
            if mode == "page_timeout":
                time.sleep(state.hang_seconds)
            if mode == "page_malformed":
                return self._json(200, {"unexpected": True})

            def when(name: str) -> float | None:
                value = query.get(name, [""])[0]
                return datetime.fromisoformat(value).timestamp() if value else None

            try:
                limit = min(MAX_PAGE, max(1, int(query.get("limit", ["1000"])[0])))
                page = state.page(account, since=when("since"), until=when("until"),
                                  cursor=query.get("cursor", [""])[0] or None, limit=limit)
            except (ValueError, KeyError):
                return self._json(400, {"code": "bad_request"})
            self._json(200, page)

        def do_GET(self) -> None:
            segments = _segments(self.path)
            if len(segments) == 3 and segments[0] == "sources" and segments[2] == "events":
                return self._page(segments[1], parse_qs(urlsplit(self.path).query))
            if self.path == "/stats":
                with state.lock:
                    return self._json(200, {"page_calls": state.page_calls})
            if self.path == "/capabilities":
                return self._json(200, {"idempotency_key": state.idempotency_key,
                                        "receipt_lookup": state.receipt_lookup})
            if self.path == "/applied":
                with state.lock:
                    return self._json(200, dict(state.applied))
            if self.path.startswith("/replies/"):
                if not state.receipt_lookup:
                    return self._json(501, {"error": "receipt lookup disabled"})
                with state.lock:
                    receipt = state.receipts.get(self.path.removeprefix("/replies/"))
                return self._json(200, {"id": receipt}) if receipt else self._json(404, {})
            self._json(404, {})

        def do_DELETE(self) -> None:
            segments = _segments(self.path)
            if len(segments) == 4 and segments[0] == "sources" and segments[2] == "events":
                removed = state.unhold(segments[1], segments[3])
                return self._json(200 if removed else 404, {"removed": removed})
            self._json(404, {})

        def do_POST(self) -> None:
            segments = _segments(self.path)
            if len(segments) == 3 and segments[0] == "sources" and segments[2] == "events":
                events = self._body().get("events", [])
                state.hold(segments[1], events)
                return self._json(200, {"added": len(events)})
            if self.path == "/control":
                data = self._body()
                mode, count = data.get("mode", "ok"), int(data.get("count", 1))
                try:
                    state.fail_next(mode, count)
                except ValueError as exc:
                    return self._json(400, {"error": str(exc)})
                with state.lock:
                    state.latency = float(data.get("latency_ms", state.latency * 1000)) / 1000
                return self._json(200, {"mode": mode, "count": count})
            if self.path != "/replies":
                return self._json(404, {})
            try:
                data = self._body()
                if not isinstance(data, dict) or not isinstance(data.get("reply_key"), str):
                    raise ValueError("no reply_key")
            except ValueError:  # refused before anything is applied
                return self._json(400, {"accepted": False, "error": "bad_request"})
            mode = state.next_mode()
            if state.latency:
                time.sleep(state.latency)
            if mode == "refuse":
                return self._json(429, {"accepted": False})
            receipt, _ = state.apply(str(data.get("reply_key", "")), self.headers.get("Idempotency-Key"),
                                     str(data.get("message_ref", "")))
            if mode == "timeout_after_accept":
                time.sleep(state.hang_seconds)
                self.close_connection = True
                return
            if mode == "drop_after_accept":
                self.close_connection = True
                return
            if mode == "error_after_accept":
                return self._json(503, {"error": "accepted, then failed"})
            self._json(201, {"id": receipt})

    return Handler


def serve(*, port: int, idempotency_key: bool = True, receipt_lookup: bool = True,
          hang_seconds: float = 15.0, state_path: str | None = None) -> tuple[ThreadingHTTPServer, ProviderState]:
    """Start the provider on 127.0.0.1:port in a background thread (port 0: any free port).

    `state_path`: a SQLite file that keeps what was applied and held across restarts.
    """
    state = ProviderState(idempotency_key=idempotency_key, receipt_lookup=receipt_lookup,
                          hang_seconds=hang_seconds, state_path=state_path)
    server = ThreadingHTTPServer(("127.0.0.1", port), make_handler(state))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, state
