"""The reconcile admin speaks to people: labels and meanings where a person reads, codes kept aside.

Issue 29, "Words for people": a report page and the findings queues show "Retry candidate" with its
meaning, never RETRY_CANDIDATE; the report says what its scan covered instead of "source cursor:
scan <hex>". Each test has a positive control: with the label taken back to the code, it fails.
"""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from reconcile.admin import words
from reconcile.models import Finding, FindingKind
from tests.reconcile.test_reconcile_admin import candidate, decide  # noqa: F401 (a fixture)

RETRY_MEANING = "No receipt was found: a retry under the same reply key may be safe; a person decides."


class _Visible(HTMLParser):
    """The text a person sees: no tags, no attributes, no script or style."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag, attrs):
        self._hidden += tag in ("script", "style", "title")

    def handle_endtag(self, tag):
        self._hidden -= tag in ("script", "style", "title")

    def handle_data(self, data):
        if not self._hidden:
            self.parts.append(data)


def visible(response) -> str:
    assert response.status_code == 200
    parser = _Visible()
    parser.feed(response.content.decode())
    return " ".join(" ".join(parser.parts).split())


def _report_page(client, finding: Finding) -> str:
    return visible(client.get(f"/admin/reconcile/reconcilereport/{finding.report_id}/change/"))


def _assert_retry_candidate_in_words(text: str) -> None:
    assert f"Retry candidate {RETRY_MEANING}" in text  # the label, its meaning beside it
    assert "RETRY_CANDIDATE" not in text


def test_the_report_page_names_kinds_decisions_and_the_scan_in_words(admin_client, candidate):  # noqa: F811
    finding, _, _ = candidate
    text = _report_page(admin_client, finding)
    _assert_retry_candidate_in_words(text)
    assert (
        "source cursor" not in text
        and "scan " + finding.report.summary["source_cursor"]["scan_id"] not in text
    )
    assert "the next scan of sandbox is told that everything up to" in text
    decide(admin_client, finding, "authorize_retry", "thread checked: no reply there")
    text = _report_page(admin_client, finding)
    assert "Retry authorized" in text and "RETRY_AUTHORIZED" not in text


@pytest.mark.parametrize(
    "queue",
    ["/admin/reconcile/retrycandidatequeue/", "/admin/reconcile/finding/?queue=retry_candidates"],
)
def test_the_findings_queues_name_the_kind_in_words(admin_client, candidate, queue):  # noqa: F811
    finding, _, _ = candidate
    text = visible(admin_client.get(queue))
    assert finding.reply_key[:12] in text
    _assert_retry_candidate_in_words(text)


def test_a_finding_page_keeps_its_keys_under_details(admin_client, candidate):  # noqa: F811
    finding, _, _ = candidate
    page = admin_client.get(f"/admin/reconcile/finding/{finding.pk}/change/")
    _assert_retry_candidate_in_words(visible(page))
    main, details = page.content.decode().split('class="module aligned collapse"', 1)
    assert finding.reply_key in details and finding.event_key in details
    assert finding.reply_key[:12] in main and finding.reply_key not in main  # shortened up top


def test_control_the_code_as_label_is_caught(admin_client, candidate, monkeypatch):  # noqa: F811
    """Positive control: with RETRY_CANDIDATE's label taken back to its code, each page shows the code."""
    finding, _, _ = candidate
    field = Finding._meta.get_field("kind")
    monkeypatch.setattr(field, "choices", [(v, v) for v in FindingKind.values])
    monkeypatch.setattr(words, "label", lambda choices, value: value)
    for text in (
        _report_page(admin_client, finding),
        visible(admin_client.get("/admin/reconcile/retrycandidatequeue/")),
        visible(admin_client.get("/admin/reconcile/finding/?queue=retry_candidates")),
    ):
        with pytest.raises(AssertionError):
            _assert_retry_candidate_in_words(text)


# Every changelist under /admin/reconcile/, with the rows it shows a person.
LIST_PAGES = (
    "scanstate/",
    "reconcilereport/",
    "canaryreport/",
    "finding/",
    "finding/?queue=retry_candidates",
    "retrycandidatequeue/",
    "acceptancerun/",
)


