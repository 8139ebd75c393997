"""The Meta transports' kept-alive Graph connection: the sandbox transport's guards
(conduit.providers.keepalive, one helper for both), each with its positive control."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from conduit.providers import keepalive
from conduit.providers.meta import transport as meta_transport
from conduit.providers.meta.transport import MetaAmbiguous, MetaReceipt
from simulators.meta import SimulatorState, make_handler
from tests.providers.meta.transport.support import applied, comment, fault, reply_for, transport

KIND = "public-instagram"


@pytest.fixture(autouse=True)
def _fresh_pool():
    """Each test starts with no kept connection in this thread, and leaves none."""

    def drop():
        for kept in getattr(keepalive._local, "kept", {}).values():
            kept.close()
        keepalive._local.__dict__.clear()

    drop()
    yield
    drop()


@pytest.fixture
def counted_graph(loopback):
    """A Graph simulator that counts the TCP connections it accepts; `idle_close` makes it close a
    kept-alive connection idle that long (as Meta's front ends do)."""
    states = []

    def start(*, idle_close: float | None = None):
        state = SimulatorState(hang_seconds=2.0)
        states.append(state)
        connections: list = []

        class Handler(make_handler(state)):
            timeout = idle_close

            def setup(self):
                connections.append(self.client_address)
                super().setup()

        server = loopback(Handler)
        root = f"http://127.0.0.1:{server.server_address[1]}"
        return SimpleNamespace(
            root=root,
            url=f"{root}/v26.0",
            instagram_url=f"{root}/instagram/v26.0",
            state=state,
            connections=connections,
        )

    yield start
    for state in states:
        state.close()


def send(sim, target: str):
    """A send through a transport built for it, as the sender builds one per send."""
    try:
        return transport(sim, KIND).send(reply_for(target, purpose=KIND))
    except MetaAmbiguous as exc:
        return exc


def sends_on_connections(sim, count: int) -> tuple[list, int]:
    targets = [comment(sim, "instagram") for _ in range(count)]
    before = len(sim.connections)
    outcomes = [send(sim, target) for target in targets]
    return outcomes, len(sim.connections) - before


def test_meta_sends_share_one_kept_alive_connection(counted_graph):
    """docs/internals.md#keep-alive: "a kept-alive HTTP connection per transport and worker"; the Meta transport is built
    per send (it carries the source's token), so the connection is kept per thread and Graph host."""
    sim = counted_graph()
    outcomes, opened = sends_on_connections(sim, 4)
    assert all(isinstance(o, MetaReceipt) for o in outcomes), outcomes
    assert opened == 1
    assert sum(applied(sim)["public"].values()) == 4


def _send_after_the_server_closed_the_idle_connection(counted_graph):
    sim = counted_graph(idle_close=0.2)
    first, second = comment(sim, "instagram"), comment(sim, "instagram")
    assert isinstance(send(sim, first), MetaReceipt)
    time.sleep(0.6)  # the server closes the idle kept-alive connection
    return sim, second


def test_a_graph_connection_the_server_closed_while_idle_is_not_reused(counted_graph, monkeypatch):
    """The idle socket is found closed before anything is written (the write retry is taken away
    here, so only this check protects): the send goes out once, on a fresh connection."""
    monkeypatch.setattr(keepalive, "STALE_ON_WRITE", ())
    sim, second = _send_after_the_server_closed_the_idle_connection(counted_graph)
    assert isinstance(send(sim, second), MetaReceipt)
    assert applied(sim, second)["public"] == {second: 1}


def _send_on_a_connection_that_refuses_writes(counted_graph, monkeypatch):
    """A Graph POST is one write (everything is in the query string), so a server's close shows on
    the read, not the write (ambiguous by rule: the idle check is what protects). Here the kept
    socket refuses the write itself (shut for writing on this side), as the race the idle check
    cannot close does for a request written in parts; the check is told it is quiet."""
    import socket

    monkeypatch.setattr(keepalive, "_quiet", lambda conn: True)
    sim = counted_graph()
    first, second = comment(sim, "instagram"), comment(sim, "instagram")
    assert isinstance(send(sim, first), MetaReceipt)
    (kept,) = keepalive._local.kept.values()
    kept._kept[0].sock.shutdown(socket.SHUT_WR)
    return sim, second, send(sim, second)


def test_a_write_refused_on_a_reused_graph_connection_goes_once_more_on_a_fresh_one(
    counted_graph, monkeypatch
):
    """No whole request reached Meta: it goes once more, on a fresh connection, applied once."""
    sim, second, outcome = _send_on_a_connection_that_refuses_writes(counted_graph, monkeypatch)
    assert isinstance(outcome, MetaReceipt), outcome
    assert applied(sim, second)["public"] == {second: 1}


def test_positive_control_a_refused_write_read_as_maybe_sent_parks_the_send(counted_graph, monkeypatch):
    monkeypatch.setattr(keepalive, "STALE_ON_WRITE", ())
    sim, second, outcome = _send_on_a_connection_that_refuses_writes(counted_graph, monkeypatch)
    assert isinstance(outcome, MetaAmbiguous) and outcome.code == "connection_lost_after_request"
    assert applied(sim, second)["public"] == {}


def test_positive_control_without_either_guard_a_closed_graph_connection_parks_a_send(
    counted_graph, monkeypatch
):
    """Both guards removed: the request goes down the closed connection and the send is Ambiguous
    (a needless SEND_STATUS_UNKNOWN), although Meta never saw it."""
    monkeypatch.setattr(keepalive, "_quiet", lambda conn: True)
    monkeypatch.setattr(keepalive, "STALE_ON_WRITE", ())
    sim, second = _send_after_the_server_closed_the_idle_connection(counted_graph)
    outcome = send(sim, second)
    assert isinstance(outcome, MetaAmbiguous)
    assert outcome.code == "connection_lost_after_request"
    assert applied(sim, second)["public"] == {}


def _late_answer_then_next(sim, monkeypatch):
    """A send that times out (Meta answers after the transport gave up), then another at once.
    The idle check is told the connection is quiet: only the discard protects."""
    monkeypatch.setattr(keepalive, "_quiet", lambda conn: True)
    monkeypatch.setattr("tests.providers.meta.transport.support.TIMEOUT", 0.3)
    first, second = comment(sim, "instagram"), comment(sim, "instagram")
    fault(sim, mode="latency", latency_ms=600, count=1, method="POST")
    outcome = send(sim, first)
    assert isinstance(outcome, MetaAmbiguous) and outcome.code == "timeout_after_request"
    return second, send(sim, second)


def test_a_graph_connection_whose_request_timed_out_is_never_reused(counted_graph, monkeypatch):
    """A timed-out request's late answer must never be read as the next reply's receipt."""
    sim = counted_graph()
    second, outcome = _late_answer_then_next(sim, monkeypatch)
    assert isinstance(outcome, MetaReceipt), outcome
    assert applied(sim, second)["public"] == {second: 1}


def test_positive_control_reusing_after_a_timeout_confuses_the_next_graph_send(counted_graph, monkeypatch):
    """The discard removed (the connection kept whatever happened): the next send does not come back
    with a receipt of its own (http.client refuses the half-used connection, or the late answer
    is read as this one's)."""
    real = keepalive.KeptConnection.give_back
    monkeypatch.setattr(
        keepalive.KeptConnection,
        "give_back",
        lambda self, conn, reusable: real(self, conn, conn.sock is not None),
    )
    sim = counted_graph()
    second, outcome = _late_answer_then_next(sim, monkeypatch)
    assert not isinstance(outcome, MetaReceipt) or applied(sim, second)["public"] != {second: 1}


def test_an_answer_cut_at_the_size_limit_closes_the_connection(counted_graph, monkeypatch):
    """An answer read only up to the limit is not whole: its connection is closed, and the next send
    opens another and gets its own receipt."""
    sim = counted_graph()
    first, second = comment(sim, "instagram"), comment(sim, "instagram")
    monkeypatch.setattr(meta_transport, "SEND_MAX_BYTES", 4)
    outcome = send(sim, first)
    assert isinstance(outcome, MetaAmbiguous) and outcome.code == "unreadable_receipt"
    monkeypatch.setattr(meta_transport, "SEND_MAX_BYTES", 64 * 1024)
    before = len(sim.connections)
    assert isinstance(send(sim, second), MetaReceipt)
    assert len(sim.connections) == before + 1


def test_positive_control_keeping_a_cut_answers_connection_breaks_the_next_send(counted_graph, monkeypatch):
    real = keepalive.KeptConnection.give_back
    monkeypatch.setattr(
        keepalive.KeptConnection,
        "give_back",
        lambda self, conn, reusable: real(self, conn, conn.sock is not None),
    )
    sim = counted_graph()
    first, second = comment(sim, "instagram"), comment(sim, "instagram")
    monkeypatch.setattr(meta_transport, "SEND_MAX_BYTES", 4)
    send(sim, first)
    monkeypatch.setattr(meta_transport, "SEND_MAX_BYTES", 64 * 1024)
    assert not isinstance(send(sim, second), MetaReceipt)


@pytest.mark.parametrize("idle_limit,fresh", [(0.05, 1), (100.0, 0)])
def test_a_graph_connection_idle_past_the_limit_is_not_reused(counted_graph, monkeypatch, idle_limit, fresh):
    """Past KEEPALIVE_IDLE_SECONDS the connection is closed, not reused (servers close idle ones
    on their own clock); the control (a limit far away) shows the same pause otherwise reuses it."""
    monkeypatch.setattr(keepalive, "KEEPALIVE_IDLE_SECONDS", idle_limit)
    sim = counted_graph()
    first, second = comment(sim, "instagram"), comment(sim, "instagram")
    assert isinstance(send(sim, first), MetaReceipt)
    time.sleep(0.15)
    before = len(sim.connections)
    assert isinstance(send(sim, second), MetaReceipt)
    assert len(sim.connections) - before == fresh


def test_a_forked_child_never_writes_on_its_parents_graph_connection(counted_graph, monkeypatch):
    sim = counted_graph()
    assert isinstance(send(sim, comment(sim, "instagram")), MetaReceipt)
    (parents,) = keepalive._local.kept.values()
    sock = parents._kept[0].sock
    monkeypatch.setattr(keepalive.os, "getpid", lambda: -1)  # as if in a child
    assert parents.take() is None
    assert sock.fileno() != -1  # left open for the parent, never closed or written by the child
    before = len(sim.connections)
    assert isinstance(send(sim, comment(sim, "instagram")), MetaReceipt)
    assert len(sim.connections) - before == 2  # the child's own (and the comment's control call)
