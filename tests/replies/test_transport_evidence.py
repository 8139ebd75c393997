"""The sandbox transport's evidence: declared refusals, undeclared 4xx, and capability discovery."""

import json
from http.server import BaseHTTPRequestHandler

import pytest

from conduit.providers.base import Ambiguous, NotSent, OutboundReply
from conduit.providers.sandbox import transport as sandbox
from conduit.providers.sandbox.transport import (
    REFUSED_BEFORE_APPLYING,
    SandboxTransport,
)
from replies.models import SendAttempt
from replies.sender import due_action_ids, reply_send
from replies.services import reply_approve
from simulators.sandbox import serve
from tests.conftest import free_port

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


@pytest.fixture
def stub(loopback):
    """A provider stand-in: GET /capabilities answers `capabilities_status`, POST /replies `status`."""

    def start(*, status: int = 201, capabilities_status: int = 200):
        posts: list[dict] = []

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _answer(self, code: int, payload: dict) -> None:
                body = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                self._answer(capabilities_status, {"idempotency_key": True, "receipt_lookup": True})

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                posts.append(dict(self.headers))
                self._answer(status, {"id": "rcpt_test_stub"} if status < 300 else {"error": "no"})

        server = loopback(Handler)
        server.url = f"http://127.0.0.1:{server.server_address[1]}"
        server.posts = posts
        return server

    return start


@pytest.mark.parametrize("status", [401, 403, 405, 409, 410, 413, 418, 422, 451])
def test_a_4xx_not_declared_refused_before_applying_is_not_established(stub, status):
    """A 409 may mean the provider already holds the reply: never read as "not sent"."""
    server = stub(status=status)
    with pytest.raises(Ambiguous) as raised:
        SandboxTransport(server.url).send(REPLY)
    assert (raised.value.code, raised.value.http_status, raised.value.response) == (
        f"provider_undeclared_{status}",
        status,
        True,
    )


@pytest.mark.parametrize("status", sorted(REFUSED_BEFORE_APPLYING))
def test_only_the_declared_refusals_are_not_sent(stub, status):
    server = stub(status=status)
    with pytest.raises(NotSent) as raised:
        SandboxTransport(server.url).send(REPLY)
    assert (raised.value.code, raised.value.reached) == (f"provider_refused_{status}", True)


def test_the_declared_refusals_are_what_the_sandbox_provider_answers_before_applying(provider):
    """Each declared status is one the provider really answers without applying anything."""
    import urllib.error
    import urllib.request

    state = provider()
    assert set(REFUSED_BEFORE_APPLYING) == {400, 404, 429}
    assert all(len(why) > 20 for why in REFUSED_BEFORE_APPLYING.values())

    def post(path: str, body: bytes) -> int:
        request = urllib.request.Request(f"{state.url}{path}", data=body, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code

    assert post("/replies", b"not json") == 400
    assert post("/replies", b'{"text": "no key"}') == 400
    assert post("/replies/elsewhere", json.dumps({"reply_key": "k" * 64}).encode()) == 404
    state.fail_next("refuse")
    assert post("/replies", json.dumps({"reply_key": "k" * 64}).encode()) == 429
    assert state.applied == {}


def test_a_409_parks_the_reply_in_unknown_and_nothing_retries_it(stub, wire, planned):
    """docs/concepts/ledgers.md#reply-states: SEND_STATUS_UNKNOWN: "The provider may have accepted the
    action"; docs/concepts/acceptance.md#checks: "A simulated lost
    receipt enters SEND_STATUS_UNKNOWN and produces no automatic retry"."""
    server = stub(status=409)
    wire(server)
    action, _ = planned()
    assert reply_approve(action_id=action.pk, actor="reviewer_test").ok
    assert reply_send(action_id=action.pk) == "SEND_STATUS_UNKNOWN"
    action.refresh_from_db()
    assert action.last_error_code == "provider_undeclared_409"
    attempt = SendAttempt.objects.get(action=action)
    assert (attempt.transport, attempt.http_status) == ("response_received", 409)
    assert action.pk not in due_action_ids() and reply_send(action_id=action.pk) == "not_claimed"
    assert len(server.posts) == 1


def test_failed_discovery_fails_before_send_instead_of_dropping_the_idempotency_key(stub, wire, planned):
    """The provider's /capabilities fails while its /replies would accept: nothing may go out
    without the Idempotency-Key; the send fails before send and stays due for a retry."""
    server = stub(status=201, capabilities_status=500)
    wire(server)
    action, _ = planned()
    assert reply_approve(action_id=action.pk, actor="reviewer_test").ok
    assert reply_send(action_id=action.pk) == "FAILED_BEFORE_SEND"
    assert server.posts == []
    action.refresh_from_db()
    assert action.last_error_code == "capability_discovery_failed" and action.next_attempt_at is not None
    attempt = SendAttempt.objects.get(action=action)
    assert (attempt.transport, attempt.evidence) == ("not_sent", "capability_discovery_failed")


def test_discovery_is_asked_again_across_a_real_provider_restart(wire, planned):
    """A failed discovery is never cached: down, up, down, up with other capabilities, on one port."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # 1. Nothing listens yet: the conservative answer.
    transport = SandboxTransport(url)
    assert not transport.capabilities.idempotency_key and not transport.capabilities.receipt_lookup

    # 2. The provider starts: a new build, and the same long-lived transport, both learn it.
    server, state = serve(port=port, idempotency_key=True, receipt_lookup=True)
    try:
        fresh = SandboxTransport(url)
        assert fresh.capabilities.idempotency_key and fresh.capabilities.receipt_lookup
        assert fresh.discovered and not transport.discovered
        transport.send(REPLY)  # the transport built while it was down re-asks before sending
        assert transport.capabilities.idempotency_key
        assert state.receipts.get(REPLY.reply_key)  # keyed by the Idempotency-Key header
    finally:
        server.shutdown()
        server.server_close()

    # 3. It stops: a send finds nobody and forgets what it learnt about the address.
    with pytest.raises(NotSent) as raised:
        SandboxTransport(url).send(REPLY)
    assert raised.value.code == "connect_failed"

    # 4. It comes back on the same port with other capabilities: they are re-discovered.
    server, state = serve(port=port, idempotency_key=False, receipt_lookup=False)
    try:
        again = SandboxTransport(url)
        assert again.discovered
        assert not again.capabilities.idempotency_key and not again.capabilities.receipt_lookup
    finally:
        server.shutdown()
        server.server_close()


def test_a_remembered_discovery_expires(provider, monkeypatch):
    state = provider()
    host, port = "127.0.0.1", int(state.url.rsplit(":", 1)[1])
    assert sandbox._discovered(host, port).receipt_lookup
    state.receipt_lookup = False  # as a restart with other flags would
    assert sandbox._discovered(host, port).receipt_lookup  # still within the TTL
    monkeypatch.setattr(sandbox, "CAPABILITIES_TTL_SECONDS", 0.0)
    assert not sandbox._discovered(host, port).receipt_lookup
