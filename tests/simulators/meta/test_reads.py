"""The simulator's read routes answer in Meta's shapes, page newest first, and expire cursors."""

from __future__ import annotations

import re
import urllib.request

from tests.simulators.meta.helpers import IG, PAGE, add_comment, call

BASE = 1_780_000_000  # a fixed creation time, unix seconds


def walk(url: str, params: dict) -> tuple[list[dict], int]:
    """Follow paging.next until it is absent: (every item, pages read)."""
    status, answer, _ = call(url, params=params)
    assert status == 200, answer
    items, pages = list(answer["data"]), 1
    while "next" in answer.get("paging", {}):
        status, answer, _ = call(answer["paging"]["next"], token=None)
        assert status == 200, answer
        items += answer["data"]
        pages += 1
    return items, pages


def test_instagram_comments_page_newest_first_and_stop_on_missing_next(sim):
    """Contract: "Newest first", at most 50 a page, `next` absent on the last page."""
    ids = [
        add_comment(
            sim, account=IG, media_id="1790000000000001", text=f"c{i}", from_id="u1", created_time=BASE + i
        )
        for i in range(120)
    ]
    status, first, _ = call(f"{sim.url}/1790000000000001/comments", params={"limit": 500})
    assert status == 200 and len(first["data"]) == 50  # capped at 50 for comment edges
    assert set(first["paging"]["cursors"]) == {"before", "after"}
    assert first["paging"]["next"].startswith(sim.root)
    items, pages = walk(f"{sim.url}/1790000000000001/comments", {"limit": 50})
    assert pages == 3  # 50 + 50 + 20: the short page is the last because next is absent
    assert [i["id"] for i in items] == list(reversed(ids))


def test_an_exact_multiple_of_the_page_size_ends_without_next(sim):
    for i in range(50):
        add_comment(sim, account=IG, media_id="m_exact", text="x", from_id="u1", created_time=BASE + i)
    status, answer, _ = call(f"{sim.url}/m_exact/comments", params={"limit": 50})
    assert len(answer["data"]) == 50 and "next" not in answer["paging"]


def test_instagram_comment_shape_with_nested_replies_and_both_hosts(sim):
    top = add_comment(
        sim, account=IG, media_id="m2", text="Hi", from_id="u1", from_name="alice", created_time=BASE
    )
    reply = add_comment(
        sim, account=IG, media_id="m2", text="Thanks", from_id=IG, parent_id=top, created_time=BASE + 60
    )
    fields = (
        "id,text,timestamp,username,from{id,username},media{id,media_product_type},parent_id,"
        "replies{id,text,timestamp,username,from{id,username},parent_id}"
    )
    for base in (sim.url, sim.instagram_url, f"{sim.root}/v19.0", f"{sim.root}/instagram/v30.1"):
        status, answer, _ = call(f"{base}/m2/comments", params={"fields": fields})
        assert status == 200
        assert answer["data"] == [
            {
                "id": top,
                "text": "Hi",
                "timestamp": "2026-05-28T20:26:40+0000",
                "username": "alice",
                "from": {"id": "u1", "username": "alice"},
                "media": {"id": "m2", "media_product_type": "FEED"},
                "replies": {
                    "data": [
                        {
                            "id": reply,
                            "text": "Thanks",
                            "timestamp": "2026-05-28T20:27:40+0000",
                            "username": f"acct_test_{IG}",
                            "from": {"id": IG, "username": f"acct_test_{IG}"},
                            "parent_id": top,
                        }
                    ]
                },
            }
        ]
    # Without `replies` in fields, no nested replies; the replies edge lists them.
    status, answer, _ = call(f"{sim.url}/m2/comments", params={"fields": "id,text"})
    assert answer["data"] == [{"id": top, "text": "Hi"}]
    status, answer, _ = call(f"{sim.instagram_url}/{top}/replies", params={"fields": "id,parent_id"})
    assert answer["data"] == [{"id": reply, "parent_id": top}]


def test_get_one_comment_gives_its_timestamp(sim):
    comment = add_comment(sim, account=IG, media_id="m3", text="Hi", from_id="u1", created_time=BASE)
    status, answer, _ = call(f"{sim.instagram_url}/{comment}", params={"fields": "timestamp"})
    assert (status, answer) == (200, {"id": comment, "timestamp": "2026-05-28T20:26:40+0000"})


def test_live_and_ad_comments_never_appear_in_reads(sim):
    """Contract: live and ad comments are NOT returned."""
    add_comment(sim, account=IG, media_id="m_live", text="live", from_id="u1", media_product_type="LIVE")
    add_comment(sim, account=IG, media_id="m_ad", text="ad", from_id="u1", ad_id="ad_test_1")
    add_comment(sim, account=IG, media_id="m_feed", text="feed", from_id="u1")
    for media in ("m_live", "m_ad"):
        assert call(f"{sim.url}/{media}/comments")[1]["data"] == []
    assert len(call(f"{sim.url}/m_feed/comments")[1]["data"]) == 1


