"""Real processes: four workers racing over 500 approved actions, and a worker killed mid-send."""

import json
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from ingress.models import Source
from ingress.services import webhook_receive
from replies.models import ReplyAction, SendAttempt
from replies.sender import due_action_ids, replies_sweep, reply_send
from replies.services import reply_approve
from tests.conftest import provider_calls, sign, subprocess_env

ROOT = Path(__file__).resolve().parents[2]
WORKERS = 4
EVENTS = 250  # two purposes each: 500 actions


def ingest_events(count: int) -> None:
    source = Source.objects.get(name="sandbox")
    for start in range(0, count, 50):
        events = [
            {
                "id": f"evt_test_w{i}",
                "type": "comment.created",
                "post_id": "post_test_07",
                "comment_id": f"msg_test_w{i}",
                "from_id": "person_test_09",
                "created_at": "2026-01-15T14:30:00Z",
                "text": "CHECKLIST",
            }
            for i in range(start, min(count, start + 50))
        ]
        body = json.dumps({"account": "acct_test_01", "events": events}).encode()
        webhook_receive(source=source, body=body, headers=sign(body))


def approve_all(monkeypatch) -> None:
    from replies import sender

    monkeypatch.setattr(sender, "enqueue_send", lambda action_id: None)  # no cluster in this test
    for action_id in ReplyAction.objects.order_by("id").values_list("id", flat=True):
        assert reply_approve(action_id=action_id, actor="reviewer_test").ok


@pytest.mark.django_db(transaction=True)
def test_four_worker_processes_send_500_actions_each_exactly_once(provider, wire, monkeypatch):
    state = provider()
    wire(state)
    ingest_events(EVENTS)
    approve_all(monkeypatch)
    assert ReplyAction.objects.filter(delivery_state="APPROVED").count() == 2 * EVENTS

    workers = [
        subprocess.Popen(
            [sys.executable, "manage.py", "send_replies", "--drain"],
            cwd=ROOT,
            env=subprocess_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(WORKERS)
    ]
    outputs = [w.communicate(timeout=300) for w in workers]
    assert [w.returncode for w in workers] == [0] * WORKERS, outputs
    claimed = [out.decode() for out, _ in outputs]
    assert sum("SENT" in line for line in claimed) >= 2, claimed  # the work was shared

    assert ReplyAction.objects.exclude(delivery_state="SENT").count() == 0
    keys = set(ReplyAction.objects.values_list("reply_key", flat=True))
    assert len(keys) == 2 * EVENTS
    with state.lock:
        assert state.applied.keys() == keys
        assert set(state.applied.values()) == {1}
    assert SendAttempt.objects.count() == 2 * EVENTS


@pytest.mark.django_db(transaction=True)
def test_worker_killed_after_the_provider_applied_ends_unknown_and_is_never_resent(
    provider, wire, planned, monkeypatch, settings
):
    state = provider()
    wire(state)
    action, _ = planned()
    approve_all(monkeypatch)
    worker = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("crash_worker.py")), str(action.pk)],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        timeout=120,
    )
    assert worker.returncode == -signal.SIGKILL, worker.stderr.decode()
    action.refresh_from_db()
    assert action.delivery_state == "SENDING" and not action.provider_reply_id
    assert SendAttempt.objects.get(action=action).transport == "sent"  # written before the call
    assert provider_calls(state) == 1

    # The queue redelivers the task and the schedule runs while the lease holds: nothing moves.
    assert reply_send(action_id=action.pk) == "not_claimed"
    assert replies_sweep() == 0
    # After the lease the sweeper parks it; still nothing resends it.
    later = timezone.now() + timedelta(seconds=settings.CONDUIT_SEND_LEASE_SECONDS + 1)
    assert replies_sweep(now=later) == 1
    action.refresh_from_db()
    assert (action.delivery_state, action.last_error_code) == ("SEND_STATUS_UNKNOWN", "worker_lease_expired")
    assert action.pk not in due_action_ids()
    assert reply_send(action_id=action.pk) == "not_claimed"
    drained = subprocess.run(
        [sys.executable, "manage.py", "send_replies", "--drain"],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        timeout=120,
    )
    assert drained.returncode == 0
    action.refresh_from_db()
    assert action.delivery_state == "SEND_STATUS_UNKNOWN"
    with state.lock:
        assert state.applied[action.reply_key] == 1  # the other purpose's action was sent normally
