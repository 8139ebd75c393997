"""The worker watchdog: a django-q2 cluster that finishes no task while work is due is ended and started again.

Why a cluster wedges. django-q2's workers all read one `multiprocessing.Queue`, whose `get()`
holds the queue's read lock (a POSIX semaphore, `_rlock`) while it blocks reading the pipe
(CPython's multiprocessing/queues.py). An idle cluster always has one worker there. Killed with
SIGKILL (the OOM killer, an operator), it never releases the lock: the Sentinel sees a dead worker
and starts another (cluster.py `Sentinel.guard`/`reincarnate`), and the new one and every other
worker wait on that lock for ever, alive and idle as far as the Sentinel can tell. The pusher keeps
taking tasks off the broker into a queue nobody reads (the ORM broker re-locks them every `retry`
seconds), the scheduler keeps handing out schedules, nothing finishes, and SIGTERM cannot stop the
cluster either (`Sentinel.stop` waits for workers that never get their STOP). The monitor reads
the result queue the same way, so a monitor killed while idle wedges the results instead. Killing
a worker that waits on the lock (rather than the one holding it) is harmless, so only some kills wedge.

What is measured, from django-q2's tables (the same on every node, web or worker):

- finished: the newest `Task.stopped` (every finished task is saved, success or failure, with
  either broker; Conduit keeps django-q2's default of the last 250 successes);
- due: the oldest task waiting in the ORM broker's queue (`OrmQ`, dated by the enqueue time in its
  signed package); a schedule more than 60 s past its `next_run` (the Sentinel hands due schedules
  out every 30 s); and, as long as the Sentinel hands them out, the run of the most frequent
  minutes or hourly schedule that came after the last finished task: with Redis the handed-out
  tasks leave no row, but a schedule every minute must have handed one out within 90 s of it.

A cluster is stalled when work has been due for the window (CONDUIT_WORKER_WATCHDOG_SECONDS) and
no task finished in that time. `manage.py worker` (deploy/entrypoint.sh's worker) runs qcluster as
its child and checks every window/6 seconds (1 to 30): a stalled cluster gets one SIGTERM, then
SIGKILL for every process left of it after 10 s, and a new cluster starts, judged only once its
first schedules were due (30 s after it starts) plus the window. /readyz (`worker_stall`) and
/metrics (`conduit_worker_stall_seconds`, `conduit_worker_watchdog_restarts_total`) show the same.

With several worker nodes, a node sees the others' finished tasks as progress: a wedged node beside
a working one is not restarted while the other keeps every queue moving.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import connections
from django.utils import timezone

logger = logging.getLogger("conduit.watchdog")

# django-q2's Sentinel runs the scheduler every 30 s of its guard loop, the first time 30 s after
# it starts (cluster.py Sentinel.guard: `counter >= 30`).
SCHEDULER_CYCLE_SECONDS = 30
# A schedule this far past its next_run was not handed out: the scheduler itself is stuck.
LATE_SCHEDULE_SECONDS = 2 * SCHEDULER_CYCLE_SECONDS
# A stalled cluster finishes nothing, so it has nothing in hand to finish: a short grace, then SIGKILL.
STALL_STOP_GRACE_SECONDS = 10
# A stop asked for (SIGTERM) lets the tasks in hand end (django-q2's timeout is 60 s), inside the
# unit's TimeoutStopSec=90.
STOP_GRACE_SECONDS = 80
# Due work, by where it was seen.
QUEUED_TASK, LATE_SCHEDULE, SCHEDULED_TASK = "queued_task", "late_schedule", "scheduled_task"


# -- the rule -----------------------------------------------------------------------------------


def stall_seconds(
    *,
    now: datetime,
    last_finished: datetime | None,
    due_since: datetime | None,
    since: datetime | None = None,
) -> float:
    """Seconds work has been due with no task finished: 0 when nothing is due.

    Counted from the latest of: when the work became due, the last task finished, and `since`
    (a cluster's own start, for the process that supervises it).
    """
    if due_since is None:
        return 0.0
    start = max(moment for moment in (due_since, last_finished, since) if moment is not None)
    return max(0.0, (now - start).total_seconds())


def is_stalled(
    *,
    now: datetime,
    last_finished: datetime | None,
    due_since: datetime | None,
    window: float,
    since: datetime | None = None,
) -> bool:
    """Work has been due for `window` seconds and no task finished in them (a window of 0: never)."""
    if window <= 0:
        return False
    return stall_seconds(now=now, last_finished=last_finished, due_since=due_since, since=since) >= window


def stall_window() -> int:
    """The window /readyz judges by: the watchdog's, or with the watchdog off the readiness window."""
    return settings.CONDUIT_WORKER_WATCHDOG_SECONDS or settings.CONDUIT_READY_WORKER_SECONDS


# -- what the task tables say -------------------------------------------------------------------


@dataclass(frozen=True)
class Progress:
    """The task tables at `now`: the last finished task, and since when which work has been due."""

    now: datetime
    last_finished: datetime | None
    due_since: datetime | None
    due: str  # QUEUED_TASK, LATE_SCHEDULE, SCHEDULED_TASK, or "" when nothing is due

    @property
    def stall_seconds(self) -> float:
        return stall_seconds(now=self.now, last_finished=self.last_finished, due_since=self.due_since)


def _oldest_queued() -> datetime | None:
    """When the oldest task in the ORM broker's queue was enqueued (None: empty, or Redis)."""
    from django_q.conf import Conf
    from django_q.models import OrmQ
    from django_q.signing import SignedPackage

    if not Conf.ORM:
        return None
    row = (
        OrmQ.objects.using(Conf.ORM)
        .filter(key=Conf.CLUSTER_NAME)
        .order_by("id")
        .values_list("payload", "lock")
        .first()
    )
    if row is None:
        return None
    payload, lock = row
    try:
        started = SignedPackage.loads(payload).get("started")
    except Exception:  # unreadable: its lock is its enqueue time until a pusher first takes it
        started = None
    return started if isinstance(started, datetime) else lock


def _schedules():
    """The schedules this cluster's scheduler hands out (django_q/scheduler.py's own filter)."""
    from django.db.models import Q
    from django_q.conf import Conf
    from django_q.models import Schedule

    unnamed = Q(cluster__isnull=True) if Conf.CLUSTER_NAME == Conf.PREFIX else Q(pk__in=[])
    return Schedule.objects.exclude(repeats=0).filter(unnamed | Q(cluster=Conf.CLUSTER_NAME))


def _shortest_period() -> timedelta | None:
    """The period of the most frequent minutes or hourly schedule."""
    from django.db.models import Min
    from django_q.models import Schedule

    minutes = (
        _schedules().filter(schedule_type=Schedule.MINUTES, minutes__gt=0).aggregate(m=Min("minutes"))["m"]
    )
    hourly = _schedules().filter(schedule_type=Schedule.HOURLY).exists()
    periods = [timedelta(minutes=minutes)] if minutes else []
    periods += [timedelta(hours=1)] if hourly else []
    return min(periods, default=None)


def progress(now: datetime | None = None) -> Progress:
    """Read the task tables: a handful of statements on small tables, whatever the history."""
    from django.db.models import Max, Min
    from django_q.models import Task

    now = now or timezone.now()
    last = Task.objects.aggregate(m=Max("stopped"))["m"]
    due: list[tuple[datetime, str]] = []
    queued = _oldest_queued()
    if queued is not None:
        due.append((queued, QUEUED_TASK))
    late = (
        _schedules()
        .filter(next_run__lt=now - timedelta(seconds=LATE_SCHEDULE_SECONDS))
        .aggregate(m=Min("next_run"))["m"]
    )
    if late is not None:
        due.append((late, LATE_SCHEDULE))
    period = _shortest_period() if last is not None else None
    if period is not None:
        # The scheduler hands this schedule out at least once per period and cycle: the first run
        # after the last finished task was handed out by then, and it has not finished.
        due.append((last + period + timedelta(seconds=SCHEDULER_CYCLE_SECONDS), SCHEDULED_TASK))
    due = [(moment, kind) for moment, kind in due if moment <= now]
    due_since, kind = min(due, default=(None, ""))
    return Progress(now=now, last_finished=last, due_since=due_since, due=kind)


# -- the supervisor -----------------------------------------------------------------------------


def _become_subreaper() -> None:
    """Orphans of the cluster (a Sentinel whose qcluster died) become this process's children, so
    ending the cluster finds every process of it (Linux's PR_SET_CHILD_SUBREAPER)."""
    try:
        if ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl")
    except (AttributeError, OSError) as refused:
        logger.warning("worker: not a child subreaper (%s): a cluster's orphans may outlive it", refused)


def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state) of every process this one can see in /proc."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        found[int(name)] = (int(fields[1]), fields[0])
    return found


