"""The sandbox provider over HTTP, and the transport's reading of each failure mode."""

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from conduit.providers.base import Ambiguous, NotSent, OutboundReply
from conduit.providers.sandbox.transport import SandboxTransport
from tests.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
REPLY = OutboundReply(
    reply_key="k" * 64,
    event_key="evt",
    purpose="public_ack",
    channel="public_ack",
    copy_version="v1",
    text="synthetic",
    conversation_ref="post_test_07",
    message_ref="msg_test_0042",
)


def control(url: str, **payload) -> dict:
    request = urllib.request.Request(f"{url}/control", data=json.dumps(payload).encode(), method="POST")
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read())


def applied(url: str) -> dict:
    with urllib.request.urlopen(f"{url}/applied", timeout=5) as response:
        return json.loads(response.read())


def test_each_failure_mode_is_read_as_the_sender_needs(provider):
    state = provider(hang_seconds=1.5)
    transport = SandboxTransport(state.url, timeout=0.5)
    assert transport.capabilities.idempotency_key and transport.capabilities.receipt_lookup
    expectations = [
        ("refuse", NotSent, "provider_refused_429"),
        ("timeout_after_accept", Ambiguous, "timeout_after_request"),
        ("drop_after_accept", Ambiguous, "connection_lost_after_request"),
        ("error_after_accept", Ambiguous, "provider_error_503"),
    ]
    for mode, kind, code in expectations:
        assert control(state.url, mode=mode, count=1)["mode"] == mode
        with pytest.raises(kind) as raised:
            transport.send(REPLY)
        assert raised.value.code == code, mode
    # Every mode but refuse applied it; the idempotency key kept that to once.
    assert applied(state.url) == {REPLY.reply_key: 1}
    receipt = transport.send(REPLY)
    assert transport.lookup(REPLY.reply_key).provider_reply_id == receipt.provider_reply_id
    assert transport.lookup("0" * 64) is None


def test_without_idempotency_every_post_applies(provider):
    state = provider(idempotency_key=False, receipt_lookup=False)
    transport = SandboxTransport(state.url)
    assert not transport.capabilities.idempotency_key
    transport.send(REPLY)
    transport.send(REPLY)
    assert applied(state.url) == {REPLY.reply_key: 2}
    with pytest.raises(NotImplementedError):
        transport.lookup(REPLY.reply_key)


def test_the_sandbox_transport_refuses_anything_but_loopback():
    with pytest.raises(ValueError, match="loopback"):
        SandboxTransport("http://192.0.2.1:8765")


def test_control_rejects_unknown_modes(provider):
    state = provider()
    with pytest.raises(urllib.error.HTTPError) as refused:
        control(state.url, mode="explode")
    assert refused.value.code == 400


def test_the_management_command_serves_with_the_chosen_capabilities():
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "manage.py", "sandbox_provider", "--port", str(port), "--no-lookup"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/capabilities", timeout=1) as r:
                    assert json.loads(r.read()) == {"idempotency_key": True, "receipt_lookup": False}
                    break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
    finally:
        server.terminate()
        server.wait(timeout=10)
