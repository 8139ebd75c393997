"""The 24-hour window at approval: past it free-form copy is refused with the reason, a copy with a
template is approved to go out as that template; a later message from the buyer opens it again."""

from __future__ import annotations

import time

from replies.models import ReplyAction
from replies.services import reply_approve, reply_copy_create
from tests.providers.whatsapp.conftest import body, routed, text_message

TEMPLATE = {"name": "price_list", "language": "en_US", "parameters": []}
HOURS_25 = 25 * 3600


def test_free_form_copy_25_hours_after_the_buyer_wrote_is_refused(whatsapp_source, deliver):
    routed(whatsapp_source)
    deliver(body(text_message(1, "price?", at=int(time.time()) - HOURS_25)))
    action = ReplyAction.objects.get()
    result = reply_approve(action_id=action.pk, actor="reviewer_test")
    assert not result.ok
    assert "free-form text may answer this buyer only until" in result.message
    assert "no template" in result.message
    action.refresh_from_db()
    assert action.delivery_state == "REVIEW_PENDING"


def test_with_a_template_it_is_approved_as_the_template(whatsapp_source, deliver):
    routed(whatsapp_source, template=TEMPLATE)
    deliver(body(text_message(1, "price?", at=int(time.time()) - HOURS_25)))
    action = ReplyAction.objects.get()
    result = reply_approve(action_id=action.pk, actor="reviewer_test")
    assert result.ok and "as template price_list" in result.message


def test_inside_the_window_the_text_is_approved(whatsapp_source, deliver):
    routed(whatsapp_source, template=TEMPLATE)
    deliver(body(text_message(1, "price?", at=int(time.time()) - 3600)))
    result = reply_approve(action_id=ReplyAction.objects.get().pk, actor="reviewer_test")
    assert result.ok and "template" not in result.message


def test_the_buyers_later_message_opens_the_window_again(whatsapp_source, deliver):
    routed(whatsapp_source)
    deliver(body(text_message(1, "price?", at=int(time.time()) - HOURS_25)))
    deliver(body(text_message(2, "hello again", at=int(time.time()) - 60)))
    first = ReplyAction.objects.get(event__message_ref__endswith="0001A=")
    assert reply_approve(action_id=first.pk, actor="reviewer_test").ok


def test_a_template_without_a_name_is_refused_as_copy(whatsapp_source):
    import pytest

    with pytest.raises(ValueError, match="a template needs"):
        reply_copy_create(
            source_id=whatsapp_source.pk,
            purpose="private_delivery",
            channel="whatsapp",
            text="hi",
            actor="test",
            template={"language": "en_US"},
        )


def test_a_template_changed_since_the_reviewer_looked_refuses_the_approval(whatsapp_source, deliver):
    """The text is the same, the template is not: past the window the template is what goes out,
    so the reviewer must see the new one. The control: the copy they were shown, unchanged, passes."""
    routed(whatsapp_source, template=TEMPLATE)
    shown, _ = reply_copy_create(
        source_id=whatsapp_source.pk,
        purpose="private_delivery",
        channel="whatsapp",
        text="Thanks! The price list is on its way.",
        actor="test",
        template=TEMPLATE,
    )
    deliver(body(text_message(1, "price?", at=int(time.time()) - HOURS_25)))
    action = ReplyAction.objects.get()
    newer, created = reply_copy_create(
        source_id=whatsapp_source.pk,
        purpose="private_delivery",
        channel="whatsapp",
        text="Thanks! The price list is on its way.",
        actor="owner_test",
        template={"name": "big_sale_blast", "language": "en_US", "parameters": []},
    )
    assert created and newer.copy_version != shown.copy_version
    refused = reply_approve(action_id=action.pk, actor="reviewer_test", shown_copy_version=shown.copy_version)
    assert not refused.ok and "the copy changed" in refused.message
    approved = reply_approve(
        action_id=action.pk, actor="reviewer_test", shown_copy_version=newer.copy_version
    )
    assert approved.ok and "as template big_sale_blast" in approved.message


def _confirmation(admin_client, action) -> str:
    return admin_client.post(
        "/admin/replies/reviewqueue/", {"action": "approve", "index": 0, "_selected_action": [action.pk]}
    ).content.decode()


def test_the_reviewer_is_shown_the_template_that_goes_out_past_the_window(
    whatsapp_source, deliver, admin_client
):
    routed(whatsapp_source, template=TEMPLATE)
    deliver(body(text_message(1, "price?", at=int(time.time()) - HOURS_25)))
    action = ReplyAction.objects.get()
    confirm = _confirmation(admin_client, action)
    assert "Will send as template price_list (en_US)" in confirm
    assert "the text is not sent" in confirm
    page = admin_client.get(f"/admin/replies/replyaction/{action.pk}/change/").content.decode()
    assert "then only the copy&#x27;s template" in page or "then only the copy's template" in page


def test_the_reviewer_is_told_free_form_copy_cannot_go_out_past_the_window(
    whatsapp_source, deliver, admin_client
):
    routed(whatsapp_source)
    deliver(body(text_message(1, "price?", at=int(time.time()) - HOURS_25)))
    confirm = _confirmation(admin_client, ReplyAction.objects.get())
    assert "Cannot be approved: the free-form window closed at" in confirm and "has no template" in confirm


def test_inside_the_window_the_reviewer_is_shown_the_text_and_until_when(
    whatsapp_source, deliver, admin_client
):
    routed(whatsapp_source, template=TEMPLATE)
    deliver(body(text_message(1, "price?", at=int(time.time()) - 3600)))
    confirm = _confirmation(admin_client, ReplyAction.objects.get())
    assert "Will send as whatsapp (copy" in confirm and "Thanks! The price list is on its way." in confirm
    assert "free-form text until" in confirm
