"""The sandbox source's read side: keyset pages over HTTP, and the adapter's normalization of them."""

from __future__ import annotations

import json
import urllib.request

import pytest

from conduit.providers.base import PageFailure
from conduit.providers.registry import get_adapter
from ingress.selectors import source_config
from tests.conftest import fixture_body
from tests.reconcile.conftest import item

ADAPTER = get_adapter("sandbox-social")


def read(state, source, **kw):
    args = dict(
        config=source_config(source),
        base_url=state.url,
        since=None,
        until=None,
        cursor=None,
        limit=1000,
        timeout=2.0,
    )
    args.update(kw)
    return ADAPTER.read_page(**args)


def test_pages_walk_every_event_once_in_order_even_when_events_change_mid_scan(source_side):
    state, source = source_side
    state.hold_events(*[item(n) for n in range(1, 8)])
    seen, cursor, scan_ids = [], None, set()
    for page_number in range(10):
        page = read(state, source, cursor=cursor, limit=3)
        scan_ids.add(page.scan_id)
        seen += [o.source_event_id for o in page.observations]
        if page_number == 0:  # an event is removed and one added behind the cursor
            urllib.request.urlopen(
                urllib.request.Request(
                    f"{state.url}/sources/acct_test_01/events/evt_test_000005", method="DELETE"
                ),
                timeout=2,
            )
            state.hold_events(item(8))
        if page.complete:
            assert page.next_cursor is None
            break
        cursor = page.next_cursor
    assert seen == [f"evt_test_{n:06d}" for n in (1, 2, 3, 4, 6, 7, 8)]
    assert len(scan_ids) == 1


def test_the_window_bounds_the_read(source_side):
    from datetime import timedelta

    from tests.reconcile.conftest import BASE_TIME

    state, source = source_side
    state.hold_events(*[item(n) for n in range(1, 6)])
    page = read(state, source, since=BASE_TIME + timedelta(minutes=2), until=BASE_TIME + timedelta(minutes=4))
    assert [o.source_event_id for o in page.observations] == ["evt_test_000002", "evt_test_000003"]
    assert page.complete


def test_read_events_hash_and_key_exactly_as_their_webhook(source_side, deliver):
    from ingress.models import InboundEvent

    state, source = source_side
    northstar = json.loads(fixture_body("comment__northstar"))["events"][0]
    state.hold_events(northstar)
    deliver(fixture_body("comment__northstar"))
    action_key = "k" * 64
    state.apply(action_key, None, northstar["comment_id"])  # the provider shows a reply on it
    (observation,) = read(state, source).observations
    event = InboundEvent.objects.get()
    assert (observation.event_key, observation.payload_hash) == (event.event_key, event.payload_hash)
    (receipt,) = read(state, source).receipts
    assert (receipt.reply_key, receipt.event_key) == (action_key, event.event_key)
    assert receipt.provider_reply_id == state.receipts[action_key]


def test_invalid_source_items_become_rejections_not_failures(source_side):
    state, source = source_side
    bad = item(2)
    del bad["post_id"]
    state.hold_events(item(1), bad)
    page = read(state, source)
    assert [o.source_event_id for o in page.observations] == ["evt_test_000001"]
    assert [r.reason_code for r in page.rejections] == ["missing_identity"]


def test_failures_are_classified_and_never_carry_provider_text(source_side):
    from tests.conftest import fail_next

    state, source = source_side
    fail_next(state, "page_error")
    with pytest.raises(PageFailure) as raised:
        read(state, source)
    assert (raised.value.error_class, raised.value.code) == ("provider", "provider_overloaded")
    assert "raw-provider-detail" not in str(raised.value) + raised.value.message
    fail_next(state, "page_malformed")
    with pytest.raises(PageFailure) as raised:
        read(state, source)
    assert (raised.value.error_class, raised.value.code) == ("protocol", "malformed_page")
    with pytest.raises(PageFailure) as raised:
        read(state, source, base_url="http://198.51.100.7:8765")
    assert raised.value.code == "source_url_not_loopback"


def test_page_failure_is_bounded_to_one_safe_line():
    failure = PageFailure("provider", "x" * 100, "line one\nline two " + "y" * 400)
    assert "\n" not in failure.message and len(failure.message) == 256 and len(failure.code) == 64
    with pytest.raises(ValueError):
        PageFailure("made_up", "code", "message")


def test_sandbox_provider_command_holds_fixtures(tmp_path):
    from django.core.management import CommandError, call_command

    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    with pytest.raises(CommandError, match="not a fixture"):
        call_command("sandbox_provider", "--port", "0", "--hold", str(bad))
