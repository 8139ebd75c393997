"""The Meta readers against the loopback Graph simulator: one resumable cursor over the whole fan-out."""

from __future__ import annotations

import base64
import json

import pytest

from conduit.providers.base import PageFailure
from conduit.providers.meta import reader as meta_reader
from conduit.providers.meta.reader import MAX_CALLS_PER_PAGE
from tests.providers.meta.reader.support import (
    IG_ACCOUNT,
    PAGE_ACCOUNT,
    TOKEN,
    InstagramReaderUnderTest,
    PageReaderUnderTest,
    at,
    config,
    keys,
    outside_hosts,
    scan,
)

BASE = 1_790_000_000  # unix seconds, 2026-09


def ig_comment(
    sim, media: int, n: int, *, parent: str | None = None, when: int | None = None, from_id: str | None = None
) -> str:
    return sim.state.comment_create(
        {
            "account": IG_ACCOUNT,
            "media_id": f"1800000000{media:07d}",
            "text": f"comment {media}-{n}",
            "from_id": from_id or f"9{n:05d}",
            "created_time": when or BASE + media * 10_000 + n,
            "media_created_time": BASE + media * 10_000,
            **({"parent_id": parent} if parent else {}),
        }
    )["id"]


def page_comment(sim, post: int, n: int, *, parent: str | None = None, when: int | None = None) -> str:
    return sim.state.comment_create(
        {
            "account": PAGE_ACCOUNT,
            "post_id": f"{PAGE_ACCOUNT}_{post:07d}",
            "text": f"comment {post}-{n}",
            "from_id": f"8{n:05d}",
            "created_time": when or BASE + post * 10_000 + n,
            "media_created_time": BASE + post * 10_000,
            **({"parent_id": parent} if parent else {}),
        }
    )["id"]


def calls(sim) -> int:
    return sum(sim.state.calls.values())


@pytest.fixture
def instagram(sim):
    """Three media: 120 top-level comments with a 40-reply thread, 55 with 3 replies each on one, and 5."""
    expected = set()
    for media, count in ((1, 120), (2, 55), (3, 5)):
        ids = [ig_comment(sim, media, n) for n in range(count)]
        expected.update(ids)
        replies = 40 if media == 1 else 3
        expected.update(ig_comment(sim, media, 1000 + r, parent=ids[0]) for r in range(replies))
    return expected


def test_a_full_instagram_read_pages_through_media_comments_and_replies(sim, instagram):
    """docs/platforms/meta.md#reading-back: "the fan-out over media/posts and their comments is one
    resumable cursor"; docs/concepts/reconciliation.md#page-protocol:
    "Returned pages must retain one nonempty ScanID, avoid repeated cursors, and cannot claim completion
    while providing another cursor" (checked on every page by `scan`)."""
    reader = InstagramReaderUnderTest()
    before = calls(sim)
    pages = scan(reader, base_url=sim.instagram_url, cfg=config(), limit=100)
    assert keys(pages) == instagram  # every comment and reply, past several 50-comment pages
    assert len(instagram) == 120 + 40 + 55 + 3 + 5 + 3
    assert all(not p.rejections and not p.receipts for p in pages)
    assert [p.complete for p in pages] == [False] * (len(pages) - 1) + [True]
    assert all(len(p.observations) <= 100 for p in pages)
    assert calls(sim) - before <= MAX_CALLS_PER_PAGE * len(pages)
    assert all(p.size_bytes > 0 for p in pages if p.observations)
    thread = {f"comment 1-{1000 + r}" for r in range(40)}
    replies = {o.source_event_id for p in pages for o in p.observations if o.text in thread}
    assert len(replies) == 40  # the thread past the inline cap came from /replies


