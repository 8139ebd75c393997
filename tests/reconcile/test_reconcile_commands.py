"""`manage.py reconcile` and `manage.py doctor`: output, errors and exit codes."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from reconcile.models import ReconcileReport
from replies.models import ReplyAction
from tests.conftest import fail_next
from tests.reconcile.conftest import body, item

pytestmark = pytest.mark.django_db


def run(*args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(*args, stdout=out, stderr=err)
        code = 0
    except SystemExit as exit_:
        code = exit_.code
    return code, out.getvalue(), err.getvalue()


def test_reconcile_shows_progress_and_where_the_report_is(source_side, settings):
    settings.CONDUIT_RECONCILE_PAGE_SIZE = 2
    state, source = source_side
    state.hold_events(*[item(n) for n in range(1, 6)])
    code, out, _ = run("reconcile", "sandbox", "--actor", "operator_test")
    report = ReconcileReport.objects.get()
    assert code == 0
    assert "page 1: 2 events staged" in out and "page 2: 4 events staged" in out
    assert (
        f"report {report.pk}: /admin/reconcile/reconcilereport/{report.pk}/change/ "
        f"(JSON: /admin/reconcile/reconcilereport/{report.pk}/export/)"
    ) in out
    assert report.summary["requested_by"] == "operator_test" and report.summary["trigger"] == "command"


def test_reconcile_window(source_side):
    state, source = source_side
    state.hold_events(*[item(n) for n in range(1, 6)])  # minutes 1..5 after 14:00
    code, _, _ = run(
        "reconcile", "sandbox", "--since", "2026-01-15T14:02:00Z", "--until", "2026-01-15T14:04:00Z"
    )
    assert code == 0
    summary = ReconcileReport.objects.get().summary
    assert summary["counts"]["events_compared"] == 2
    assert summary["window"] == {"since": "2026-01-15T14:02:00Z", "until": "2026-01-15T14:04:00Z"}


def test_reconcile_refuses_bad_input(source_side):
    with pytest.raises(CommandError, match="no source named"):
        call_command("reconcile", "nope")
    with pytest.raises(CommandError, match="with an offset"):
        call_command("reconcile", "sandbox", "--since", "2026-01-15")
    with pytest.raises(CommandError, match="before --until"):
        call_command(
            "reconcile", "sandbox", "--since", "2026-01-16T00:00:00Z", "--until", "2026-01-15T00:00:00Z"
        )


def test_reconcile_failure_exits_non_zero_with_the_safe_code(source_side):
    state, _ = source_side
    fail_next(state, "page_error")
    code, _, err = run("reconcile", "sandbox")
    assert code == 1
    assert "provider/provider_overloaded" in err and "raw-provider-detail" not in err
    assert "run the command again to resume" in err


def _reviewed() -> None:
    """The delivered event's replies decided (closed), so the review queue needs no one (a reply
    waiting for review needs a person, tests/reconcile/test_inspection.py)."""
    ReplyAction.objects.filter(delivery_state="REVIEW_PENDING").update(delivery_state="CLOSED_NO_REPLY")


def test_doctor_is_quiet_when_healthy_and_exits_1_when_a_person_is_needed(source_side, deliver):
    state, source = source_side
    state.hold_events(item(1))
    deliver(body(item(1)))
    run("reconcile", "sandbox")
    _reviewed()
    code, out, _ = run("doctor")
    assert code == 0, out
    assert "sandbox (sandbox-social acct_test_01)" in out and "needs a person    no" in out
    ReplyAction.objects.filter(purpose="public_ack").update(delivery_state="SEND_STATUS_UNKNOWN")
    fail_next(state, "page_error")
    from reconcile import clock
    from reconcile.models import ScanState

    ScanState.objects.update(next_due_at=clock.now())
    run("reconcile", "sandbox")
    code, out, _ = run("doctor")
    assert code == 1
    assert "1 unknown send(s) waiting" in out and "last page failed (provider/provider_overloaded)" in out
    code, out, _ = run("doctor", "--json")
    assert code == 1 and '"unknown_sends": 1' in out


def test_doctor_counts_stranded_sends_and_prints_the_checkpoint(source_side, deliver):
    """docs/replies.md#stranded: doctor exits 1 when something needs a person, stranded sends included."""
    from replies.contract import MAX_AUTOMATIC_ATTEMPTS

    state, source = source_side
    state.hold_events(item(1))
    deliver(body(item(1)))
    run("reconcile", "sandbox")
    _reviewed()
    code, out, _ = run("doctor")
    assert code == 0, out
    from reconcile.models import ScanState

    checkpoint = ScanState.objects.get().checkpoint_until.isoformat()
    assert f"checkpoint        {checkpoint} (last complete scan " in out
    assert "stranded sends    0" in out
    ReplyAction.objects.filter(purpose="public_ack").update(
        delivery_state="FAILED_BEFORE_SEND", attempt_count=MAX_AUTOMATIC_ATTEMPTS
    )
    code, out, _ = run("doctor")
    assert code == 1
    assert "stranded sends    1" in out and "1 stranded send(s)" in out
    code, out, _ = run("doctor", "--json")
    assert code == 1 and '"stranded_sends": 1' in out


def test_every_kind_waiting_for_a_person_has_its_line_in_the_command_s_output():
    """A scan that leaves findings for a person says so (`needs a person: ...`), whatever their kind:
    a kind missing from the command's words would be counted in the report and never printed."""
    from reconcile.management.commands.reconcile import ATTENTION_WORDS, attention_lines
    from reconcile.selectors import PERSON_KINDS

    assert set(ATTENTION_WORDS) == set(PERSON_KINDS)
    summary = {"needs_a_person": {k: {"open": 2, "new": 1, "already_open": 1} for k in PERSON_KINDS}}
    lines = attention_lines(summary)
    assert len(lines) == len(PERSON_KINDS)
    assert any("never reported a status" in line for line in lines)  # NO_STATUS, WhatsApp's silent sends
