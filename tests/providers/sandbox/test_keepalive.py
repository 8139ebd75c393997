"""The sandbox transport's kept-alive connection: reused only when it is safe, never confusing outcomes."""

import json
import time
import urllib.request

import pytest

from conduit.providers import keepalive
from conduit.providers.base import Ambiguous, OutboundReply
from conduit.providers.sandbox import transport as sandbox_transport
from conduit.providers.sandbox.transport import SandboxTransport
from simulators.sandbox import ProviderState, make_handler


def reply(n: int) -> OutboundReply:
    return OutboundReply(
        reply_key=f"{n:064d}",
        event_key=f"evt_test_{n}",
        purpose="public_ack",
        channel="public_ack",
        copy_version="v1",
        text="synthetic",
        conversation_ref="post_test_07",
        message_ref=f"msg_test_{n}",
    )


@pytest.fixture
def counted_provider(loopback):
    """A sandbox provider that counts the TCP connections it accepts; `idle_close` makes it close
    a kept-alive connection idle that long (as real servers do)."""

    def start(*, idle_close: float | None = None, nodelay: bool | None = None):
        sandbox_transport._discovered.cache_clear()
        state = ProviderState(idempotency_key=True, receipt_lookup=True, hang_seconds=2.0, state_path=None)
        base = make_handler(state)
        connections = []

        class Handler(base):
            timeout = idle_close  # StreamRequestHandler: the socket's timeout; idle past it, it closes

            def setup(self):
                connections.append(self.client_address)
                super().setup()

        if nodelay is not None:  # else the provider's own setting (its guard against delayed ACKs)
            Handler.disable_nagle_algorithm = nodelay
        server = loopback(Handler)
        state.url = f"http://127.0.0.1:{server.server_address[1]}"
        state.connections = connections
        return state

    return start


def control(url: str, **payload) -> None:
    request = urllib.request.Request(f"{url}/control", data=json.dumps(payload).encode(), method="POST")
    urllib.request.urlopen(request, timeout=5).read()


def posts(state) -> int:
    """Connections that carried a POST /replies (the discovery GET and /control use their own)."""
    return len(state.connections) - 1  # the capability discovery's connection


def test_sends_share_one_kept_alive_connection(counted_provider):
    state = counted_provider()
    transport = SandboxTransport(state.url)
    receipts = [transport.send(reply(n)) for n in range(5)]
    assert [state.receipts[reply(n).reply_key] for n in range(5)] == [r.provider_reply_id for r in receipts]
    assert state.applied == {reply(n).reply_key: 1 for n in range(5)}
    assert posts(state) == 1


def _send_after_the_server_closed_the_idle_connection(counted_provider):
    state = counted_provider(idle_close=0.2)
    transport = SandboxTransport(state.url)
    transport.send(reply(1))
    time.sleep(0.6)  # the server closes the idle kept-alive connection
    return state, transport


def test_a_connection_the_server_closed_while_idle_is_not_reused(counted_provider, monkeypatch):
    """The task: "the sandbox simulator closing an idle keep-alive connection" must not turn the
    next send into a maybe-applied one. The idle socket is found closed before anything is
    written (the write retry below is taken away here, so only this check protects)."""
    monkeypatch.setattr(keepalive, "STALE_ON_WRITE", ())
    state, transport = _send_after_the_server_closed_the_idle_connection(counted_provider)
    receipt = transport.send(reply(2))
    assert receipt.provider_reply_id == state.receipts[reply(2).reply_key]
    assert state.applied == {reply(1).reply_key: 1, reply(2).reply_key: 1}
    assert posts(state) == 2


def test_a_write_that_fails_on_a_reused_connection_goes_once_more_on_a_fresh_one(
    counted_provider, monkeypatch
):
    """The race the idle check cannot close (the server closes just after the check): the write
    fails on the reused connection, no whole request reached the provider, so the request goes
    once more on a fresh connection: applied once, with its own receipt."""
    monkeypatch.setattr(keepalive, "_quiet", lambda conn: True)  # the check saw it open
    state, transport = _send_after_the_server_closed_the_idle_connection(counted_provider)
    receipt = transport.send(reply(2))
    assert receipt.provider_reply_id == state.receipts[reply(2).reply_key]
    assert state.applied == {reply(1).reply_key: 1, reply(2).reply_key: 1}
    assert posts(state) == 2


def test_positive_control_without_either_guard_the_closed_connection_parks_a_send(
    counted_provider, monkeypatch
):
    """Both guards removed (no idle check, every write failure read as maybe sent): the request
    goes down the closed connection and the send is Ambiguous, a needless SEND_STATUS_UNKNOWN,
    although the provider never saw it."""
    monkeypatch.setattr(keepalive, "_quiet", lambda conn: True)
    monkeypatch.setattr(keepalive, "STALE_ON_WRITE", ())
    state, transport = _send_after_the_server_closed_the_idle_connection(counted_provider)
    with pytest.raises(Ambiguous) as raised:
        transport.send(reply(2))
    assert raised.value.code in ("write_failed", "connection_lost_after_request")
    assert reply(2).reply_key not in state.applied


