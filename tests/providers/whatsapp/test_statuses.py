"""Statuses as receipts through the Meta callback: a status carrying the reply key settles an
ambiguous send as SENT without a person, in any order and however often it comes; a failure
after `sent` keeps SENT and waits in the failed-delivery queue; a status never moves a state back."""

from __future__ import annotations

import pytest

from ingress.models import InboundEvent, MessageStatus, UndeliveredMessage
from replies.ledger import reply_action_transition
from replies.models import ReplyAction, ReplyTransition
from replies.services import reply_approve
from tests.providers.whatsapp.conftest import body, routed, status, text_message, wamid

SENT_ID = wamid(500)


@pytest.fixture
def action(whatsapp_source, deliver):
    """A buyer's message with the campaign's keyword, its reply approved."""
    routed(whatsapp_source)
    deliver(body(text_message(1, "What is the price?")))
    deliver(body(text_message(1, "What is the price?")))  # Meta delivers at least once
    assert InboundEvent.objects.count() == 1
    action = ReplyAction.objects.get()
    assert reply_approve(action_id=action.pk, actor="reviewer_test").ok
    return action


def _move(action, *states):
    for before, after in zip(("APPROVED",) + states, states):
        assert reply_action_transition(
            action_id=action.pk, to=after, actor="test", reason_code="test", expected=before
        ).applied


def test_a_status_with_the_reply_key_settles_an_unknown_send(action, deliver):
    _move(action, "SENDING", "SEND_STATUS_UNKNOWN")
    deliver(body(status(SENT_ID, "delivered", key=action.reply_key)))
    action.refresh_from_db()
    assert action.delivery_state == "SENT" and action.provider_reply_id == SENT_ID
    last = ReplyTransition.objects.filter(action=action).order_by("-id").first()
    assert (last.actor, last.reason_code) == ("system:status", "status_seen")


def test_a_status_settles_a_send_still_in_flight(action, deliver):
    _move(action, "SENDING")
    deliver(body(status(SENT_ID, "sent", key=action.reply_key)))
    action.refresh_from_db()
    assert action.delivery_state == "SENT"


def test_statuses_reordered_and_repeated_keep_one_history(action, deliver):
    _move(action, "SENDING", "SEND_STATUS_UNKNOWN")
    for state in ("read", "delivered", "delivered", "sent", "sent"):
        deliver(body(status(SENT_ID, state, key=action.reply_key)))
    action.refresh_from_db()
    assert action.delivery_state == "SENT"
    assert ReplyTransition.objects.filter(action=action, next_state="SENT").count() == 1
    seen = dict(MessageStatus.objects.filter(provider_id=SENT_ID).values_list("status", "seen_count"))
    assert seen == {"read": 1, "delivered": 2, "sent": 2}


def test_the_reply_page_shows_its_status_history(action, deliver, admin_client):
    _move(action, "SENDING", "SEND_STATUS_UNKNOWN")
    for state in ("read", "sent", "delivered", "sent"):
        deliver(body(status(SENT_ID, state, key=action.reply_key)))
    page = admin_client.get(f"/admin/replies/replyaction/{action.pk}/change/").content.decode()
    assert "Delivery statuses" in page
    assert "sent at" in page and "delivered at" in page and "read at" in page and "seen 2 times" in page


def test_a_failure_after_sent_keeps_sent_and_waits_for_a_person(action, deliver, admin_client):
    _move(action, "SENDING", "SEND_STATUS_UNKNOWN")
    deliver(body(status(SENT_ID, "sent", key=action.reply_key)))
    # As recorded: a `failed` status carries no biz_opaque_callback_data; its wamid names the reply.
    deliver(body(status(SENT_ID, "failed", error=131026)))
    action.refresh_from_db()
    assert action.delivery_state == "SENT"  # right after `failed`, before any later status
    deliver(body(status(SENT_ID, "delivered", key=action.reply_key)))  # after failed: no move back
    action.refresh_from_db()
    assert action.delivery_state == "SENT" and action.provider_reply_id == SENT_ID
    # A `failed` never moves SENT anywhere, not even away and back: SENT was reached once.
    assert not ReplyTransition.objects.filter(action=action, prior_state="SENT").exists()
    assert ReplyTransition.objects.filter(action=action, next_state="SENT").count() == 1
    (failure,) = UndeliveredMessage.objects.filter(status="failed", reviewed_at__isnull=True)
    assert failure.error_code == "131026" and failure.correlation == action.reply_key
    page = admin_client.get("/admin/ingress/undeliveredmessage/")
    assert page.status_code == 200 and b"cannot deliver to this number" in page.content
    assert b"not sent by Conduit" not in page.content and action.reply_key[:12].encode() in page.content


