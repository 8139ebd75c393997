"""Every human decision on a reconciled item lands on its finding and in the reports.

docs/concepts/reconciliation.md#decisions; seed 000: the report records "every human decision".
A person decides in whichever queue shows the item (the unknown-send queue, the retry-candidate
queue, the stranded queue, the unexpected-receipt queue, quarantine): the decision is kept on the
finding it decides, shown in that finding's report, and in the next report of the source when it
was taken after its own report was written.
"""

from __future__ import annotations

import json

import pytest
from django.db import IntegrityError, transaction

from ingress.models import QuarantineReceipt
from ingress.services import quarantine_review
from ingress.signals import quarantine_reviewed
from reconcile import repairs, services
from reconcile.models import Finding, ReconcileReport
from reconcile.selectors import report_decisions, report_json_chunks, report_later_decisions
from replies.models import ReplyAction
from replies.services import stranded_retry_now, unknown_confirm_sent
from replies.signals import person_resolved
from tests.conftest import fixture_body
from tests.reconcile.conftest import approved_and_sent, body, held_and_delivered, item
from tests.reconcile.test_report_replays import _conflict_arrives_before_the_replay
from tests.replies.test_replies_admin import act, member

pytestmark = pytest.mark.django_db


def decision_reported(finding: Finding, decision: str, actor: str) -> None:
    """The finding holds the decision with its actor, time and reason, and its report lists it
    (the page's rows and the JSON export alike)."""
    finding.refresh_from_db()
    assert finding.decision, f"no decision recorded on finding {finding.pk} ({finding.kind})"
    assert (finding.decision, finding.decided_by) == (decision, actor)
    assert finding.decided_at is not None and finding.decision_reason
    report = ReconcileReport.objects.get(pk=finding.report_id)
    listed = [(d["kind"], d["decision"], d["decided_by"]) for d in report_decisions(report)]
    assert (finding.kind, decision, actor) in listed, f"report {report.pk} lists {listed}"
    exported = json.loads("".join(report_json_chunks(report)))["decisions"]
    assert (finding.kind, decision, actor) in [(d["kind"], d["decision"], d["decided_by"]) for d in exported]


@pytest.fixture
def receipt_missing(source_side, deliver, scan):
    """The issue's sequence: SENT, then the provider stops showing the reply; a scan finds
    RECEIPT_MISSING and parks the action in SEND_STATUS_UNKNOWN."""
    state, source = source_side
    action = held_and_delivered(state, deliver)
    assert approved_and_sent(state, action) == "SENT"
    with state.lock:  # gone from the thread, and no lookup finds it: a person must look
        state.targets.clear()
        state.receipts.clear()
    outcome = scan(source)
    finding = Finding.objects.get(report_id=outcome.report_id, kind="RECEIPT_MISSING")
    action.refresh_from_db()
    assert action.delivery_state == "SEND_STATUS_UNKNOWN"
    return finding, action, source


@pytest.mark.parametrize(
    "how, note, decision, state",
    [
        ("confirm_sent", "rcpt_test_checked", "CONFIRMED_SENT", "SENT"),
        ("authorize_retry", "", "RETRY_AUTHORIZED", "APPROVED"),  # the lookup finds nothing
        ("close", "", "CLOSED", "CLOSED_NO_REPLY"),
    ],
)
def test_a_decision_on_a_send_whose_receipt_went_missing_is_reported(
    client, receipt_missing, how, note, decision, state
):
    """A person confirms (retries, closes) in the unknown-send queue: the RECEIPT_MISSING finding
    records it and its report lists it."""
    finding, action, _ = receipt_missing
    client.force_login(member("operator_test", "operators"))
    act(client, "unknownsendqueue", how, [action], confirm="yes", note=note)
    action.refresh_from_db()
    assert action.delivery_state == state
    decision_reported(finding, decision, "operator_test")


def test_without_the_recording_the_check_names_the_missing_decision(client, receipt_missing):
    """Positive control: the receiver that records a queue's decision disconnected, the same
    confirm leaves the finding undecided and the check above says so."""
    finding, action, _ = receipt_missing
    assert person_resolved.disconnect(dispatch_uid="reconcile.decision_record_resolution")
    try:
        client.force_login(member("operator_test", "operators"))
        act(client, "unknownsendqueue", "confirm_sent", [action], confirm="yes", note="rcpt_test_checked")
        action.refresh_from_db()
        assert action.delivery_state == "SENT"  # the move itself happened
        with pytest.raises(AssertionError, match="no decision recorded on finding"):
            decision_reported(finding, "CONFIRMED_SENT", "operator_test")
    finally:
        person_resolved.connect(
            services.decision_record_resolution, dispatch_uid="reconcile.decision_record_resolution"
        )


