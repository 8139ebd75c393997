"""django-q2 on Redis: a task lost with Redis's contents is harmless (schedules, claim, sweeper)."""

from __future__ import annotations

import importlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import subprocess_env

ROOT = Path(__file__).resolve().parents[2]
QUEUE_KEY = "django_q:conduit:q"  # django-q2's Redis list for the cluster named "conduit"


def _body(first: int, count: int) -> bytes:
    events = [
        {
            "id": f"evt_test_r{n:04d}",
            "type": "comment.created",
            "post_id": "post_test_07",
            "comment_id": f"msg_test_r{n:04d}",
            "from_id": f"person_test_{n:04d}",
            "created_at": "2026-01-15T14:30:00Z",
            "text": "CHECKLIST",
        }
        for n in range(first, first + count)
    ]
    return json.dumps({"account": "acct_test_01", "events": events}).encode()


def _production_schedules() -> None:
    """The send and sweep schedules exactly as migrate creates them (a transactional test's flush
    removed the migration's rows), due now as on a freshly migrated database."""
    from django.utils import timezone
    from django_q.models import Schedule

    migration = importlib.import_module("replies.migrations.0002_groups_and_schedules")
    for name, func in migration.SCHEDULES:
        Schedule.objects.update_or_create(
            name=name,
            defaults={
                "func": func,
                "schedule_type": "I",
                "minutes": 1,
                "repeats": -1,
                "next_run": timezone.now(),
            },
        )


def test_the_redis_url_puts_django_q2_on_redis(redis_url):
    """CONDUIT_Q_BROKER=redis://... selects django-q2's Redis broker; unset, the ORM broker stays."""
    probe = "import django; django.setup(); from django_q.brokers import get_broker; print(type(get_broker()).__module__)"
    run = lambda **env: subprocess.run(  # noqa: E731
        [sys.executable, "-c", probe],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={**subprocess_env(), "DJANGO_SETTINGS_MODULE": "conduit.settings", **env},
    ).stdout.strip()
    assert run(CONDUIT_Q_BROKER=redis_url) == "django_q.brokers.redis_broker"
    assert run() == "django_q.brokers.orm"
    bad = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={
            **subprocess_env(),
            "DJANGO_SETTINGS_MODULE": "conduit.settings",
            "CONDUIT_Q_BROKER": "amqp://127.0.0.1/",
        },
    )
    assert bad.returncode != 0 and "CONDUIT_Q_BROKER is orm or a redis:// URL" in bad.stderr


@pytest.mark.django_db(transaction=True)
def test_flushing_redis_loses_queued_sends_and_every_approved_reply_is_still_sent_once(
    provider,
    wire,
    deliver,
    redis_url,
    redis_client,
    monkeypatch,
):
    """A real qcluster on a real redis-server; Redis is flushed with sends queued, twice.

    docs/scaling.md#redis: "The send and reconcile safety nets (the schedules, the claim, the sweeper) make a
    lost Redis task harmless; a test proves it by flushing Redis mid-run."
    """
    from django_q.conf import Conf
    from django_q.models import OrmQ, Task

    from replies.models import ReplyAction, SendAttempt
    from replies.services import reply_approve

    state = provider()
    wire(state)
    _production_schedules()
    # This process enqueues (approval's on-commit send) on the same Redis as the cluster.
    monkeypatch.setattr(Conf, "ORM", None)
    monkeypatch.setattr(Conf, "REDIS", redis_url)

    def approve_new(first: int, count: int) -> list[int]:
        before = set(ReplyAction.objects.values_list("pk", flat=True))
        assert deliver(_body(first, count)).status_code == 200
        ids = sorted(set(ReplyAction.objects.values_list("pk", flat=True)) - before)
        assert len(ids) == 2 * count  # public_ack and private_delivery per event
        for action_id in ids:
            assert reply_approve(action_id=action_id, actor="reviewer_test").ok  # queues on commit
        return ids

    def states(ids: list[int]) -> set[str]:
        return set(ReplyAction.objects.filter(pk__in=ids).values_list("delivery_state", flat=True))

    # Lost before any worker ran: every approval's task is in Redis, then Redis is emptied.
    batch_a = approve_new(1, 3)
    assert redis_client.llen(QUEUE_KEY) == len(batch_a)
    redis_client.flushall()
    assert redis_client.llen(QUEUE_KEY) == 0

    cluster = subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"],
        cwd=ROOT,
        env={**subprocess_env(), "CONDUIT_Q_BROKER": redis_url, "CONDUIT_Q_WORKERS": "2"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    started = time.monotonic()

    def wait_sent(ids: list[int], seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while states(ids) != {"SENT"}:
            assert cluster.poll() is None, cluster.stdout.read().decode()[-2000:]
            assert time.monotonic() < deadline, f"not all sent: {states(ids)}"
            time.sleep(0.5)

    try:
        # The cluster is up (its stats are in Redis) and, before its scheduler's first run
        # (30 s after start), the lost tasks sent nothing: they are really gone.
        while not redis_client.keys("django_q:conduit:cluster*"):
            assert cluster.poll() is None, cluster.stdout.read().decode()[-2000:]
            assert time.monotonic() - started < 30, "the cluster did not start on Redis"
            time.sleep(0.2)
        time.sleep(max(0.0, 20 - (time.monotonic() - started)))
        assert states(batch_a) == {"APPROVED"}
        # The send_due schedule (rows in PostgreSQL) queues them again.
        wait_sent(batch_a, 90)
        assert max(
            Task.objects.filter(func="replies.tasks.send_due").values_list("result", flat=True)
        ) >= len(batch_a)

        # Mid-run: approvals queue sends on a running cluster, and Redis is flushed at once;
        # whatever the workers had not yet taken is lost, whatever they took runs.
        batch_b = approve_new(101, 3)
        redis_client.flushall()
        wait_sent(batch_b, 150)
    finally:
        cluster.send_signal(signal.SIGTERM)
        try:
            cluster.wait(timeout=30)
        except subprocess.TimeoutExpired:
            cluster.kill()
            cluster.wait()

    every = batch_a + batch_b
    # Exactly once: one attempt per action, and the provider applied each reply key once.
    assert sorted(SendAttempt.objects.filter(action__in=every).values_list("action", flat=True)) == every
    keys = dict(ReplyAction.objects.filter(pk__in=every).values_list("pk", "reply_key"))
    with state.lock:
        assert state.applied == {keys[pk]: 1 for pk in every}
    # Nothing went through the ORM broker.
    assert not OrmQ.objects.exists()
