"""Catch-up: a person plans replies for earlier comments a campaign now matches, one per comment and
purpose, leaving out what was history before the connection unless included; the account's send
budget paces what is sent; a preview says what would match without planning anything."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.db.models import Count
from django.utils import timezone

from ingress.models import EventTransition, InboundEvent, Source
from replies.matching import campaign_preview
from replies.models import ReplyAction
from replies.sender import reply_send
from replies.services import campaign_create, reply_approve, send_budget_set
from replies.services.catch_up import campaign_catch_up
from tests.providers.meta.sending.conftest import PERSON, ig_comment_body, sim
from tests.replies.campaigns.conftest import MEDIA_A, MEDIA_B

EARLIER, HISTORY, BUDGET = 200, 20, 50


def _reel(source, **kw):
    return campaign_create(
        name="reel A",
        source_id=source.pk,
        posts=[MEDIA_A],
        keywords=["guide"],
        copies={"public_ack": ["Sent you the guide!"]},
        actor="editor_test",
        **kw,
    )


@pytest.mark.django_db(transaction=True)
def test_a_catch_up_of_200_comments_plans_one_reply_each_and_the_budget_paces_them(
    instagram, graph, deliver, monkeypatch
):
    from replies import sender

    monkeypatch.setattr(sender, "enqueue_send", lambda action_id: None)  # sent below, one by one
    now = int(time.time())
    Source.objects.filter(pk=instagram.pk).update(connected_at=timezone.now() - timedelta(hours=1))
    ids = [f"17900000009{n:06d}" for n in range(EARLIER + HISTORY)]
    for n, comment_id in enumerate(ids):
        sim(
            graph,
            "/_sim/comments",
            {
                "account": instagram.account_ref,
                "media_id": MEDIA_A,
                "id": comment_id,
                "text": "guide please",
                "from_id": PERSON,
            },
        )
        # The first HISTORY were made before the account was connected.
        deliver(
            ig_comment_body(
                comment_id, MEDIA_A, text="guide please", entry_time=now - 7200 if n < HISTORY else now - 60
            )
        )
    assert not ReplyAction.objects.exists()  # no campaign matched them when they arrived
    deliver(ig_comment_body("17900000008000001", MEDIA_B, text="guide please"))  # another post: out of scope

    reel = _reel(instagram, activate=True, starts_at=timezone.now() - timedelta(days=1))
    offer = campaign_catch_up(campaign_id=reel.pk, actor="editor_test")
    assert (offer.comments, offer.replies, offer.history_left_out, offer.planned) == (
        EARLIER,
        EARLIER,
        HISTORY,
        False,
    )
    assert not ReplyAction.objects.exists()  # counting plans nothing

    done = campaign_catch_up(campaign_id=reel.pk, actor="editor_test", plan=True)
    assert (done.comments, done.replies, done.planned) == (EARLIER, EARLIER, True)
    planned = ReplyAction.objects.filter(campaign=reel)
    assert planned.count() == EARLIER
    assert set(planned.values_list("delivery_state", "purpose", "campaign_version")) == {
        ("REVIEW_PENDING", "public_ack", 1)
    }
    assert set(planned.values_list("event__message_ref", flat=True)) == set(ids[HISTORY:])
    reopened = EventTransition.objects.filter(reason_code="catch_up_planned", next_state="RECORD_READY")
    assert reopened.count() == EARLIER and set(reopened.values_list("actor", flat=True)) == {"editor_test"}
    # Once per comment and purpose: a second catch-up finds nothing left.
    assert campaign_catch_up(campaign_id=reel.pk, actor="editor_test", plan=True).comments == 0
    # History only when the person includes it.
    with_history = campaign_catch_up(
        campaign_id=reel.pk, actor="editor_test", include_history=True, plan=True
    )
    assert (with_history.comments, ReplyAction.objects.count()) == (HISTORY, EARLIER + HISTORY)

    send_budget_set(source_id=instagram.pk, purpose="public_ack", limit=BUDGET, window_seconds=3600)
    for action_id in ReplyAction.objects.order_by("id").values_list("id", flat=True):
        assert reply_approve(action_id=action_id, actor="reviewer_test").ok
        reply_send(action_id=action_id)
    writes = [c for c in graph.state.call_log if c["method"] == "POST" and c["path"].endswith("/replies")]
    assert len(writes) == BUDGET
    states = dict(ReplyAction.objects.values_list("delivery_state").annotate(n=Count("id")))
    assert states == {"SENT": BUDGET, "APPROVED": EARLIER + HISTORY - BUDGET}  # deferred, never failed
    assert set(
        ReplyAction.objects.filter(delivery_state="APPROVED").values_list("attempt_count", flat=True)
    ) == {0}


@pytest.mark.django_db
def test_catch_up_leaves_what_a_person_closed_and_what_was_answered(instagram, comment):
    from replies.services import reply_close

    reel = _reel(instagram, activate=True, starts_at=timezone.now() - timedelta(days=1))
    answered = comment(MEDIA_A, "guide please")  # matched on arrival: planned then
    closed = comment(MEDIA_A, "guide again")
    for action in ReplyAction.objects.filter(event=closed):
        assert reply_close(action_id=action.pk, actor="reviewer_test", reason_code="closed_by_reviewer").ok
    offer = campaign_catch_up(campaign_id=reel.pk, actor="editor_test")
    assert offer.comments == 0, offer
    assert ReplyAction.objects.filter(event__in=[answered, closed]).count() == 2


@pytest.mark.django_db
def test_the_preview_says_what_would_match_and_why_and_plans_nothing(instagram, comment):
    comment(MEDIA_A, "guide please")
    comment(MEDIA_A, "lovely")
    comment(MEDIA_A, "price?")  # the every-post campaign answers it: planned
    comment(MEDIA_B, "guide please")  # another post: not in the preview
    planned = ReplyAction.objects.count()
    reel = _reel(instagram, starts_at=timezone.now() - timedelta(days=1))
    rows = campaign_preview(campaign_id=reel.pk, last=10)
    assert [(r.matched, r.why) for r in rows] == [
        (False, "none of the keywords as a whole word"),
        (False, "none of the keywords as a whole word"),
        (True, "matched"),
    ]
    assert {r.post for r in rows} == {MEDIA_A}
    assert ReplyAction.objects.count() == planned
    assert InboundEvent.objects.filter(event_state="RECORD_READY").count() == 1


@pytest.mark.django_db
def test_history_matched_on_arrival_is_offered_when_included_and_counted_when_not(instagram, deliver):
    """A comment from before the connection is closed as history even when the every-post keyword
    ("price") matched it: it is left out and counted, and planned only when the person includes it."""
    now = int(time.time())
    Source.objects.filter(pk=instagram.pk).update(connected_at=timezone.now() - timedelta(hours=1))
    deliver(ig_comment_body("17900000007000001", MEDIA_A, text="guide and price", entry_time=now - 7200))
    deliver(ig_comment_body("17900000007000002", MEDIA_A, text="guide please", entry_time=now - 7200))
    assert set(InboundEvent.objects.values_list("event_state", "trigger_match")) == {
        ("CLOSED_NO_REPLY", True),
        ("CLOSED_NO_REPLY", False),
    }
    reel = _reel(instagram, activate=True)  # made now: its earlier comments are caught up all the same
    offer = campaign_catch_up(campaign_id=reel.pk, actor="editor_test")
    assert (offer.comments, offer.history_left_out) == (0, 2)
    done = campaign_catch_up(campaign_id=reel.pk, actor="editor_test", include_history=True, plan=True)
    assert (done.comments, done.replies) == (2, 2)


@pytest.mark.django_db
def test_a_more_specific_campaign_keeps_its_comments_from_an_every_post_catch_up(instagram, comment):
    """The every-post campaign answers with both purposes; a comment the reel's own campaign (public
    only) answered gets no private reply from a catch-up of the every-post one."""
    from replies.models import Campaign
    from replies.services import campaign_copy_set

    _reel(instagram, activate=True, starts_at=timezone.now() - timedelta(days=1))
    on_reel = comment(MEDIA_A, "guide and price")
    every = Campaign.objects.get(source=instagram, account_default=True)
    campaign_copy_set(campaign_id=every.pk, purpose="private_delivery", texts=["the link"], actor="t")
    assert set(ReplyAction.objects.filter(event=on_reel).values_list("purpose", flat=True)) == {"public_ack"}
    assert campaign_catch_up(campaign_id=every.pk, actor="editor_test").comments == 0


@pytest.mark.django_db
def test_a_paused_or_ended_campaign_is_not_caught_up(instagram):
    from replies.services import CampaignRefused, campaign_state_set

    reel = _reel(instagram, activate=True)
    for state in ("paused", "ended"):
        campaign_state_set(campaign_id=reel.pk, state=state, actor="t")
        with pytest.raises(CampaignRefused, match=f"is {state}: activate it first"):
            campaign_catch_up(campaign_id=reel.pk, actor="editor_test", plan=True)
