"""Fixtures for the Meta reader tests: the loopback-only guard and the Graph simulator."""

from __future__ import annotations

import socket

import pytest

from conduit.loopback import LOOPBACK_HOSTS
from tests.providers.meta.reader.support import outside_hosts


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch):
    """Every connection a test here attempts is recorded; one off this host is refused and fails the test.

    http.client connects through socket.create_connection (looked up at each
    connection), so patching it sees every HTTP and HTTPS attempt before any
    DNS lookup could leave the machine.
    """
    attempted: list[str] = []
    real = socket.create_connection

    def guarded(address, *args, **kwargs):
        attempted.append(str(address[0]))
        if str(address[0]) not in LOOPBACK_HOSTS:
            raise ConnectionRefusedError("the meta_reader tests connect only to this host")
        return real(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", guarded)
    yield attempted
    assert outside_hosts(attempted) == [], f"a test attempted a connection off this host: {attempted}"


@pytest.fixture
def sim():
    from simulators.meta import serve

    simulator = serve(port=0, hang_seconds=5.0)
    try:
        yield simulator
    finally:
        simulator.close()
