"""Four worker processes drain 500 approved Meta actions (public and private replies, Instagram and
Page comments) against the Graph simulator while faults are injected at random: nothing is applied
twice, every ambiguous answer ends in SEND_STATUS_UNKNOWN, and echoes resolve the ones they can."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ingress.models import Source
from ingress.services import source_reauthorized
from replies.models import ReplyAction, ReplyTransition, SendAttempt
from replies.services import reply_approve
from tests.conftest import subprocess_env
from tests.providers.meta.integration.conftest import IG_ACCOUNT, PAGE_ACCOUNT
from tests.providers.meta.sending.conftest import PERSON, applied, meta_source, sim

ROOT = Path(__file__).resolve().parents[4]
WORKER = Path(__file__).with_name("drain_worker.py")
WORKERS = 4
COMMENTS = 125  # per source; two sources, two purposes each: 500 actions
BATCH = 25
MEDIA = "17800000000000501"
POST = f"{PAGE_ACCOUNT}_200000000000501"
PAGE_MESSAGES = f"/{PAGE_ACCOUNT}/messages"  # the Page's private replies (Instagram's go under /instagram/)
ROUTES = {"public_ack": "meta-comment-reply", "private_delivery": "meta-private-reply"}
SEED = 14
# The random faults: (name, the /_sim/faults body). Ambiguous ones and what "not applied" ones mean
# are errors.py's table; the test below checks each against what the sender recorded.
FAULTS = [
    ("throttled", {"mode": "error", "code": 80002, "status": 400}),
    ("throttled", {"mode": "error", "code": 613, "status": 400}),
    (
        "window",
        {"mode": "error", "code": 10, "subcode": 2534022, "status": 400, "path_contains": "/messages"},
    ),
    (
        "window",
        {"mode": "error", "code": 10, "subcode": 2018278, "status": 400, "path_contains": "/messages"},
    ),
    ("already_replied", {"mode": "error", "code": 10900, "status": 400}),
    ("server_error", {"mode": "error", "code": 1, "status": 500}),
    ("apply_then_timeout", {"mode": "apply_then_timeout"}),
    ("apply_then_drop", {"mode": "apply_then_drop"}),
    ("apply_then_4xx", {"mode": "apply_then_error", "code": 20, "subcode": 1772107, "status": 400}),
]
AMBIGUOUS = {"server_error", "apply_then_timeout", "apply_then_drop", "apply_then_4xx"}
APPLIED_AMBIGUOUS = {"apply_then_timeout", "apply_then_drop", "apply_then_4xx"}


def _kind_of(fault: dict) -> str:
    if fault["mode"] != "error":
        return {"apply_then_error": "apply_then_4xx"}.get(fault["mode"], fault["mode"])
    return {
        80002: "throttled",
        613: "throttled",
        10: "window",
        10900: "already_replied",
        1: "server_error",
        190: "token",
    }[fault["code"]]


def _bodies(kind: str, comments: list[str], created: int) -> list[bytes]:
    """Meta's notifications of the comments, BATCH changes to a body."""
    bodies = []
    for start in range(0, len(comments), BATCH):
        if kind == "instagram":
            changes = [
                {
                    "field": "comments",
                    "value": {
                        "id": c,
                        "text": "price?",
                        "from": {"id": PERSON, "username": "person_test"},
                        "media": {"id": MEDIA, "media_product_type": "FEED"},
                    },
                }
                for c in comments[start : start + BATCH]
            ]
            account, object = IG_ACCOUNT, "instagram"
        else:
            changes = [
                {
                    "field": "feed",
                    "value": {
                        "item": "comment",
                        "verb": "add",
                        "comment_id": c,
                        "post_id": POST,
                        "parent_id": POST,
                        "from": {"id": PERSON, "name": "Person Test"},
                        "message": "price?",
                        "created_time": created,
                    },
                }
                for c in comments[start : start + BATCH]
            ]
            account, object = PAGE_ACCOUNT, "page"
        bodies.append(
            json.dumps(
                {"object": object, "entry": [{"id": account, "time": int(time.time()), "changes": changes}]}
            ).encode()
        )
    return bodies


def _target(action: ReplyAction) -> str:
    return action.event_id.rsplit(":", 1)[1]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("guarded", [True, False], ids=["as_built", "positive_control_unknown_retried"])
