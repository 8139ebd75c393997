"""The worker watchdog on real processes (PostgreSQL, `manage.py worker`, django-q2's qcluster).

SIGKILL of an idle worker can wedge a django-q2 cluster (docs/operations.md#watchdog). The cause, reproduced here on
purpose rather than planted: an idle cluster has one worker blocked reading the task queue's pipe
while it holds the queue's read lock (multiprocessing's Queue.get), the others waiting on that
lock. That worker is killed; the Sentinel starts another, which waits on the lock for ever too.
Approved replies then stay APPROVED until the watchdog ends the cluster and starts a new one.
"""

from __future__ import annotations

import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import subprocess_env
from tests.redis.test_lost_tasks import _body, _production_schedules

ROOT = Path(__file__).resolve().parents[2]
WINDOW = 20  # seconds of work due with nothing finished before the watchdog restarts the cluster
# From the approvals to every reply SENT: the window, a check (window/6), the 10 s stop grace, a
# new qcluster's start and its first scheduler run 30 s later (send_due queues the approved sends).
BOUND = 110
# The syscall number of read(2) where /proc/<pid>/wchan says nothing useful.
READ_SYSCALL = {"x86_64": "0", "aarch64": "63"}.get(platform.machine())


# -- processes, from /proc ----------------------------------------------------------------------


def stat_fields(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()


def children(pid: int) -> list[int]:
    """Live child processes of `pid`, oldest first."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                fields = stat_fields(int(name))
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append((int(fields[19]), int(name)))
    return [child for _, child in sorted(found)]


def blocked_reading(pid: int) -> bool:
    """Blocked in read(2) on a pipe: the idle worker that holds the task queue's read lock."""
    try:
        with open(f"/proc/{pid}/wchan") as wchan:
            if "pipe_read" in wchan.read():
                return True
        with open(f"/proc/{pid}/syscall") as syscall:
            return syscall.read().split()[0] == READ_SYSCALL
    except OSError:
        return False


def session_members(sid: int) -> list[int]:
    members = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                fields = stat_fields(int(name))
            except OSError:
                continue
            if int(fields[3]) == sid and fields[0] != "Z":
                members.append(int(name))
    return members


class Worker:
    """`manage.py worker` in a session of its own, its output in a file."""

    def __init__(self, tmp_path: Path, *, watchdog: int, command: list[str] | None = None) -> None:
        self.log = tmp_path / "worker.log"
        self.prom = tmp_path / "prom"
        self.prom.mkdir()
        env = {
            **subprocess_env(),
            "CONDUIT_Q_WORKERS": "2",
            "CONDUIT_WORKER_WATCHDOG_SECONDS": str(watchdog),
            "PROMETHEUS_MULTIPROC_DIR": str(self.prom),
            "CONDUIT_Q_LOG_LEVEL": "WARNING",
        }
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                command or [sys.executable, "manage.py", "worker"],
                cwd=ROOT,
                env={**env, "CONDUIT_PYTHON": sys.executable},
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> None:
        assert self.proc.poll() is None, (
            f"manage.py worker ended ({self.proc.returncode}):\n{self.output()[-3000:]}"
        )

    def cluster(self) -> tuple[int, int, list[int]]:
        """(qcluster, sentinel, the sentinel's children) once all are up: two workers, monitor, pusher."""
        deadline = time.monotonic() + 60
        while True:
            self.alive()
            qcluster = children(self.proc.pid)
            sentinel = children(qcluster[0]) if qcluster else []
            pool = children(sentinel[0]) if sentinel else []
            if len(pool) == 4:
                return qcluster[0], sentinel[0], pool
            assert time.monotonic() < deadline, f"the cluster did not start:\n{self.output()[-3000:]}"
            time.sleep(0.2)

    def restarts(self) -> float:
        from prometheus_client import CollectorRegistry
        from prometheus_client.multiprocess import MultiProcessCollector

        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=str(self.prom))
        return (
            registry.get_sample_value("conduit_worker_watchdog_restarts_total", {"due": "queued_task"}) or 0.0
        )

    def end(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)
        for pid in session_members(self.proc.pid):
            os.kill(pid, signal.SIGKILL)


def wait_for(what: str, condition, seconds: float, worker: Worker) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        worker.alive()
        assert time.monotonic() < deadline, f"{what} within {seconds} s:\n{worker.output()[-3000:]}"
        time.sleep(0.3)


def wedge(worker: Worker) -> int:
    """Kill the idle worker that holds the task queue's read lock, until no worker reads the task
    pipe any more (one that took a task just before the kill had let the lock go). qcluster's pid."""
    from django_q.models import OrmQ

    qcluster, sentinel, pool = worker.cluster()
    helpers = set(pool[2:])  # the Sentinel starts its workers first, then the monitor and the pusher

    def workers() -> list[int]:
        return [pid for pid in children(sentinel) if pid not in helpers]

    def idle() -> bool:
        found = workers()
        return (
            len(found) == 2
            and not OrmQ.objects.exists()
            and [blocked_reading(p) for p in found].count(True) == 1
        )

    for _ in range(3):
        wait_for("the workers idle, one reading the task pipe", idle, 30, worker)
        os.kill(next(pid for pid in workers() if blocked_reading(pid)), signal.SIGKILL)
        wait_for("the Sentinel started a new worker", lambda: len(workers()) == 2, 30, worker)
        time.sleep(2)
        if not any(blocked_reading(pid) for pid in workers()):
            return qcluster  # every worker waits on the lock the killed one held
    raise AssertionError(f"the cluster did not wedge in three kills:\n{worker.output()[-3000:]}")


