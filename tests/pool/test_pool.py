"""CONDUIT_DB_POOL=on: connections come from Django's psycopg pool, per process, fork-safe."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import subprocess_env

ROOT = Path(__file__).resolve().parents[2]


def probe(**env: str) -> dict:
    run = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("pool_probe.py"))],
        cwd=ROOT,
        env={**subprocess_env(), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.django_db(transaction=True)
def test_the_pool_hands_the_same_server_connection_to_each_request():
    """docs/scaling.md#pooling: "CONDUIT_DB_POOL=on uses Django 5.2's psycopg pool (sizes configurable)"."""
    found = probe(
        CONDUIT_DB_POOL="on",
        CONDUIT_DB_POOL_MIN_SIZE="1",
        CONDUIT_DB_POOL_MAX_SIZE="3",
        CONDUIT_DB_POOL_TIMEOUT_SECONDS="2.5",
    )
    assert found["pool"] == {"min_size": 1, "max_size": 3, "timeout": 2.5}
    assert found["conn_max_age"] == 0  # Django refuses persistent connections beside a pool
    # Twenty requests, each closing its connection at its end, served by no more server
    # backends than the pool holds (the pool resets a returned connection in the background,
    # so the next request may take a second one).
    assert len(found["pids"]) == 20 and len(set(found["pids"])) <= 3
    # A forked child (a django-q2 worker) opens its own connection, never the parent's socket,
    # and the parent goes on working after it.
    assert found["child_exit"] == 0
    assert found["child_pid"] not in found["pids"] + [found["after"]]


@pytest.mark.django_db(transaction=True)
def test_without_the_pool_each_request_opens_its_own_connection():
    """The control: pool off and CONN_MAX_AGE=0, every request is a new server backend."""
    found = probe(CONDUIT_DB_POOL="off", CONN_MAX_AGE="0")
    assert found["pool"] is None
    assert len(set(found["pids"])) == 20
