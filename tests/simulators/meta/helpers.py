"""Helpers for the Graph simulator tests: a JSON client and a loopback webhook receiver."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler
from urllib.parse import urlencode

from tests.conftest import loopback_server

APP_ID = "app_test_1001"
# A test-only app secret, generated for the suite; it signs nothing real.
APP_SECRET = "meta-sim-test-only-app-secret-01"
IG = "17841400000000001"
PAGE = "100000000000001"


def call(
    url: str,
    *,
    method: str = "GET",
    body: dict | None = None,
    params: dict | None = None,
    timeout: float = 10,
    token: str | None = "tok_test",
) -> tuple[int, dict, dict]:
    """One HTTP call: (status, JSON answer, headers)."""
    params = dict(params or {})
    if token is not None and "/_sim/" not in url:
        params.setdefault("access_token", token)
    if params:
        url = f"{url}{'&' if '?' in url else '?'}{urlencode(params)}"
    data = json.dumps(body).encode() if body is not None else (b"" if method == "POST" else None)
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"{}"), dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}"), dict(exc.headers)


class Receiver:
    """A loopback webhook receiver keeping each POST's exact bytes and headers."""

    def __init__(self, status: int = 200) -> None:
        self.received: list[tuple[bytes, dict]] = []
        self.status = status
        self.delay = 0.0
        self.event = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                time.sleep(receiver.delay)
                receiver.received.append((raw, dict(self.headers)))
                receiver.event.set()
                self.send_response(receiver.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = loopback_server(Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/webhooks/meta/{APP_ID}/"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def add_comment(simulator, **data) -> str:
    status, answer, _ = call(f"{simulator.root}/_sim/comments", method="POST", body=data)
    assert status == 200, answer
    return answer["id"]


def wait_for(receiver: Receiver, count: int, timeout: float = 5) -> list[tuple[bytes, dict]]:
    """Wait until the receiver holds `count` posts (notifications of Graph writes come asynchronously)."""
    deadline = time.monotonic() + timeout
    while len(receiver.received) < count and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(receiver.received) >= count, receiver.received
    return receiver.received
