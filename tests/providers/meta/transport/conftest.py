"""Fixtures for the Meta transport tests: the loopback-only guard, the Graph simulator, a webhook receiver."""

from __future__ import annotations

import socket

import pytest

from simulators.meta import serve
from tests.providers.meta.transport.support import (
    APP_ID,
    APP_SECRET,
    HANG,
    control,
    loopback_guard,
    outside_hosts,
)
from tests.simulators.meta.helpers import Receiver


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch):
    """Every connection a test here attempts is recorded; one off this host is refused and fails the test."""
    attempted: list[str] = []
    monkeypatch.setattr(socket, "create_connection", loopback_guard(attempted))
    yield attempted
    assert outside_hosts(attempted) == [], f"a test attempted a connection off this host: {attempted}"


@pytest.fixture(scope="module")
def shared_sim():
    # One simulator per module: closing one waits out its server's poll interval (0.5 s), which
    # over 200 tests is most of the run. Each test uses fresh comments, so the state it asserts
    # is its own; faults and the call log are cleared around each test.
    simulator = serve(port=0, hang_seconds=HANG)
    try:
        yield simulator
    finally:
        simulator.close()


@pytest.fixture
def sim(shared_sim):
    control(shared_sim, "faults", method="DELETE")
    control(shared_sim, "calls", method="DELETE")
    yield shared_sim
    control(shared_sim, "faults", method="DELETE")


@pytest.fixture
def receiver():
    receiver = Receiver()
    yield receiver
    receiver.close()


@pytest.fixture
def notifying_sim(receiver):
    simulator = serve(port=0, callback=receiver.url, app_id=APP_ID, app_secret=APP_SECRET, hang_seconds=HANG)
    try:
        yield simulator
    finally:
        simulator.close()
