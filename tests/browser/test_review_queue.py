"""The back office in a real browser: log in, open the review queue, approve, see SENT.

Drives Debian's chromium with Playwright (`executable_path`, never a browser
download) against pytest-django's live server. The queue's screenshot is kept
in artifacts/ as evidence of what a reviewer sees.
"""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from replies.models import ReplyAction
from replies.sender import reply_send_next
from tests.conftest import fixture_body

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"


def _browser_or_skip():
    """CI installs chromium (.ci/run), so there a missing browser fails; elsewhere it skips, loudly."""
    missing = [] if os.path.exists(CHROMIUM) else [CHROMIUM]
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing.append("the playwright package")
        sync_playwright = None
    if missing:
        message = f"the browser test needs {' and '.join(missing)} (Debian: apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return sync_playwright


def _drain_one():
    from django.db import connection

    try:
        return reply_send_next()
    finally:
        connection.close()


@pytest.mark.django_db(transaction=True)
def test_a_reviewer_approves_in_the_queue_and_the_reply_reaches_sent(
    live_server, provider, wire, deliver, django_user_model, monkeypatch
):
    sync_playwright = _browser_or_skip()
    from replies import sender

    # The queue's task would be picked up by a django-q2 cluster; here the drain below
    # does the same work, in this process, after the browser approved.
    monkeypatch.setattr(sender, "enqueue_send", lambda action_id: None)
    state = provider()
    wire(state)
    assert deliver(fixture_body("comment__northstar")).status_code == 200
    action = ReplyAction.objects.get(purpose="public_ack")
    password = "browser-test-only-" + os.urandom(6).hex()
    django_user_model.objects.create_superuser("reviewer_browser", "reviewer@example.invalid", password)
    ARTIFACTS.mkdir(exist_ok=True)

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1600, "height": 900})
        page.goto(f"{live_server.url}/admin/login/?next=/admin/replies/reviewqueue/")
        page.fill("#id_username", "reviewer_browser")
        page.fill("#id_password", password)
        page.click("input[type=submit]")
        page.wait_for_url(re.compile(r".*/admin/replies/reviewqueue/$"))
        assert page.locator("#result_list tbody tr").count() == 2
        page.screenshot(path=str(ARTIFACTS / "review-queue.png"), full_page=True)

        page.check(f"input[name=_selected_action][value='{action.pk}']")
        page.select_option("select[name=action]", "approve")
        page.click("button[name=index]")
        page.click("input[type=submit][value=Confirm]")
        page.wait_for_selector("ul.messagelist")
        assert "Approve replies: 1 done." in page.inner_text("ul.messagelist")

        # The ORM refuses to run beside Playwright's event loop; the sender runs in a thread,
        # as it would in a cluster worker.
        with ThreadPoolExecutor(1) as pool:
            assert pool.submit(_drain_one).result(timeout=30) == (action.pk, "SENT")
        page.goto(f"{live_server.url}/admin/replies/replyaction/{action.pk}/change/")
        assert page.inner_text("div.field-status div.readonly").startswith("Sent")
        # Under the folded "Details": in the page, shown when opened.
        assert state.receipts[action.reply_key] in page.text_content("div.field-provider_reply_id")
        browser.close()

    action.refresh_from_db()
    assert action.delivery_state == "SENT" and action.approved_by == "reviewer_browser"
    assert state.applied == {action.reply_key: 1}