def test_media_and_feed_honour_since_and_until(sim):
    for i in range(5):
        add_comment(
            sim, account=IG, media_id=f"media_{i}", text="x", from_id="u1", created_time=BASE + i * 3600
        )
        add_comment(
            sim, account=PAGE, post_id=f"{PAGE}_{i}", text="x", from_id="u1", created_time=BASE + i * 3600
        )
    window = {"since": BASE + 3600, "until": BASE + 4 * 3600, "fields": "id,timestamp,media_product_type"}
    items, _ = walk(f"{sim.url}/{IG}/media", window)
    assert [i["id"] for i in items] == ["media_3", "media_2", "media_1"]  # since inclusive, until exclusive
    assert items[0] == {
        "id": "media_3",
        "timestamp": "2026-05-28T23:26:40+0000",
        "media_product_type": "FEED",
    }
    items, _ = walk(f"{sim.url}/{PAGE}/feed", {**window, "fields": "id,created_time"})
    assert [i["id"] for i in items] == [f"{PAGE}_3", f"{PAGE}_2", f"{PAGE}_1"]
    # The window survives paging: next carries since/until.
    items, pages = walk(f"{sim.url}/{IG}/media", {**window, "limit": 1})
    assert pages == 3 and [i["id"] for i in items] == ["media_3", "media_2", "media_1"]


def test_page_post_comments_filter_stream_lists_replies_chronologically(sim):
    post = f"{PAGE}_77"
    top = add_comment(
        sim, account=PAGE, post_id=post, text="Q?", from_id="u1", from_name="Ann", created_time=BASE
    )
    later = add_comment(sim, account=PAGE, post_id=post, text="2nd", from_id="u2", created_time=BASE + 10)
    reply = add_comment(
        sim, account=PAGE, post_id=post, text="A.", from_id=PAGE, parent_id=top, created_time=BASE + 20
    )
    fields = "id,message,created_time,from{id,name},parent{id}"
    status, answer, _ = call(f"{sim.url}/{post}/comments", params={"filter": "stream", "fields": fields})
    assert [c["id"] for c in answer["data"]] == [top, later, reply]
    assert answer["data"][0] == {
        "id": top,
        "message": "Q?",
        "created_time": "2026-05-28T20:26:40+0000",
        "from": {"id": "u1", "name": "Ann"},
    }
    assert answer["data"][2]["parent"] == {"id": top}
    # Without filter=stream: top-level only.
    status, answer, _ = call(f"{sim.url}/{post}/comments", params={"fields": fields})
    assert [c["id"] for c in answer["data"]] == [top, later]
    # Page objects are not on the Instagram host.
    status, answer, _ = call(f"{sim.instagram_url}/{post}/comments")
    assert status == 400 and answer["error"]["code"] == 100


def test_subscribed_apps_shows_what_the_control_api_set(sim):
    call(
        f"{sim.root}/_sim/accounts",
        method="POST",
        body={
            "id": PAGE,
            "object": "page",
            "app_id": "app_test_1",
            "subscribed_fields": ["feed", "messages"],
        },
    )
    status, answer, _ = call(f"{sim.url}/{PAGE}/subscribed_apps")
    assert answer == {
        "data": [
            {
                "id": "app_test_1",
                "name": "Conduit simulator app app_test_1",
                "subscribed_fields": ["feed", "messages"],
            }
        ]
    }
    call(
        f"{sim.root}/_sim/subscriptions",
        method="POST",
        body={"account": PAGE, "app_id": "app_test_1", "fields": []},
    )
    assert call(f"{sim.url}/{PAGE}/subscribed_apps")[1] == {"data": []}
    call(
        f"{sim.root}/_sim/accounts",
        method="POST",
        body={"id": IG, "object": "instagram", "app_id": "app_test_1"},
    )
    answer = call(f"{sim.instagram_url}/{IG}/subscribed_apps")[1]
    assert answer["data"][0]["subscribed_fields"] == ["comments", "live_comments", "messages"]


def test_expired_cursors_answer_invalid_cursor(sim):
    """Contract: an expired cursor is HTTP 400 code 100 GraphMethodException "Invalid cursor"."""
    for i in range(4):
        add_comment(sim, account=IG, media_id="m_cur", text="x", from_id="u1", created_time=BASE + i)
    status, first, _ = call(f"{sim.url}/m_cur/comments", params={"limit": 2})
    next_url = first["paging"]["next"]
    assert call(next_url, token=None)[0] == 200  # valid before expiry
    status, _, _ = call(f"{sim.root}/_sim/faults", method="POST", body={"mode": "expire_cursors"})
    assert status == 200
    status, answer, _ = call(next_url, token=None)
    assert status == 400
    error = answer["error"]
    assert (error["code"], error["type"], error["message"]) == (100, "GraphMethodException", "Invalid cursor")
    assert re.fullmatch(r"[A-Za-z0-9_-]+", error["fbtrace_id"])
    # A fresh listing issues cursors that work again.
    status, fresh, _ = call(f"{sim.url}/m_cur/comments", params={"limit": 2})
    assert call(fresh["paging"]["next"], token=None)[0] == 200
    # A cursor that was never issued is refused the same way.
    forged = call(f"{sim.url}/m_cur/comments", params={"after": "not-a-cursor"})[1]
    assert forged["error"]["message"] == "Invalid cursor"


def test_missing_token_and_unknown_object_use_meta_envelope(sim):
    status, answer, headers = call(f"{sim.url}/{IG}/media", token=None)
    # As Meta answers a call without a token (fixtures/meta_page/recorded/answer_error__code104_missing_token.json).
    assert status == 400 and answer["error"]["code"] == 104 and answer["error"]["type"] == "OAuthException"
    assert set(answer["error"]) == {"message", "type", "code", "fbtrace_id"}
    status, answer, _ = call(f"{sim.url}/999/comments")
    assert status == 400 and (answer["error"]["code"], answer["error"]["error_subcode"]) == (100, 33)


def test_bearer_token_is_accepted(sim):
    add_comment(sim, account=IG, media_id="m_b", text="x", from_id="u1")
    request = urllib.request.Request(f"{sim.url}/m_b/comments", headers={"Authorization": "Bearer tok_test"})
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.status == 200
