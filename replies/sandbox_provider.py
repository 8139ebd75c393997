"""The sandbox provider: a loopback HTTP server that applies replies and can fail on purpose.

It stands in for a social platform's reply API so the sender can be proven
against every outcome that matters: accepted, refused before accepting,
accepted then timed out, accepted then dropped, and 5xx after accepting. It
runs with any capability combination of seed 000's recovery table and counts
what it really applied per reply key, so tests can prove "exactly once".

    POST /replies            apply a reply (Idempotency-Key honoured when enabled)
    GET  /replies/<key>      receipt lookup (404 when none; 501 when disabled)
    GET  /capabilities       {"idempotency_key": bool, "receipt_lookup": bool}
    GET  /applied            {"<reply_key>": times applied, ...}
    POST /control            {"mode": "...", "count": N, "latency_ms": M}: fail the next N sends
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODES = ("ok", "refuse", "timeout_after_accept", "drop_after_accept", "error_after_accept")


class ProviderState:
    def __init__(self, *, idempotency_key: bool, receipt_lookup: bool, hang_seconds: float) -> None:
        self.idempotency_key = idempotency_key
        self.receipt_lookup = receipt_lookup
        self.hang_seconds = hang_seconds
        self.lock = threading.Lock()
        self.applied: dict[str, int] = {}
        self.receipts: dict[str, str] = {}
        self.mode, self.remaining, self.latency = "ok", 0, 0.0

    def next_mode(self) -> str:
        with self.lock:
            if self.remaining > 0:
                self.remaining -= 1
                return self.mode
            return "ok"

    def apply(self, reply_key: str, idempotency_key: str | None) -> tuple[str, bool]:
        """Apply once per idempotency key when enabled; every time otherwise."""
        with self.lock:
            if self.idempotency_key and idempotency_key and idempotency_key in self.receipts:
                return self.receipts[idempotency_key], False
            receipt = f"rcpt_test_{uuid.uuid4().hex[:16]}"
            self.applied[reply_key] = self.applied.get(reply_key, 0) + 1
            self.receipts[reply_key] = receipt
            return receipt, True


def make_handler(state: ProviderState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

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

        def do_GET(self) -> None:
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

        def do_POST(self) -> None:
            if self.path == "/control":
                data = self._body()
                if data.get("mode", "ok") not in MODES:
                    return self._json(400, {"error": f"mode is one of {MODES}"})
                with state.lock:
                    state.mode = data.get("mode", "ok")
                    state.remaining = int(data.get("count", 1))
                    state.latency = float(data.get("latency_ms", state.latency * 1000)) / 1000
                return self._json(200, {"mode": state.mode, "count": state.remaining})
            if self.path != "/replies":
                return self._json(404, {})
            data = self._body()
            mode = state.next_mode()
            if state.latency:
                time.sleep(state.latency)
            if mode == "refuse":
                return self._json(429, {"accepted": False})
            receipt, _ = state.apply(str(data.get("reply_key", "")), self.headers.get("Idempotency-Key"))
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
          hang_seconds: float = 15.0) -> tuple[ThreadingHTTPServer, ProviderState]:
    """Start the provider on 127.0.0.1:port in a background thread (port 0: any free port)."""
    state = ProviderState(idempotency_key=idempotency_key, receipt_lookup=receipt_lookup,
                          hang_seconds=hang_seconds)
    server = ThreadingHTTPServer(("127.0.0.1", port), make_handler(state))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, state
