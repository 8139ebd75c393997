"""The 7-day private-reply window: the deadline from the comment's real creation time (read once from
the Graph for Instagram, after the webhook's transaction), approval refused after it, and the
schedule closing what expired."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pytest

from replies.models import ReplyAction
from replies.selectors import review_pending_by_deadline
from replies.sender import reply_send
from replies.services import approval, reply_approve, window
from replies.tasks import close_expired_windows, fill_reply_deadline
from tests.providers.meta.sending.conftest import applied, ig_comment_body, meta_source, sim

WEEK = 7 * 24 * 3600
MEDIA = "17800000000000301"
EARLY, LATE, FORGOTTEN = "17900000000000301", "17900000000000302", "17900000000000303"


@pytest.fixture
def three_comments(graph, db, deliver, monkeypatch):
    """Three Instagram comments: one 7 days less 1 minute old, two 7 days and 1 minute old. The
    notifications carry no creation time; the plan queues the Graph read on commit."""
    queued = []
    monkeypatch.setattr(window, "_enqueue_deadline_fill", queued.append)
    source = meta_source(graph, kind="instagram", purposes={"private_delivery": "meta-private-reply"})
    now = int(time.time())
    for comment, age in ((EARLY, WEEK - 60), (LATE, WEEK + 60), (FORGOTTEN, WEEK + 60)):
        sim(
            graph,
            "/_sim/comments",
            {
                "account": source.account_ref,
                "media_id": MEDIA,
                "id": comment,
                "text": "price?",
                "from_id": "17841400000000901",
                "created_time": now - age,
            },
        )
        deliver(ig_comment_body(comment, MEDIA, entry_time=now))
    actions = {a.event.message_ref: a for a in ReplyAction.objects.select_related("event")}
    assert sorted(queued) == sorted(a.pk for a in actions.values())  # queued after commit, one each
    assert all(a.reply_deadline is None for a in actions.values())  # nothing read inside the webhook
    for action in actions.values():
        fill_reply_deadline(action.pk)  # the queued task
    for action in actions.values():
        action.refresh_from_db()
    return actions, now


def test_approved_before_the_deadline_sends_after_it_is_refused_and_the_schedule_closes_the_rest(
    three_comments, graph
):
    """docs/platforms/meta.md#private-reply-window: "an action approved one minute before the deadline sends; one approved after is
    refused; the expiry schedule closes the rest." """
    actions, now = three_comments
    early, late, forgotten = actions[EARLY], actions[LATE], actions[FORGOTTEN]
    assert early.reply_deadline == datetime.fromtimestamp(now - (WEEK - 60), tz=timezone.utc) + timedelta(
        days=7
    )
    # The review queue: what expires soonest first.
    assert list(review_pending_by_deadline().values_list("pk", flat=True))[-1] == early.pk

    # The early one is approved with under one minute of its window left.
    assert reply_approve(action_id=early.pk, actor="reviewer_test").ok
    assert reply_send(action_id=early.pk) == "SENT"
    assert applied(graph)["private"] == {EARLY: 1}

    refused = reply_approve(action_id=late.pk, actor="reviewer_test")
    assert not refused.ok
    assert late.reply_deadline.strftime("%Y-%m-%d %H:%M:%S") in refused.message
    assert ReplyAction.objects.get(pk=late.pk).delivery_state == "REVIEW_PENDING"

    assert close_expired_windows() == 2
    for action in (late, forgotten):
        action.refresh_from_db()
        assert action.delivery_state == "CLOSED_NO_REPLY" and action.last_error_code == "window_expired"
        assert action.transitions.filter(next_state="CLOSED_NO_REPLY", reason_code="window_expired").exists()
    assert ReplyAction.objects.get(pk=early.pk).delivery_state == "SENT"
    assert applied(graph)["private"] == {EARLY: 1}


def test_approval_reads_the_deadline_itself_when_the_task_has_not_run(graph, db, deliver, monkeypatch):
    monkeypatch.setattr(window, "_enqueue_deadline_fill", lambda action_id: None)  # the queue is down
    source = meta_source(graph, kind="instagram", purposes={"private_delivery": "meta-private-reply"})
    sim(
        graph,
        "/_sim/comments",
        {
            "account": source.account_ref,
            "media_id": MEDIA,
            "id": LATE,
            "text": "price?",
            "from_id": "17841400000000901",
            "created_time": int(time.time()) - WEEK - 60,
        },
    )
    deliver(ig_comment_body(LATE, MEDIA))
    action = ReplyAction.objects.get()
    assert not reply_approve(action_id=action.pk, actor="reviewer_test").ok
    action.refresh_from_db()
    assert action.reply_deadline is not None


def test_positive_control_without_the_deadline_check_the_late_approval_goes_through(
    three_comments, monkeypatch
):
    actions, _ = three_comments
    monkeypatch.setattr(approval, "reply_deadline_fill", lambda action_id: None)
    assert reply_approve(action_id=actions[LATE].pk, actor="reviewer_test").ok
