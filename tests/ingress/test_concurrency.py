"""Real concurrency on PostgreSQL: 32 simultaneous deliveries of one event over HTTP."""

import http.client
import threading
from urllib.parse import urlsplit

import pytest

from conduit import groupcommit
from ingress.models import Delivery, InboundEvent
from replies.models import ReplyAction
from tests.conftest import fixture_body, sign

WORKERS = 32


def post(base_url: str, body: bytes, headers: dict) -> int:
    parts = urlsplit(base_url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        conn.request(
            "POST", "/webhooks/sandbox/", body=body, headers={**headers, "Content-Type": "application/json"}
        )
        return conn.getresponse().status
    finally:
        conn.close()


def deliver_concurrently(base_url: str, body: bytes, delivery_ids: list[str]) -> list[int]:
    signed = [sign(body, delivery_id=d) for d in delivery_ids]
    barrier = threading.Barrier(len(signed))
    statuses: list[int] = []
    lock = threading.Lock()

    def run(headers: dict) -> None:
        barrier.wait()
        status = post(base_url, body, headers)
        with lock:
            statuses.append(status)

    threads = [threading.Thread(target=run, args=(h,)) for h in signed]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return statuses


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("group_commit", [False, True], ids=["alone", "grouped"])
def test_32_concurrent_deliveries_leave_one_event_and_one_reply_per_purpose(
    live_server, sandbox_source, settings, monkeypatch, group_commit
):
    # Each body committing alone (the default), and through the process's group commit queue
    # (CONDUIT_GROUP_COMMIT=on), where bodies of one event never share a group (their keys overlap).
    settings.CONDUIT_GROUP_COMMIT = group_commit
    queued = []
    through_queue = groupcommit._process.fetchall

    def counted(*args, **kwargs):
        queued.append(1)
        return through_queue(*args, **kwargs)

    monkeypatch.setattr(groupcommit._process, "fetchall", counted)
    # Half are provider retries of one delivery id, half carry their own ids.
    ids = ["msg_test_shared"] * (WORKERS // 2) + [f"msg_test_{i:02d}" for i in range(WORKERS // 2)]
    statuses = deliver_concurrently(live_server.url, fixture_body("comment__northstar"), ids)
    assert statuses == [200] * WORKERS
    # The path the setting names: with it on, every body's statement goes to the process's queue
    # (which runs it at once when no commit is in flight, and queues it behind one that is; a body
    # whose statement meets a change of its source runs it again), and with it off, none does.
    # Whether any body did queue depends on timing: tests/ingress/test_group_commit.py holds a
    # commit in flight to make sure of it.
    assert len(queued) >= WORKERS if group_commit else not queued
    event = InboundEvent.objects.get()
    assert event.seen_count == WORKERS
    assert ReplyAction.objects.filter(event=event).count() == 2
    assert sorted(ReplyAction.objects.values_list("purpose", flat=True)) == ["private_delivery", "public_ack"]
    assert Delivery.objects.count() == WORKERS // 2 + 1
    assert Delivery.objects.get(delivery_id="msg_test_shared").seen_count == WORKERS // 2
