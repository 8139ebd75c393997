"""Error reports: SENTRY_DSN turns on sentry-sdk, and every event passes the data boundary."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from tests.conftest import loopback_server

ROOT = Path(__file__).resolve().parents[2]
# A secret-named variable's value with no credential shape: only registration can catch it.
PLANTED_SECRET = "planted-value-0f3a9c2e7b"
BUYER_WORDS = "buyer-words-7731"


class _Collector(BaseHTTPRequestHandler):
    envelopes: list[bytes] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        encoding = self.headers.get("Content-Encoding", "")
        if encoding == "gzip":
            body = gzip.decompress(body)
        elif encoding:
            raise AssertionError(f"unexpected Content-Encoding {encoding}")
        if self.path.endswith("/envelope/"):
            self.envelopes.append(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args) -> None:
        pass


def run_and_collect(*args: str) -> tuple[list[dict], str]:
    """Run sentry_run.py with a loopback DSN; return the events received and the raw text."""
    handler = type("Collector", (_Collector,), {"envelopes": []})
    server = loopback_server(handler)
    try:
        env = {
            **os.environ,
            "SENTRY_DSN": f"http://public@127.0.0.1:{server.server_address[1]}/1",
            "CONDUIT_PLANTED_SECRET": PLANTED_SECRET,
            "PYTHONPATH": str(ROOT),
        }
        done = subprocess.run(
            [sys.executable, str(ROOT / "tests/ops/sentry_run.py"), *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert "view status=500" in done.stdout and "task raised=PlantedError" in done.stdout, done.stdout
    finally:
        server.shutdown()
        server.server_close()
    raw = b"\n".join(handler.envelopes).decode()
    events = []
    for envelope in handler.envelopes:
        lines = envelope.split(b"\n")
        # An envelope: a header line, then (item header, item payload) pairs.
        for header, payload in zip(lines[1::2], lines[2::2]):
            if json.loads(header).get("type") == "event":
                events.append(json.loads(payload))
    return events, raw


def _planted(events: list[dict]) -> list[dict]:
    return [
        e
        for e in events
        if any(v.get("type") == "PlantedError" for v in e.get("exception", {}).get("values", []))
    ]


def test_view_and_task_errors_arrive_without_the_secret_or_the_buyer_text():
    events, raw = run_and_collect()
    planted = _planted(events)
    # Positive: both failures arrive, the view's through Django's integration, the task's
    # through django-q2's error-reporter hook.
    mechanisms = {
        v["mechanism"]["type"]
        for e in planted
        for v in e["exception"]["values"]
        if v["type"] == "PlantedError"
    }
    assert len(planted) == 2, [e.get("exception") for e in events]
    assert "django" in mechanisms
    assert any(e.get("tags", {}).get("conduit.origin") == "django-q2-task" for e in planted)
    assert any(e.get("request", {}).get("url", "").endswith("/planted-error/") for e in planted)
    # The chained cause arrives too (its type), with its text withheld.
    assert all(any(v["type"] == "ValueError" for v in e["exception"]["values"]) for e in planted)
    assert "withheld by the data boundary: credential" in raw
    assert "withheld by the data boundary: message body" in raw
    crumbs = [
        c
        for e in planted
        for c in e.get("breadcrumbs", {}).get("values", [])
        if c.get("category", "").startswith("conduit.planted")
    ]
    assert {c["category"] for c in crumbs} == {"conduit.planted", "conduit.planted.unhandled"}
    assert all("withheld by the data boundary" in c["message"] for c in crumbs)
    # Neither the secret nor the buyer's words anywhere in anything sent.
    assert PLANTED_SECRET not in raw
    assert BUYER_WORDS not in raw
    for event in planted:
        assert "user" not in event or not event["user"].get("ip_address")


def test_positive_control_without_the_scrubber_the_secret_arrives():
    events, raw = run_and_collect("--no-scrub")
    assert len(_planted(events)) == 2
    assert PLANTED_SECRET in raw
    assert BUYER_WORDS in raw
    crumbs = [
        c
        for e in events
        for c in e.get("breadcrumbs", {}).get("values", [])
        if c.get("category") == "conduit.planted.unhandled"
    ]
    assert crumbs and all(PLANTED_SECRET in json.dumps(c) for c in crumbs)


def test_without_a_dsn_sentry_is_off():
    import sentry_sdk
    from django.conf import settings

    assert not settings.SENTRY_DSN
    assert "error_reporter" not in settings.Q_CLUSTER
    assert not sentry_sdk.get_client().is_active()