def _late_answer_then_next(state, transport) -> tuple:
    """A send that times out (the provider answers after the transport gave up), then another."""
    control(state.url, latency_ms=600)
    with pytest.raises(Ambiguous) as raised:
        transport.send(reply(1))
    assert raised.value.code == "timeout_after_request"
    control(state.url, latency_ms=0)
    try:
        return transport.send(reply(2)), None
    except Exception as exc:  # noqa: BLE001 - the control below names what went wrong
        return None, exc


def test_a_connection_whose_request_ended_ambiguously_is_never_reused(counted_provider, monkeypatch):
    """A timed-out request's late answer must never be read as the next reply's receipt (the idle
    check taken away: the discard after an ambiguous end is what protects here)."""
    monkeypatch.setattr(keepalive, "_quiet", lambda conn: True)
    state = counted_provider()
    transport = SandboxTransport(state.url, timeout=0.3)
    receipt, error = _late_answer_then_next(state, transport)
    assert error is None
    assert receipt.provider_reply_id == state.receipts[reply(2).reply_key]
    assert transport.kept._kept is not None  # the fresh connection, kept


def test_positive_control_reusing_after_a_timeout_confuses_the_next_send(counted_provider, monkeypatch):
    """The discard removed (the connection kept whatever happened): the next send does not come
    back with its own receipt (http.client refuses the half-used connection, or the late answer
    is read as this one's)."""
    real = keepalive.KeptConnection.give_back
    monkeypatch.setattr(
        keepalive.KeptConnection,
        "give_back",
        lambda self, conn, reusable: real(self, conn, conn.sock is not None),
    )
    state = counted_provider()
    transport = SandboxTransport(state.url, timeout=0.3)
    receipt, error = _late_answer_then_next(state, transport)
    assert error is not None or receipt.provider_reply_id != state.receipts.get(reply(2).reply_key)


def test_a_dropped_answer_closes_the_connection_and_the_next_send_opens_another(counted_provider):
    state = counted_provider()
    transport = SandboxTransport(state.url)
    transport.send(reply(1))
    state.fail_next("drop_after_accept", 1)
    with pytest.raises(Ambiguous):
        transport.send(reply(3))
    assert transport.send(reply(2)).provider_reply_id == state.receipts[reply(2).reply_key]
    assert posts(state) == 2


def test_a_forked_child_never_writes_on_its_parents_connection(counted_provider, monkeypatch):
    state = counted_provider()
    transport = SandboxTransport(state.url)
    transport.send(reply(1))
    kept = transport.kept._kept[0]
    monkeypatch.setattr(keepalive.os, "getpid", lambda: -1)  # as if in a child
    assert transport.kept.take() is None
    assert kept.sock is not None  # left open for the parent, never closed or written by the child


def test_a_provider_rediscovered_from_scratch_is_not_spoken_to_on_an_old_connection(counted_provider):
    state = counted_provider()
    transport = SandboxTransport(state.url)
    transport.send(reply(1))
    sandbox_transport._discovered.cache_clear()  # e.g. a provider restarted on the same port
    transport.refresh()  # asks /capabilities again, on its own connection
    before = len(state.connections)
    transport.send(reply(2))
    assert len(state.connections) == before + 1


def _ten_kept_alive_sends(state) -> float:
    transport = SandboxTransport(state.url)
    transport.send(reply(100))
    started = time.perf_counter()
    for n in range(10):
        transport.send(reply(101 + n))
    return time.perf_counter() - started


@pytest.mark.parametrize("kept_guard", ["provider_nodelay", "transport_quickack"])
def test_kept_alive_sends_are_not_held_by_delayed_acks(counted_provider, monkeypatch, kept_guard):
    """The sandbox provider writes headers and body apart: without TCP_NODELAY on a kept-alive
    connection the body waited for the client's delayed ACK, 40 ms a send. Each guard alone (the
    provider's own TCP_NODELAY, the transport's quick ACK) keeps ten sends well under nine of
    those (at least 0.36 s), with room for a loaded machine."""
    if kept_guard == "provider_nodelay":
        monkeypatch.setattr(keepalive, "_ack_at_once", lambda conn: None)
        state = counted_provider()  # the simulator's own setting
    else:
        state = counted_provider(nodelay=False)
    assert _ten_kept_alive_sends(state) < 0.3


def test_positive_control_without_either_guard_each_send_waits(counted_provider, monkeypatch):
    """Both guards taken away (the provider's TCP_NODELAY and the transport's quick ACK): each
    kept-alive answer waits for the delayed ACK again."""
    monkeypatch.setattr(keepalive, "_ack_at_once", lambda conn: None)
    assert _ten_kept_alive_sends(counted_provider(nodelay=False)) >= 0.3