def test_each_page_makes_a_bounded_number_of_graph_calls(sim, instagram):
    """docs/concepts/reconciliation.md#leases: "Reconcile(ctx, name) makes exactly one external page call"; here one page is a
    few Graph calls, never more than MAX_CALLS_PER_PAGE, and never more than `limit` items."""
    reader = InstagramReaderUnderTest()
    per_page: list[int] = []
    last = [calls(sim)]

    def count(_number, _page):
        per_page.append(calls(sim) - last[0])
        last[0] = calls(sim)

    pages = scan(reader, base_url=sim.instagram_url, cfg=config(), limit=30, between=count)
    assert keys(pages) == instagram
    assert per_page and max(per_page) <= MAX_CALLS_PER_PAGE
    assert all(len(p.observations) <= 30 for p in pages)


def test_a_short_graph_page_does_not_end_an_edge(sim, monkeypatch):
    """docs/platforms/meta.md#reading-back: "stop on a missing `next`, not a short page". Every Graph answer here holds one item,
    fewer than the reader asked for, and still has a `next`: the reader must go on to the end."""
    real = meta_reader.graph_get
    asked: list[int] = []

    def one_at_a_time(**kwargs):
        asked.append(int(kwargs["params"]["limit"]))
        return real(**{**kwargs, "params": {**kwargs["params"], "limit": "1"}})

    monkeypatch.setattr(meta_reader, "graph_get", one_at_a_time)
    expected = {ig_comment(sim, media, n) for media in (1, 2, 3) for n in range(3)}
    pages = scan(InstagramReaderUnderTest(), base_url=sim.instagram_url, cfg=config())
    assert keys(pages) == expected
    assert min(asked) > 1  # every answer was short


def test_a_full_page_read_uses_filter_stream_and_keeps_replies(sim):
    expected, replies = set(), set()
    for post in (1, 2):
        ids = [page_comment(sim, post, n) for n in range(70)]
        expected.update(ids)
        replies.update(page_comment(sim, post, 100 + r, parent=ids[3]) for r in range(4))
    expected |= replies
    pages = scan(
        PageReaderUnderTest(), base_url=sim.url, cfg=config(PAGE_ACCOUNT, system="meta-page"), limit=60
    )
    assert keys(pages) == expected
    observed = {o.source_event_id: o for p in pages for o in p.observations}
    assert all(observed[r].conversation_ref.startswith(PAGE_ACCOUNT) for r in replies)


def test_since_until_bound_the_media_read_and_each_comment(sim):
    """docs/platforms/meta.md#reading-back: "a --since/--until window bounds the media/posts read and is applied client-side to comments"."""
    old = ig_comment(sim, 1, 0)  # media 1 is before the window: not listed at all
    inside = [ig_comment(sim, 2, n) for n in (1, 2)]
    early_reply = ig_comment(sim, 2, 3, parent=inside[0])
    late = ig_comment(sim, 2, 5, when=BASE + 40_000)  # on media 2, but after the window
    after_media = ig_comment(sim, 4, 1)  # media 4 is after the window
    before = len(sim.state.call_log)
    pages = scan(
        InstagramReaderUnderTest(),
        base_url=sim.instagram_url,
        cfg=config(),
        since=at(BASE + 15_000),
        until=at(BASE + 30_000),
    )
    assert keys(pages) == {*inside, early_reply}
    assert {old, late, after_media}.isdisjoint(keys(pages))
    read = {c["path"].rsplit("/", 2)[-2] for c in sim.state.call_log[before:]}
    assert "18000000000000001" not in read and "18000000000000004" not in read  # never fanned out


def test_an_expired_comment_cursor_mid_scan_resumes_without_losing_items(sim, instagram):
    """docs/platforms/meta.md#reading-back: "a fallback when a stored cursor no longer works (re-list that media's comments;
    staging deduplicates by key)"."""

    def expire(number, _page):
        if number in (0, 2):
            sim.state.expire_cursors()

    reader = InstagramReaderUnderTest()
    pages = scan(reader, base_url=sim.instagram_url, cfg=config(), limit=60, between=expire)
    assert keys(pages) == instagram
    state = meta_reader._Scan.decode(_cursors(pages)[-1])
    assert state.x >= 1  # a recovery did happen


