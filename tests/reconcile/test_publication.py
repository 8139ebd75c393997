"""Publication: run states through the declared table, a crash between report and repairs,
complete-scan checkpoints kept apart from windows, and "Reconcile now" timing."""

from __future__ import annotations

import pytest

from conduit.providers.sandbox.webhook import SandboxSocialAdapter
from ingress.models import InboundEvent
from reconcile import clock, repairs
from reconcile.models import (
    RUN_TABLE,
    Finding,
    ReconcileReport,
    ReconcileRun,
    ReconcileRunTransition,
    ScanState,
)
from reconcile.scan import reconcile_page
from reconcile.services import reconcile_request
from replies.models import ReplyAction
from tests.reconcile.conftest import BASE_TIME, body, item

pytestmark = pytest.mark.django_db


def moves(run) -> list[tuple]:
    return list(
        ReconcileRunTransition.objects.filter(run=run).values_list("prior_state", "next_state", "refused")
    )


def test_a_published_run_went_through_the_declared_table(source_side, scan):
    """docs/concepts/ledgers.md#transitions: every state change goes through the one transition
    function, with history."""
    state, source = source_side
    state.hold_events(item(1))
    outcome = scan(source)
    run = ReconcileRun.objects.get(pk=outcome.run_id)
    assert run.state == "PUBLISHED"
    assert moves(run) == [
        (None, "SCANNING", False),
        ("SCANNING", "REPAIRING", False),
        ("REPAIRING", "PUBLISHED", False),
    ]
    for prior, nxt, _ in moves(run):
        assert RUN_TABLE.allows(prior, nxt)
    assert not RUN_TABLE.allows("PUBLISHED", "SCANNING") and not RUN_TABLE.allows("REPAIRING", "DISCARDED")


def test_a_crash_after_the_report_is_finished_by_the_next_page_call(source_side, deliver, scan, monkeypatch):
    """docs/concepts/reconciliation.md#generations: "completion cannot publish half a diff". The report and findings committed,
    the process died before its repairs: the run stays REPAIRING with its staging and the old
    checkpoint; the next page call makes no source call, applies each planned repair once,
    then publishes."""
    state, source = source_side
    state.hold_events(item(1), item(2))
    deliver(body(item(1)))
    real = repairs.missing_replay

    def crash(*args, **kwargs):
        raise KeyboardInterrupt  # not an Exception: nothing records it, as with SIGKILL

    monkeypatch.setattr(repairs, "missing_replay", crash)
    with pytest.raises(KeyboardInterrupt):
        scan(source)
    run = ReconcileRun.objects.get()
    report = ReconcileReport.objects.get(run=run)
    assert run.state == "REPAIRING"
    assert report.findings.get(kind="MISSING_LOCAL").repair_outcome == "planned"
    scan_state = ScanState.objects.get()
    assert scan_state.checkpoint_until is None and scan_state.active_run_id == run.pk
    assert InboundEvent.objects.count() == 1
    calls_before = state.page_calls
    monkeypatch.setattr(repairs, "missing_replay", real)
    outcome = reconcile_page(source=source)
    assert (outcome.state, outcome.report_id, outcome.called) == ("published", report.pk, False)
    assert state.page_calls == calls_before  # no second read of the source
    assert InboundEvent.objects.count() == 2 and ReconcileReport.objects.count() == 1
    assert report.findings.get(kind="MISSING_LOCAL").repair_outcome == "applied"
    assert ScanState.objects.get().checkpoint_until == run.until
    # Re-applying is idempotent: the replayed batch is the same delivery.
    repairs.missing_replay(source, "", run, report)  # nothing planned is left: no lease needed
    assert InboundEvent.objects.count() == 2


