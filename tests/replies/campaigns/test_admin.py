"""Campaigns in the back office: a campaign editor makes one with its copy, switches it, is offered a
catch-up; reviewers read it; its preview and what it did are pages, the latter also JSON."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone

from replies.models import Campaign, ReplyAction
from replies.services import campaign_create, reply_approve
from tests.replies.campaigns.conftest import MEDIA_A, MEDIA_B

pytestmark = pytest.mark.django_db


def _member(client, group: str):
    user = User.objects.create_user(
        f"{group.replace(' ', '_')}_test", password="unused-test-password", is_staff=True
    )
    user.groups.add(Group.objects.get(name=group))
    client.force_login(user)
    return client


def _reel(source, **kw) -> Campaign:
    return campaign_create(
        name="reel A",
        source_id=source.pk,
        posts=[MEDIA_A],
        keywords=["guide"],
        copies={"public_ack": ["x"]},
        actor="t",
        starts_at=timezone.now() - timedelta(days=1),
        **kw,
    )


def _form(source, **overrides) -> dict:
    data = {
        "name": "reel A",
        "source": source.pk,
        "posts_text": MEDIA_A,
        "keywords_text": "guide, link",
        "starts_at_0": "2026-01-01",
        "starts_at_1": "00:00:00",
        "ends_at_0": "",
        "ends_at_1": "",
        "copy_public_ack": "Sent you the guide!\n---\nCheck your DMs!",
        "copy_private_delivery": "",
    }
    return {**data, **overrides}


def test_a_campaign_editor_makes_a_campaign_with_variants_and_activates_it(instagram, client, comment):
    editor = _member(client, "campaign editors")
    assert editor.get("/admin/replies/campaign/add/").status_code == 200
    response = editor.post("/admin/replies/campaign/add/", _form(instagram))
    assert response.status_code == 302, response.content.decode()[:2000]
    campaign = Campaign.objects.get(name="reel A")
    assert (campaign.state, campaign.posts, campaign.keywords, campaign.purposes) == (
        "draft",
        [MEDIA_A],
        ["guide", "link"],
        ["public_ack"],
    )
    assert [c.text for c in campaign.copies.order_by("variant")] == ["Sent you the guide!", "Check your DMs!"]
    comment(MEDIA_A, "guide")  # while a draft, nothing answers it from this campaign
    page = editor.get(f"/admin/replies/campaign/{campaign.pk}/change/").content.decode()
    assert 'id="campaign-activate"' in page and 'id="campaign-preview"' in page
    response = editor.post(f"/admin/replies/campaign/{campaign.pk}/state/", {"verb": "activate"})
    # The comment made before activation has no reply: a catch-up is offered.
    assert response.status_code == 302 and response["Location"].endswith(f"/{campaign.pk}/catch-up/")
    offer = editor.get(response["Location"]).content.decode()
    assert "Plan replies for 1 earlier comment" in offer
    editor.post(response["Location"], {})
    assert ReplyAction.objects.filter(campaign=campaign).count() == 1


@pytest.mark.parametrize(
    "changes, problem",
    [
        ({"posts_text": "", "every_post": ""}, "choose the posts a campaign covers"),
        ({"every_post": "on"}, "a campaign covers chosen posts or every post, not both"),
        ({"keywords_text": "", "any_comment": ""}, "give the keywords a comment must contain"),
        ({"copy_public_ack": ""}, "give the approved copy for at least one purpose"),
        ({"ends_at_0": "2025-12-31", "ends_at_1": "00:00:00"}, "a campaign ends after it starts"),
    ],
)
def test_the_form_refuses_with_the_problem_named(instagram, client, changes, problem):
    response = _member(client, "campaign editors").post(
        "/admin/replies/campaign/add/", _form(instagram, **changes)
    )
    assert response.status_code == 200 and problem in response.content.decode()
    assert not Campaign.objects.filter(name="reel A").exists()


def test_an_edit_of_rule_and_copy_is_a_new_version(instagram, client):
    editor = _member(client, "owners")
    editor.post("/admin/replies/campaign/add/", _form(instagram))
    campaign = Campaign.objects.get(name="reel A")
    url = f"/admin/replies/campaign/{campaign.pk}/change/"
    assert editor.post(url, _form(instagram, keywords_text="guide")).status_code == 302
    campaign.refresh_from_db()
    assert (campaign.keywords, campaign.version) == (["guide"], 2)
    assert (
        editor.post(url, _form(instagram, keywords_text="guide", copy_public_ack="New text")).status_code
        == 302
    )
    campaign.refresh_from_db()
    assert campaign.version == 3
    assert (
        editor.post(url, _form(instagram, keywords_text="guide", copy_public_ack="New text")).status_code
        == 302
    )
    campaign.refresh_from_db()
    assert campaign.version == 3  # saved unchanged: no new version


def test_a_reviewer_reads_campaigns_but_cannot_make_or_switch_them(instagram, client):
    campaign = _reel(instagram)
    reviewer = _member(client, "reviewers")
    assert reviewer.get("/admin/replies/campaign/").status_code == 200
    page = reviewer.get(f"/admin/replies/campaign/{campaign.pk}/change/").content.decode()
    assert "public_ack: c" in page and 'id="campaign-activate"' not in page
    assert reviewer.get("/admin/replies/campaign/add/").status_code == 403
    assert (
        reviewer.post(f"/admin/replies/campaign/{campaign.pk}/state/", {"verb": "activate"}).status_code
        == 403
    )
    assert reviewer.post(f"/admin/replies/campaign/{campaign.pk}/catch-up/", {}).status_code == 403
    campaign.refresh_from_db()
    assert campaign.state == "draft"


def test_what_a_campaign_did_per_day_as_a_page_and_json(instagram, comment, admin_client):
    campaign = _reel(instagram, activate=True)
    first = comment(MEDIA_A, "guide")
    comment(MEDIA_A, "guide too")
    comment(MEDIA_A, "hello")
    comment(MEDIA_B, "guide")  # another post: not in scope
    action = ReplyAction.objects.get(event=first, purpose="public_ack")
    assert reply_approve(action_id=action.pk, actor="reviewer_test").ok
    export = admin_client.get(f"/admin/replies/campaign/{campaign.pk}/activity/?format=json").json()
    (day,) = export["days"]
    assert {
        k: day[k]
        for k in (
            "comments_in_scope",
            "matched",
            "planned",
            "approved",
            "sent",
            "unknown",
            "closed",
            "expired",
        )
    } == {
        "comments_in_scope": 3,
        "matched": 2,
        "planned": 2,
        "approved": 1,
        "sent": 0,
        "unknown": 0,
        "closed": 0,
        "expired": 0,
    }
    assert day["median_minutes_to_approval"] is not None
    assert "no buyers, revenue or intent" in export["note"]
    page = admin_client.get(f"/admin/replies/campaign/{campaign.pk}/activity/").content.decode()
    assert day["day"] in page and "JSON export" in page


def test_the_preview_page_lists_matches_and_reasons(instagram, comment, admin_client):
    comment(MEDIA_A, "guide please")
    comment(MEDIA_A, "hello there")
    campaign = _reel(instagram)
    page = admin_client.get(f"/admin/replies/campaign/{campaign.pk}/preview/").content.decode()
    assert page.count('class="matched"') == 1 and page.count('class="unmatched"') == 1
    assert (
        "none of the keywords as a whole word" in page and "hello there" in page
    )  # superuser: content shown
