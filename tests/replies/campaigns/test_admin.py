"""Campaigns in the back office: a campaign editor makes one with its copy, switches it, is offered a
catch-up; reviewers read it; its preview and what it did are pages, the latter also JSON."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone

from replies.models import Campaign, ReplyAction
from replies.services import campaign_copy_set, campaign_create, reply_approve
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
    from replies.services import reply_close, reply_windows_expire

    campaign = _reel(instagram, activate=True)
    campaign_copy_set(campaign_id=campaign.pk, purpose="private_delivery", texts=["the link"], actor="t")
    first = comment(MEDIA_A, "guide")
    second = comment(MEDIA_A, "guide too")
    third = comment(MEDIA_A, "guide three")
    comment(MEDIA_A, "hello")
    comment(MEDIA_B, "guide")  # another post: not in scope
    assert reply_approve(
        action_id=ReplyAction.objects.get(event=first, purpose="public_ack").pk, actor="reviewer_test"
    ).ok
    closed = ReplyAction.objects.get(event=second, purpose="public_ack")
    assert reply_close(action_id=closed.pk, actor="reviewer_test", reason_code="closed_by_reviewer").ok
    # A private reply whose 7-day window passed while it waited: closed by the window, "expired".
    late = ReplyAction.objects.filter(event=third, purpose="private_delivery")
    late.update(reply_deadline=timezone.now() - timedelta(minutes=1))
    assert reply_windows_expire() == 1
    export = admin_client.get(f"/admin/replies/campaign/{campaign.pk}/activity/?format=json&days=7").json()
    (day,) = export["days"]
    counted = ("comments_in_scope", "matched", "planned", "approved", "sent", "unknown", "closed", "expired")
    assert {k: day[k] for k in counted} == {
        "comments_in_scope": 4,
        "matched": 3,
        "planned": 6,  # both purposes for each of the three
        "approved": 1,
        "sent": 0,
        "unknown": 0,
        "closed": 1,
        "expired": 1,
    }
    assert day["median_minutes_to_approval"] is not None and export["span_days"] == 7
    assert "no buyers, revenue or intent" in export["note"]
    page = admin_client.get(f"/admin/replies/campaign/{campaign.pk}/activity/").content.decode()
    assert day["day"] in page and "JSON export" in page
    # The campaign's own page shows the same table.
    page = admin_client.get(f"/admin/replies/campaign/{campaign.pk}/change/").content.decode()
    assert 'id="campaign-activity-days"' in page and day["day"] in page


def test_the_preview_page_lists_matches_and_reasons(instagram, comment, admin_client):
    comment(MEDIA_A, "guide please")
    comment(MEDIA_A, "hello there")
    campaign = _reel(instagram)
    page = admin_client.get(f"/admin/replies/campaign/{campaign.pk}/preview/").content.decode()
    assert page.count('class="matched"') == 1 and page.count('class="unmatched"') == 1
    assert (
        "none of the keywords as a whole word" in page and "hello there" in page
    )  # superuser: content shown


def test_saving_the_every_post_campaign_unchanged_keeps_its_copy_and_channel(sandbox_source, client):
    from replies.services import reply_copy_create

    reply_copy_create(
        source_id=sandbox_source.pk,
        purpose="public_ack",
        channel="public_reply",
        text="Hi!",
        actor="owner_test",
    )
    every = Campaign.objects.get(source=sandbox_source, account_default=True)
    before = (every.version, list(every.copies.values_list("copy_version", "channel")))
    editor = _member(client, "owners")
    page = editor.get(f"/admin/replies/campaign/{every.pk}/change/").content.decode()
    assert "Hi!</textarea>" in page
    data = {
        "name": every.name,
        "every_post": "on",
        "posts_text": "",
        "keywords_text": "CHECKLIST",
        "starts_at_0": "1970-01-01",
        "starts_at_1": "00:00:00",
        "ends_at_0": "",
        "ends_at_1": "",
        "copy_public_ack": "Hi!",
        "copy_private_delivery": "",
    }
    response = editor.post(f"/admin/replies/campaign/{every.pk}/change/", data)
    assert response.status_code == 302, response.content.decode()[:3000]
    every.refresh_from_db()
    assert (every.version, list(every.copies.values_list("copy_version", "channel"))) == before


def test_copy_for_a_purpose_the_source_does_not_declare_is_refused_on_the_form(
    instagram, sandbox_source, client
):
    from ingress.services import source_update

    source_update(source_id=instagram.pk, changes={"purposes": ["public_ack"]})  # the boxes still list both
    response = _member(client, "campaign editors").post(
        "/admin/replies/campaign/add/", _form(instagram, copy_private_delivery="the link")
    )
    assert response.status_code == 200
    assert "&#x27;private_delivery&#x27; is not a declared purpose of source &#x27;ig-test&#x27;" in (
        response.content.decode()
    )


def test_malformed_ids_are_not_server_errors(instagram, admin_client):
    assert admin_client.get("/admin/replies/campaign/posts/?source=abc").status_code == 200
    assert admin_client.get("/admin/replies/campaign/abc/change/").status_code in (302, 404)
