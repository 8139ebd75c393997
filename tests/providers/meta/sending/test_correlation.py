"""Correlation without an idempotency key: Messenger's echoed metadata, and the account's own comment,
resolve an unknown send to SENT (the receipt repair, docs/concepts/reconciliation.md#repairs); Instagram's echo carries no metadata."""

from __future__ import annotations

import json
import time

import pytest

from ingress.models import SelfAuthoredItem
from replies.models import ReplyAction, ReplyTransition
from replies.sender import reply_send
from replies.services import reply_approve
from tests.providers.meta.sending.conftest import (
    applied,
    ig_comment_body,
    meta_source,
    page_comment_body,
    sim,
)

POST = "100000000000001_200000000000001"
PAGE_COMMENT = "200000000000001_300000000000001"
IG_COMMENT = "17900000000000201"
MEDIA = "17800000000000201"


def _unknown_after_apply(graph, action: ReplyAction) -> None:
    sim(graph, "/_sim/faults", {"mode": "apply_then_drop", "count": 1})
    assert reply_send(action_id=action.pk) == "SEND_STATUS_UNKNOWN"


def _notified(capture, graph, count: int = 1) -> list[bytes]:
    capture.wait(count)
    return list(capture.bodies)


@pytest.fixture
def page_private(graph, db, deliver):
    source = meta_source(graph, kind="page", purposes={"private_delivery": "meta-private-reply"})
    created = int(time.time()) - 60
    sim(
        graph,
        "/_sim/comments",
        {
            "account": source.account_ref,
            "post_id": POST,
            "id": PAGE_COMMENT,
            "text": "price?",
            "from_id": "17841400000000901",
            "created_time": created,
        },
    )
    deliver(page_comment_body(PAGE_COMMENT, POST, created=created))
    action = ReplyAction.objects.get()
    assert reply_approve(action_id=action.pk, actor="reviewer_test").ok
    return action


def test_a_messenger_echo_with_the_reply_key_resolves_an_unknown_private_reply(
    page_private, graph, capture, deliver
):
    """docs/concepts/reconciliation.md#repairs: "Provider receipt exists for SENDING or
    SEND_STATUS_UNKNOWN: Attach the receipt and mark SENT"; docs/platforms/meta.md#echoes: an echo
    carrying the reply key "resolves it to SENT with the echo as evidence"."""
    _unknown_after_apply(graph, page_private)
    (echo_body,) = _notified(capture, graph)
    echo = json.loads(echo_body)["entry"][0]["messaging"][0]["message"]
    assert echo["is_echo"] and echo["metadata"] == page_private.reply_key
    deliver(echo_body)
    deliver(echo_body)  # Meta retries: the second delivery changes nothing
    page_private.refresh_from_db()
    assert page_private.delivery_state == "SENT" and page_private.provider_reply_id == echo["mid"]
    resolved = ReplyTransition.objects.filter(action=page_private, next_state="SENT")
    assert [(t.actor, t.reason_code) for t in resolved] == [("system:echo", "echo_confirmed")]
    assert applied(graph)["private"] == {PAGE_COMMENT: 1}


def test_an_echo_that_came_before_the_send_ended_still_resolves_it(page_private, graph, capture, deliver):
    """The echo may reach Conduit while the send is still SENDING (nothing to resolve then): the
    sender looks again once the send ends unknown."""
    from replies.sender import deliver as sender

    _unknown_after_apply(graph, page_private)
    (echo_body,) = _notified(capture, graph)
    # Replay the race: the echo arrives while the action is SENDING, the unknown comes after.
    ReplyAction.objects.filter(pk=page_private.pk).update(delivery_state="SENDING")
    deliver(echo_body)
    assert ReplyAction.objects.get(pk=page_private.pk).delivery_state == "SENDING"
    ReplyAction.objects.filter(pk=page_private.pk).update(delivery_state="SEND_STATUS_UNKNOWN")
    assert sender._evidence_already_seen(page_private) == "SENT"


