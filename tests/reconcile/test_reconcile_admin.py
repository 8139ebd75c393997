"""Reports as readable pages and JSON, retry candidates decided by a person, the scan state page."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from reconcile.models import Finding, ReconcileReport, ScanState
from replies.models import ReplyAction
from tests.reconcile.conftest import approved_and_sent, held_and_delivered
from tests.replies.test_replies_admin import member


@pytest.fixture
def candidate(source_side, deliver, scan):
    """A SEND_STATUS_UNKNOWN action whose provider thread shows no reply: one RETRY_CANDIDATE."""
    state, source = source_side
    action = held_and_delivered(state, deliver)
    approved_and_sent(state, action, "refuse")  # refused: nothing applied...
    ReplyAction.objects.filter(pk=action.pk).update(delivery_state="SEND_STATUS_UNKNOWN")  # ...yet parked
    outcome = scan(source)
    finding = Finding.objects.get(report_id=outcome.report_id, kind="RETRY_CANDIDATE")
    return finding, action, state


def decide(client: Client, finding: Finding, action: str, note: str):
    return client.post(
        "/admin/reconcile/retrycandidatequeue/",
        {
            "action": action,
            "_selected_action": [finding.pk],
            "confirm": "yes",
            "note": note,
        },
        follow=True,
    )


def test_report_page_and_export_show_counts_findings_and_decisions(admin_client, candidate):
    finding, action, state = candidate
    report = finding.report
    page = admin_client.get(f"/admin/reconcile/reconcilereport/{report.pk}/change/").content.decode()
    assert f'href="/admin/reconcile/reconcilereport/{report.pk}/export/"' in page
    for text in (
        "events_compared",
        "retry_candidates",
        "no receipt on the provider",
        "None yet.",
        "retry candidate queue",
        report.summary["contract_version"],
    ):
        assert text in page
    listing = admin_client.get("/admin/reconcile/reconcilereport/").content.decode()
    assert f"reconciliation report {report.pk}" in listing

    response = decide(admin_client, finding, "authorize_retry", "thread checked: no reply there")
    assert "1 done" in response.content.decode()
    finding.refresh_from_db()
    action.refresh_from_db()
    assert (finding.decision, finding.decided_by) == ("RETRY_AUTHORIZED", "admin")
    assert action.delivery_state == "APPROVED" and action.reply_key == finding.reply_key  # same key

    page = admin_client.get(f"/admin/reconcile/reconcilereport/{report.pk}/change/").content.decode()
    assert "Retry authorized" in page and "thread checked: no reply there" in page
    export = admin_client.get(f"/admin/reconcile/reconcilereport/{report.pk}/export/")
    document = json.loads(b"".join(export.streaming_content))
    assert document["report"] == report.pk and document["counts"]["retry_candidates"] == 1
    (decision,) = document["decisions"]
    assert (decision["decision"], decision["decided_by"], decision["decision_reason"]) == (
        "RETRY_AUTHORIZED",
        "admin",
        "thread checked: no reply there",
    )
    assert [f["kind"] for f in document["findings"]] == ["RETRY_CANDIDATE"]
    # Decided: gone from the queue.
    assert (
        finding.reply_key[:12]
        not in admin_client.get("/admin/reconcile/retrycandidatequeue/").content.decode()
    )


def test_a_decision_needs_a_reason_and_closing_closes(admin_client, candidate):
    finding, action, _ = candidate
    response = decide(admin_client, finding, "close_without_reply", "")
    assert "is required" in response.content.decode()
    finding.refresh_from_db()
    assert finding.decision == ""
    decide(admin_client, finding, "close_without_reply", "buyer already answered by phone")
    finding.refresh_from_db()
    action.refresh_from_db()
    assert finding.decision == "CLOSED" and action.delivery_state == "CLOSED_NO_REPLY"


def test_only_operators_decide(candidate, client):
    finding, action, _ = candidate
    reviewer = member("reviewer_test_user", "reviewers")
    client.force_login(reviewer)
    assert client.get("/admin/reconcile/retrycandidatequeue/").status_code == 403
    operator = member("operator_test_user", "operators")
    client.force_login(operator)
    page = client.get("/admin/reconcile/retrycandidatequeue/").content.decode()
    assert "authorize_retry" in page and "close_without_reply" in page
    decide(client, finding, "authorize_retry", "checked the thread")
    finding.refresh_from_db()
    assert finding.decided_by == "operator_test_user"


def test_the_database_refuses_a_decision_without_actor_time_or_reason(candidate):
    from django.db import IntegrityError, transaction

    finding, _, _ = candidate
    with pytest.raises(IntegrityError), transaction.atomic():
        Finding.objects.filter(pk=finding.pk).update(decision="CLOSED")


def test_scan_state_page_and_reconcile_now(admin_client, source_side, scan):
    state, source = source_side
    scan(source)
    scan_state = ScanState.objects.get(source=source)
    assert scan_state.requested_at is None
    page = admin_client.get("/admin/reconcile/scanstate/").content.decode()
    assert "sandbox" in page
    admin_client.post(
        "/admin/reconcile/scanstate/", {"action": "reconcile_now", "_selected_action": [scan_state.pk]}
    )
    scan_state.refresh_from_db()
    assert scan_state.requested_by == "admin" and scan_state.next_due_at <= scan_state.requested_at
    assert admin_client.get(f"/admin/reconcile/scanstate/{scan_state.pk}/change/").status_code == 200
    assert ReconcileReport.objects.count() == 1
