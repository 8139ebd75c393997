"""Chunked bodies against real server processes (gunicorn and Django's runserver).

A chunked request has no Content-Length. Django's own stream then reads nothing,
so an authentic body was refused as a 0-byte forgery and a 2 MB one got 401.
"""

from __future__ import annotations

import http.client
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ingress.models import InboundEvent, QuarantineReceipt
from tests.conftest import fixture_body, free_port, server_started, sign, subprocess_env

ROOT = Path(__file__).resolve().parents[2]


def _post_chunked(port: int, body: bytes, headers: dict[str, str]) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.putrequest("POST", "/webhooks/sandbox/")
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Transfer-Encoding", "chunked")
        for name, value in headers.items():
            conn.putheader(name, value)
        conn.endheaders()
        try:
            for start in range(0, len(body), 4096):
                piece = body[start : start + 4096]
                conn.send(f"{len(piece):X}\r\n".encode() + piece + b"\r\n")
            conn.send(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered (413) and closed before the rest was sent
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        conn.close()


def _serve(command: list[str]):
    port = free_port()
    server = subprocess.Popen(
        [*command, f"127.0.0.1:{port}"]
        if "runserver" in command
        else [*command, "--bind", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=subprocess_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    server_started(port, server)
    return port, server


@pytest.fixture
def gunicorn_port(transactional_db, sandbox_source):
    gunicorn = shutil.which("gunicorn", path=str(Path(sys.executable).parent))
    assert gunicorn, "gunicorn is installed with the bench extra (make test installs it)"
    port, server = _serve([gunicorn, "conduit.wsgi:application", "--workers", "1", "--threads", "2"])
    yield port
    server.terminate()
    server.wait(timeout=30)


@pytest.fixture
def runserver_port(transactional_db, sandbox_source):
    port, server = _serve([sys.executable, "manage.py", "runserver", "--noreload", "--nothreading"])
    yield port
    server.terminate()
    server.wait(timeout=30)


def test_gunicorn_reads_a_chunked_body_as_it_arrives(gunicorn_port):
    body = fixture_body("comment__northstar")
    status, payload = _post_chunked(gunicorn_port, body, sign(body))
    assert status == 200, payload
    assert payload["results"][0]["result"] == "accepted"
    assert InboundEvent.objects.count() == 1 and QuarantineReceipt.objects.count() == 0


def test_gunicorn_answers_413_for_a_chunked_body_past_the_limit(gunicorn_port):
    body = b'{"account": "acct_test_01", "events": [' + b" " * (2 * 1024 * 1024) + b"]}"
    status, payload = _post_chunked(gunicorn_port, body, sign(body))
    assert (status, payload["code"]) == (413, "payload_too_large")
    assert QuarantineReceipt.objects.count() == 0


def test_a_server_that_cannot_frame_a_chunked_body_answers_411(runserver_port):
    body = fixture_body("comment__northstar")
    status, payload = _post_chunked(runserver_port, body, sign(body))
    assert (status, payload["code"]) == (411, "length_required")
    assert QuarantineReceipt.objects.count() == InboundEvent.objects.count() == 0
