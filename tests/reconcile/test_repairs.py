"""The repair table (docs/concepts/reconciliation.md#repairs), one test per rule, plus report-before-repair and paging."""

from __future__ import annotations

import pytest
from django.utils import timezone

from ingress.models import Delivery, InboundEvent
from reconcile.models import Finding, ReconcileReport, ReconcileRun, StagedEvent
from replies.contract import reply_key
from replies.models import ReplyAction, ReplyTransition
from tests.reconcile.conftest import approved_and_sent, body, held_and_delivered, item

pytestmark = pytest.mark.django_db


def kinds(report: ReconcileReport) -> dict[str, int]:
    out: dict[str, int] = {}
    for kind in report.findings.values_list("kind", flat=True):
        out[kind] = out.get(kind, 0) + 1
    return out


def test_missing_source_event_is_replayed_through_ingest_with_replies_held(source_side, deliver, scan):
    state, source = source_side
    state.hold_events(item(1), item(2))
    assert deliver(body(item(1))).status_code == 200  # item 2's webhook never came
    outcome = scan(source)
    assert outcome.state == "published"
    report = ReconcileReport.objects.get(pk=outcome.report_id)
    counts = report.summary["counts"]
    from reconcile.publication import REPORT_COUNTS

    assert sorted(counts) == sorted(REPORT_COUNTS)  # the page and printouts show every count
    assert counts["events_compared"] == 2
    assert counts["missing_recovered"] == 1 and counts["events_matched"] == 1
    recovered = InboundEvent.objects.get(source_event_id="evt_test_000002")
    assert recovered.reconcile_status == "MATCHED" and recovered.seen_count == 1
    actions = ReplyAction.objects.filter(event=recovered)
    assert sorted(actions.values_list("delivery_state", flat=True)) == ["REVIEW_PENDING"] * 2
    assert {a.reply_key for a in actions} == {reply_key(recovered.event_key, p) for p in source.purposes}
    # The same ingest function wrote it: a delivery row and its history, actor reconcile.
    assert Delivery.objects.filter(delivery_id__startswith=f"reconcile:{outcome.run_id}:").count() == 1
    assert set(recovered.transitions.values_list("actor", flat=True)) == {"system:reconcile"}
    finding = report.findings.get(kind="MISSING_LOCAL")
    assert (finding.event_key, finding.repair, finding.repair_outcome) == (
        recovered.event_key,
        "replayed_through_ingest",
        "applied",
    )


def test_event_on_both_sides_updates_evidence_only(source_side, deliver, scan):
    state, source = source_side
    state.hold_events(item(1))
    deliver(body(item(1)))
    deliver(body(item(1)))
    before = list(ReplyAction.objects.values_list("reply_key", "delivery_state"))
    outcome = scan(source)
    report = ReconcileReport.objects.get(pk=outcome.report_id)
    event = InboundEvent.objects.get()
    assert event.reconcile_status == "MATCHED" and event.reconciled_at is not None
    assert list(ReplyAction.objects.values_list("reply_key", "delivery_state")) == before
    assert report.summary["counts"]["duplicates_converged"] == 1
    assert report.findings.count() == 0


def test_local_event_without_source_evidence_is_kept_and_marked(source_side, deliver, scan):
    state, source = source_side
    deliver(body(item(1)))  # the provider holds nothing
    outcome = scan(source)
    event = InboundEvent.objects.get()
    assert event.reconcile_status == "SOURCE_UNVERIFIED"
    assert ReplyAction.objects.filter(event=event).count() == 2  # preserved, untouched
    report = ReconcileReport.objects.get(pk=outcome.report_id)
    assert kinds(report) == {"SOURCE_UNVERIFIED": 1}


def test_receipt_for_unknown_send_is_attached_and_marked_sent(source_side, deliver, scan):
    state, source = source_side
    action = held_and_delivered(state, deliver)
    # The provider applied it; the answer was lost.
    assert approved_and_sent(state, action, "error_after_accept") == "SEND_STATUS_UNKNOWN"
    outcome = scan(source)
    action.refresh_from_db()
    assert action.delivery_state == "SENT"
    assert action.provider_reply_id == state.receipts[action.reply_key]
    assert ReplyTransition.objects.filter(
        action=action, next_state="SENT", reason_code="receipt_found_at_reconcile"
    ).exists()
    report = ReconcileReport.objects.get(pk=outcome.report_id)
    assert report.summary["counts"]["receipts_attached"] == 1
    assert report.summary["counts"]["replies_confirmed"] == 1
    assert state.applied == {action.reply_key: 1}  # nothing resent


