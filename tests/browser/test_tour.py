"""The five-minute tour (docs/tour.md) in a real browser at 1366x768.

Log in, read the front page's counts, open the oldest pending reply, see its comment and the
copy that would go out, approve it and see it SENT; resolve an unknown send by looking the
receipt up; open a reconciliation report and a canary report. Every page must fit 1366 px
(no horizontal scrolling), and each page's screenshot is kept in artifacts/tour-*.png.
"""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.utils import timezone

from reconcile.models import CanaryReport, ReconcileReport
from replies.models import ReplyAction
from replies.sender import reply_send
from replies.services import reply_approve
from tests.browser.test_review_queue import ARTIFACTS, CHROMIUM, _browser_or_skip, _drain_one
from tests.conftest import COPY, fail_next, fixture_body

WIDTH, HEIGHT = 1366, 768


def _no_overflow(page, name: str) -> None:
    """Screenshot the page, then assert nothing is wider than the window."""
    page.screenshot(path=str(ARTIFACTS / f"tour-{name}.png"), full_page=True)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= WIDTH, f"{name}: the page is {width} px wide at a {WIDTH} px window"


@pytest.mark.django_db(transaction=True)
def test_the_tour_from_login_to_the_canary_report(
    live_server, provider, wire, deliver, scan, django_user_model, monkeypatch
):
    sync_playwright = _browser_or_skip()
    from replies import sender

    monkeypatch.setattr(sender, "enqueue_send", lambda action_id: None)  # the drain below sends
    state = provider()
    source = wire(state)
    assert deliver(fixture_body("comment__northstar")).status_code == 200
    pending = ReplyAction.objects.get(purpose="public_ack")
    unknown = ReplyAction.objects.get(purpose="private_delivery")
    scan(source)  # a kept reconciliation report
    reply_approve(action_id=unknown.pk, actor="reviewer_setup")
    fail_next(state, "error_after_accept")  # the provider applies it, the answer is lost
    assert reply_send(action_id=unknown.pk) == "SEND_STATUS_UNKNOWN"
    # The canary refuses to run beside a live source on its reserved account (this test's sandbox
    # source), so its kept report is written here in the shape canary_run writes it.
    canary = CanaryReport.objects.create(
        created_at=timezone.now(),
        actor="operator_tour",
        ok=True,
        failed="",
        summary={
            "event_key": "sandbox-social:acct_test_01:comment.created:evt_test_0042",
            "first_run": True,
            "seen_count": {"before": 0, "after": 2},
            "actions": [],
            "reconcile_report": None,
        },
        expectations=[
            {
                "name": "both deliveries accepted (HTTP 200)",
                "expected": [200, 200],
                "found": [200, 200],
                "ok": True,
            },
            {
                "name": "every reply action SUPPRESSED_TEST",
                "expected": ["SUPPRESSED_TEST"] * 2,
                "found": ["SUPPRESSED_TEST"] * 2,
                "ok": True,
            },
            {"name": "one event row", "expected": 1, "found": 1, "ok": True},
        ],
    )
    report = ReconcileReport.objects.filter(source=source).latest("id")
    comment = pending.event.message_text
    assert comment  # the fixture's synthetic comment, shown to a superuser on the reply pages
    password = "browser-test-only-" + os.urandom(6).hex()
    django_user_model.objects.create_superuser("tour_browser", "tour@example.invalid", password)
    ARTIFACTS.mkdir(exist_ok=True)

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
        page.goto(f"{live_server.url}/admin/login/")
        _no_overflow(page, "01-login")
        page.fill("#id_username", "tour_browser")
        page.fill("#id_password", password)
        page.click("input[type=submit]")
        page.wait_for_url(re.compile(r".*/admin/$"))

        # The front page: each queue's count, and Conduit's name on the header.
        assert "Conduit" in page.inner_text("#site-name")
        assert page.inner_text("#work-review_pending td.count") == "1"
        assert page.inner_text("#work-unknown_sends td.count") == "1"
        assert "View site" not in page.content()
        _no_overflow(page, "02-front-page")

        # The oldest pending reply: its comment and the copy that would go out.
        page.click("#work-review_pending a")
        page.wait_for_url(re.compile(r".*/admin/replies/reviewqueue/inbox/$"))
        card = page.inner_text(".conduit-card")
        assert comment[:40] in card and COPY in card
        page.click("text=The review queue as a list")
        page.wait_for_url(re.compile(r".*/admin/replies/reviewqueue/$"))
        row = page.locator("#result_list tbody tr").first
        assert comment[:40] in row.inner_text() and COPY in row.inner_text()
        _no_overflow(page, "03-review-queue")
        row.locator("th a").click()
        page.wait_for_url(re.compile(rf".*/reviewqueue/{pending.pk}/change/$"))
        _no_overflow(page, "04-pending-reply")

        # Approve is a button; the confirmation page shows the exact text that will go out.
        page.click("button[value=approve]")
        assert COPY in page.inner_text(".conduit-said")
        _no_overflow(page, "05-approve-confirm")
        page.click("input[type=submit][value=Confirm]")
        page.wait_for_selector("ul.messagelist")
        assert "Approve replies: 1 done." in page.inner_text("ul.messagelist")
        with ThreadPoolExecutor(1) as pool:  # the ORM refuses to run beside Playwright's loop
            assert pool.submit(_drain_one).result(timeout=30) == (pending.pk, "SENT")
        page.goto(f"{live_server.url}/admin/replies/replyaction/?decided=yes")
        assert "approved by tour_browser" in page.inner_text("#result_list")
        _no_overflow(page, "06-recently-decided")
        page.goto(f"{live_server.url}/admin/replies/replyaction/{pending.pk}/change/")
        assert page.inner_text("div.field-status div.readonly").startswith("Sent")

        # The unknown send, in plain words, resolved by looking the receipt up.
        page.goto(f"{live_server.url}/admin/")
        page.click("#work-unknown_sends a")
        page.locator("#result_list tbody tr th a").first.click()
        words = page.inner_text("div.field-in_plain_words")
        assert (
            "may have reached the customer" in words and "can be asked whether it holds this reply" in words
        )
        _no_overflow(page, "07-unknown-send")
        page.click("button[value=authorize_retry]")
        _no_overflow(page, "08-unknown-confirm")
        page.click("input[type=submit][value=Confirm]")
        page.wait_for_selector("ul.messagelist")
        assert "marked SENT, nothing resent" in page.inner_text("ul.messagelist")

        # A reconciliation report and the canary report, readable.
        page.goto(f"{live_server.url}/admin/reconcile/reconcilereport/{report.pk}/change/")
        assert "Missed webhooks recovered" in page.inner_text("#counters-events")
        assert "+00:00" not in page.content() and not re.search(r"\d\d:\d\d:\d\d\.\d{6}", page.content())
        _no_overflow(page, "09-report")
        page.goto(f"{live_server.url}/admin/reconcile/canaryreport/{canary.pk}/change/")
        expectations = page.inner_text(".conduit-expectations")
        assert "expected 2 × 200, found 2 × 200" in expectations
        assert "expected 2 × SUPPRESSED_TEST, found 2 × SUPPRESSED_TEST" in expectations
        assert "[" not in expectations and "'" not in expectations
        _no_overflow(page, "10-canary-report")
        browser.close()

    pending.refresh_from_db()
    unknown.refresh_from_db()
    assert (pending.delivery_state, pending.approved_by) == ("SENT", "tour_browser")
    assert unknown.delivery_state == "SENT" and state.applied[unknown.reply_key] == 1