def test_four_workers_drain_500_meta_actions_under_random_faults(
    graph, deliver, capture, monkeypatch, guarded
):
    """docs/testing.md#folders: "4 worker processes drain 500 approved actions across both transports against
    the simulator with faults injected at random (...): no comment gets two public or two private
    replies, every ambiguous one ends in SEND_STATUS_UNKNOWN, and echoes resolve the ones they can."
    docs/concepts/ledgers.md#recovery: SEND_STATUS_UNKNOWN "Never retry automatically".

    Positive control: the workers may claim SEND_STATUS_UNKNOWN; a reply Meta applied without a
    readable answer is then sent again and the simulator counts a comment twice."""
    from replies import sender

    monkeypatch.setattr(sender, "enqueue_send", lambda action_id: None)  # no cluster: the workers send
    rng = random.Random(SEED)
    started = time.monotonic()
    ig = meta_source(graph, kind="instagram", purposes=ROUTES)
    page = meta_source(graph, kind="page", purposes=ROUTES)
    created = int(time.time()) - 60
    ig_comments = [f"179000000005{i:05d}" for i in range(COMMENTS)]
    page_comments = [f"200000000000501_{300000000000000 + i}" for i in range(COMMENTS)]
    for comment in ig_comments:
        sim(
            graph,
            "/_sim/comments",
            {
                "account": IG_ACCOUNT,
                "media_id": MEDIA,
                "id": comment,
                "text": "price?",
                "from_id": PERSON,
                "created_time": created,
            },
        )
    for comment in page_comments:
        sim(
            graph,
            "/_sim/comments",
            {
                "account": PAGE_ACCOUNT,
                "post_id": POST,
                "id": comment,
                "text": "price?",
                "from_id": PERSON,
                "created_time": created,
            },
        )
    for body in _bodies("instagram", ig_comments, created) + _bodies("page", page_comments, created):
        deliver(body)
    for action_id in ReplyAction.objects.order_by("id").values_list("id", flat=True):
        assert reply_approve(action_id=action_id, actor="reviewer_test").ok
    assert ReplyAction.objects.filter(delivery_state="APPROVED").count() == 4 * COMMENTS
    prepared = time.monotonic() - started

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
    # Inject at random while they drain: one fault queued at a time, a 190 on the Instagram source
    # once a third of the writes are done, and its token restored a few seconds after.
    token_at = reauth_seen = restored = pinned = None
    deck = rng.sample(FAULTS, len(FAULTS))
    while any(w.poll() is None for w in workers):
        time.sleep(rng.uniform(0.02, 0.15))
        writes = sum(1 for c in graph.state.call_log if c["method"] == "POST")
        if token_at is None and writes >= 4 * COMMENTS // 3:
            token_at = time.time()
            graph.state.fault_add(
                {
                    "mode": "error",
                    "code": 190,
                    "subcode": 460,
                    "status": 400,
                    "path_contains": "/instagram/",
                    "method": "POST",
                }
            )
            continue
        if token_at and reauth_seen is None and Source.objects.get(pk=ig.pk).needs_reauth:
            reauth_seen = time.time()
        if reauth_seen and restored is None and time.time() - reauth_seen > 3:
            source_reauthorized(source_id=ig.pk, actor="operator_test")
            restored = time.time()
        if (
            pinned is None
            and graph.state.faults_pending() == 0
            and any(c["method"] == "POST" and PAGE_MESSAGES in c["path"] for c in graph.state.call_log)
        ):
            # Once a Page's private replies are going out, one applied-then-dropped send among them,
            # so step 4 has an echo to resolve (left to chance, a quick drain may have none).
            graph.state.fault_add(
                {
                    "mode": "apply_then_drop",
                    "path_contains": PAGE_MESSAGES,
                    "method": "POST",
                    "hang_seconds": 2,
                }
            )
            pinned = True
            continue
        if graph.state.faults_pending() == 0 and rng.random() < 0.5:
            # Every kind once, in a random order, then at random: each kind is sure to fire.
            fault = deck.pop() if deck else rng.choice(FAULTS)
            graph.state.fault_add({**fault[1], "method": "POST", "hang_seconds": 2})
    outputs = [w.communicate(timeout=30) for w in workers]
    drained = time.monotonic() - started - prepared
    assert [w.returncode for w in workers] == [0] * WORKERS, [e.decode()[-2000:] for _, e in outputs]
    assert sum("SENT=" in out.decode() for out, _ in outputs) >= 2, outputs  # the work was shared
    graph.state.fault_add({"mode": "clear"})

    # 1. Nothing was applied twice.
    at_sim = applied(graph)
    if not guarded:
        assert max([*at_sim["public"].values(), *at_sim["private"].values()]) >= 2, at_sim
        return
    assert at_sim["public"] and at_sim["private"]
    assert set(at_sim["public"].values()) == {1} and set(at_sim["private"].values()) == {1}, at_sim

    # 2. Nothing is left to send, and each fault led where Meta's answer means.
    actions = {(_target(a), a.purpose): a for a in ReplyAction.objects.select_related("event")}
    assert len(actions) == 4 * COMMENTS
    assert not ReplyAction.objects.filter(delivery_state__in=["APPROVED", "SENDING"]).exists()
    assert not ReplyAction.objects.filter(
        delivery_state="FAILED_BEFORE_SEND", next_attempt_at__isnull=False
    ).exists()
    fired = list(graph.state.fault_log)
    kinds = {_kind_of(f) for f in fired}
    assert {
        "throttled",
        "window",
        "already_replied",
        "server_error",
        "apply_then_timeout",
        "apply_then_drop",
        "apply_then_4xx",
        "token",
    } <= kinds, kinds
    for fault in fired:
        purpose = "private_delivery" if fault["path"].endswith("/messages") else "public_ack"
        action, kind = actions[(fault["target"], purpose)], _kind_of(fault)
        where = f"{kind} on {purpose} of {fault['target']}: {action.delivery_state} {action.last_error_code}"
        kind_at = at_sim["private" if purpose == "private_delivery" else "public"].get(fault["target"], 0)
        if kind in AMBIGUOUS:
            assert action.delivery_state == "SEND_STATUS_UNKNOWN", where
            assert kind_at == (1 if kind in APPLIED_AMBIGUOUS else 0), where
        elif kind == "window":
            assert (action.delivery_state, action.last_error_code) == (
                "FAILED_BEFORE_SEND",
                "window_expired",
            ), where
        elif kind == "already_replied":
            assert action.delivery_state == "SENT" and action.provider_reply_id.startswith(
                "already_replied:"
            ), where
        else:  # throttled or the token: refused, not applied, and tried again
            assert action.attempt_count >= 2, where
    # Ambiguous is final for the sender: no attempt ever followed a move to SEND_STATUS_UNKNOWN.
    unknown = ReplyTransition.objects.filter(next_state="SEND_STATUS_UNKNOWN").values_list(
        "action_id", flat=True
    )
    assert set(unknown) == set(
        ReplyAction.objects.filter(delivery_state="SEND_STATUS_UNKNOWN").values_list("id", flat=True)
    )
    assert not ReplyTransition.objects.filter(
        action_id__in=unknown, prior_state="SEND_STATUS_UNKNOWN"
    ).exists()
    for action_id in unknown:
        assert (
            not SendAttempt.objects.filter(action_id=action_id)
            .exclude(attempt_number=ReplyAction.objects.get(pk=action_id).attempt_count)
            .filter(evidence__in=["timeout_after_request", "connection_lost_after_request"])
            .exists()
        )

    # 3. The 190 stopped the Instagram source until its token was restored, and it resumed.
    assert reauth_seen and restored, "the 190 never marked the source"
    stalled = [
        c
        for c in graph.state.call_log
        if c["method"] == "POST"
        and c["path"].startswith("/instagram/")
        and reauth_seen + 1.5 < c["at"] < restored
    ]
    assert stalled == []  # in-flight sends end within the 1 s timeout; nothing new was claimed
    assert any(c["at"] > restored for c in graph.state.call_log if c["path"].startswith("/instagram/"))

    # 4. Echoes and the account's own comments, delivered as Meta notifies them, resolve what they can.
    still_unknown = {a.pk for a in ReplyAction.objects.filter(delivery_state="SEND_STATUS_UNKNOWN")}
    expected_echo = sum(
        1
        for f in fired
        if _kind_of(f) in APPLIED_AMBIGUOUS
        and f["path"].endswith("/messages")
        and not f["path"].startswith("/instagram/")
    )
    count, settled = -1, time.monotonic() + 10
    while count != len(capture.bodies) and time.monotonic() < settled:
        count = len(capture.bodies)
        time.sleep(0.5)
    for body in list(capture.bodies):
        deliver(body)
    resolved = ReplyTransition.objects.filter(action_id__in=still_unknown, next_state="SENT")
    by_echo = resolved.filter(reason_code="echo_confirmed").count()
    assert by_echo == expected_echo and expected_echo > 0, (by_echo, expected_echo)
    for action in ReplyAction.objects.filter(pk__in=still_unknown).select_related("event__source"):
        fault = [
            f
            for f in fired
            if f["target"] == _target(action)
            and _kind_of(f) in AMBIGUOUS
            and (f["path"].endswith("/messages")) == (action.purpose == "private_delivery")
        ][-1]
        messenger_applied = (
            _kind_of(fault) in APPLIED_AMBIGUOUS
            and action.purpose == "private_delivery"
            and action.event.source_id == page.pk
        )
        if messenger_applied:
            assert action.delivery_state == "SENT", fault
        elif action.purpose == "private_delivery" or _kind_of(fault) not in APPLIED_AMBIGUOUS:
            # Instagram echoes carry no metadata; nothing was applied for a 5xx: both stay for a person.
            assert action.delivery_state == "SEND_STATUS_UNKNOWN", fault
    print(
        f"\ndrain: prepared in {prepared:.1f} s, drained in {drained:.1f} s, faults {len(fired)}, "
        f"resolved by echo {by_echo}, by own comment {resolved.filter(reason_code='own_comment_seen').count()}, "
        f"states {sorted(set(ReplyAction.objects.values_list('delivery_state', flat=True)))}"
    )