def _list_widths(live_server, django_user_model, paths, *, style: str = "") -> dict[str, list[int]]:
    """Each changelist's [results scroll width, results box width, page width] at 1366x768, its
    screenshot kept in artifacts/reconcile-*.png; `style` is added to each page's CSS."""
    import os

    from tests.browser.test_review_queue import ARTIFACTS, CHROMIUM, _browser_or_skip

    sync_playwright = _browser_or_skip()
    password = "browser-test-only-" + os.urandom(6).hex()
    django_user_model.objects.create_superuser("words_browser", "words@example.invalid", password)
    ARTIFACTS.mkdir(exist_ok=True)
    widths = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1366, "height": 768})
        page.goto(f"{live_server.url}/admin/login/")
        page.fill("#id_username", "words_browser")
        page.fill("#id_password", password)
        page.click("input[type=submit]")
        page.wait_for_url(f"{live_server.url}/admin/")
        for path in paths:
            page.goto(f"{live_server.url}/admin/reconcile/{path}")
            if style:
                page.add_style_tag(content=style)
            assert page.is_visible("#nav-sidebar"), path
            assert page.locator("#result_list tbody tr").count() >= 1, path
            name = path.strip("/").replace("/", "-").replace("?", "-").replace("=", "-")
            page.screenshot(path=str(ARTIFACTS / f"reconcile-{name}.png"), full_page=True)
            widths[path] = page.evaluate(
                "() => { const r = document.querySelector('.results');"
                " return [r.scrollWidth, r.clientWidth, document.documentElement.scrollWidth]; }"
            )
        browser.close()
    return widths


@pytest.fixture
def every_list_has_rows(source_side, deliver, scan):
    """A retry candidate, a failing scan, a failed canary and an acceptance run: each list shows rows."""
    from django.utils import timezone

    from ingress.models import Source
    from reconcile.models import AcceptanceRun, CanaryReport, ScanState
    from replies.models import ReplyAction
    from tests.reconcile.conftest import approved_and_sent, held_and_delivered

    state, source = source_side
    action = held_and_delivered(state, deliver)
    approved_and_sent(state, action, "refuse")
    ReplyAction.objects.filter(pk=action.pk).update(delivery_state="SEND_STATUS_UNKNOWN")
    scan(source)
    # A second source, so each list's source filter shows and narrows the table as it does in use.
    other = Source.objects.get(pk=source.pk)
    other.pk, other.name, other.account_ref = None, "sandbox-second-account", "acct_test_02"
    other.save()
    now = timezone.now()
    ScanState.objects.filter(source=source).update(
        failures=3,
        last_error_class="provider",
        last_error_code="provider_overloaded",
        last_error_message="the provider answered 503 three times: it is overloaded; the next page is read later",
    )
    CanaryReport.objects.create(
        created_at=now, actor="operator_test", ok=False, failed="reconciliation: one matched event"
    )
    AcceptanceRun.objects.create(
        started_at=now, finished_at=now, ran_by="operator_test", code_version="0.1.0+" + "a" * 58, passed=True
    )


@pytest.mark.django_db(transaction=True)
def test_every_reconcile_list_fits_1366_px_with_the_sidebar_open(
    live_server, django_user_model, every_list_has_rows
):
    """Issue 29, "Fits the screen": no column a person decides from behind a sideways scroll."""
    for path, (scrolled, box, page) in _list_widths(live_server, django_user_model, LIST_PAGES).items():
        assert scrolled <= box and page <= 1366, (path, scrolled, box, page)


@pytest.mark.django_db(transaction=True)
def test_control_the_old_columns_scroll_sideways(
    live_server, django_user_model, every_list_has_rows, monkeypatch
):
    """Positive control: the findings list with its columns and cells before issue 29 (cells that
    never wrap, as Django's stylesheet keeps them) is wider than its box."""
    from reconcile.admin import FindingAdmin

    old = ("id", "kind", "source", "key", "action_state", "reply_now", "report", "decision", "detail")
    monkeypatch.setattr(FindingAdmin, "list_display", old)
    unwrapped = "#result_list th, #result_list td { white-space: nowrap !important; overflow-wrap: normal !important; }"
    widths = _list_widths(live_server, django_user_model, ["finding/"], style=unwrapped)
    ((scrolled, box, _),) = widths.values()
    assert scrolled > box