def test_an_expired_list_cursor_relists_and_skips_finished_posts(sim, monkeypatch):
    """An expired feed cursor re-lists up to the oldest finished post, skipping the ones just finished,
    so each post's comments are read once; every page here meets an expired cursor."""
    monkeypatch.setattr(meta_reader, "LIST_PAGE_SIZE", 2)
    expected = {page_comment(sim, post, n) for post in range(1, 8) for n in range(2)}

    def expire(_number, _page):
        sim.state.expire_cursors()

    pages = scan(
        PageReaderUnderTest(),
        base_url=sim.url,
        cfg=config(PAGE_ACCOUNT, system="meta-page"),
        limit=2,
        between=expire,
    )
    assert keys(pages) == expected
    comment_reads = [c["path"] for c in sim.state.call_log if c["path"].endswith("/comments")]
    assert sorted(comment_reads) == sorted(set(comment_reads)) and len(comment_reads) == 7
    assert meta_reader._Scan.decode(_cursors(pages)[-1]).x >= 2  # the list cursor did expire


def test_every_cursor_of_a_generation_differs_even_when_a_recovery_lands_on_the_same_position(monkeypatch):
    """Staging refuses "a cursor this scan was already given" (page_cursor_cycle). Meta's cursors may
    be deterministic: re-reading a media after an expired cursor can land exactly where an earlier
    page ended, so the Conduit cursor carries a page counter. No network: canned Graph answers."""
    from conduit.providers.meta.graph import GraphError, GraphResponse

    def canned(*, path, params, **_kw):
        if path.endswith("/media"):
            return GraphResponse(
                {"data": [{"id": "18000000000000001", "timestamp": "2026-09-01T00:00:00+0000"}]}, 10
            )
        if "after" in params:  # every stored cursor has expired
            raise GraphError(
                status=400,
                code=100,
                subcode=None,
                is_transient=False,
                fbtrace_id="",
                retry_after=None,
                had_cursor=True,
            )
        comment = {
            "id": "17900000000000009",
            "text": "hi",
            "timestamp": "2026-09-01T00:00:01+0000",
            "from": {"id": "900001", "username": "u"},
        }
        return GraphResponse(
            {
                "data": [comment],
                "paging": {"cursors": {"after": "QVFIUfixed"}, "next": "https://graph.example/next"},
            },
            10,
        )

    monkeypatch.setattr(meta_reader, "graph_get", canned)
    monkeypatch.setattr(meta_reader, "MAX_CALLS_PER_PAGE", 2)
    reader = InstagramReaderUnderTest()
    cursor, seen = None, []
    for _ in range(4):
        page = reader.read_page(
            config=config(),
            base_url="https://graph.instagram.com/v26.0",
            since=None,
            until=at(BASE * 2),
            cursor=cursor,
            limit=1000,
            timeout=5,
        )
        cursor = page.next_cursor
        seen.append(cursor)
    positions = [
        {k: v for k, v in vars(meta_reader._Scan.decode(c)).items() if k not in ("n", "x")} for c in seen
    ]
    assert positions[1] == positions[2] == positions[3]  # the scan stands still (Meta keeps expiring)...
    assert len(set(seen)) == len(seen)  # ...yet no cursor repeats


def test_throttling_is_a_provider_failure_with_the_announced_wait(sim, instagram):
    sim.state.fault_add(
        {"mode": "error", "code": 80002, "count": 1, "retry_minutes": 3, "path_contains": "/media"}
    )
    with pytest.raises(PageFailure) as caught:
        InstagramReaderUnderTest().read_page(
            config=config(),
            base_url=sim.instagram_url,
            since=None,
            until=at(BASE * 2),
            cursor=None,
            limit=100,
            timeout=5,
        )
    failure = caught.value
    assert (failure.error_class, failure.code, failure.retry_after) == ("provider", "graph_throttled", 180.0)
    sim.state.fault_add({"mode": "error", "code": 613, "count": 1})
    with pytest.raises(PageFailure) as caught:
        InstagramReaderUnderTest().read_page(
            config=config(),
            base_url=sim.instagram_url,
            since=None,
            until=at(BASE * 2),
            cursor=None,
            limit=100,
            timeout=5,
        )
    assert (caught.value.code, caught.value.retry_after) == ("graph_throttled", None)


