"""Rate budgets shared by every worker: four worker processes on PostgreSQL keep one account under its
budget at the simulator; a send over budget is deferred, never failed, and uses no attempt."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from replies.models import ReplyAction, SendBudget
from replies.services import reply_approve, send_budget_set
from tests.conftest import subprocess_env
from tests.providers.meta.sending.conftest import applied, ig_comment_body, meta_source, sim

ROOT = Path(__file__).resolve().parents[4]
WORKER = Path(__file__).with_name("budget_worker.py")
WORKERS = 4
LIMIT, WINDOW = 20, 4  # "20 per minute", on a 4-second window: the same code, a shorter wait
COMMENTS = 50
MEDIA = "17800000000000401"


def _busiest_window(times: list[float], window: float) -> int:
    times = sorted(times)
    busiest, start = 0, 0
    for end, at in enumerate(times):
        while at - times[start] >= window:
            start += 1
        busiest = max(busiest, end - start + 1)
    return busiest


def _run(graph, deliver, monkeypatch, *, budget_off: bool) -> tuple[list[float], list[str]]:
    from replies import sender

    monkeypatch.setattr(sender, "enqueue_send", lambda action_id: None)  # no cluster: the workers send
    source = meta_source(graph, kind="instagram", purposes={"public_ack": "meta-comment-reply"})
    send_budget_set(source_id=source.pk, purpose="public_ack", limit=LIMIT, window_seconds=WINDOW)
    for i in range(COMMENTS):
        comment = f"179000000004{i:05d}"
        sim(
            graph,
            "/_sim/comments",
            {
                "account": source.account_ref,
                "media_id": MEDIA,
                "id": comment,
                "text": "price?",
                "from_id": "17841400000000901",
            },
        )
        deliver(ig_comment_body(comment, MEDIA))
    for action_id in ReplyAction.objects.values_list("id", flat=True):
        assert reply_approve(action_id=action_id, actor="reviewer_test").ok
    env = subprocess_env()
    if budget_off:
        env["CONDUIT_TEST_BUDGET_OFF"] = "1"
    started = time.time()
    workers = [
        subprocess.Popen(
            [sys.executable, str(WORKER), "60"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(WORKERS)
    ]
    outputs = [w.communicate(timeout=120) for w in workers]
    assert [w.returncode for w in workers] == [0] * WORKERS, outputs
    writes = [
        c["at"]
        for c in graph.state.call_log
        if c["method"] == "POST" and c["path"].endswith("/replies") and c["at"] >= started
    ]
    return writes, [out.decode() for out, _ in outputs]


@pytest.mark.django_db(transaction=True)
def test_four_workers_never_exceed_the_accounts_budget_at_the_simulator(graph, deliver, monkeypatch):
    """docs/platforms/meta.md#send-budgets: "With a budget of 20 per minute for one account and 4 workers, the simulator never
    sees more than 20 in any minute." (Here 20 in any 4 seconds.)"""
    writes, outputs = _run(graph, deliver, monkeypatch, budget_off=False)
    assert len(writes) == COMMENTS
    assert _busiest_window(writes, WINDOW) <= LIMIT, (_busiest_window(writes, WINDOW), outputs)
    assert sum("worker sent 0" not in out for out in outputs) >= 2, outputs  # the work was shared
    # Deferred, never failed: every action sent with exactly one attempt.
    assert set(ReplyAction.objects.values_list("delivery_state", "attempt_count")) == {("SENT", 1)}
    assert set(applied(graph)["public"].values()) == {1}
    assert SendBudget.objects.get().pause_reason == "budget_full"


@pytest.mark.django_db(transaction=True)
def test_positive_control_without_the_budget_the_simulator_sees_more(graph, deliver, monkeypatch):
    writes, _ = _run(graph, deliver, monkeypatch, budget_off=True)
    assert _busiest_window(writes, WINDOW) > LIMIT
