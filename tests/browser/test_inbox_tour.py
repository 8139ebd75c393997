"""The reviewer's inbox by keyboard alone, in Debian's chromium at 1366x768.

A reviewer signs in, opens the inbox from the front page, approves the first card (a, then
Enter on the confirmation), closes the next one with a reason (c, a reason, Enter), and searches
a handle (/, typing, Enter), touching no mouse. Every page visited, the inbox and every list
page of the sidebar, fits the window with the sidebar open (nothing scrolls sideways, no list
hides columns in a scrolling box), and the inbox, the queues and the reply pages have no
serious or critical axe-core violation. Each page's screenshot is kept in artifacts/inbox-*.png.
"""

from __future__ import annotations

import json
import os
import re
from datetime import datetime, timedelta, timezone

import pytest

from replies.models import ReplyAction, ReplyTransition
from tests.browser.test_review_queue import ARTIFACTS, CHROMIUM, _browser_or_skip
from tests.conftest import COPY

WIDTH, HEIGHT = 1366, 768
SERIOUS = ("serious", "critical")


def _comment(n: int, handle: str, text: str) -> bytes:
    when = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(minutes=30 - n)
    return json.dumps(
        {
            "account": "acct_test_01",
            "events": [
                {
                    "id": f"evt_test_tour{n}",
                    "type": "comment.created",
                    "post_id": "post_test_07",
                    "comment_id": f"msg_test_tour{n}",
                    "from_id": f"person_test_tour{n}",
                    "from_handle": handle,
                    "created_at": when.isoformat(),
                    "text": text,
                }
            ],
        }
    ).encode()


def _fits(page, name: str) -> None:
    """Screenshot the page; nothing wider than the window, no list scrolled inside its box."""
    page.screenshot(path=str(ARTIFACTS / f"inbox-{name}.png"), full_page=True)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= WIDTH, f"{name}: the page is {width} px wide at a {WIDTH} px window"
    hidden = page.evaluate(
        "Array.from(document.querySelectorAll('.results'))"
        ".filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.className || e.id)"
    )
    assert not hidden, f"{name}: columns hidden behind a sideways scroll in {hidden}"


def _accessible(page, name: str) -> None:
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    serious = [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:3]}"
        for v in results.response["violations"]
        if v["impact"] in SERIOUS
    ]
    assert not serious, f"{name}: {serious}"


