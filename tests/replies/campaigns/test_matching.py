"""Which campaign answers a comment: the post's own over the every-post one, then the earliest
activated; each event and reply records the campaign and its version; one reply per comment and
purpose whatever matches."""

from __future__ import annotations

import pytest

from replies.models import Campaign, CampaignVersion, ReplyAction
from replies.selectors import copy_for
from replies.services import campaign_create, campaign_state_set, campaign_update, reply_approve
from tests.replies.campaigns.conftest import MEDIA_A, MEDIA_B, MEDIA_C

pytestmark = pytest.mark.django_db


def _copies(tag: str) -> dict[str, list[str]]:
    return {"public_ack": [f"{tag}: public"], "private_delivery": [f"{tag}: the link"]}


def _two_post_campaigns(source):
    reel = campaign_create(
        name="reel A: GUIDE",
        source_id=source.pk,
        posts=[MEDIA_A],
        keywords=["guide"],
        copies=_copies("A"),
        activate=True,
        actor="editor_test",
    )
    price = campaign_create(
        name="post B: PRICE",
        source_id=source.pk,
        posts=[MEDIA_B],
        keywords=["price"],
        copies=_copies("B"),
        activate=True,
        actor="editor_test",
    )
    return reel, price


def _answered_by(event) -> tuple:
    actions = ReplyAction.objects.filter(event=event).order_by("purpose")
    return (
        event.trigger_campaign,
        event.trigger_campaign_version,
        {a.purpose: (a.campaign_id, a.campaign_version, copy_for(a).text) for a in actions},
    )


def test_each_comment_is_answered_by_its_posts_campaign_with_that_campaigns_copy(instagram, comment):
    every = Campaign.objects.get(source=instagram, account_default=True)
    reel, price = _two_post_campaigns(instagram)
    default_copy = "Thanks! The details are on their way."

    on_reel = comment(MEDIA_A, "Send me the GUIDE please")
    on_post = comment(MEDIA_B, "PRICE?")
    elsewhere = comment(MEDIA_C, "what is the price")
    both = comment(MEDIA_A, "guide and price please")  # the reel's campaign and the every-post one match
    reel_price = comment(MEDIA_A, "price please")  # not the reel's keyword: the every-post campaign's
    nothing = comment(MEDIA_B, "lovely colours")

    assert _answered_by(on_reel) == (
        reel.pk,
        1,
        {"private_delivery": (reel.pk, 1, "A: the link"), "public_ack": (reel.pk, 1, "A: public")},
    )
    assert _answered_by(on_post)[0] == price.pk
    assert _answered_by(on_post)[2]["public_ack"][2] == "B: public"
    assert _answered_by(elsewhere)[0] == every.pk
    assert _answered_by(elsewhere)[2]["public_ack"][2] == default_copy
    # The most specific campaign answers, once per purpose: two actions, both the reel's.
    assert _answered_by(both)[0] == reel.pk
    assert ReplyAction.objects.filter(event=both).count() == 2
    assert {a.campaign_id for a in ReplyAction.objects.filter(event=both)} == {reel.pk}
    assert _answered_by(reel_price)[0] == every.pk
    assert (nothing.event_state, nothing.trigger_match, nothing.trigger_campaign) == (
        "CLOSED_NO_REPLY",
        False,
        None,
    )
    assert not ReplyAction.objects.filter(event=nothing).exists()


def test_of_two_campaigns_on_one_post_the_earliest_activated_answers(instagram, comment):
    first = campaign_create(
        name="first",
        source_id=instagram.pk,
        posts=[MEDIA_A],
        any_comment=True,
        copies=_copies("1"),
        actor="t",
    )
    second = campaign_create(
        name="second",
        source_id=instagram.pk,
        posts=[MEDIA_A],
        keywords=["guide"],
        copies=_copies("2"),
        activate=True,
        actor="t",
    )
    assert _answered_by(comment(MEDIA_A, "guide"))[0] == second.pk  # the first is a draft still
    campaign_state_set(campaign_id=first.pk, state="active", actor="t")
    assert _answered_by(comment(MEDIA_A, "guide"))[0] == second.pk  # activated earlier
    campaign_state_set(campaign_id=second.pk, state="paused", actor="t")
    assert _answered_by(comment(MEDIA_A, "guide"))[0] == first.pk
    campaign_state_set(campaign_id=second.pk, state="active", actor="t")
    # Paused and resumed, it keeps its place: it was activated first.
    assert _answered_by(comment(MEDIA_A, "guide"))[0] == second.pk


