"""`scripts/demo` stops cleanly: a Ctrl-C or SIGTERM to its process group leaves nothing running."""

import contextlib
import os
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
BANNER = "Conduit is running at"


def processes() -> dict[int, dict]:
    """Every process on the machine: pid -> ppid, session, state, start time and command line."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = (
                Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            )
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
        found[int(entry)] = {
            "state": fields[0],
            "ppid": int(fields[1]),
            "pgrp": int(fields[2]),
            "sid": int(fields[3]),
            "start": fields[19],
            "cmd": cmdline.strip(),
        }
    return found


class Demo:
    """scripts/demo in its own session, as a terminal would run it, on SQLite and free ports."""

    def __init__(
        self, tmp_path: Path, *, web_port: int | None = None, command: list[str] | None = None
    ) -> None:
        self.tmp_path = tmp_path
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "SECRET_KEY")}
        env.update(
            DEMO_ENV_FILE=str(tmp_path / "demo.env"),
            DEMO_DATABASE_URL=f"sqlite:///{tmp_path / 'demo.sqlite3'}",
            DEMO_PORT=str(web_port or free_port()),
            DEMO_PROVIDER_PORT=str(free_port()),
            DEMO_GRAPH_PORT=str(free_port()),
            DEMO_STOP_GRACE_SECONDS="20",
            PYTHONUNBUFFERED="1",
            CONDUIT_Q_WORKERS="2",
        )
        self.proc = subprocess.Popen(
            command or ["bash", str(ROOT / "scripts" / "demo")],
            cwd=ROOT,
            env=env,
            start_new_session=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self.seen: dict[int, dict] = {}  # every descendant ever observed, by pid
        self._done = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._watch, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)

    def _watch(self) -> None:
        while not self._done.is_set():
            table = processes()
            tree = {self.proc.pid}
            grew = True
            while grew:
                grew = False
                for pid, info in table.items():
                    if pid not in tree and info["ppid"] in tree:
                        tree.add(pid)
                        grew = True
            for pid in tree:
                if pid in table and pid not in self.seen:
                    self.seen[pid] = table[pid]
            time.sleep(0.1)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_for(self, text: str, timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.output:
            if self.proc.poll() is not None:
                raise AssertionError(f"the demo ended before {text!r}:\n{self.output[-3000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no {text!r} within {timeout}s:\n{self.output[-3000:]}")
            time.sleep(0.1)

    def stop(self, signum: int, timeout: float = 90) -> int:
        os.killpg(self.proc.pid, signum)  # what a terminal does on Ctrl-C, or `kill -TERM -PGID`
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            time.sleep(0.5)
            self._done.set()

    def survivors(self) -> list[str]:
        """Live processes the demo started, or still in a session one of them leads."""
        now = processes()
        sessions = {info["sid"] for info in self.seen.values()}
        left = []
        for pid, info in now.items():
            if info["state"] == "Z":
                continue  # exited; only waiting for a parent to read its status
            same = pid in self.seen and self.seen[pid]["start"] == info["start"]
            if same or info["sid"] in sessions:
                left.append(f"{pid} sid={info['sid']} state={info['state']} {info['cmd']}")
        return left

    def kill_all(self) -> None:
        for pid, info in processes().items():
            if pid in self.seen and self.seen[pid]["start"] == info["start"]:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass


@pytest.fixture
def demo(tmp_path):
    started = []

    def start(**kwargs) -> Demo:
        started.append(Demo(tmp_path, **kwargs))
        return started[-1]

    yield start
    for one in started:  # never leave a failed run's processes behind for the next test
        if one.proc.poll() is None:
            os.killpg(one.proc.pid, signal.SIGKILL)
        one.kill_all()


def qcluster_processes(run: Demo) -> list[int]:
    return [pid for pid, info in run.seen.items() if re.search(r"manage\.py qcluster|qcluster ", info["cmd"])]


@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_stopping_the_running_demo_leaves_nothing_running(demo, signum, status):
    """Stopping the demo stops the django-q2 cluster too: nothing outlives it."""
    run = demo()
    run.wait_for(BANNER)
    deadline = time.monotonic() + 30
    while (
        len(qcluster_processes(run)) < 3 and time.monotonic() < deadline
    ):  # the cluster and its sentinel, workers
        time.sleep(0.2)
    assert len(qcluster_processes(run)) >= 3, run.seen
    # The terminal stays readable: no django-q2 line per task, no line per request.
    assert "django-q Processed" not in run.output and '"GET /admin/login/' not in run.output
    # The demo's synthetic Instagram source holds the notified comment and the one
    # reconciliation recovered from the Graph simulator.
    import sqlite3

    with contextlib.closing(sqlite3.connect(run.tmp_path / "demo.sqlite3")) as db:
        statuses = db.execute(
            "SELECT e.reconcile_status FROM inbound_events e JOIN ingress_source s ON s.id = e.source_id "
            "WHERE s.name = 'instagram-acct_test_demo'"
        ).fetchall()
    assert sorted(statuses) == [("MATCHED",), ("MATCHED",)], run.output[-3000:]
    if signum == signal.SIGINT:
        # The banner's "try" command works as printed, in a terminal that exported
        # nothing (manage.py reads the env file), and makes a new pending reply.
        (command,) = re.findall(r"^\s*try:\s+(.+)$", run.output, flags=re.MULTILINE)
        terminal = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "SECRET_KEY")}
        terminal["DATABASE_URL"] = (
            f"sqlite:///{run.tmp_path / 'demo.sqlite3'}"  # the demo's, as DEMO_DATABASE_URL
        )
        tried = subprocess.run(
            command, shell=True, cwd=ROOT, env=terminal, capture_output=True, text=True, timeout=60
        )
        assert tried.returncode == 0, tried.stdout + tried.stderr
        with contextlib.closing(sqlite3.connect(run.tmp_path / "demo.sqlite3")) as db:
            (pending,) = db.execute(
                "SELECT COUNT(*) FROM reply_actions WHERE event_key LIKE '%evt_test_0104' "
                "AND delivery_state = 'REVIEW_PENDING'"
            ).fetchone()
        assert pending == 2
    assert run.stop(signum) == status, run.output[-3000:]
    assert run.survivors() == []
    assert "nothing is left running" in run.output


def test_ctrl_c_during_setup_stops_setup_and_never_claims_to_run(demo):
    """A Ctrl-C during setup stops it; no banner, nothing left running."""
    run = demo()
    run.wait_for("demo: running the non-delivery canary")
    assert run.stop(signal.SIGINT) == 130, run.output[-3000:]
    assert BANNER not in run.output
    assert run.survivors() == []


def test_a_service_that_cannot_start_fails_the_demo_loudly(demo):
    """A failed step is not swallowed; the demo says so, exits non-zero, stops the rest."""
    with socket.socket() as taken:  # the web server's port is already in use
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        run = demo(web_port=taken.getsockname()[1])
        assert run.proc.wait(timeout=180) == 1, run.output[-3000:]
    assert "FAILED: the web server exited during startup" in run.output
    assert BANNER not in run.output
    time.sleep(0.5)
    run._done.set()
    assert run.survivors() == []


@pytest.mark.parametrize("to_demo_only", [False, True])
def test_make_demo_ends_without_an_error_when_stopped(demo, to_demo_only):
    """`make` does not end with an error after the demo is stopped: Ctrl-C (the terminal
    signals make, its recipe's shell and the demo alike), or a SIGTERM to the demo alone, after
    which make reports no "Error 143"."""
    run = demo(command=["make", "--no-print-directory", "demo"])
    run.wait_for(BANNER)
    if to_demo_only:
        shells = {
            pid: info
            for pid, info in run.seen.items()
            if "scripts/demo" in info["cmd"]
            and "make" not in info["cmd"]
            and info["ppid"] != 1
            and pid != run.proc.pid
            and info["cmd"].startswith(("bash", "/bin/bash", "/usr/bin/bash"))
        }
        # The script's own subshells carry its command line too: the script is the one whose parent is not one.
        (script,) = [pid for pid, info in shells.items() if info["ppid"] not in shells]
        os.kill(script, signal.SIGTERM)
        status = run.proc.wait(timeout=90)
        assert status == 0, (status, run.output[-2000:])
    else:
        status = run.stop(signal.SIGINT)
        assert status in (0, -signal.SIGINT), (status, run.output[-2000:])
    assert "make: ***" not in run.output, run.output[-2000:]
    assert run.survivors() == []
