"""/webhooks/meta/<app_id>/: the verification handshake, routing, and real concurrency on PostgreSQL."""

from __future__ import annotations

import http.client
import json
import threading
from urllib.parse import urlsplit

import pytest

from conduit.providers.meta.webhook import signature_header
from ingress.models import Delivery, InboundEvent, QuarantineReceipt
from replies.models import ReplyAction
from tests.providers.meta.integration.conftest import APP_ID, APP_SECRET, VERIFY_TOKEN, meta_body

URL = f"/webhooks/meta/{APP_ID}/"


def handshake(
    client, token: str = VERIFY_TOKEN, challenge: str = "1158201444", app_id: str = APP_ID, **extra
):
    query = {"hub.mode": "subscribe", "hub.verify_token": token, "hub.challenge": challenge, **extra}
    return client.get(f"/webhooks/meta/{app_id}/", query)


def test_handshake_echoes_the_challenge_as_text(client, meta_sources):
    response = handshake(client)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    assert response.content == b"1158201444"


@pytest.mark.parametrize(
    "change",
    [
        {"token": "not-the-token"},
        {"token": ""},
        {"hub.mode": "unsubscribe"},
        {"app_id": "900000000000002"},
        {"challenge": "<script>" * 40},
    ],
)
def test_handshake_refuses_what_does_not_match(client, meta_sources, change):
    response = handshake(client, **change)
    assert response.status_code == 403
    assert response.json()["code"] == "verification_failed"
    assert VERIFY_TOKEN not in response.content.decode()


def test_unknown_app_is_404_and_writes_nothing(client, meta_sources):
    body = meta_body("meta_instagram/comment__created")
    response = client.post(
        "/webhooks/meta/900000000000002/",
        data=body,
        content_type="application/json",
        headers={"X-Hub-Signature-256": signature_header(body=body, secret=APP_SECRET)},
    )
    assert response.status_code == 404 and response.json()["code"] == "unknown_app"
    assert not QuarantineReceipt.objects.exists()


def test_missing_secret_is_503_not_a_refusal(client, meta_sources, monkeypatch):
    monkeypatch.delenv("CONDUIT_SOURCE_TEST_META_SECRET")
    body = meta_body("meta_instagram/comment__created")
    response = client.post(
        URL, data=body, content_type="application/json", headers={"X-Hub-Signature-256": "sha256=" + "0" * 64}
    )
    assert response.status_code == 503 and response.json()["code"] == "source_secret_unavailable"


def test_one_body_for_two_objects_routes_each_entry_to_its_source(post_meta, meta_sources):
    """An Instagram body and a Page body of one app reach their own sources through one URL."""
    assert post_meta(meta_body("meta_instagram/comment__created")).status_code == 200
    assert post_meta(meta_body("meta_page/comment__add")).status_code == 200
    assert sorted(InboundEvent.objects.values_list("source__name", flat=True)) == ["ig-test", "page-test"]


def test_a_rebatched_retry_is_another_delivery_of_the_same_events(post_meta, meta_sources):
    """Meta may re-batch a retry: the per-event keys, not the body, keep one record per event."""
    single = json.loads(meta_body("meta_instagram/comment__created"))
    reply = json.loads(meta_body("meta_instagram/comment__reply"))
    batched = {
        "object": "instagram",
        "entry": [
            {**single["entry"][0], "changes": single["entry"][0]["changes"] + reply["entry"][0]["changes"]}
        ],
    }
    post_meta(json.dumps(single).encode())
    results = post_meta(json.dumps(batched).encode()).json()["results"]
    assert [r["result"] for r in results] == ["duplicate", "accepted"]
    assert Delivery.objects.count() == 2
    assert InboundEvent.objects.count() == 2


WORKERS = 32


@pytest.mark.django_db(transaction=True)
def test_32_concurrent_copies_of_one_meta_body_leave_one_row_per_event(live_server, meta_sources):
    single = json.loads(meta_body("meta_instagram/comment__created"))
    reply = json.loads(meta_body("meta_instagram/comment__reply"))
    single["entry"][0]["changes"] += reply["entry"][0]["changes"]
    body = json.dumps(single).encode()
    headers = {
        "X-Hub-Signature-256": signature_header(body=body, secret=APP_SECRET),
        "Content-Type": "application/json",
    }
    parts = urlsplit(live_server.url)
    barrier = threading.Barrier(WORKERS)
    statuses, lock = [], threading.Lock()

    def run():
        barrier.wait()
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        try:
            conn.request("POST", URL, body=body, headers=headers)
            status = conn.getresponse().status
        finally:
            conn.close()
        with lock:
            statuses.append(status)

    threads = [threading.Thread(target=run) for _ in range(WORKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert statuses == [200] * WORKERS
    assert InboundEvent.objects.count() == 2
    assert set(InboundEvent.objects.values_list("seen_count", flat=True)) == {WORKERS}
    assert ReplyAction.objects.count() == 2  # one public_ack per event
    assert Delivery.objects.get().seen_count == WORKERS