def test_the_event_and_the_reply_show_the_campaign_that_matched(instagram, comment, admin_client):
    reel, _ = _two_post_campaigns(instagram)
    event = comment(MEDIA_A, "guide")
    page = admin_client.get(f"/admin/ingress/inboundevent/{event.pk}/change/").content.decode()
    assert "reel A: GUIDE (version 1;" in page
    action = ReplyAction.objects.get(event=event, purpose="public_ack")
    page = admin_client.get(f"/admin/replies/replyaction/{action.pk}/change/").content.decode()
    assert "reel A: GUIDE (version 1)" in page
    unmatched = comment(MEDIA_B, "hello")
    page = admin_client.get(f"/admin/ingress/inboundevent/{unmatched.pk}/change/").content.decode()
    assert "none (no active campaign matched it)" in page


def test_a_rule_edited_while_comments_arrive_leaves_each_event_its_own_version(instagram, comment):
    reel, _ = _two_post_campaigns(instagram)
    before = comment(MEDIA_A, "guide please")
    campaign_update(campaign_id=reel.pk, changes={"keywords": ["guide", "link"]}, actor="editor_test")
    after = comment(MEDIA_A, "the link please")
    before.refresh_from_db()
    assert (before.trigger_campaign, before.trigger_campaign_version) == (reel.pk, 1)
    assert (after.trigger_campaign, after.trigger_campaign_version) == (reel.pk, 2)
    assert after.trigger_rule_version > before.trigger_rule_version
    assert ReplyAction.objects.get(event=after, purpose="public_ack").campaign_version == 2
    assert dict(CampaignVersion.objects.filter(campaign=reel).values_list("version", "rule__keywords")) == {
        1: ["guide"],
        2: ["guide", "link"],
    }


def test_positive_control_without_the_rules_version_count_ingest_keeps_the_old_rule(
    instagram, comment, monkeypatch
):
    """The count of the source's rules version is what makes ingest read an edited rule: without
    it, the rules read before the edit go on answering (this is the guard the test above watches)."""
    from replies.services import campaigns

    reel, _ = _two_post_campaigns(instagram)
    comment(MEDIA_A, "guide please")  # the rules are read, and held
    monkeypatch.setattr(campaigns, "_rules_changed", lambda source_id: None)  # no count, no record
    campaign_update(campaign_id=reel.pk, changes={"keywords": ["guide", "link"]}, actor="editor_test")
    stale = comment(MEDIA_A, "the link please")
    assert (stale.trigger_match, stale.trigger_campaign) == (False, None)


def test_approval_sends_the_campaigns_copy_and_records_its_version(instagram, comment):
    reel, _ = _two_post_campaigns(instagram)
    action = ReplyAction.objects.get(event=comment(MEDIA_A, "guide"), purpose="public_ack")
    result = reply_approve(action_id=action.pk, actor="reviewer_test", shown_copy_version=f"c{reel.pk}-v1")
    assert result.ok, result.message
    action.refresh_from_db()
    assert (action.copy_version, action.channel) == (f"c{reel.pk}-v1", "public_ack")


def test_every_rules_version_is_recorded_from_registration_on(graph):
    from ingress.services import source_register
    from replies.models import RulesVersion
    from tests.providers.meta.integration.conftest import SECRET_ENV

    source, _ = source_register(
        name="plain",
        adapter="sandbox-social",
        account_ref="acct_test_plain",
        event_types=["comment.created"],
        purposes=["public_ack"],
        secret_env=SECRET_ENV,
    )
    assert list(RulesVersion.objects.filter(source=source).values_list("version", "campaigns")) == [(1, {})]
    made = campaign_create(
        name="plain reel",
        source_id=source.pk,
        posts=[MEDIA_A],
        any_comment=True,
        copies={"public_ack": ["x"]},
        activate=True,
        actor="t",
    )
    source.refresh_from_db()
    assert RulesVersion.objects.get(source=source, version=source.trigger_rule_version).campaigns == {
        str(made.pk): 1
    }