def test_a_failed_action_repair_is_recorded_and_the_others_apply(source_side, deliver, scan, monkeypatch):
    """Each repair records `applied`, `refused` or `failed` with a code on its finding."""
    from replies import services as reply_services
    from tests.reconcile.conftest import approved_and_sent

    state, source = source_side
    state.hold_events(item(1))
    deliver(body(item(1)))
    action = ReplyAction.objects.get(purpose="public_ack")
    approved_and_sent(state, action)
    ReplyAction.objects.filter(pk=action.pk).update(delivery_state="SEND_STATUS_UNKNOWN")
    real = reply_services.reply_action_transition

    def failing(**kwargs):
        if kwargs["reason_code"] == "receipt_found_at_reconcile":
            from django.db import DatabaseError

            raise DatabaseError("planted")
        return real(**kwargs)

    monkeypatch.setattr(repairs, "reply_action_transition", failing)
    outcome = scan(source)
    finding = Finding.objects.get(report_id=outcome.report_id, kind="RECEIPT_ATTACHED")
    assert (finding.repair_outcome, finding.repair_code) == ("failed", "database_error")
    assert finding.action_state == "SEND_STATUS_UNKNOWN"
    assert ReplyAction.objects.get(pk=action.pk).delivery_state == "SEND_STATUS_UNKNOWN"
    assert InboundEvent.objects.get().reconcile_status == "MATCHED"
    from reconcile.selectors import needs_a_person, source_health

    row = source_health()[0]
    assert row["repairs_failed"] == 1
    assert "1 repair(s) failed in the last report" in needs_a_person(row)


def test_a_window_never_moves_the_complete_checkpoint(source_side, scan):
    """docs/concepts/reconciliation.md#generations: "Each source stores complete progress separately from active generation
    progress." A --since/--until window, even one ending earlier, leaves the checkpoint alone."""
    state, source = source_side
    state.hold_events(item(1), item(30))
    scan(source)
    complete = ScanState.objects.get()
    checkpoint, last_run = complete.checkpoint_until, complete.last_run_id
    outcome = scan(source, since=BASE_TIME, until=BASE_TIME.replace(hour=14, minute=10))
    assert outcome.state == "published"
    windowed = ReconcileRun.objects.get(pk=outcome.run_id)
    assert windowed.complete_scan is False
    after = ScanState.objects.get()
    assert (after.checkpoint_until, after.last_run_id) == (checkpoint, last_run)
    assert ReconcileReport.objects.get(run=windowed).summary["source_cursor"]["checkpoint_until"] is None
    # and --until alone is a window too: it could end before the checkpoint
    outcome = scan(source, until=BASE_TIME)
    assert ScanState.objects.get().checkpoint_until == checkpoint


def test_a_new_generation_receives_the_last_complete_checkpoint(source_side, scan, settings, monkeypatch):
    """docs/concepts/reconciliation.md#generations: "A request for a new generation receives the last complete checkpoint. A resumed
    generation receives its durably staged page checkpoint" (its cursor)."""
    settings.CONDUIT_RECONCILE_PAGE_SIZE = 2
    state, source = source_side
    state.hold_events(*[item(n) for n in range(1, 4)])
    real = SandboxSocialAdapter.read_page
    calls = []

    def spy(self, **kw):
        calls.append(kw)
        return real(self, **kw)

    monkeypatch.setattr(SandboxSocialAdapter, "read_page", spy)
    scan(source)
    assert [c.get("checkpoint") for c in calls] == [None, None]
    checkpoint = ScanState.objects.get().checkpoint_until
    calls.clear()
    scan(source)
    assert calls[0]["checkpoint"] == checkpoint and calls[0]["cursor"] is None
    assert "checkpoint" not in calls[1] and calls[1]["cursor"]


def test_reconcile_now_during_the_first_page_call_keeps_the_source_due(source_side, monkeypatch):
    """docs/concepts/reconciliation.md#scheduling: a request "committed after the generation's first
    page was claimed" keeps the
    source due. A request that arrives while the first page is being read is not answered by
    that page's data, though the page commits after it."""
    state, source = source_side
    state.hold_events(item(1))
    real = SandboxSocialAdapter.read_page

    def read_while_asked(self, **kw):
        page = real(self, **kw)
        reconcile_request(source=source, actor="operator_test")  # asked while the page is in flight
        return page

    monkeypatch.setattr(SandboxSocialAdapter, "read_page", read_while_asked)
    assert reconcile_page(source=source).state == "published"
    scan_state = ScanState.objects.get()
    run = ReconcileRun.objects.get()
    assert run.first_page_at < scan_state.requested_at
    assert scan_state.next_due_at <= clock.now()  # still due: a later scan must answer
