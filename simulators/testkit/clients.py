"""Test-only instruments: Django's test client, environment and attribute patches, captured logs."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import threading
import time
from typing import Callable, Iterator

from django.test import Client
from django.test.utils import override_settings


def test_client(*, raise_errors: bool = False, **defaults) -> Client:
    """Django's test client; by default a server error is a response (a failed check), not raised."""
    return Client(raise_request_exception=raise_errors, **defaults)


def environ_set(name: str, value: str) -> Callable[[], None]:
    """Set an environment variable; the returned callable puts back what was there."""
    previous = os.environ.get(name)
    os.environ[name] = value

    def restore() -> None:
        if previous is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = previous

    return restore


@contextlib.contextmanager
def patched(target, name: str, value) -> Iterator[None]:
    """`target.name` replaced by `value` for the block."""
    original = getattr(target, name)
    setattr(target, name, value)
    try:
        yield
    finally:
        setattr(target, name, original)


@contextlib.contextmanager
def patched_item(mapping: dict, key: str, value) -> Iterator[None]:
    """`mapping[key]` set to `value` for the block (removed after if it was absent)."""
    missing = object()
    original = mapping.get(key, missing)
    mapping[key] = value
    try:
        yield
    finally:
        if original is missing:
            mapping.pop(key, None)
        else:
            mapping[key] = original


def transport_timeout(seconds: float) -> contextlib.AbstractContextManager:
    """Every transport built in the block times out after `seconds`."""
    return override_settings(CONDUIT_TRANSPORT_TIMEOUT_SECONDS=seconds)


def send_leases_expired() -> contextlib.AbstractContextManager:
    """Every send lease counts as expired, so the sweeper looks at every SENDING action."""
    return override_settings(CONDUIT_SEND_LEASE_SECONDS=0)


def commits_run() -> contextlib.AbstractContextManager:
    """Work deferred to commit (transaction.on_commit) runs at the end of the block even inside a
    transaction that is never committed (a test's); in autocommit it has run already."""
    from django.test import TestCase

    return TestCase.captureOnCommitCallbacks(execute=True)


@contextlib.contextmanager
def nothing_queued() -> Iterator[None]:
    """Approval queues the send on commit; the checks send by hand, so nothing is queued."""
    from replies import sender

    with patched(sender, "enqueue_send", lambda action_id: None):
        yield


@contextlib.contextmanager
def captured_logs() -> Iterator[tuple[io.StringIO, bool]]:
    """Every console log line, at DEBUG and up, into the yielded buffer; with it, whether any
    console handler was there to capture (if not, a search of the buffer is blind)."""
    console = [x for x in logging.getLogger().handlers if type(x) is logging.StreamHandler]
    root, level = logging.getLogger(), logging.getLogger().level
    buffer = io.StringIO()
    streams = [handler.setStream(buffer) for handler in console]
    root.setLevel(logging.DEBUG)
    try:
        yield buffer, bool(console)
    finally:
        root.setLevel(level)
        for handler, stream in zip(console, streams):
            handler.setStream(stream)


@contextlib.contextmanager
def console_held() -> Iterator[io.StringIO]:
    """Every console log line of the block into the yielded buffer, at the configured levels:
    the planted faults' noise (tracebacks of deliberate 500s) stays out of the terminal."""
    console = [x for x in logging.getLogger().handlers if type(x) is logging.StreamHandler]
    named = {
        x
        for name in ("django-q", "django.server")
        for x in logging.getLogger(name).handlers
        if type(x) is logging.StreamHandler
    }
    buffer = io.StringIO()
    handlers = [*console, *(x for x in named if x not in console)]
    streams = [handler.setStream(buffer) for handler in handlers]
    try:
        yield buffer
    finally:
        for handler, stream in zip(handlers, streams):
            handler.setStream(stream)


class CallbackRecorder:
    """A loopback HTTP endpoint that keeps every body POSTed to it (a simulator's webhooks), for a
    check to deliver to Conduit's own endpoint as it chooses. `.url`, `.bodies`, `.wait()`, `.close()`."""

    def __init__(self) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.bodies: list[bytes] = []
        self._lock = threading.Lock()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with recorder._lock:
                    recorder.bodies.append(body)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/callback"

    def wait(self, count: int, timeout: float = 10.0) -> list[bytes]:
        """The first `count` bodies (fewer if they have not come within `timeout` seconds)."""
        deadline = time.monotonic() + timeout
        while len(self.bodies) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        with self._lock:
            return list(self.bodies[:count])

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def callback_recorder() -> CallbackRecorder:
    return CallbackRecorder()
