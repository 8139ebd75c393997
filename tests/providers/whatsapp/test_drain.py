"""Four worker processes drain 500 approved WhatsApp replies against the simulator while faults are
injected at random: no reply is applied twice, every ambiguous answer ends in SEND_STATUS_UNKNOWN,
and the statuses the simulator posts (shuffled), delivered to Conduit's callback, settle every one
the simulator applied; what is left unknown is what it never applied, for a person."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from replies.models import ReplyAction, ReplyTransition
from replies.services import reply_approve
from tests.conftest import subprocess_env
from tests.providers.meta.sending.conftest import APP_ID, capture, graph, sim  # noqa: F401 (fixtures)
from tests.providers.whatsapp.conftest import register_meta, routed

ROOT = Path(__file__).resolve().parents[3]
WORKER = ROOT / "tests" / "providers" / "meta" / "sending" / "drain_worker.py"
WORKERS = 4
BUYERS = 500
BATCH = 25
NUMBER = "100000000000921"
WABA = "100000000000920"
SEED = 30
# The random faults: (kind, the /_sim/faults body); what each means is conduit/providers/whatsapp/errors.py.
FAULTS = [
    ("throttled", {"mode": "error", "code": 130429, "status": 400}),
    ("throttled", {"mode": "error", "code": 131056, "status": 400}),
    ("final", {"mode": "error", "code": 131026, "status": 400}),
    ("final", {"mode": "error", "code": 131047, "status": 400}),
    ("server_error", {"mode": "error", "code": 131000, "status": 500}),
    ("apply_then_timeout", {"mode": "apply_then_timeout"}),
    ("apply_then_drop", {"mode": "apply_then_drop"}),
    ("apply_then_error", {"mode": "apply_then_error", "code": 131000, "status": 500}),
]
AMBIGUOUS = {"server_error", "apply_then_timeout", "apply_then_drop", "apply_then_error"}
APPLIED = {"apply_then_timeout", "apply_then_drop", "apply_then_error"}


def _kind_of(fired: dict) -> str:
    if fired["mode"] != "error":
        return fired["mode"]
    return {
        130429: "throttled",
        131056: "throttled",
        131026: "final",
        131047: "final",
        131000: "server_error",
    }[fired["code"]]


def _buyer(i: int) -> str:
    """A fictional number: 555-0100 to 555-0199 under five area codes."""
    return f"1{201 + i // 100}555{100 + i % 100:04d}"


def _merged(raw: list[bytes]) -> list[bytes]:
    """The simulator's one-message bodies, BATCH changes to a body (as Meta batches them)."""
    merged = []
    for start in range(0, len(raw), BATCH):
        bodies = [json.loads(b) for b in raw[start : start + BATCH]]
        changes = [c for b in bodies for e in b["entry"] for c in e["changes"]]
        merged.append(
            json.dumps(
                {"object": "whatsapp_business_account", "entry": [{"id": WABA, "changes": changes}]}
            ).encode()
        )
    return merged


def _settle(capture, timeout: float = 15.0) -> list[bytes]:
    """Every body the simulator posted, once it has stopped posting."""
    count, deadline = -1, time.monotonic() + timeout
    while count != len(capture.bodies) and time.monotonic() < deadline:
        count = len(capture.bodies)
        time.sleep(0.5)
    return list(capture.bodies)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("guarded", [True, False], ids=["as_built", "positive_control_unknown_retried"])