def test_instagram_echoes_carry_no_metadata_yet_the_approved_text_to_the_commenter_resolves_it(
    graph, db, deliver, capture
):
    """The simulator's Instagram (as Meta documents nothing else) echoes a private reply in `messages`
    without `metadata`. docs/platforms/meta.md#receipts: receipts are "matched to actions by provider id first, then by the
    approved text and the answered comment, and never across actions": the echo is the account's
    message to the commenter carrying the approved copy, the one action it fits, so it is the
    receipt; an echo with other text (a message a person typed) leaves the send unknown."""
    source = meta_source(graph, kind="instagram", purposes={"private_delivery": "meta-private-reply"})
    sim(
        graph,
        "/_sim/comments",
        {
            "account": source.account_ref,
            "media_id": MEDIA,
            "id": IG_COMMENT,
            "text": "price?",
            "from_id": "17841400000000901",
        },
    )
    deliver(ig_comment_body(IG_COMMENT, MEDIA))
    action = ReplyAction.objects.get()
    assert reply_approve(action_id=action.pk, actor="reviewer_test").ok
    _unknown_after_apply(graph, action)
    (echo_body,) = _notified(capture, graph)
    echo = json.loads(echo_body)["entry"][0]["messaging"][0]["message"]
    assert echo["is_echo"] and "metadata" not in echo

    typed = json.loads(echo_body)
    typed["entry"][0]["messaging"][0]["message"].update(mid=echo["mid"][:-4] + "AAAA", text="see you soon")
    deliver(json.dumps(typed).encode())
    action.refresh_from_db()
    assert action.delivery_state == "SEND_STATUS_UNKNOWN"  # another text: not Conduit's reply

    deliver(echo_body)
    assert SelfAuthoredItem.objects.filter(kind="message", correlation="").count() == 2
    action.refresh_from_db()
    assert action.delivery_state == "SENT" and action.provider_reply_id == echo["mid"]


@pytest.fixture
def ig_public(graph, db, deliver):
    source = meta_source(graph, kind="instagram", purposes={"public_ack": "meta-comment-reply"})
    sim(
        graph,
        "/_sim/comments",
        {
            "account": source.account_ref,
            "media_id": MEDIA,
            "id": IG_COMMENT,
            "text": "price?",
            "from_id": "17841400000000901",
        },
    )
    deliver(ig_comment_body(IG_COMMENT, MEDIA))
    action = ReplyAction.objects.get()
    assert reply_approve(action_id=action.pk, actor="reviewer_test").ok
    return action


def test_the_accounts_own_comment_on_the_comment_resolves_an_unknown_public_reply(
    ig_public, graph, capture, deliver
):
    _unknown_after_apply(graph, ig_public)
    (own_body,) = _notified(capture, graph)
    value = json.loads(own_body)["entry"][0]["changes"][0]["value"]
    assert value["parent_id"] == IG_COMMENT
    deliver(own_body)
    ig_public.refresh_from_db()
    assert ig_public.delivery_state == "SENT" and ig_public.provider_reply_id == value["id"]
    assert (
        ReplyTransition.objects.filter(action=ig_public, next_state="SENT").get().reason_code
        == "own_comment_seen"
    )


def test_an_own_comment_that_is_another_actions_receipt_resolves_nothing(ig_public, graph, capture, deliver):
    """Unambiguous only: a comment by the account that is already some action's receipt is that
    action's, not evidence for this one."""
    _unknown_after_apply(graph, ig_public)
    (own_body,) = _notified(capture, graph)
    value = json.loads(own_body)["entry"][0]["changes"][0]["value"]
    other = ReplyAction.objects.create(
        reply_key="f" * 64,
        event=ig_public.event,
        purpose="other",
        campaign=ig_public.campaign,
        campaign_version=1,
        delivery_state="SENT",
        provider_reply_id=value["id"],
        created_at=ig_public.created_at,
    )
    deliver(own_body)
    ig_public.refresh_from_db()
    assert ig_public.delivery_state == "SEND_STATUS_UNKNOWN"
    assert other.delivery_state == "SENT"


def test_positive_control_without_the_receiver_the_echo_resolves_nothing(
    page_private, graph, capture, deliver
):
    """The hook removed (replies not listening to self_authored_seen): the echo test's check fails."""
    from ingress.signals import self_authored_seen

    assert self_authored_seen.disconnect(dispatch_uid="replies.self_authored_seen")
    try:
        _unknown_after_apply(graph, page_private)
        (echo_body,) = _notified(capture, graph)
        deliver(echo_body)
        page_private.refresh_from_db()
        assert page_private.delivery_state == "SEND_STATUS_UNKNOWN"
    finally:
        from replies.apps import _self_authored_seen

        self_authored_seen.connect(_self_authored_seen, dispatch_uid="replies.self_authored_seen")
