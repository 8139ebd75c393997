"""`scripts/soak --quick` inside make test: every check passes, and a spoiled run fails its check."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECKS = [
    "every acknowledged event present once",
    "nothing lost",
    "seen_count equals receipts",
    "each reply planned once",
    "every approved reply SENT or SEND_STATUS_UNKNOWN",
    "each reply key applied at most once by the provider",
    "every answer 200 or 503",
    "the replica holds what the primary holds",
    "every web node ready",
]


def _needs_engines() -> None:
    """The soak starts its own PostgreSQL pair and Redis: a missing engine fails (never skips)."""
    if shutil.which("redis-server") is None:
        pytest.fail("redis-server is missing (Debian: apt-get install redis-server; .ci/run installs it)")
    if not list(Path("/usr/lib/postgresql").glob("*/bin/pg_basebackup")):
        pytest.fail("PostgreSQL server binaries are missing (Debian: apt-get install postgresql)")


def _soak(*args: str, timeout: float) -> tuple[int, str, dict[str, str]]:
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "soak"), *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # SIGTERM, not SIGKILL: the soak then stops the nodes it started in their own sessions.
        proc.terminate()
        stdout, stderr = proc.communicate(timeout=60)
        pytest.fail(f"the soak took longer than {timeout} s: {(stdout + stderr)[-4000:]}")
    verdicts = {
        name: verdict for verdict, name in re.findall(r"^(PASS|FAIL) ([^:]+):", stdout, flags=re.MULTILINE)
    }
    return proc.returncode, stdout + stderr, verdicts


def test_the_quick_soak_passes_every_check():
    """docs/testing.md#soak: three gunicorn nodes, two qcluster nodes on Redis, a streaming replica and the
    sandbox provider; signed deliveries (a third duplicates, some re-sent after a dropped response)
    spread over the web nodes, every planned reply approved, one web node and one worker node
    killed -9 mid-run and restarted; then "every acknowledged event present once, `seen_count`
    equal to receipts, each reply key applied at most once by the provider, every approved reply
    SENT or SEND_STATUS_UNKNOWN, nothing lost". It prints events/s, p99 latency and the counts."""
    _needs_engines()
    status, output, verdicts = _soak("--quick", timeout=240)
    assert status == 0, output[-4000:]
    assert verdicts == {name: "PASS" for name in CHECKS}, output[-4000:]
    # It really killed and restarted a node of each kind, and drove traffic through the retries.
    for line in (
        "killed web1 (SIGKILL",
        "web1 restarted",
        "killed worker0 (SIGKILL",
        "worker0 restarted",
        "events/s:",
        "p99",
        "duplicate deliveries",
        "dropped responses",
    ):
        assert line in output, output[-4000:]


def test_a_reply_applied_twice_fails_the_soak():
    """Positive control: with one SENT reply posted to the provider a second time after the drain
    (--break duplicate-send), the provider's count for that key is 2 and the at-most-once check
    fails, and with it the soak's exit status; every other check still passes."""
    _needs_engines()
    status, output, verdicts = _soak(
        "--quick", "--no-kills", "--seconds", "5", "--break", "duplicate-send", timeout=240
    )
    assert status == 1, output[-4000:]
    assert "--break duplicate-send: reply" in output
    assert verdicts == {
        name: "FAIL" if name == "each reply key applied at most once by the provider" else "PASS"
        for name in CHECKS
    }, output[-4000:]
    assert re.search(
        r"FAIL each reply key applied at most once by the provider: \d+ keys applied "
        r"\(\d+ applications\), 1 more than once",
        output,
    ), output[-4000:]