def test_receipt_for_sending_action_is_attached(source_side, deliver, scan):
    state, source = source_side
    action = held_and_delivered(state, deliver)
    state.apply(action.reply_key, None, "msg_test_000001")  # applied; the worker died mid-call
    ReplyAction.objects.filter(pk=action.pk).update(delivery_state="SENDING", sending_since=timezone.now())
    scan(source)
    action.refresh_from_db()
    assert action.delivery_state == "SENT" and action.provider_reply_id


def test_sent_without_receipt_becomes_unknown_and_stops(source_side, deliver, scan):
    state, source = source_side
    action = held_and_delivered(state, deliver)
    assert approved_and_sent(state, action) == "SENT"
    with state.lock:  # the provider no longer shows it
        state.targets.clear()
    outcome = scan(source)
    action.refresh_from_db()
    assert action.delivery_state == "SEND_STATUS_UNKNOWN"
    assert action.last_error_code == "receipt_missing_at_reconcile"
    report = ReconcileReport.objects.get(pk=outcome.report_id)
    assert kinds(report) == {"RECEIPT_MISSING": 1}  # stop: no retry candidate in the same run
    assert state.applied == {action.reply_key: 1}


def test_no_receipt_makes_a_retry_candidate_and_nothing_more(source_side, deliver, scan):
    state, source = source_side
    action = held_and_delivered(state, deliver)
    approved_and_sent(state, action, "drop_after_accept")
    with state.lock:  # the provider shows no reply: what it applied is gone from the thread
        state.targets.clear()
    keys_before = set(ReplyAction.objects.values_list("reply_key", flat=True))
    outcome = scan(source)
    action.refresh_from_db()
    assert action.delivery_state == "SEND_STATUS_UNKNOWN"
    finding = Finding.objects.get(report_id=outcome.report_id)
    assert (finding.kind, finding.action_id, finding.repair) == ("RETRY_CANDIDATE", action.pk, "none")
    assert set(ReplyAction.objects.values_list("reply_key", flat=True)) == keys_before
    assert state.applied_count() == 1


def test_report_is_written_before_any_repair(source_side, deliver, scan, monkeypatch):
    """docs/concepts/reconciliation.md#steps: "Write a report before applying any repair." A repair that fails leaves the
    report and its findings committed, the failed finding says `failed` with a code, and the
    other repairs still apply."""
    from ingress import services as ingress_services
    from reconcile import repairs

    state, source = source_side
    state.hold_events(item(1), item(2))
    deliver(body(item(1)))
    seen = {}

    def failing_accept(**kwargs):
        run = ReconcileRun.objects.get()
        seen["reports"] = ReconcileReport.objects.filter(run=run).count()
        seen["findings"] = Finding.objects.filter(report__run=run).count()
        seen["run_state"] = run.state
        raise RuntimeError("planted repair failure")

    monkeypatch.setattr(repairs, "observations_accept", failing_accept)
    outcome = scan(source)
    assert seen == {"reports": 1, "findings": 1, "run_state": "REPAIRING"}
    assert outcome.state == "published"
    report = ReconcileReport.objects.get()
    missing = report.findings.get(kind="MISSING_LOCAL")
    assert (missing.repair_outcome, missing.repair_code) == ("failed", "unexpected_error")
    assert "planted" not in missing.repair_code + missing.detail  # the exception's text is never kept
    assert InboundEvent.objects.get().reconcile_status == "MATCHED"  # the other repair applied
    assert InboundEvent.objects.count() == 1  # the failed replay recorded nothing
    assert ReconcileRun.objects.get().state == "PUBLISHED"
    monkeypatch.setattr(repairs, "observations_accept", ingress_services.observations_accept)
    again = scan(source)  # the next complete scan finds the event missing again and replays it
    assert Finding.objects.get(report_id=again.report_id, kind="MISSING_LOCAL").repair_outcome == "applied"
    assert InboundEvent.objects.count() == 2


def test_pages_stage_until_the_last_one(source_side, deliver, scan, settings):
    from reconcile.scan import reconcile_page

    settings.CONDUIT_RECONCILE_PAGE_SIZE = 2
    state, source = source_side
    state.hold_events(*[item(n) for n in range(1, 6)])
    states = [reconcile_page(source=source).state for _ in range(3)]
    assert states == ["staged", "staged", "published"]
    assert InboundEvent.objects.count() == 5
    assert not StagedEvent.objects.exists()
    report = ReconcileReport.objects.get()
    assert report.summary["source_cursor"]["pages"] == 3
    assert report.summary["counts"]["missing_recovered"] == 5