@pytest.mark.django_db(transaction=True)
def test_the_inbox_by_keyboard_alone(live_server, provider, wire, deliver, scan, django_user_model):
    sync_playwright = _browser_or_skip()
    source = wire(provider())
    for n, (handle, text) in enumerate(
        (
            ("first_buyer_test", "CHECKLIST for me please"),
            ("second_buyer_test", "CHECKLIST? just looking"),
            ("third_buyer_test", "CHECKLIST please, the blue one"),
        )
    ):
        assert deliver(_comment(n, handle, text)).status_code == 200
    scan(source)  # a reconciliation report, a scan state: rows on the reconcile lists too
    first = list(ReplyAction.objects.filter(event__source_event_id="evt_test_tour0"))
    second = list(ReplyAction.objects.filter(event__source_event_id="evt_test_tour1"))
    password = "browser-test-only-" + os.urandom(6).hex()
    django_user_model.objects.create_superuser("inbox_browser", "inbox@example.invalid", password)
    ARTIFACTS.mkdir(exist_ok=True)

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
        page.goto(f"{live_server.url}/admin/login/")
        page.fill("#id_username", "inbox_browser")
        page.fill("#id_password", password)
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(r".*/admin/$"))
        _fits(page, "01-front-page")

        # The front page's "Replies to review" opens the inbox: one card per comment, oldest first.
        page.click("#work-review_pending a")
        page.wait_for_url(re.compile(r".*/reviewqueue/inbox/$"))
        cards = page.locator(".conduit-card")
        assert cards.count() == 3
        assert "first_buyer_test" in cards.nth(0).inner_text() and COPY in cards.nth(0).inner_text()
        _fits(page, "02-inbox")
        _accessible(page, "inbox")

        # ? shows the keys; Escape closes the help.
        page.keyboard.press("?")
        assert page.locator("#inbox-help").is_visible()
        page.keyboard.press("Escape")
        assert not page.locator("#inbox-help").is_visible()

        # a: approve the focused (first) card; the confirmation shows the comment beside each text.
        page.keyboard.press("a")
        page.wait_for_selector(".conduit-beside")
        said = page.inner_text("#content")
        assert "first_buyer_test wrote:" in said and "CHECKLIST for me please" in said
        assert said.count(COPY) == 2
        _fits(page, "03-approve-confirm")
        _accessible(page, "approve confirmation")
        page.keyboard.press("Enter")  # the Confirm button has the focus
        page.wait_for_selector("ul.messagelist")
        assert "Approve replies: 2 done." in page.inner_text("ul.messagelist")
        assert page.locator(".conduit-card").count() == 2
        _fits(page, "04-after-approve")

        # j then k: the focus moves between cards; c closes the focused one with a reason.
        page.keyboard.press("j")
        page.keyboard.press("k")
        assert "second_buyer_test" in page.inner_text(".conduit-card.conduit-current")
        page.keyboard.press("c")
        page.wait_for_selector("select#id_note")
        assert "second_buyer_test wrote:" in page.inner_text("#content")
        _fits(page, "05-close-confirm")
        _accessible(page, "close confirmation")
        assert page.input_value("select#id_note") == ""  # no reason is chosen for the reviewer
        page.keyboard.press("ArrowDown")  # "Not a buyer's question"
        page.keyboard.press("ArrowDown")  # "Already answered elsewhere"
        page.keyboard.press("Tab")
        page.keyboard.press("Enter")
        page.wait_for_selector("ul.messagelist")
        assert "Close without reply: 2 done." in page.inner_text("ul.messagelist")

        # /: search a handle.
        page.keyboard.press("/")
        page.keyboard.type("third_buyer")
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(r".*inbox/\?q=third_buyer$"))
        assert page.locator(".conduit-card").count() == 1
        assert "third_buyer_test" in page.inner_text(".conduit-card")
        _fits(page, "06-search")

        # A reply's own page: its title says what it is; the buyer's words come first.
        page.goto(f"{live_server.url}/admin/replies/reviewqueue/")
        _fits(page, "07-review-queue")
        _accessible(page, "review queue")
        page.locator("#result_list tbody tr th a").first.click()
        title = page.inner_text("#content h1")
        assert title.startswith("Reply to a comment on post post_test_07") or "reply to a comment" in title
        assert page.locator("fieldset").first.inner_text().find("third_buyer_test") >= 0
        _fits(page, "08-reply-page")
        _accessible(page, "reply page")
        for name, url in (
            ("unknown-sends", "/admin/replies/unknownsendqueue/"),
            ("stranded-sends", "/admin/replies/strandedsendqueue/"),
        ):
            page.goto(live_server.url + url)
            assert page.locator("#queue-empty").is_visible(), f"{name}: an empty queue says so"
            _fits(page, name)
            _accessible(page, name)

        # Every list page of the sidebar fits, with the sidebar open.
        page.goto(f"{live_server.url}/admin/")
        links = sorted(
            set(
                page.eval_on_selector_all(
                    "#content-main table a[href$='/']", "els => els.map(e => e.getAttribute('href'))"
                )
            )
        )
        lists = [href for href in links if re.fullmatch(r"/admin/[a-z_]+/[a-z_]+/", href)]
        assert len(lists) >= 20, lists
        wide = []
        for href in lists:
            page.goto(live_server.url + href)
            assert page.locator("#nav-sidebar").is_visible(), href
            try:
                _fits(page, "list-" + href.strip("/").replace("/", "-"))
            except AssertionError as too_wide:
                wide.append(str(too_wide))
        browser.close()
    assert not wide, "\n".join(wide)

    assert {a.approval_state for a in ReplyAction.objects.filter(pk__in=[a.pk for a in first])} == {
        "APPROVED"
    }
    reasons = set(
        ReplyTransition.objects.filter(action__in=second, next_state="CLOSED_NO_REPLY").values_list(
            "reason_code", flat=True
        )
    )
    assert reasons == {"closed_answered_elsewhere"}