def test_four_workers_drain_500_whatsapp_replies_under_random_faults(
    graph, deliver, capture, monkeypatch, guarded
):
    """Positive control: the workers may claim SEND_STATUS_UNKNOWN; a send the simulator applied
    without a readable answer is sent again and the simulator counts a reply key twice."""
    from replies import sender

    monkeypatch.setattr(sender, "enqueue_send", lambda action_id: None)  # no cluster: the workers send
    rng = random.Random(SEED)
    sim(graph, "/_sim/whatsapp/numbers", {"phone_number_id": NUMBER, "waba_id": WABA, "app_id": APP_ID})
    sim(graph, "/_sim/whatsapp/status_plan", {"shuffle": True, "seed": SEED})
    source = register_meta(
        "wa-drain-test",
        "meta-whatsapp",
        NUMBER,
        graph_url=graph.url,
        event_types=["message.created"],
        purposes=["private_delivery"],
        contract_version="whatsapp-v1",
    )
    routed(source, url=graph.url)
    for i in range(BUYERS):
        sim(
            graph, "/_sim/whatsapp/messages", {"phone_number_id": NUMBER, "from": _buyer(i), "text": "price?"}
        )
    capture.wait(BUYERS)
    assert len(capture.bodies) == BUYERS
    for body in _merged(list(capture.bodies)):
        deliver(body)
    for action_id in ReplyAction.objects.order_by("id").values_list("id", flat=True):
        assert reply_approve(action_id=action_id, actor="reviewer_test").ok
    assert ReplyAction.objects.filter(delivery_state="APPROVED").count() == BUYERS

    env = {**subprocess_env(), "CONDUIT_TRANSPORT_TIMEOUT_SECONDS": "1", "CONDUIT_LOG_LEVEL": "WARNING"}
    if not guarded:
        env["CONDUIT_TEST_UNKNOWN_RETRIED"] = "1"
    workers = [
        subprocess.Popen(
            [sys.executable, str(WORKER), "150"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(WORKERS)
    ]
    started = time.monotonic()
    deck = rng.sample(FAULTS, len(FAULTS))  # every kind once, in a random order, then at random
    while any(w.poll() is None for w in workers):
        time.sleep(rng.uniform(0.02, 0.15))
        if graph.state.faults_pending() == 0 and rng.random() < 0.5:
            fault = deck.pop() if deck else rng.choice(FAULTS)
            graph.state.fault_add(
                {**fault[1], "method": "POST", "path_contains": "/messages", "hang_seconds": 2}
            )
    outputs = [w.communicate(timeout=30) for w in workers]
    drained = time.monotonic() - started
    assert [w.returncode for w in workers] == [0] * WORKERS, [e.decode()[-2000:] for _, e in outputs]
    assert sum("SENT=" in out.decode() for out, _ in outputs) >= 2, outputs  # the work was shared
    graph.state.fault_add({"mode": "clear"})

    # 1. Nothing was applied twice.
    applied = sim(graph, "/_sim/whatsapp/sent", method="GET")["by_callback_data"]
    if not guarded:
        assert max(applied.values()) >= 2, applied
        return
    assert len(applied) > BUYERS // 2 and set(applied.values()) == {1}, applied

    # 2. Nothing is left to send, and each fault led where WhatsApp's answer means.
    actions = {a.reply_key: a for a in ReplyAction.objects.all()}
    assert len(actions) == BUYERS
    assert not ReplyAction.objects.filter(delivery_state__in=["APPROVED", "SENDING"]).exists()
    assert not ReplyAction.objects.filter(
        delivery_state="FAILED_BEFORE_SEND", next_attempt_at__isnull=False
    ).exists()
    fired = list(graph.state.fault_log)
    assert {kind for kind, _ in FAULTS} <= {_kind_of(f) for f in fired}
    for fault in fired:
        action, kind = actions[fault["target"]], _kind_of(fault)
        where = f"{kind} on {fault['target'][:12]}: {action.delivery_state} {action.last_error_code}"
        if kind in AMBIGUOUS:
            assert action.delivery_state == "SEND_STATUS_UNKNOWN", where
            assert applied.get(action.reply_key, 0) == (1 if kind in APPLIED else 0), where
        elif kind == "final":
            assert action.delivery_state == "FAILED_BEFORE_SEND", where
            assert action.reply_key not in applied, where
        else:  # throttled: refused, nothing sent, tried again
            assert action.attempt_count >= 2, where
    unknown = set(
        ReplyAction.objects.filter(delivery_state="SEND_STATUS_UNKNOWN").values_list("pk", flat=True)
    )
    assert unknown
    # Ambiguous is final for the sender: no attempt ever followed a move to SEND_STATUS_UNKNOWN.
    assert not ReplyTransition.objects.filter(
        action_id__in=unknown, prior_state="SEND_STATUS_UNKNOWN"
    ).exists()

    # 3. The statuses, delivered as the simulator posted them (shuffled), settle every applied one.
    for body in _settle(capture)[BUYERS:]:
        deliver(body)
    for key, action in actions.items():
        action.refresh_from_db()
        if key in applied:
            assert action.delivery_state == "SENT", f"{key[:12]} applied, still {action.delivery_state}"
        else:
            assert action.delivery_state != "SENT", f"{key[:12]} never applied, yet SENT"
    settled = ReplyTransition.objects.filter(action_id__in=unknown, next_state="SENT")
    assert settled.exists() and {t.actor for t in settled} == {"system:status"}
    left = ReplyAction.objects.filter(delivery_state="SEND_STATUS_UNKNOWN")
    assert all(a.reply_key not in applied for a in left)  # left for a person: never applied
    assert ReplyTransition.objects.filter(next_state="SENT").values("action").distinct().count() == len(
        applied
    )
    kinds = sorted({_kind_of(f) for f in fired})
    print(
        f"whatsapp drain: {BUYERS} replies, {WORKERS} workers, {drained:.1f} s; applied {len(applied)}, "
        f"faults {len(fired)} ({', '.join(f'{k}={sum(_kind_of(f) == k for f in fired)}' for k in kinds)}); "
        f"unknown {len(unknown)}, settled by status {settled.count()}, left for a person {left.count()}"
    )