def test_a_second_run_changes_nothing(source_side, deliver, scan):
    state, source = source_side
    state.hold_events(item(1), item(2))
    deliver(body(item(1)))
    scan(source)
    snapshot = (
        InboundEvent.objects.count(),
        ReplyAction.objects.count(),
        sorted(ReplyAction.objects.values_list("reply_key", flat=True)),
    )
    outcome = scan(source)
    assert (
        InboundEvent.objects.count(),
        ReplyAction.objects.count(),
        sorted(ReplyAction.objects.values_list("reply_key", flat=True)),
    ) == snapshot
    counts = ReconcileReport.objects.get(pk=outcome.report_id).summary["counts"]
    assert counts["missing_recovered"] == 0 and counts["events_matched"] == 2


def test_reconcile_status_moves_through_its_declared_table_with_history(source_side, deliver, scan):
    """reconcile_status never bypasses the transition function (docs/concepts/ledgers.md#transitions)."""
    from conduit.statemachine import TransitionTable
    from ingress.contract import RECONCILE_TABLE
    from ingress.models import EventTransition

    state, source = source_side
    state.hold_events(item(1))
    assert deliver(body(item(1))).status_code == 200
    assert deliver(body(item(2))).status_code == 200  # the source never shows it
    assert scan(source).state == "published"
    moves = set(
        EventTransition.objects.filter(ledger="event_reconcile", refused=False).values_list(
            "event__source_event_id", "prior_state", "next_state"
        )
    )
    assert moves == {
        ("evt_test_000001", "UNRECONCILED", "MATCHED"),
        ("evt_test_000002", "UNRECONCILED", "SOURCE_UNVERIFIED"),
    }
    assert scan(source).state == "published"  # nothing changes: no new history
    assert EventTransition.objects.filter(ledger="event_reconcile").count() == 2
    # The source shows event 2 now: SOURCE_UNVERIFIED -> MATCHED is declared.
    state.hold_events(item(1), item(2))
    scan(source)
    assert EventTransition.objects.filter(ledger="event_reconcile", next_state="MATCHED").count() == 2
    assert RECONCILE_TABLE.allows("SOURCE_UNVERIFIED", "MATCHED")
    assert not RECONCILE_TABLE.allows("MATCHED", "UNRECONCILED")
    assert isinstance(RECONCILE_TABLE, TransitionTable)


def test_an_undeclared_reconcile_status_move_is_refused_and_recorded(sandbox_source, deliver, monkeypatch):
    """Positive control for the table: with MATCHED -> SOURCE_UNVERIFIED undeclared, the move is
    refused, the event keeps its status and the refusal is in its history."""
    from conduit.statemachine import TransitionTable
    from ingress.models import EventTransition, InboundEvent
    from ingress.services import events as services

    deliver(body(item(1)))
    InboundEvent.objects.update(reconcile_status="MATCHED")
    narrowed = TransitionTable.declare("event_reconcile", [("UNRECONCILED", "MATCHED")])
    monkeypatch.setattr(services, "RECONCILE_TABLE", narrowed)
    moved = services.events_reconcile_mark(
        events=InboundEvent.objects.all(),
        to="SOURCE_UNVERIFIED",
        actor="tester",
        reason_code="test",
        at=timezone.now(),
    )
    assert moved == 0
    assert InboundEvent.objects.get().reconcile_status == "MATCHED"
    refusal = EventTransition.objects.get(ledger="event_reconcile")
    assert (refusal.prior_state, refusal.next_state, refusal.refused) == (
        "MATCHED",
        "SOURCE_UNVERIFIED",
        True,
    )


def test_a_receipt_under_a_key_never_planned_is_reported_and_the_scan_publishes(source_side, deliver, scan):
    """docs/concepts/reconciliation.md#repairs: "a receipt for an action in another state, or under a key Conduit never
    planned | none | UNEXPECTED_RECEIPT, UNKNOWN_RECEIPT". End to end: the provider shows a reply
    under a foreign key on a held event, and the scan still publishes its report."""
    state, source = source_side
    state.hold_events(item(1))
    assert deliver(body(item(1))).status_code == 200
    with state.lock:  # a reply the provider holds under a key Conduit never planned
        state.receipts["f" * 64] = "msg_test_foreign"
        state.targets.setdefault("msg_test_000001", []).append("f" * 64)
    outcome = scan(source)
    assert outcome.state == "published"
    (finding,) = Finding.objects.filter(report_id=outcome.report_id, kind="UNKNOWN_RECEIPT")
    assert (finding.reply_key, finding.action_id, finding.repair) == ("f" * 64, None, "none")
    assert ReconcileReport.objects.get(pk=outcome.report_id).summary["counts"]["unknown_receipts"] == 1