def descendants(root: int) -> list[int]:
    """Live (not zombie) processes descending from `root`."""
    table = _processes()
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found, stack = [], list(children.get(root, []))
    while stack:
        pid = stack.pop()
        stack.extend(children.get(pid, []))
        if table[pid][1] != "Z":
            found.append(pid)
    return found


class ClusterSupervisor:
    """Runs `manage.py qcluster` as a child process; ends and restarts it when it stalls.

    The child stays in this process's group, so whatever ends the node's group (a terminal's
    Ctrl-C, a host's death in the soak) reaches the whole cluster. SIGTERM is passed on to qcluster
    once (a second signal can deadlock django-q2's Cluster.stop, so send it to this process alone:
    systemd's KillMode=mixed, `docker stop`); SIGINT is not, because a terminal sends it to the
    whole group. Either way, what is left of the cluster after STOP_GRACE_SECONDS is killed. A
    qcluster that ends by itself ends this process with an error, for systemd or compose to restart.
    """

    def __init__(self, *, window: int, command: list[str] | None = None) -> None:
        self.window = window
        self.command = command or [sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), "qcluster"]
        self.check_every = min(30.0, max(1.0, window / 6))
        self.child: subprocess.Popen | None = None
        self.judged_from: datetime | None = None
        self.stop_signal: int | None = None

    def run(self) -> int:
        from django_q.conf import Conf

        if 0 < self.window <= (Conf.TIMEOUT or 0):
            logger.warning(
                "worker: watchdog window %s s is not longer than django-q2's task timeout %s s: "
                "a cluster busy with long tasks could be taken for a stalled one",
                self.window,
                Conf.TIMEOUT,
            )
        _become_subreaper()
        signal.signal(signal.SIGTERM, self._asked_to_stop)
        signal.signal(signal.SIGINT, self._asked_to_stop)
        self._start()
        next_check = time.monotonic() + self.check_every
        while True:
            if self.stop_signal is not None:
                return self._stop()
            code = self.child.poll()
            if code is not None:
                logger.error("worker: qcluster ended by itself (exit %s)", code)
                self._end_cluster(grace=0)
                return code if code > 0 else (128 - code if code < 0 else 1)
            if self.window and time.monotonic() >= next_check:
                self._check()
                next_check = time.monotonic() + self.check_every
            self._reap_orphans()
            time.sleep(0.2)

    def _asked_to_stop(self, signum: int, frame: object) -> None:
        if self.stop_signal is None:
            self.stop_signal = signum

    def _start(self) -> None:
        self.child = subprocess.Popen(self.command)
        # Its first schedules are handed out 30 s after it starts: judged from then.
        self.judged_from = timezone.now() + timedelta(seconds=SCHEDULER_CYCLE_SECONDS)
        logger.info(
            "worker: qcluster started (pid %s), watchdog window %s s", self.child.pid, self.window or "off"
        )

    def _check(self) -> None:
        try:
            seen = progress()
        except Exception as failed:  # a database outage is not a stall a restart would mend
            logger.warning(
                "worker watchdog: the task tables did not answer (%s): not judged", type(failed).__name__
            )
            return
        finally:
            connections.close_all()
        if not is_stalled(
            now=seen.now,
            last_finished=seen.last_finished,
            due_since=seen.due_since,
            window=self.window,
            since=self.judged_from,
        ):
            return
        from conduit.metrics import WATCHDOG_RESTARTS

        logger.error(
            "worker watchdog: restarting the cluster: due=%s since=%s last_finished=%s stalled=%.0fs window=%ss",
            seen.due,
            seen.due_since.isoformat(),
            seen.last_finished.isoformat() if seen.last_finished else "never",
            seen.stall_seconds,
            self.window,
        )
        WATCHDOG_RESTARTS.labels(due=seen.due).inc()
        self.child.send_signal(signal.SIGTERM)
        self._end_cluster(grace=STALL_STOP_GRACE_SECONDS)
        if self.stop_signal is None:
            self._start()

    def _stop(self) -> int:
        if self.stop_signal == signal.SIGTERM:
            self.child.send_signal(signal.SIGTERM)
        self._end_cluster(grace=STOP_GRACE_SECONDS)
        logger.info("worker: stopped")
        return 0

    def _end_cluster(self, *, grace: float) -> None:
        """Wait up to `grace` for qcluster to end, then SIGKILL every process left of the cluster."""
        deadline = time.monotonic() + grace
        while self.child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        for _ in range(100):
            left = descendants(os.getpid())
            if not left:
                break
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)
            self._reap_orphans()
        self.child.wait()
        self._reap_orphans()

    def _reap_orphans(self) -> None:
        """Collect the exit of each orphan of the cluster that became this process's child."""
        me = os.getpid()
        for pid, (parent, state) in _processes().items():
            if parent == me and state == "Z" and pid != self.child.pid:
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass


def supervise() -> int:
    """Run the worker node: qcluster under the watchdog. The exit status for the process."""
    return ClusterSupervisor(window=settings.CONDUIT_WORKER_WATCHDOG_SECONDS).run()
