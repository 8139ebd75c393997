"""The sandbox provider: a loopback HTTP server that applies replies and can fail on purpose.

It stands in for a social platform's reply API so the sender can be proven
against every outcome that matters: accepted, refused before accepting,
accepted then timed out, accepted then dropped, and 5xx after accepting. It
runs with any capability combination of the recovery table
(docs/concepts/ledgers.md#recovery) and counts what it really applied per
reply key (simulators.sandbox_state), so tests can prove "exactly once".

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
    GET    /sources/<account>/posts?limit=   the account's posts, newest first: {"posts": [{"id",
                             "caption", "kind", "published_at", "permalink"}]} (those published,
                             and any its events are on)
    POST   /sources/<account>/posts       {"posts": [{"id", "caption"?, "kind"?, "published_at"?, "thumbnail"?}]}
    GET    /stats            {"page_calls": N}
"""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

from simulators.sandbox_state import ProviderState

MAX_PAGE = 5000


def _segments(path: str) -> list[str]:
    """The URL path's segments, unquoted: /sources/acct/events -> ["sources", "acct", "events"]."""
    return [unquote(p) for p in urlsplit(path).path.strip("/").split("/")]


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
                return self._json(
                    503, {"code": "overloaded", "message": "raw-provider-detail-never-recorded"}
                )
            if mode == "page_timeout":
                time.sleep(state.hang_seconds)
            if mode == "page_malformed":
                return self._json(200, {"unexpected": True})

            def when(name: str) -> float | None:
                value = query.get(name, [""])[0]
                return datetime.fromisoformat(value).timestamp() if value else None

            try:
                limit = min(MAX_PAGE, max(1, int(query.get("limit", ["1000"])[0])))
                page = state.page(
                    account,
                    since=when("since"),
                    until=when("until"),
                    cursor=query.get("cursor", [""])[0] or None,
                    limit=limit,
                )
            except (ValueError, KeyError):
                return self._json(400, {"code": "bad_request"})
            self._json(200, page)

        def do_GET(self) -> None:
            segments = _segments(self.path)
            if len(segments) == 3 and segments[0] == "sources" and segments[2] == "events":
                return self._page(segments[1], parse_qs(urlsplit(self.path).query))
            if len(segments) == 3 and segments[0] == "sources" and segments[2] == "posts":
                query = parse_qs(urlsplit(self.path).query)
                try:
                    limit = max(1, min(int(query.get("limit", ["25"])[0]), 100))
                except ValueError:
                    return self._json(400, {"error": "limit is a number"})
                return self._json(200, {"posts": state.recent_posts(segments[1], limit)})
            if self.path == "/stats":
                with state.lock:
                    return self._json(200, {"page_calls": state.page_calls})
            if self.path == "/capabilities":
                return self._json(
                    200, {"idempotency_key": state.idempotency_key, "receipt_lookup": state.receipt_lookup}
                )
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
            if len(segments) == 3 and segments[0] == "sources" and segments[2] == "posts":
                posts = self._body().get("posts", [])
                if not isinstance(posts, list) or not all(isinstance(p, dict) and p.get("id") for p in posts):
                    return self._json(400, {"error": "posts is a list of objects with an id"})
                state.post(segments[1], posts)
                return self._json(200, {"added": len(posts)})
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
            receipt, _ = state.apply(
                str(data.get("reply_key", "")),
                self.headers.get("Idempotency-Key"),
                str(data.get("message_ref", "")),
            )
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


def serve(
    *,
    port: int,
    idempotency_key: bool = True,
    receipt_lookup: bool = True,
    hang_seconds: float = 15.0,
    state_path: str | None = None,
) -> tuple[ThreadingHTTPServer, ProviderState]:
    """Start the provider on 127.0.0.1:port in a background thread (port 0: any free port).

    `state_path`: a SQLite file that keeps what was applied and held across restarts.
    """
    state = ProviderState(
        idempotency_key=idempotency_key,
        receipt_lookup=receipt_lookup,
        hang_seconds=hang_seconds,
        state_path=state_path,
    )
    server = ThreadingHTTPServer(("127.0.0.1", port), make_handler(state))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, state