@pytest.fixture
def healthy_worker(tmp_path, provider, wire, planned, settings):
    """A supervised cluster that sent one approved reply and ran its first schedules."""
    from django_q.models import Task

    from replies.models import ReplyAction
    from replies.services import reply_approve

    settings.CONDUIT_WORKER_WATCHDOG_SECONDS = WINDOW  # this process's /readyz judges by the same window
    state = provider()
    wire(state)
    _production_schedules()
    first, *_ = planned()
    assert reply_approve(action_id=first.pk, actor="reviewer_test").ok

    def start(watchdog: int) -> Worker:
        worker = Worker(tmp_path, watchdog=watchdog)
        started.append(worker)
        wait_for(
            "the approved reply was sent",
            lambda: ReplyAction.objects.get(pk=first.pk).delivery_state == "SENT",
            60,
            worker,
        )
        wait_for(
            "the first schedules ran",
            lambda: Task.objects.filter(func="replies.tasks.send_due").exists(),
            60,
            worker,
        )
        time.sleep(3)  # the scheduler's batch handed out and done: the next comes 30 s later
        return worker

    started: list[Worker] = []
    yield state, start
    for worker in started:
        worker.end()


def approve_batch(deliver) -> list[int]:
    from replies.models import ReplyAction
    from replies.services import reply_approve

    assert deliver(_body(1, 2)).status_code == 200
    ids = list(
        ReplyAction.objects.filter(delivery_state="REVIEW_PENDING")
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    for action_id in ids:
        assert reply_approve(action_id=action_id, actor="reviewer_test").ok  # queued on commit
    assert len(ids) == 5  # the first fixture's second purpose, and two events' two
    return ids


def states(ids: list[int]) -> set[str]:
    from replies.models import ReplyAction

    return set(ReplyAction.objects.filter(pk__in=ids).values_list("delivery_state", flat=True))


@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_holding_the_queue_lock_wedges_the_cluster_and_the_watchdog_heals_it(
    healthy_worker, deliver
):
    from conduit.health import readiness_checks
    from replies.models import ReplyAction

    state, start = healthy_worker
    worker = start(WINDOW)
    qcluster = wedge(worker)
    ids = approve_batch(deliver)
    approved = time.monotonic()
    wait_for(
        "every approved reply reached SENT after the watchdog's restart",
        lambda: states(ids) == {"SENT"},
        BOUND,
        worker,
    )
    took = time.monotonic() - approved
    # Not before the window: the wedged cluster sent nothing by itself.
    assert took >= WINDOW, f"sent in {took:.0f} s: the cluster was not wedged"
    output = worker.output()
    assert "worker watchdog: restarting the cluster: due=queued_task" in output, output[-3000:]
    assert children(worker.proc.pid) != [qcluster]  # a new qcluster
    assert worker.restarts() == 1
    # Each reply once, whatever the old queue held (the claim makes its redelivery a no-op).
    keys = ReplyAction.objects.filter(pk__in=ids).values_list("reply_key", flat=True)
    with state.lock:
        assert all(state.applied[key] == 1 for key in keys)
    assert readiness_checks()["worker_stall"] == "ok"


@pytest.mark.django_db(transaction=True)
def test_positive_control_with_the_watchdog_off_the_wedged_cluster_sends_nothing(healthy_worker, deliver):
    """The same wedge, CONDUIT_WORKER_WATCHDOG_SECONDS=0: nothing is sent over the same bound, and
    /readyz and the stall gauge name it."""
    from django_q.models import OrmQ

    from conduit.health import readiness_checks
    from conduit.watchdog import progress

    _, start = healthy_worker
    worker = start(0)
    qcluster = wedge(worker)
    ids = approve_batch(deliver)
    deadline = time.monotonic() + BOUND
    while time.monotonic() < deadline:
        worker.alive()
        assert states(ids) == {"APPROVED"}, "the wedged cluster sent a reply: the wedge was not reproduced"
        time.sleep(1)
    assert children(worker.proc.pid) == [qcluster]  # the same cluster, alive, all along
    assert OrmQ.objects.exists()  # its sends wait in the queue
    assert "restarting the cluster" not in worker.output()
    assert worker.restarts() == 0
    assert progress().stall_seconds >= WINDOW
    assert readiness_checks()["worker_stall"] == "failed"


# -- stopping -----------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_sigterm_stops_the_supervised_cluster_and_leaves_nothing_running(tmp_path):
    """Through deploy/entrypoint.sh's worker, as systemd and compose run it (it execs `manage.py worker`)."""
    worker = Worker(
        tmp_path, watchdog=WINDOW, command=["bash", str(ROOT / "deploy" / "entrypoint.sh"), "worker"]
    )
    try:
        worker.cluster()
        worker.proc.send_signal(signal.SIGTERM)
        assert worker.proc.wait(timeout=60) == 0, worker.output()[-3000:]
        assert session_members(worker.proc.pid) == []
    finally:
        worker.end()


@pytest.mark.django_db(transaction=True)
def test_a_qcluster_that_dies_ends_the_worker_with_an_error_and_its_orphans_with_it(tmp_path):
    """SIGKILL of qcluster's main process orphans its Sentinel and workers; the supervisor, their
    subreaper, ends them too and exits non-zero for systemd or compose to restart the node."""
    worker = Worker(tmp_path, watchdog=WINDOW)
    try:
        qcluster, sentinel, _ = worker.cluster()
        os.kill(qcluster, signal.SIGKILL)
        assert worker.proc.wait(timeout=60) != 0
        assert session_members(worker.proc.pid) == []
        assert "qcluster ended by itself" in worker.output()
    finally:
        worker.end()
