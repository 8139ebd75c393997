"""Each Meta fixture, signed like Meta, becomes what its field map documents (one test per fixture).

Keys follow conduit/providers/meta/webhook.py: `<adapter>:<account>:<event type>:<provider id>`.
"""

from __future__ import annotations

import pytest

from conduit.canonical import sha256_hex
from ingress.models import (
    Delivery,
    EventTransition,
    IgnoredUpdate,
    InboundEvent,
    QuarantineReceipt,
    SelfAuthoredItem,
)
from replies.models import ReplyAction
from tests.providers.meta.integration.conftest import IG_ACCOUNT, PAGE_ACCOUNT, meta_body

IG = f"meta-instagram:{IG_ACCOUNT}"
PAGE = f"meta-page:{PAGE_ACCOUNT}"


def accepted(api, post_meta, fixture: str) -> dict:
    """Post the fixture, check Meta's 200, and read its one event back through the API."""
    response = post_meta(meta_body(fixture))
    assert response.status_code == 200, response.content
    (result,) = [r for r in response.json()["results"] if r["result"] == "accepted"]
    (event,) = api.get("/api/events/", {"event_key": result["event_key"]}).json()["results"]
    return event


def test_instagram_comment_created(api, post_meta, meta_sources):
    event = accepted(api, post_meta, "meta_instagram/comment__created")
    assert event["event_key"] == f"{IG}:comment.created:17900000000000001"
    assert event["source"] == "ig-test" and event["event_state"] == "RECORD_READY"
    assert [a["purpose"] for a in event["reply_actions"]] == ["public_ack"]
    stored = InboundEvent.objects.get(event_key=event["event_key"])
    # No creation time in the notification: the entry's time stands in, marked approximate.
    assert stored.occurred_at_original == "approx:entry.time=1767225600"
    assert (stored.conversation_ref, stored.message_ref, stored.sender_ref) == (
        "17800000000000001",
        "17900000000000001",
        "17841400000000901",
    )


def test_instagram_comment_reply(api, post_meta, meta_sources):
    event = accepted(api, post_meta, "meta_instagram/comment__reply")
    assert event["event_key"] == f"{IG}:comment.created:17900000000000002"


def test_instagram_live_comment(api, post_meta, meta_sources):
    event = accepted(api, post_meta, "meta_instagram/comment__live")
    assert event["event_key"] == f"{IG}:comment.created:17900000000000003"


def test_instagram_self_authored_comment_is_evidence_not_an_event(post_meta, meta_sources):
    response = post_meta(meta_body("meta_instagram/comment__self_authored"))
    assert response.status_code == 200 and response.json()["results"] == []
    assert not InboundEvent.objects.exists() and not ReplyAction.objects.exists()
    own = SelfAuthoredItem.objects.get()
    assert (own.kind, own.provider_id, own.parent_ref) == (
        "comment",
        "17900000000000004",
        "17900000000000001",
    )


def test_instagram_ad_comment_notified_twice_in_one_body_is_one_event(post_meta, meta_sources):
    response = post_meta(meta_body("meta_instagram/comment__ad_notified_twice"))
    assert [r["result"] for r in response.json()["results"]] == ["accepted", "duplicate"]
    assert InboundEvent.objects.get().seen_count == 1


def test_instagram_entry_for_unknown_account_is_quarantined_and_the_rest_accepted(post_meta, meta_sources):
    response = post_meta(meta_body("meta_instagram/comment__unknown_account"))
    assert response.status_code == 200
    body = response.json()
    (receipt,) = QuarantineReceipt.objects.filter(reason_code="unknown_account")
    assert body["receipt_ids"] == [str(receipt.receipt_id)]
    assert receipt.authenticated and receipt.event_index == 1
    assert InboundEvent.objects.get().event_key == f"{IG}:comment.created:17900000000000006"


def test_instagram_unsubscribed_field_is_counted_not_quarantined(post_meta, meta_sources):
    response = post_meta(meta_body("meta_instagram/comment__unsubscribed_field"))
    assert response.status_code == 200 and response.json()["ignored"] == 1
    assert not QuarantineReceipt.objects.exists() and not InboundEvent.objects.exists()
    ignored = IgnoredUpdate.objects.get()
    assert (ignored.source.name, ignored.name, ignored.count) == ("ig-test", "instagram.mentions", 1)


def test_instagram_comment_without_author_is_quarantined_with_200(post_meta, meta_sources):
    response = post_meta(meta_body("meta_instagram/comment__missing_from"))
    assert response.status_code == 200  # Meta understands only 200
    (receipt,) = QuarantineReceipt.objects.all()
    assert receipt.reason_code == "missing_identity" and receipt.authenticated
    assert response.json()["receipt_ids"] == [str(receipt.receipt_id)]


def test_instagram_message_created(api, post_meta, meta_sources):
    event = accepted(api, post_meta, "meta_instagram/message__created")
    assert event["event_key"] == f"{IG}:message.created:mid_test_ig_0001"
    stored = InboundEvent.objects.get()
    assert stored.occurred_at.timestamp() == pytest.approx(1767225600.123)


def test_instagram_message_echo_is_evidence(post_meta, meta_sources):
    assert post_meta(meta_body("meta_instagram/message__echo")).status_code == 200
    assert not InboundEvent.objects.exists()
    assert SelfAuthoredItem.objects.get().provider_id == "mid_test_ig_0002"


