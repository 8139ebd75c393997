"""doctor and the source's admin page show what the inspection lists
(docs/concepts/reconciliation.md#inspection).

docs/concepts/reconciliation.md#inspection: "Inspect provides sorted source/config/health records: source identity/Scope, declared
families and loss limitations, complete checkpoint, active generation/cursor, due time, safe
last-error code, the provider's failure behind a provider_failed code, last completion and
LimitedRecovery." And doctor counts the review queue: with three replies waiting, `doctor` never
says "needs a person: no" (docs/concepts/event-contract.md#invariants: "Every live reply waits for
recorded human approval").
"""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from django.core.management import call_command

from conduit.providers.base import LIMITED, Family
from conduit.providers.sandbox.webhook import SandboxSocialAdapter
from reconcile import clock
from reconcile.models import ReconcileRun
from reconcile.scan import reconcile_page
from replies.models import ReplyAction
from tests.reconcile.conftest import body, item

pytestmark = pytest.mark.django_db


def doctor(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    try:
        call_command("doctor", "--no-meta-check", *args, stdout=out, stderr=io.StringIO())
    except SystemExit as exit_:
        return exit_.code, out.getvalue()
    return 0, out.getvalue()


def json_row() -> dict:
    return json.loads(doctor("--json")[1])[0]


# The keys doctor --json has always had: kept, never renamed.
KEYS_BEFORE = {
    "source",
    "source_system",
    "account_ref",
    "checkpoint",
    "checkpoint_scan_id",
    "last_completed_at",
    "active_scan",
    "due_at",
    "requested",
    "last_error_class",
    "last_error_code",
    "failures",
    "unknown_sends",
    "quarantine_waiting",
    "retry_candidates",
    "stranded_sends",
    "repairs_failed",
    "unexpected_receipts",
    "subscription_problem",
    "needs_reauth",
    "refused_settings",
    "families",
    "receipts_compared_for",
    "needs_a_person",
}
ACTIVE_SCAN_KEYS_BEFORE = {"run", "state", "pages", "staged_events", "complete_scan"}


@pytest.fixture
def three_waiting(source_side, deliver):
    """Two events delivered (two purposes each), one action closed: three replies waiting."""
    state, source = source_side
    for n in (1, 2):
        assert deliver(body(item(n))).status_code == 200
    closed = ReplyAction.objects.order_by("id").first()
    ReplyAction.objects.filter(pk=closed.pk).update(delivery_state="CLOSED_NO_REPLY")
    assert ReplyAction.objects.filter(delivery_state="REVIEW_PENDING").count() == 3
    return state, source


def test_replies_waiting_for_review_need_a_person_with_the_count_and_oldest_age(three_waiting):
    ReplyAction.objects.filter(delivery_state="REVIEW_PENDING").update(
        created_at=clock.now() - timedelta(hours=2, minutes=5)
    )
    code, out = doctor()
    assert code == 1
    assert "needs a person    no" not in out
    assert "review queue      3 waiting, the oldest for 2 h 5 min" in out
    assert "3 replies waiting for review, the oldest for 2 h 5 min (Replies > Review queue)" in out
    row = json_row()
    assert row["reviews_waiting"] == 3
    assert 2 * 3600 + 5 * 60 <= row["oldest_review_age_seconds"] < 2 * 3600 + 6 * 60
    assert row["oldest_review_at"]
    assert any(reason.startswith("3 replies waiting for review") for reason in row["needs_a_person"])


def test_an_empty_review_queue_needs_no_one(three_waiting):
    ReplyAction.objects.update(delivery_state="CLOSED_NO_REPLY")
    code, out = doctor()
    assert code == 0, out
    assert "review queue      0 waiting" in out and "needs a person    no" in out
    assert json_row()["reviews_waiting"] == 0


def test_doctor_shows_the_active_generations_scan_id_and_cursor(source_side, settings):
    settings.CONDUIT_RECONCILE_PAGE_SIZE = 2
    state, source = source_side
    state.hold_events(*[item(n) for n in range(1, 6)])
    assert reconcile_page(source=source).state == "staged"
    run = ReconcileRun.objects.get()
    assert run.scan_id and run.cursor
    code, out = doctor()
    assert f"  scan id           {run.scan_id}" in out
    assert f"  cursor            {run.cursor}" in out
    scan = json_row()["active_scan"]
    assert (scan["scan_id"], scan["cursor"]) == (run.scan_id, run.cursor)


def test_a_long_cursor_is_shortened_with_its_size(source_side, settings):
    settings.CONDUIT_RECONCILE_PAGE_SIZE = 2
    state, source = source_side
    state.hold_events(*[item(n) for n in range(1, 6)])
    reconcile_page(source=source)
    ReconcileRun.objects.update(cursor="c" * 4000)
    _, out = doctor()
    assert f"  cursor            {'c' * 200}... (4000 bytes)" in out
    assert json_row()["active_scan"]["cursor"] == "c" * 4000  # whole in JSON


def test_limited_recovery_is_shown_with_the_families_it_concerns(source_side, monkeypatch):
    _, out = doctor()
    assert "limited recovery  no" in out and json_row()["limited_recovery"] is False
    monkeypatch.setattr(
        SandboxSocialAdapter,
        "families",
        (Family("comment.created", LIMITED, "only the newest 20 are read back", answers="comment"),),
    )
    _, out = doctor()
    assert "limited recovery  yes: comment.created" in out
    assert "family            comment.created recovery limited" in out
    assert json_row()["limited_recovery"] is True


def test_doctor_json_keys_are_only_added(source_side, settings):
    settings.CONDUIT_RECONCILE_PAGE_SIZE = 2
    state, source = source_side
    state.hold_events(*[item(n) for n in range(1, 6)])
    reconcile_page(source=source)
    row = json_row()
    assert KEYS_BEFORE <= set(row)
    assert ACTIVE_SCAN_KEYS_BEFORE <= set(row["active_scan"])
    assert {
        "last_error_message",
        "last_error_at",
        "reviews_waiting",
        "oldest_review_at",
        "oldest_review_age_seconds",
        "limited_recovery",
    } <= set(row)


def test_the_source_page_shows_the_inspection(source_side, deliver, settings, admin_client, monkeypatch):
    from tests.conftest import fail_next

    settings.CONDUIT_RECONCILE_PAGE_SIZE = 2
    state, source = source_side
    state.hold_events(*[item(n) for n in range(1, 6)])
    deliver(body(item(1)))
    assert reconcile_page(source=source).state == "staged"
    fail_next(state, "page_error")
    assert reconcile_page(source=source).state == "failed"
    monkeypatch.setattr(
        SandboxSocialAdapter,
        "families",
        (Family("comment.created", LIMITED, "only the newest 20 are read back", answers="comment"),),
    )
    run = ReconcileRun.objects.get()
    page = admin_client.get(f"/admin/ingress/source/{source.pk}/change/").content.decode()
    assert "Inspection" in page
    for words in (
        "Checkpoint",
        "none: no complete scan yet",
        f"run {run.pk} SCANNING, scan id {run.scan_id}, 1 page(s), 2 staged",
        f"<th>Active cursor</th><td>{run.cursor}</td>",
        "provider/provider_overloaded: the provider answered HTTP 503",
        "yes: comment.created (limited: only the newest 20 are read back)",
        "2 waiting, the oldest for",
        "2 replies waiting for review",
    ):
        assert words in page, words


def test_the_source_page_costs_the_same_queries_however_much_is_waiting(source_side, deliver, admin_client):
    """The inspection reads counts, one query each: more waiting replies add no query."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    state, source = source_side
    url = f"/admin/ingress/source/{source.pk}/change/"
    deliver(body(item(1)))
    admin_client.get(url)  # warm: the session and per-process caches
    with CaptureQueriesContext(connection) as few:
        admin_client.get(url)
    for n in range(2, 8):
        deliver(body(item(n)))
    with CaptureQueriesContext(connection) as many:
        admin_client.get(url)
    assert len(many) == len(few)
