"""The real django-q2 cluster: approval queues the send on commit; redelivered tasks are harmless."""

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from replies.models import ReplyAction, SendAttempt
from replies.sender import enqueue_send
from replies.services import reply_approve
from tests.conftest import subprocess_env

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.django_db(transaction=True)
def test_approval_reaches_sent_through_the_cluster_once_despite_duplicate_tasks(provider, wire, planned):
    state = provider()
    wire(state)
    action, _ = planned()
    assert reply_approve(action_id=action.pk, actor="reviewer_test").ok  # enqueues on commit
    enqueue_send(action.pk)  # the queue delivering the same task again, twice
    enqueue_send(action.pk)

    cluster = subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"],
        cwd=ROOT,
        env={**subprocess_env(), "CONDUIT_Q_WORKERS": "2"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 90
        while ReplyAction.objects.get(pk=action.pk).delivery_state != "SENT":
            assert cluster.poll() is None, cluster.stdout.read().decode()[-2000:]
            assert time.monotonic() < deadline, "the cluster did not send the approved reply"
            time.sleep(0.3)
        from django_q.models import Task

        # Wait for all three deliveries of the task to have run.
        while Task.objects.filter(func="replies.tasks.send_reply").count() < 3:
            assert time.monotonic() < deadline, "the duplicate tasks did not run"
            time.sleep(0.3)
        results = sorted(
            Task.objects.filter(func="replies.tasks.send_reply").values_list("result", flat=True)
        )
    finally:
        cluster.send_signal(signal.SIGTERM)
        try:
            cluster.wait(timeout=30)
        except subprocess.TimeoutExpired:
            cluster.kill()
    assert results == ["SENT", "not_claimed", "not_claimed"]
    assert SendAttempt.objects.filter(action=action).count() == 1
    with state.lock:
        assert state.applied == {action.reply_key: 1}