def test_page_comment_add(api, post_meta, meta_sources):
    event = accepted(api, post_meta, "meta_page/comment__add")
    assert event["event_key"] == f"{PAGE}:comment.created:300000000000001_400000000000001"
    assert event["event_state"] == "RECORD_READY"
    assert InboundEvent.objects.get().occurred_at_original == "1767225600"


def test_page_edit_is_its_own_event_and_leaves_the_original_untouched(api, post_meta, meta_sources):
    original = accepted(api, post_meta, "meta_page/comment__add")
    before = InboundEvent.objects.values().get(event_key=original["event_key"])
    edit = accepted(api, post_meta, "meta_page/comment__edited")
    digest = sha256_hex("What is the price for two?")[:16]
    assert edit["event_key"] == f"{PAGE}:comment.edited:300000000000001_400000000000001@{digest}"
    assert InboundEvent.objects.values().get(event_key=original["event_key"]) == before
    assert not QuarantineReceipt.objects.exists()


def test_page_comment_remove(api, post_meta, meta_sources):
    event = accepted(api, post_meta, "meta_page/comment__remove")
    assert event["event_key"] == f"{PAGE}:comment.removed:300000000000001_400000000000001"


def test_page_comment_hide(api, post_meta, meta_sources):
    event = accepted(api, post_meta, "meta_page/comment__hide")
    assert event["event_key"] == f"{PAGE}:comment.hidden:300000000000001_400000000000001@1767225900"


def test_page_self_authored_comment_plans_nothing(post_meta, meta_sources):
    assert post_meta(meta_body("meta_page/comment__self_authored")).status_code == 200
    assert not InboundEvent.objects.exists() and not ReplyAction.objects.exists()
    assert SelfAuthoredItem.objects.get().parent_ref == "300000000000001_400000000000001"


def test_page_status_post_is_ignored(post_meta, meta_sources):
    assert post_meta(meta_body("meta_page/post__status")).json()["ignored"] == 1
    assert IgnoredUpdate.objects.get().name == "page.feed.status"


def test_page_message_created(api, post_meta, meta_sources):
    event = accepted(api, post_meta, "meta_page/message__created")
    assert event["event_key"] == f"{PAGE}:message.created:m_test_page_0001"


def test_page_message_echo_keeps_its_metadata_as_correlation(post_meta, meta_sources):
    assert post_meta(meta_body("meta_page/message__echo_metadata")).status_code == 200
    own = SelfAuthoredItem.objects.get()
    assert (own.kind, own.provider_id, own.correlation) == ("message", "m_test_page_0002", "rk_test_0001")


def test_page_standby_message_is_an_event(api, post_meta, meta_sources):
    event = accepted(api, post_meta, "meta_page/message__standby")
    assert event["event_key"] == f"{PAGE}:message.created:m_test_page_0003"


def test_page_read_receipt_is_ignored(post_meta, meta_sources):
    assert post_meta(meta_body("meta_page/message__read_receipt")).json()["ignored"] == 1
    assert IgnoredUpdate.objects.get().name == "messaging.read"


def test_same_body_twice_is_one_delivery_seen_twice(api, post_meta, meta_sources):
    body = meta_body("meta_instagram/comment__created")
    first, second = post_meta(body).json(), post_meta(body).json()
    assert first["delivery_id"] == second["delivery_id"] == "sha256:" + sha256_hex(body)
    assert [r["result"] for r in second["results"]] == ["duplicate"]
    assert Delivery.objects.get().seen_count == 2
    assert InboundEvent.objects.get().seen_count == 2


def test_before_connection_is_history_not_work(post_meta, meta_sources):
    """Connecting an account is a backfill: an event from before it is recorded, closed, never planned."""
    from ingress.models import Source

    Source.objects.filter(name="page-test").update(connected_at="2027-01-01T00:00:00Z")
    assert post_meta(meta_body("meta_page/comment__add")).status_code == 200
    event = InboundEvent.objects.get()
    assert event.event_state == "CLOSED_NO_REPLY" and not ReplyAction.objects.exists()
    assert EventTransition.objects.filter(event=event, reason_code="before_connection").exists()


def test_every_meta_fixture_has_its_test():
    """Zulip's habit: a fixture nobody tests is a shape nobody checks."""
    from pathlib import Path

    from tests.conftest import FIXTURES

    here = (
        Path(__file__).read_text() + (Path(__file__).parents[3] / "reconcile" / "test_canary.py").read_text()
    )
    for folder in ("meta_instagram", "meta_page"):
        for path in sorted((FIXTURES / folder).glob("*.json")):
            name = f"{folder}/{path.stem}"
            assert name in here or path.stem in here, f"{name} has no test"


@pytest.mark.parametrize(
    "fixture, reason",
    [
        ("meta_instagram/comment__unknown_account", "unknown_account"),
        ("meta_instagram/comment__missing_from", "missing_identity"),
    ],
)
def test_a_retried_body_meets_its_first_receipt(post_meta, meta_sources, fixture, reason):
    """Meta retries a body for up to 36 hours: the same bytes add no second receipt."""
    first = post_meta(meta_body(fixture)).json()["receipt_ids"]
    again = post_meta(meta_body(fixture)).json()["receipt_ids"]
    assert first == again
    assert QuarantineReceipt.objects.filter(reason_code=reason).count() == 1


def test_a_body_that_is_not_json_is_one_receipt_however_often_it_comes(post_meta, meta_sources):
    for _ in range(3):
        response = post_meta(b"{not json")
        assert response.status_code == 200
    assert QuarantineReceipt.objects.filter(reason_code="unparsable_body", authenticated=True).count() == 1