def test_a_failed_status_of_a_message_conduit_did_not_send_names_no_reply(action, deliver, admin_client):
    deliver(body(status(wamid(777), "failed", error=131026)))
    (failure,) = UndeliveredMessage.objects.all()
    assert failure.correlation == ""
    assert b"not sent by Conduit" in admin_client.get("/admin/ingress/undeliveredmessage/").content


def test_a_refused_message_does_not_take_the_statuses_beside_it(action, deliver):
    """A body quarantined whole for a message it cannot read still records and settles the
    statuses it carried: Meta answered 200 will not send them again."""
    _move(action, "SENDING", "SEND_STATUS_UNKNOWN")
    broken = text_message(2, "hello")
    del broken["value"]["messages"][0]["timestamp"]
    answer = deliver(body(broken, status(SENT_ID, "sent", key=action.reply_key)))
    assert [r["result"] for r in answer["results"]] == ["quarantined"], answer
    assert InboundEvent.objects.count() == 1  # the fixture's message only
    action.refresh_from_db()
    assert action.delivery_state == "SENT" and MessageStatus.objects.filter(provider_id=SENT_ID).exists()


def test_a_flow_answer_is_counted_not_a_refusal_of_its_body(whatsapp_source, deliver):
    from ingress.models import IgnoredUpdate

    flow = text_message(3, "unused")
    flow["value"]["messages"][0].update(
        type="interactive",
        interactive={
            "type": "nfm_reply",
            "nfm_reply": {"name": "flow", "body": "Sent", "response_json": "{}"},
        },
    )
    flow["value"]["messages"][0].pop("text")
    answer = deliver(body(flow, text_message(4, "What is the price?")))
    assert "quarantined" not in [r["result"] for r in answer["results"]], answer
    assert InboundEvent.objects.count() == 1
    assert IgnoredUpdate.objects.get(name="whatsapp.interactive.nfm_reply").count == 1


def test_a_status_without_the_reply_key_settles_nothing(action, deliver):
    _move(action, "SENDING", "SEND_STATUS_UNKNOWN")
    deliver(body(status(SENT_ID, "delivered")))
    action.refresh_from_db()
    assert action.delivery_state == "SEND_STATUS_UNKNOWN"
    assert MessageStatus.objects.filter(provider_id=SENT_ID).exists()  # still recorded


def test_a_status_for_another_message_of_the_reply_settles_nothing(action, deliver):
    _move(action, "SENDING", "SEND_STATUS_UNKNOWN")
    ReplyAction.objects.filter(pk=action.pk).update(provider_reply_id=wamid(501))
    deliver(body(status(SENT_ID, "delivered", key=action.reply_key)))
    action.refresh_from_db()
    assert action.delivery_state == "SEND_STATUS_UNKNOWN"


def test_positive_control_without_the_receiver_a_status_settles_nothing(action, deliver):
    """The hook removed (replies not listening): the settling test's check fails."""
    from ingress.signals import message_statuses_seen
    from replies.apps import _message_statuses_seen

    assert message_statuses_seen.disconnect(dispatch_uid="replies.message_statuses_seen")
    try:
        _move(action, "SENDING", "SEND_STATUS_UNKNOWN")
        deliver(body(status(SENT_ID, "delivered", key=action.reply_key)))
        action.refresh_from_db()
        assert action.delivery_state == "SEND_STATUS_UNKNOWN"
    finally:
        message_statuses_seen.connect(_message_statuses_seen, dispatch_uid="replies.message_statuses_seen")


def test_a_body_of_statuses_only_is_answered_200(whatsapp_source, deliver):
    answer = deliver(body(status(SENT_ID, "read")))
    assert answer is not None and MessageStatus.objects.count() == 1
