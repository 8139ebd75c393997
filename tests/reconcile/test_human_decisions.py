"""Every path that decides a RETRY_CANDIDATE records it on its finding, with the reply move."""

from __future__ import annotations

import pytest

from reconcile import clock, services
from reconcile.models import Finding, ReconcileReport
from reconcile.selectors import report_decisions
from replies.models import ReplyAction
from tests.reconcile.test_reconcile_admin import candidate  # noqa: F401  (fixture)
from tests.replies.test_replies_admin import act, member

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "how, note, decision, state",
    [
        ("close", "", "CLOSED", "CLOSED_NO_REPLY"),
        ("confirm_sent", "rcpt_test_checked", "CONFIRMED_SENT", "SENT"),
        ("authorize_retry", "", "RETRY_AUTHORIZED", "APPROVED"),
    ],
)
def test_a_decision_in_the_unknown_send_queue_lands_on_the_finding(
    client,
    candidate,
    how,
    note,  # noqa: F811
    decision,
    state,
):
    """docs/concepts/reconciliation.md#decisions: "The reconciliation report records ... every human
    decision." Resolving the
    action in the unknown-send queue decides its open retry candidate, and the report shows it."""
    finding, action, _ = candidate
    client.force_login(member("operator_test", "operators"))
    act(client, "unknownsendqueue", how, [action], confirm="yes", note=note)
    action.refresh_from_db()
    assert action.delivery_state == state
    finding.refresh_from_db()
    assert (finding.decision, finding.decided_by) == (decision, "operator_test")
    assert finding.decided_at is not None and finding.decision_reason
    decisions = report_decisions(ReconcileReport.objects.get(pk=finding.report_id))
    assert [(d["decision"], d["decided_by"]) for d in decisions] == [(decision, "operator_test")]


def test_a_refused_queue_decision_leaves_the_finding_open(client, candidate):  # noqa: F811
    finding, action, _ = candidate
    ReplyAction.objects.filter(pk=action.pk).update(delivery_state="SENT")  # moved on meanwhile
    client.force_login(member("operator_test", "operators"))
    act(client, "unknownsendqueue", "close", [action], confirm="yes")
    finding.refresh_from_db()
    assert finding.decision == ""


def test_finding_decide_commits_the_reply_move_and_the_finding_together(candidate, monkeypatch):  # noqa: F811
    """One transaction: when recording the decision fails, the reply move is taken back too."""
    finding, action, _ = candidate

    def broken_clock():
        raise RuntimeError("planted failure while recording the decision")

    monkeypatch.setattr(clock, "now", broken_clock)
    with pytest.raises(RuntimeError):
        services.finding_decide(
            finding_id=finding.pk,
            decision="CLOSED",
            actor="operator_test",
            reason="customer already answered",
        )
    action.refresh_from_db()
    finding.refresh_from_db()
    assert action.delivery_state == "SEND_STATUS_UNKNOWN" and finding.decision == ""


def test_a_candidate_found_by_two_scans_is_one_decision(candidate, source_side, scan):  # noqa: F811
    """Found again while open, a candidate is counted in the second report, not recorded twice."""
    finding, action, _ = candidate
    _, source = source_side
    second = scan(source)
    assert not Finding.objects.filter(report_id=second.report_id, kind="RETRY_CANDIDATE").exists()
    assert ReconcileReport.objects.get(pk=second.report_id).summary["needs_a_person"]["RETRY_CANDIDATE"] == {
        "new": 0,
        "already_open": 1,
        "open": 1,
    }
    result = services.finding_decide(
        finding_id=finding.pk, decision="CLOSED", actor="operator_test", reason="customer already answered"
    )
    assert result.ok
    finding.refresh_from_db()
    assert (finding.decision, finding.decision_reason) == ("CLOSED", "customer already answered")
