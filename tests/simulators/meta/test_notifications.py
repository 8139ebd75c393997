"""Notifications reach the callback signed like Meta over the exact bytes sent, singly or batched."""

from __future__ import annotations

import hashlib
import hmac
import json

from tests.simulators.meta.helpers import APP_ID, APP_SECRET, IG, PAGE, add_comment, call


def verify(raw: bytes, headers: dict) -> dict:
    """What a receiver does: HMAC over the received bytes, constant-time compare, then parse."""
    expected = "sha256=" + hmac.new(APP_SECRET.encode(), raw, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(headers["X-Hub-Signature-256"], expected)
    return json.loads(raw)


def test_instagram_comment_notification_is_signed_over_the_escaped_bytes(notifying_sim, receiver):
    """docs/platforms/meta.md#proof: "sha256=<lowercase hex HMAC-SHA256 of the raw body>"; Meta signs the escaped-unicode payload."""
    comment = add_comment(
        notifying_sim,
        account=IG,
        media_id="m_n",
        text="Ça va? 👋 https://x.test/a",
        from_id="u1",
        from_name="zoë",
        notify=True,
    )
    raw, headers = receiver.received[-1]
    assert headers["Content-Type"] == "application/json"
    assert (
        b"\\u00c7a va? \\ud83d\\udc4b" in raw and b"https:\\/\\/x.test\\/a" in raw
    )  # escaped, as Meta sends
    assert raw.isascii()
    body = verify(raw, headers)
    entry = body["entry"][0]
    assert body["object"] == "instagram" and entry["id"] == IG
    assert 1_000_000_000 < entry["time"] < 10_000_000_000  # unix seconds for changes
    assert entry["changes"] == [
        {
            "field": "comments",
            "value": {
                "id": comment,
                "text": "Ça va? 👋 https://x.test/a",
                "from": {"id": "u1", "username": "zoë"},
                "media": {"id": "m_n", "media_product_type": "FEED"},
            },
        }
    ]
    # Re-serialising the parsed body gives other bytes: only the received bytes verify.
    reencoded = json.dumps(body).encode()
    assert (
        hmac.new(APP_SECRET.encode(), reencoded, hashlib.sha256).hexdigest()
        not in headers["X-Hub-Signature-256"]
    )


def test_a_wrong_secret_does_not_verify(notifying_sim, receiver):
    """Positive control for the verification above."""
    add_comment(notifying_sim, account=IG, media_id="m_n", text="x", from_id="u1", notify=True)
    raw, headers = receiver.received[-1]
    forged = "sha256=" + hmac.new(b"another-secret", raw, hashlib.sha256).hexdigest()
    assert not hmac.compare_digest(headers["X-Hub-Signature-256"], forged)


def test_page_comment_and_self_authored_reply_are_notified(notifying_sim, receiver):
    post = f"{PAGE}_5"
    top = add_comment(
        notifying_sim,
        account=PAGE,
        post_id=post,
        text="Q",
        from_id="u1",
        from_name="Ann",
        created_time=1_780_000_000,
        notify=True,
    )
    own = add_comment(
        notifying_sim,
        account=PAGE,
        post_id=post,
        text="A",
        from_id=PAGE,
        parent_id=top,
        created_time=1_780_000_060,
        notify=True,
    )
    first, second = (verify(raw, headers) for raw, headers in receiver.received)
    assert first["object"] == "page"
    assert first["entry"][0]["changes"] == [
        {
            "field": "feed",
            "value": {
                "from": {"id": "u1", "name": "Ann"},
                "post_id": post,
                "comment_id": top,
                "created_time": 1_780_000_000,
                "item": "comment",
                "parent_id": post,
                "verb": "add",
                "message": "Q",
            },
        }
    ]
    value = second["entry"][0]["changes"][0]["value"]
    assert (value["comment_id"], value["from"]["id"], value["parent_id"]) == (own, PAGE, top)


def test_notify_false_is_a_missed_webhook(notifying_sim, receiver):
    add_comment(notifying_sim, account=IG, media_id="m_n", text="x", from_id="u1", notify=False)
    assert receiver.received == []


def test_messages_are_notified_with_millisecond_times(notifying_sim, receiver):
    status, answer, _ = call(
        f"{notifying_sim.root}/_sim/messages",
        method="POST",
        body={"account": IG, "from_id": "u9", "text": "hello", "notify": True},
    )
    body = verify(*receiver.received[-1])
    entry = body["entry"][0]
    assert entry["time"] > 10_000_000_000  # milliseconds for messaging
    assert entry["messaging"][0]["message"] == {"mid": answer["mid"], "text": "hello"}
    assert entry["messaging"][0]["sender"] == {"id": "u9"} and entry["messaging"][0]["recipient"] == {
        "id": IG
    }


def test_an_unsubscribed_account_gets_no_notifications(notifying_sim, receiver):
    call(f"{notifying_sim.root}/_sim/accounts", method="POST", body={"id": IG, "object": "instagram"})
    call(
        f"{notifying_sim.root}/_sim/subscriptions",
        method="POST",
        body={"account": IG, "app_id": APP_ID, "fields": []},
    )
    add_comment(notifying_sim, account=IG, media_id="m_n", text="x", from_id="u1", notify=True)
    assert receiver.received == []


def test_batching_sends_one_body_with_one_entry_per_account(batching_sim, receiver):
    a = add_comment(batching_sim, account=IG, media_id="m_b1", text="1", from_id="u1", notify=True)
    b = add_comment(batching_sim, account=IG, media_id="m_b2", text="2", from_id="u2", notify=True)
    c = add_comment(
        batching_sim, account="17841400000000002", media_id="m_b3", text="3", from_id="u3", notify=True
    )
    assert receiver.received == []  # queued until /_sim/notify
    status, answer, _ = call(f"{batching_sim.root}/_sim/notify", method="POST", body={})
    assert status == 200 and len(receiver.received) == 1
    body = verify(*receiver.received[0])
    by_account = {e["id"]: [ch["value"]["id"] for ch in e["changes"]] for e in body["entry"]}
    assert by_account == {IG: [a, b], "17841400000000002": [c]}
    call(f"{batching_sim.root}/_sim/notify", method="POST", body={})
    assert len(receiver.received) == 1  # nothing left to send


def test_a_refused_delivery_stays_queued_for_the_next_flush(notifying_sim, receiver):
    receiver.status = 500
    add_comment(notifying_sim, account=IG, media_id="m_n", text="x", from_id="u1", notify=True)
    receiver.status = 200
    call(f"{notifying_sim.root}/_sim/notify", method="POST", body={})
    assert len(receiver.received) == 2 and receiver.received[0][0] == receiver.received[1][0]
