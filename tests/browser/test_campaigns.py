"""A campaign made in a real browser: an editor picks a post from the account's list, previews what
the campaign would match, activates it, and a new matching comment waits in the review queue with
the campaign's copy.

Debian's chromium through Playwright (`executable_path`, never a download), against pytest-django's
live server and the sandbox provider, which lists the account's posts. The ORM is not used beside
Playwright's event loop: deliveries run in a worker thread, as a webhook arrives on its own.
"""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone

import pytest

from replies.models import Campaign, ReplyAction
from tests.browser.test_review_queue import ARTIFACTS, CHROMIUM, _browser_or_skip
from tests.reconcile.conftest import body, item

REEL, OTHER = "post_test_reel", "post_test_other"
COPY = "Thanks! The guide is on its way to your inbox."


def _delivered(deliver, payload: bytes) -> int:
    from django.db import connection

    try:
        return deliver(payload).status_code
    finally:
        connection.close()  # the thread's own connection, closed before the test database goes


@pytest.mark.django_db(transaction=True)
def test_an_editor_makes_a_campaign_from_the_post_list_and_its_comment_reaches_review(
    live_server, provider, wire, deliver, django_user_model
):
    sync_playwright = _browser_or_skip()
    from django.contrib.auth.models import Permission

    state = provider()
    wire(state)
    state.post(
        "acct_test_01",
        [
            {
                "id": REEL,
                "caption": "Comment GUIDE and I will DM you the guide",
                "kind": "reel",
                "published_at": "2026-11-30T10:00:00+00:00",
            },
            {
                "id": OTHER,
                "caption": "Our opening hours",
                "kind": "post",
                "published_at": "2026-11-29T10:00:00+00:00",
            },
        ],
    )
    # A comment made before the campaign exists: the preview shows it, the catch-up offers it.
    # Made an hour ago: within the 7 days a sandbox catch-up looks back.
    made = (datetime.now(timezone.utc) - timedelta(hours=1)).isoformat()
    assert deliver(body(item(1, text="GUIDE please", post_id=REEL, created_at=made))).status_code == 200
    password = "browser-test-only-" + os.urandom(6).hex()
    editor = django_user_model.objects.create_user("editor_browser", password=password, is_staff=True)
    # The permissions of the campaign editors and reviewers groups, given directly: an earlier
    # transactional test's flush takes the groups the migrations made, not the permissions.
    editor.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="replies",
            codename__in=[
                "view_campaign",
                "edit_campaign",
                "view_reviewqueue",
                "view_replyaction",
                "approve_replyaction",
            ],
        )
    )
    ARTIFACTS.mkdir(exist_ok=True)

    with sync_playwright() as p, ThreadPoolExecutor(1) as pool:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1366, "height": 768})
        page.goto(f"{live_server.url}/admin/login/?next=/admin/replies/campaign/add/")
        page.fill("#id_username", "editor_browser")
        page.fill("#id_password", password)
        page.click("input[type=submit]")
        page.wait_for_url(re.compile(r".*/admin/replies/campaign/add/$"))

        # Pick the post by what it is.
        page.click("#campaign-pick-posts")
        page.select_option("#posts-source", label="sandbox")
        page.click("input[type=submit][value='Show its recent posts']")
        page.wait_for_selector("#campaign-posts")
        assert "Comment GUIDE and I will DM you the guide" in page.inner_text("#campaign-posts")
        page.screenshot(path=str(ARTIFACTS / "campaign-posts.png"), full_page=True)
        page.check(f"#post-{REEL}")
        page.click("#use-posts")
        page.wait_for_url(re.compile(r".*/admin/replies/campaign/add/\?.*"))
        assert page.input_value("#id_posts_text").strip() == REEL

        page.fill("#id_name", "reel GUIDE")
        page.fill("#id_keywords_text", "guide")
        page.fill("#id_starts_at_0", "2020-01-01")
        page.fill("#id_starts_at_1", "00:00:00")
        page.fill("#id_copy_public_ack", COPY)
        page.click("input[name=_continue]")
        page.wait_for_selector("#campaign-tools")

        page.click("#campaign-preview")
        page.wait_for_selector("#campaign-preview-rows")
        assert page.locator("#campaign-preview-rows tr.matched").count() == 1
        page.go_back()

        page.click("#campaign-activate")
        page.wait_for_url(re.compile(r".*/catch-up/$"))
        assert "1 earlier comment in the scope of reel GUIDE matches its rule" in page.inner_text("#content")
        assert page.get_attribute("#plan-catch-up", "value") == "Plan replies for 1 earlier comment"
        page.click("a.cancel-link")  # not now

        # A new comment on the reel: the campaign answers it with its copy.
        comment = item(2, text="Guide please!", post_id=REEL)
        assert pool.submit(_delivered, deliver, body(comment)).result(timeout=30) == 200
        page.goto(f"{live_server.url}/admin/replies/reviewqueue/")
        queue = page.inner_text("#result_list")
        assert COPY in queue and "reel GUIDE" in queue
        page.screenshot(path=str(ARTIFACTS / "campaign-review-queue.png"), full_page=True)
        browser.close()

    campaign = Campaign.objects.get(name="reel GUIDE")
    assert (campaign.state, campaign.posts, campaign.keywords) == ("active", [REEL], ["guide"])
    (answered,) = ReplyAction.objects.filter(campaign=campaign)
    assert answered.event.source_event_id == comment["id"] and answered.purpose == "public_ack"