def test_a_throttled_page_mid_scan_fails_and_the_same_cursor_resumes(sim, instagram):
    """docs/concepts/reconciliation.md#page-failures: "Failed pages advance neither cursor nor complete
    checkpoint"; the stored cursor still works."""
    reader = InstagramReaderUnderTest()
    first = reader.read_page(
        config=config(),
        base_url=sim.instagram_url,
        since=None,
        until=at(BASE * 2),
        cursor=None,
        limit=60,
        timeout=5,
    )
    sim.state.fault_add({"mode": "error", "code": 80002, "count": 1})
    with pytest.raises(PageFailure):
        reader.read_page(
            config=config(),
            base_url=sim.instagram_url,
            since=None,
            until=at(BASE * 2),
            cursor=first.next_cursor,
            limit=60,
            timeout=5,
        )
    cursor, pages = first.next_cursor, [first]
    while cursor:
        page = reader.read_page(
            config=config(),
            base_url=sim.instagram_url,
            since=None,
            until=at(BASE * 2),
            cursor=cursor,
            limit=60,
            timeout=5,
        )
        assert page.scan_id == first.scan_id
        pages.append(page)
        cursor = page.next_cursor
    assert pages[-1].complete and keys(pages) == instagram


@pytest.mark.parametrize("subcode", [None, 460, 463])
def test_190_is_a_credentials_failure(sim, instagram, subcode):
    sim.state.fault_add({"mode": "error", "code": 190, "subcode": subcode, "count": 1})
    with pytest.raises(PageFailure) as caught:
        InstagramReaderUnderTest().read_page(
            config=config(),
            base_url=sim.instagram_url,
            since=None,
            until=at(BASE * 2),
            cursor=None,
            limit=100,
            timeout=5,
        )
    assert (caught.value.error_class, caught.value.code) == ("credentials", "graph_token_invalid")
    assert TOKEN not in caught.value.message


def test_a_missing_token_fails_before_any_call(sim, instagram):
    before = calls(sim)
    with pytest.raises(PageFailure) as caught:
        InstagramReaderUnderTest().read_page(
            config=config(token=""),
            base_url=sim.instagram_url,
            since=None,
            until=at(BASE * 2),
            cursor=None,
            limit=100,
            timeout=5,
        )
    assert (caught.value.error_class, caught.value.code) == ("credentials", "graph_token_unavailable")
    assert calls(sim) == before


@pytest.mark.parametrize(
    "fault, error_class, code",
    [
        ({"mode": "timeout", "hang_seconds": 2}, "timeout", "page_timeout"),
        ({"mode": "drop"}, "transport", "connection_failed"),
        ({"mode": "error", "code": 2}, "provider", "graph_unavailable"),
        (
            {"mode": "error", "code": 10, "subcode": 2534022, "message": "leaked-meta-text"},
            "provider",
            "graph_error",
        ),
    ],
)
def test_failures_take_the_sandbox_readers_classes(sim, instagram, fault, error_class, code):
    sim.state.fault_add({"count": 1, **fault})
    with pytest.raises(PageFailure) as caught:
        InstagramReaderUnderTest().read_page(
            config=config(),
            base_url=sim.instagram_url,
            since=None,
            until=at(BASE * 2),
            cursor=None,
            limit=100,
            timeout=0.5,
        )
    assert (caught.value.error_class, caught.value.code) == (error_class, code)
    assert "leaked-meta-text" not in caught.value.message and TOKEN not in caught.value.message


