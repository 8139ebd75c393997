"""The graph_simulator command: state survives a killed process, loopback only, secret from the env."""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from simulators.meta import serve
from tests.simulators.meta.helpers import APP_ID, APP_SECRET, IG, PAGE, add_comment, call

ROOT = Path(__file__).resolve().parents[3]


class Running:
    def __init__(self, process: subprocess.Popen, line: str) -> None:
        self.process = process
        self.root = re.search(r"http://127\.0\.0\.1:\d+", line).group(0)
        self.url = f"{self.root}/v26.0"
        self.instagram_url = f"{self.root}/instagram/v26.0"


def start(*args: str, env: dict | None = None) -> Running:
    process = subprocess.Popen(
        [sys.executable, "manage.py", "graph_simulator", "--port", "0", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    line = process.stdout.readline()
    if "graph simulator on" not in line:
        process.kill()
        raise AssertionError(f"did not start: {line!r} {process.stderr.read()}")
    return Running(process, line)


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "graph_simulator", "--port", "0", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def test_a_killed_simulator_restarted_on_its_state_file_loses_nothing(tmp_path):
    state = str(tmp_path / "graph.sqlite3")
    first = start("--state", state)
    try:
        comment = add_comment(
            first, account=IG, media_id="m_s", text="keep me", from_id="u1", created_time=1_780_000_000
        )
        reply = add_comment(first, account=IG, media_id="m_s", text="mine", from_id=IG, parent_id=comment)
        post_comment = add_comment(first, account=PAGE, post_id=f"{PAGE}_1", text="page", from_id="u2")
        call(
            f"{first.root}/_sim/subscriptions",
            method="POST",
            body={"account": PAGE, "app_id": "app_test_9", "fields": ["feed"]},
        )
        status, message, _ = call(
            f"{first.root}/_sim/messages",
            method="POST",
            body={"account": IG, "from_id": "u1", "text": "dm", "notify": False},
        )
        status, _, _ = call(f"{first.url}/{comment}/replies", method="POST", params={"message": "thanks"})
        assert status == 200
        stale = call(f"{first.url}/{IG}/media", params={"limit": 1})[1]["paging"]["cursors"]["after"]
        call(f"{first.root}/_sim/faults", method="POST", body={"mode": "expire_cursors"})
    finally:
        first.process.kill()  # SIGKILL: no chance to flush anything
        first.process.wait()
    second = start("--state", state)
    try:
        fields = "id,text,from{id,username},replies{id,text}"
        answer = call(f"{second.url}/m_s/comments", params={"fields": fields})[1]
        assert [c["id"] for c in answer["data"]] == [comment]
        assert reply in [r["id"] for r in answer["data"][0]["replies"]["data"]]
        assert len(answer["data"][0]["replies"]["data"]) == 2  # the posted public reply is there too
        assert call(f"{second.url}/{PAGE}_1/comments")[1]["data"][0]["id"] == post_comment
        assert call(f"{second.url}/{PAGE}/subscribed_apps")[1]["data"][0]["id"] == "app_test_9"
        assert call(f"{second.root}/_sim/applied")[1] == {"public": {comment: 1}, "private": {}}
        # The cursor epoch survived too: the cursor expired before the restart stays expired.
        status, answer, _ = call(f"{second.url}/{IG}/media", params={"after": stale})
        assert status == 400 and answer["error"]["message"] == "Invalid cursor"
        # New ids never collide with the old ones.
        assert add_comment(second, account=IG, media_id="m_s", text="new", from_id="u3") not in (
            comment,
            reply,
        )
    finally:
        second.process.kill()
        second.process.wait()


def test_without_state_a_restart_starts_empty():
    first = start()
    try:
        add_comment(first, account=IG, media_id="m_s", text="x", from_id="u1")
    finally:
        first.process.kill()
        first.process.wait()
    second = start()
    try:
        assert call(f"{second.url}/m_s/comments")[0] == 400  # unknown object
    finally:
        second.process.kill()
        second.process.wait()


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10", "::"])
def test_a_non_loopback_bind_is_refused(host):
    with pytest.raises(ValueError, match="loopback"):
        serve(port=0, host=host)
    result = run("--host", host)
    assert result.returncode != 0 and "loopback" in result.stderr


def test_a_loopback_bind_is_allowed():
    """Positive control for the refusal: the same call with a loopback host serves."""
    simulator = serve(port=0, host="127.0.0.1")
    simulator.close()


def test_a_non_loopback_callback_is_refused():
    with pytest.raises(ValueError, match="loopback"):
        serve(port=0, callback="https://example.com/hook", app_id=APP_ID, app_secret=APP_SECRET)


def test_the_secret_comes_from_the_named_variable_never_argv(tmp_path, receiver):
    result = run(
        "--callback", receiver.url, "--app-id", APP_ID, "--secret-env", "CONDUIT_SOURCE_TEST_UNSET_SECRET_VAR"
    )
    assert result.returncode != 0 and "CONDUIT_SOURCE_TEST_UNSET_SECRET_VAR" in result.stderr
    running = start(
        "--callback",
        receiver.url,
        "--app-id",
        APP_ID,
        "--secret-env",
        "CONDUIT_SOURCE_TEST_META_APP_SECRET",
        env={"CONDUIT_SOURCE_TEST_META_APP_SECRET": APP_SECRET},
    )
    try:
        assert APP_SECRET not in " ".join(running.process.args)
        add_comment(running, account=IG, media_id="m_c", text="x", from_id="u1", notify=True)
        raw, headers = receiver.received[-1]
        expected = "sha256=" + hmac.new(APP_SECRET.encode(), raw, hashlib.sha256).hexdigest()
        assert headers["X-Hub-Signature-256"] == expected
    finally:
        running.process.terminate()
        assert running.process.wait(timeout=10) == 0  # SIGTERM shuts down cleanly