def test_a_decision_taken_after_its_report_is_in_the_next_report(client, receipt_missing, scan):
    """The decision is listed by the report its finding belongs to and, taken after that report
    was written, by the next report of the source (and by no later one)."""
    finding, action, source = receipt_missing
    client.force_login(member("operator_test", "operators"))
    act(client, "unknownsendqueue", "confirm_sent", [action], confirm="yes", note="rcpt_test_checked")
    first = ReconcileReport.objects.get(pk=finding.report_id)
    assert report_later_decisions(first) == []  # taken after it: not "since the previous" of its own
    second = ReconcileReport.objects.get(pk=scan(source).report_id)
    later = report_later_decisions(second)
    assert [(d["report"], d["kind"], d["decision"], d["decided_by"]) for d in later] == [
        (first.pk, "RECEIPT_MISSING", "CONFIRMED_SENT", "operator_test")
    ]
    exported = json.loads("".join(report_json_chunks(second)))
    assert [d["decision"] for d in exported["decisions_since_previous_report"]] == ["CONFIRMED_SENT"]
    third = ReconcileReport.objects.get(pk=scan(source).report_id)
    assert report_later_decisions(third) == []


def test_the_report_page_shows_decisions_taken_since_the_previous_report(
    admin_client, client, receipt_missing, scan
):
    finding, action, source = receipt_missing
    client.force_login(member("operator_test", "operators"))
    act(client, "unknownsendqueue", "close", [action], confirm="yes")
    second = ReconcileReport.objects.get(pk=scan(source).report_id)
    page = admin_client.get(f"/admin/reconcile/reconcilereport/{second.pk}/change/").content.decode()
    section = page.split('id="later-decisions"', 1)[1]
    assert f"report {finding.report_id}</a>: Sent, receipt missing" in section
    assert "operator_test" in section and "Closed" in section


def test_a_retry_now_in_the_stranded_queue_decides_the_actions_open_findings(receipt_missing):
    """Whatever queue shows the action: a stranded send with an open RECEIPT_MISSING finding (its
    retry authorized, then failed before sending) is retried now; the finding records it."""
    finding, action, _ = receipt_missing
    ReplyAction.objects.filter(pk=action.pk).update(delivery_state="FAILED_BEFORE_SEND")  # planted
    assert stranded_retry_now(action_id=action.pk, actor="operator_test").ok
    decision_reported(finding, "RETRY_AUTHORIZED", "operator_test")


def test_a_failure_recording_the_decision_takes_the_reply_move_back(client, receipt_missing, monkeypatch):
    """One transaction: the queue's move and the finding's decision commit together or not at all."""
    finding, action, _ = receipt_missing

    def broken(**_):
        raise RuntimeError("planted failure while recording the decision")

    monkeypatch.setattr(services, "findings_decided", broken)
    with pytest.raises(RuntimeError, match="planted failure"):
        unknown_confirm_sent(
            action_id=action.pk, actor="operator_test", provider_reply_id="rcpt_test_checked"
        )
    action.refresh_from_db()
    finding.refresh_from_db()
    assert (action.delivery_state, finding.decision) == ("SEND_STATUS_UNKNOWN", "")


def test_an_acknowledged_unexpected_receipt_is_in_the_next_report(client, source_side, deliver, scan):
    """The unexpected-receipt queue's acknowledgement, taken after its report, is in the next one."""
    state, source = source_side
    action = held_and_delivered(state, deliver)
    assert approved_and_sent(state, action, "drop_after_accept") == "SEND_STATUS_UNKNOWN"
    ReplyAction.objects.filter(pk=action.pk).update(delivery_state="CLOSED_NO_REPLY")  # planted: buried
    finding = Finding.objects.get(report_id=scan(source).report_id, kind="UNEXPECTED_RECEIPT")
    client.force_login(member("operator_test", "operators"))
    client.post(
        "/admin/reconcile/finding/",
        {"action": "acknowledge", "_selected_action": [finding.pk], "confirm": "yes", "note": "seen it"},
    )
    decision_reported(finding, "CLOSED", "operator_test")
    second = ReconcileReport.objects.get(pk=scan(source).report_id)
    assert [(d["kind"], d["decided_by"]) for d in report_later_decisions(second)] == [
        ("UNEXPECTED_RECEIPT", "operator_test")
    ]


