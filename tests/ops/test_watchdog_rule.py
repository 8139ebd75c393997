"""The worker watchdog's stall rule over a few timestamps, and what it reads from django-q2's tables."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from conduit.watchdog import LATE_SCHEDULE, QUEUED_TASK, SCHEDULED_TASK, is_stalled, stall_seconds

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


# -- the rule: pure ---------------------------------------------------------------------------------


def test_nothing_due_is_never_a_stall_however_long_ago_a_task_finished():
    assert stall_seconds(now=NOW, last_finished=ago(86400), due_since=None) == 0
    assert stall_seconds(now=NOW, last_finished=None, due_since=None) == 0
    assert not is_stalled(now=NOW, last_finished=None, due_since=None, window=180)


def test_work_due_for_the_window_with_nothing_finished_is_a_stall_and_not_a_second_before():
    assert stall_seconds(now=NOW, last_finished=ago(500), due_since=ago(180)) == 180
    assert is_stalled(now=NOW, last_finished=ago(500), due_since=ago(180), window=180)
    assert not is_stalled(now=NOW, last_finished=ago(500), due_since=ago(179), window=180)
    assert is_stalled(now=NOW, last_finished=None, due_since=ago(180), window=180)


def test_a_task_finished_after_the_work_became_due_restarts_the_count():
    """A long queue that drains is busy, not stalled: the count runs from the last finish."""
    assert stall_seconds(now=NOW, last_finished=ago(5), due_since=ago(3600)) == 5
    assert not is_stalled(now=NOW, last_finished=ago(5), due_since=ago(3600), window=180)
    assert is_stalled(now=NOW, last_finished=ago(200), due_since=ago(3600), window=180)


def test_a_new_cluster_is_judged_only_from_its_own_start():
    assert stall_seconds(now=NOW, last_finished=ago(900), due_since=ago(900), since=ago(60)) == 60
    assert not is_stalled(now=NOW, last_finished=ago(900), due_since=ago(900), window=180, since=ago(60))
    assert is_stalled(now=NOW, last_finished=ago(900), due_since=ago(900), window=180, since=ago(181))


def test_work_due_only_later_and_a_window_of_zero_are_never_a_stall():
    assert stall_seconds(now=NOW, last_finished=ago(900), due_since=NOW + timedelta(seconds=30)) == 0
    assert not is_stalled(now=NOW, last_finished=ago(9000), due_since=ago(9000), window=0)


# -- what the tables say (PostgreSQL) ----------------------------------------------------------------


@pytest.fixture
def tables(db):
    """django-q2's tables empty (the migrations' schedules removed), and a way to fill them."""
    from django.utils import timezone as dj_timezone
    from django_q.conf import Conf
    from django_q.models import OrmQ, Schedule, Task
    from django_q.signing import SignedPackage

    Schedule.objects.all().delete()
    now = dj_timezone.now()

    class Tables:
        def finished(self, seconds_ago: float) -> None:
            stopped = now - timedelta(seconds=seconds_ago)
            Task.objects.create(
                id=f"t{seconds_ago:.0f}".ljust(32, "0"),
                name="test",
                func="replies.tasks.send_due",
                started=stopped,
                stopped=stopped,
                success=True,
            )

        def queued(self, seconds_ago: float, *, payload: str | None = None) -> None:
            started = now - timedelta(seconds=seconds_ago)
            package = SignedPackage.dumps({"id": "x", "func": "replies.tasks.send_reply", "started": started})
            # A pusher took it and re-locked it: the lock is later than the enqueue time.
            OrmQ.objects.create(
                key=Conf.CLUSTER_NAME, payload=payload or package, lock=now + timedelta(seconds=60)
            )

        def schedule(self, *, next_in: float, minutes: int | None = 1, kind: str = Schedule.MINUTES) -> None:
            Schedule.objects.create(
                func="replies.tasks.send_due",
                schedule_type=kind,
                minutes=minutes,
                repeats=-1,
                next_run=now + timedelta(seconds=next_in),
            )

    return now, Tables()


def read(now):
    from conduit.watchdog import progress

    return progress(now)


def test_empty_tables_say_nothing_is_due(tables):
    now, _ = tables
    seen = read(now)
    assert (seen.due_since, seen.due, seen.last_finished, seen.stall_seconds) == (None, "", None, 0)


def test_a_queued_task_is_due_since_it_was_enqueued_not_since_its_lock(tables):
    now, t = tables
    t.finished(400)
    t.queued(300)
    t.queued(100)
    seen = read(now)
    assert (seen.due, seen.due_since) == (QUEUED_TASK, now - timedelta(seconds=300))
    assert seen.stall_seconds == 300


def test_a_queued_task_that_cannot_be_read_is_dated_by_its_lock(tables):
    from django_q.models import OrmQ

    now, t = tables
    t.queued(0, payload="not a signed package")
    OrmQ.objects.update(lock=now - timedelta(seconds=42))
    assert read(now).due_since == now - timedelta(seconds=42)


def test_a_queued_task_is_not_read_on_redis(tables, monkeypatch):
    from django_q.conf import Conf

    now, t = tables
    t.queued(300)
    monkeypatch.setattr(Conf, "ORM", None)
    assert read(now).due_since is None


def test_a_schedule_past_its_run_by_two_scheduler_cycles_is_late(tables):
    now, t = tables
    t.finished(10)
    t.schedule(next_in=-50)  # within the Sentinel's 30 s cycles: not late yet
    assert read(now).due != LATE_SCHEDULE
    t.schedule(next_in=-70, kind="D", minutes=None)
    seen = read(now)
    assert (seen.due, seen.due_since) == (LATE_SCHEDULE, now - timedelta(seconds=70))
    assert seen.stall_seconds == 10  # a task finished since


def test_a_minutes_schedule_must_have_handed_out_a_run_after_the_last_finished_task(tables):
    """Redis keeps no row of a handed-out task: a schedule every minute, handed out by the Sentinel
    at least every 90 s, makes work due 90 s after the last finish at the latest."""
    now, t = tables
    t.schedule(next_in=20, minutes=1)
    t.schedule(next_in=20, minutes=5)
    t.finished(200)
    seen = read(now)
    assert (seen.due, seen.due_since) == (SCHEDULED_TASK, now - timedelta(seconds=110))
    assert seen.stall_seconds == 110
    t.finished(60)  # finished within the last 90 s: nothing shows as due yet
    assert read(now).due_since is None


def test_paused_schedules_and_other_clusters_schedules_are_not_due(tables):
    from django_q.models import Schedule

    now, t = tables
    t.finished(500)
    Schedule.objects.create(
        func="x.y", schedule_type="I", minutes=1, repeats=0, next_run=now - timedelta(hours=1)
    )
    Schedule.objects.create(
        func="x.y",
        schedule_type="I",
        minutes=1,
        repeats=-1,
        cluster="another",
        next_run=now - timedelta(hours=1),
    )
    assert read(now).due_since is None
