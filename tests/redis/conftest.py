"""A throwaway Redis for the session, started by scripts/with-redis (the script tests use too)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def redis_url():
    """redis://127.0.0.1:<port>/0 of a redis-server that lives as long as the session.

    scripts/with-redis starts it and runs `cat`, which ends when the fixture closes its stdin;
    the script then stops the server and removes its directory. No redis-server fails the
    test (never a skip): `.ci/run` installs Debian's redis-server.
    """
    if shutil.which("redis-server") is None:
        pytest.fail("redis-server is missing (Debian: apt-get install redis-server; .ci/run installs it)")
    proc = subprocess.Popen(
        [str(ROOT / "scripts" / "with-redis"), "sh", "-c", 'echo "$REDIS_URL"; exec cat >/dev/null'],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    url = proc.stdout.readline().strip()
    if not url.startswith("redis://"):
        proc.kill()
        pytest.fail(f"scripts/with-redis did not start Redis (exit {proc.wait()})")
    yield url
    proc.stdin.close()
    proc.wait(timeout=30)


@pytest.fixture
def redis_client(redis_url):
    import redis

    client = redis.from_url(redis_url)
    client.flushall()
    yield client
    client.flushall()
    client.close()