@pytest.fixture
def replay_refused(source_side, deliver, scan, monkeypatch):
    """A missed event whose replay ingest refused (an identity conflict met meanwhile): its
    MISSING_LOCAL finding refused, naming the quarantine receipt that says why."""
    state, source = source_side
    state.hold_events(item(1), item(2))
    assert deliver(body(item(1))).status_code == 200
    _conflict_arrives_before_the_replay(monkeypatch, deliver, 2)
    report = ReconcileReport.objects.get(pk=scan(source).report_id)
    finding = report.findings.get(kind="MISSING_LOCAL")
    assert (finding.repair_outcome, finding.repair_code) == ("refused", "replay_refused")
    assert finding.quarantine_receipt is not None
    receipt = QuarantineReceipt.objects.get(receipt_id=finding.quarantine_receipt)
    assert receipt.delivery_id.startswith(f"reconcile:{report.run_id}:")
    return finding, receipt, source


@pytest.mark.parametrize(
    "action, note, decision",
    [("dismiss", "", "DISMISSED"), ("mark_corrected", "field map fixed", "CORRECTED")],
)
def test_a_quarantine_review_of_a_refused_replay_decides_its_finding(
    client, replay_refused, action, note, decision
):
    finding, receipt, _ = replay_refused
    client.force_login(member("reviewer_test", "reviewers"))
    client.post(
        "/admin/ingress/quarantinereceipt/",
        {"action": action, "_selected_action": [receipt.pk], "confirm": "yes", "note": note},
        follow=True,
    )
    receipt.refresh_from_db()
    assert receipt.state == decision
    decision_reported(finding, decision, "reviewer_test")
    exported = json.loads("".join(report_json_chunks(finding.report)))["findings"]
    assert [f["quarantine_receipt"] for f in exported if f["kind"] == "MISSING_LOCAL"] == [
        str(receipt.receipt_id)
    ]


def test_without_the_review_recording_the_check_names_the_missing_decision(replay_refused):
    """Positive control: the receiver that records a quarantine review disconnected, the review
    still applies but the refused replay's finding stays undecided, and the check says so."""
    finding, receipt, _ = replay_refused
    assert quarantine_reviewed.disconnect(dispatch_uid="reconcile.decision_record_review")
    try:
        assert quarantine_review(
            receipt_id=receipt.pk, outcome="DISMISSED", actor="reviewer_test", note=""
        ).applied
        with pytest.raises(AssertionError, match="no decision recorded on finding"):
            decision_reported(finding, "DISMISSED", "reviewer_test")
    finally:
        quarantine_reviewed.connect(
            services.decision_record_review, dispatch_uid="reconcile.decision_record_review"
        )


def test_a_quarantine_review_of_a_webhook_body_is_in_the_next_report(source_side, deliver, scan):
    """A refused webhook body has no finding: its review is listed by the source's next report."""
    state, source = source_side
    before = ReconcileReport.objects.get(pk=scan(source).report_id)
    deliver(fixture_body("comment__missing_post_id"))
    receipt = QuarantineReceipt.objects.get(source=source)
    assert quarantine_review(
        receipt_id=receipt.pk, outcome="DISMISSED", actor="reviewer_test", note=""
    ).applied
    after = ReconcileReport.objects.get(pk=scan(source).report_id)
    assert report_later_decisions(before) == []
    rows = report_later_decisions(after)
    assert [(r["kind"], r["receipt_id"], r["decision"], r["decided_by"]) for r in rows] == [
        ("QUARANTINE_RECEIPT", str(receipt.receipt_id), "DISMISSED", "reviewer_test")
    ]


def test_the_database_refuses_a_decision_it_does_not_know(receipt_missing):
    finding, _, _ = receipt_missing
    with pytest.raises(IntegrityError, match="finding_decision_valid"), transaction.atomic():
        Finding.objects.filter(pk=finding.pk).update(
            decision="SHRUGGED",
            decided_by="operator_test",
            decided_at=finding.report.created_at,
            decision_reason="x",
        )


@pytest.mark.parametrize("one_statement", [True, False])
def test_the_replay_repair_names_its_receipt_on_either_path(
    source_side, deliver, scan, monkeypatch, one_statement
):
    """The refused findings carry their receipt whichever path sets the outcome (PostgreSQL's one
    statement, or the ORM's update): the row the receipt's review will find."""
    if one_statement and not repairs.fast_sql():
        pytest.skip("the one-statement path is PostgreSQL's")
    monkeypatch.setattr(repairs, "fast_sql", lambda: one_statement)
    state, source = source_side
    state.hold_events(item(1), item(2))
    assert deliver(body(item(1))).status_code == 200
    _conflict_arrives_before_the_replay(monkeypatch, deliver, 2)
    report = ReconcileReport.objects.get(pk=scan(source).report_id)
    refused = report.findings.get(kind="MISSING_LOCAL", repair_outcome="refused")
    assert QuarantineReceipt.objects.filter(receipt_id=refused.quarantine_receipt, source=source).exists()
