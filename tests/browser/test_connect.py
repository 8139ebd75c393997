"""Connecting accounts in a real browser: an owner presses Connect Instagram (then Connect
Facebook Page), grants on the Graph simulator's consent page, picks the account, and sees the
source connected and subscribed; a reviewer is shown no button.

Debian's chromium through Playwright against pytest-django's live server; the pick page's
screenshot is kept in artifacts/ (connect-pick-instagram.png, connect-pick-facebook.png).
"""

from __future__ import annotations

import os
import re

import pytest

from tests.browser.test_review_queue import ARTIFACTS, CHROMIUM, _browser_or_skip
from tests.providers.meta.connect.conftest import APP_ID, IG_ACCOUNT, PAGES, graph  # noqa: F401

PASSWORD = "browser-test-only-" + os.urandom(6).hex()


def _person(role_group: str | None, username: str):
    from django.contrib.auth.models import Group, User

    user = User.objects.create_user(username, password=PASSWORD, is_staff=True)
    if role_group:
        user.groups.add(Group.objects.get(name=role_group))
    return user


def _sign_in(page, base: str, username: str, then: str) -> None:
    page.goto(f"{base}/admin/login/?next={then}")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_load_state()


def _connect(page, base: str, button: str, graph, pick: str, shot: str) -> str:  # noqa: F811
    page.goto(f"{base}/admin/ingress/source/")
    page.click(f"button:has-text('{button}')")
    page.wait_for_url(re.compile(re.escape(graph.root) + r"/.*"))
    page.click("button:has-text('Allow')")  # the platform's consent page
    # Instagram appends "#_" to its redirect; a browser keeps the fragment across the redirects.
    page.wait_for_url(re.compile(r".*/admin/ingress/source/connect/pick/(#_)?$"))
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / shot), full_page=True)
    for box in page.locator("input[name=account]").all():
        box.set_checked(box.get_attribute("value") == pick)
    page.click("input[type=submit][value='Connect selected accounts']")
    page.wait_for_selector("ul.messagelist")
    return page.text_content("ul.messagelist")  # as written (the admin styles capitalise it)


@pytest.mark.django_db(transaction=True)
def test_an_owner_connects_instagram_and_a_page_and_a_reviewer_sees_no_button(
    live_server,
    graph,  # noqa: F811
    migrated_roles,
):
    sync_playwright = _browser_or_skip()
    from ingress.models import Source

    _person("owners", "owner_browser")
    _person("reviewers", "reviewer_browser")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1366, "height": 768})
        _sign_in(page, live_server.url, "owner_browser", "/admin/ingress/source/")
        said = _connect(
            page, live_server.url, "Connect Instagram", graph, IG_ACCOUNT, "connect-pick-instagram.png"
        )
        assert "Source instagram-user_test_01: connected and subscribed" in said
        said = _connect(
            page, live_server.url, "Connect Facebook Page", graph, PAGES[0], "connect-pick-facebook.png"
        )
        assert "Source facebook-test-page-01: connected and subscribed" in said
        rows = page.inner_text("#result_list")
        assert "instagram-user_test_01" in rows and "facebook-test-page-01" in rows

        reviewer = browser.new_context().new_page()
        _sign_in(reviewer, live_server.url, "reviewer_browser", "/admin/")
        assert "Connect Instagram" not in reviewer.content()
        answer = reviewer.goto(f"{live_server.url}/admin/ingress/source/")
        assert answer.status == 403 and "Connect Instagram" not in reviewer.content()
        browser.close()

    connected = {s.account_ref: s for s in Source.objects.all()}
    assert set(connected) == {IG_ACCOUNT, PAGES[0]}
    assert all(
        s.connection_authorized_by == "owner_browser" and not s.subscription_problem
        for s in connected.values()
    )
    subscribed = {a["id"]: a for a in graph.state.subscribed_apps(PAGES[0])}
    assert subscribed[APP_ID]["subscribed_fields"]