def test_a_page_over_max_bytes_is_refused(sim, instagram):
    with pytest.raises(PageFailure) as caught:
        InstagramReaderUnderTest().read_page(
            config=config(),
            base_url=sim.instagram_url,
            since=None,
            until=at(BASE * 2),
            cursor=None,
            limit=100,
            timeout=5,
            max_bytes=200,
        )
    assert (caught.value.error_class, caught.value.code) == ("protocol", "page_too_large")


def test_a_cursor_this_reader_did_not_write_is_refused(sim):
    forged = "m1." + base64.urlsafe_b64encode(json.dumps({"s": "x", "c": ["../x", 1]}).encode()).decode()
    for cursor in ("garbage", "m1.!!!", forged):
        with pytest.raises(PageFailure) as caught:
            InstagramReaderUnderTest().read_page(
                config=config(),
                base_url=sim.instagram_url,
                since=None,
                until=at(BASE * 2),
                cursor=cursor,
                limit=10,
                timeout=5,
            )
        assert caught.value.code == "cursor_unreadable"


def test_the_cursor_never_holds_the_token(sim, instagram):
    pages = scan(InstagramReaderUnderTest(), base_url=sim.instagram_url, cfg=config(), limit=40)
    for cursor in _cursors(pages):
        assert TOKEN not in base64.urlsafe_b64decode(cursor[3:] + "=" * (-len(cursor[3:]) % 4)).decode()


def test_a_read_comment_hashes_like_its_webhook(sim):
    """docs/platforms/meta.md#payload-hash: "The webhook and the read-back must normalise one comment to the same canonical payload
    and hash"; the reader hands the normalizer the webhook's value shape."""
    top = ig_comment(sim, 1, 0)
    reply = ig_comment(sim, 1, 1, parent=top)
    pages = scan(InstagramReaderUnderTest(), base_url=sim.instagram_url, cfg=config())
    read = {o.source_event_id: o for p in pages for o in p.observations}
    media = {"id": "18000000000000001", "media_product_type": "FEED"}
    webhook = InstagramReaderUnderTest().normalize(
        [
            {
                "object": "instagram",
                "field": "comments",
                "entry_time": BASE,
                "value": {
                    "id": top,
                    "text": "comment 1-0",
                    "from": {"id": "900000", "username": "x"},
                    "media": media,
                },
            },
            {
                "object": "instagram",
                "field": "comments",
                "entry_time": BASE,
                "value": {
                    "id": reply,
                    "text": "comment 1-1",
                    "from": {"id": "900001", "username": "y"},
                    "media": media,
                    "parent_id": top,
                },
            },
        ],
        IG_ACCOUNT,
        config(),
    )
    assert {o.source_event_id: o.payload_hash for o in webhook.observations} == {
        k: o.payload_hash for k, o in read.items()
    }


def test_the_accounts_own_comments_are_own_items_not_events(sim):
    mine = ig_comment(sim, 1, 0, from_id=IG_ACCOUNT)
    theirs = ig_comment(sim, 1, 1)
    pages = scan(InstagramReaderUnderTest(), base_url=sim.instagram_url, cfg=config())
    assert keys(pages) == {theirs}
    assert [o.provider_id for p in pages for o in p.own] == [mine]


def test_the_reader_reads_meta_and_says_so():
    assert InstagramReaderUnderTest.live is True and PageReaderUnderTest.live is True


def test_the_loopback_guard_sees_and_refuses_a_connection_to_meta(loopback_only):
    """Positive control for the directory's guard: a read aimed at the real Graph host is recorded and
    refused (it never resolves or connects), and the guard's check reports it. The record is then
    cleared so this test itself passes the guard's teardown."""
    with pytest.raises(PageFailure) as caught:
        InstagramReaderUnderTest().read_page(
            config=config(),
            base_url="https://graph.instagram.com/v26.0",
            since=None,
            until=at(BASE),
            cursor=None,
            limit=10,
            timeout=2,
        )
    assert caught.value.error_class == "transport"
    assert outside_hosts(loopback_only) == ["graph.instagram.com"]
    loopback_only.clear()


def _cursors(pages) -> list[str]:
    return [p.next_cursor for p in pages if p.next_cursor]
