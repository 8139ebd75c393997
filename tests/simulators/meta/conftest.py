"""Fixtures for the Graph simulator tests: a running simulator and a webhook receiver."""

from __future__ import annotations

import pytest

from simulators.meta import serve
from tests.simulators.meta.helpers import APP_ID, APP_SECRET, Receiver


@pytest.fixture
def sim():
    simulator = serve(port=0, hang_seconds=5)
    yield simulator
    simulator.close()


@pytest.fixture
def receiver():
    receiver = Receiver()
    yield receiver
    receiver.close()


@pytest.fixture
def notifying_sim(receiver):
    simulator = serve(port=0, callback=receiver.url, app_id=APP_ID, app_secret=APP_SECRET)
    yield simulator
    simulator.close()


@pytest.fixture
def batching_sim(receiver):
    simulator = serve(port=0, callback=receiver.url, app_id=APP_ID, app_secret=APP_SECRET, batch=True)
    yield simulator
    simulator.close()
