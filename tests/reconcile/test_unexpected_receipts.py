"""Closing an unknown send looks the receipt up first, and a receipt for a
reply Conduit closed or never planned is surfaced in doctor, the report, the reconcile command
and an admin queue."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.utils.html import escape

from reconcile import services
from reconcile.models import Finding, ReconcileReport
from replies import services as reply_services
from replies.models import DeliveryState, ReplyAction
from replies.services import resolution
from tests.reconcile.conftest import approved_and_sent, held_and_delivered
from tests.replies.test_replies_admin import act, member

pytestmark = pytest.mark.django_db


def run(*args) -> tuple[int, str]:
    out = io.StringIO()
    try:
        call_command(*args, stdout=out, stderr=io.StringIO())
    except SystemExit as exit_:
        return exit_.code, out.getvalue()
    return 0, out.getvalue()


@pytest.fixture
def applied_unknown(source_side, deliver):
    """An unknown send the provider applied: the connection dropped after it accepted the reply."""
    state, source = source_side
    action = held_and_delivered(state, deliver)
    assert approved_and_sent(state, action, "drop_after_accept") == "SEND_STATUS_UNKNOWN"
    assert state.applied == {action.reply_key: 1}
    return action, state, source


def test_close_in_the_unknown_send_queue_is_refused_when_the_provider_has_the_reply(client, applied_unknown):
    """docs/concepts/ledgers.md#recovery: "Receipt lookup ... Reconcile first." Closing a reply the provider applied would
    bury it: the lookup runs first, finds the receipt, and the close is refused with where to go."""
    action, state, _ = applied_unknown
    client.force_login(member("operator_test", "operators"))
    page = act(client, "unknownsendqueue", "close", [action], confirm="yes").content.decode()
    assert "not closed: the provider holds this reply" in page and state.receipts[action.reply_key] in page
    assert "Look up the receipt, then authorize a retry" in page
    action.refresh_from_db()
    assert action.delivery_state == "SEND_STATUS_UNKNOWN"


def test_closing_a_retry_candidate_is_refused_when_the_provider_has_the_reply(applied_unknown, scan):
    action, state, source = applied_unknown
    with state.lock:  # the page hides it, the lookup still finds it: the candidate path is exercised
        targets = dict(state.targets)
        state.targets.clear()
    scan(source)
    with state.lock:
        state.targets.update(targets)
    finding = Finding.objects.get(kind="RETRY_CANDIDATE")
    result = services.finding_decide(
        finding_id=finding.pk, decision="CLOSED", actor="operator_test", reason="customer already answered"
    )
    assert not result.ok and "the provider holds this reply" in result.message
    action.refresh_from_db()
    finding.refresh_from_db()
    assert action.delivery_state == "SEND_STATUS_UNKNOWN" and finding.decision == ""


def test_a_close_the_lookup_cannot_answer_is_refused(applied_unknown, wire):
    """The provider does not answer (the route now points at a closed port): closing would be blind."""
    from conduit.providers.sandbox.transport import _discovered

    action, _, _ = applied_unknown
    wire(None)
    _discovered.cache_clear()
    result = reply_services.reply_close(action_id=action.pk, actor="operator_test")
    assert not result.ok and result.message.startswith("not closed:")
    action.refresh_from_db()
    assert action.delivery_state == "SEND_STATUS_UNKNOWN"


def test_control_without_the_lookup_the_close_buries_the_reply(client, applied_unknown, monkeypatch):
    """Positive control: with the lookup taken away the close goes through (the defect)."""
    action, _, _ = applied_unknown
    monkeypatch.setattr(
        resolution,
        "_receipt_lookup",
        lambda action: reply_services.Lookup(refusal="no lookup", can_look_up=False),
    )
    client.force_login(member("operator_test", "operators"))
    act(client, "unknownsendqueue", "close", [action], confirm="yes")
    action.refresh_from_db()
    assert action.delivery_state == "CLOSED_NO_REPLY"


@pytest.fixture
def buried(applied_unknown, scan):
    """The defect's state: a reply the provider applied, closed in Conduit, then reconciled."""
    action, state, source = applied_unknown
    ReplyAction.objects.filter(pk=action.pk).update(delivery_state="CLOSED_NO_REPLY")
    outcome = scan(source)
    return action, state, source, ReconcileReport.objects.get(pk=outcome.report_id)


def test_doctor_counts_an_unexpected_receipt_and_exits_1(buried):
    action, _, _, _ = buried
    code, out = run("doctor")
    assert code == 1
    assert "unexpected receipts 1" in out and "1 unexpected receipt(s)" in out
    code, out = run("doctor", "--json")
    row = json.loads(out)[0]
    assert code == 1 and row["unexpected_receipts"] == 1
    assert any("unexpected receipt" in reason for reason in row["needs_a_person"])


def test_the_report_summary_names_the_unexpected_receipt(buried, admin_client):
    _, _, _, report = buried
    assert report.summary["counts"]["unexpected_receipts"] == 1
    assert report.summary["needs_a_person"]["UNEXPECTED_RECEIPT"] == {"new": 1, "already_open": 0, "open": 1}
    document = json.loads(
        b"".join(admin_client.get(f"/admin/reconcile/reconcilereport/{report.pk}/export/").streaming_content)
    )
    assert document["needs_a_person"]["UNEXPECTED_RECEIPT"]["open"] == 1


def test_the_reconcile_command_says_an_unexpected_receipt_waits(buried):
    code, out = run("reconcile", "sandbox")
    assert code == 0  # the scan completed; doctor is what exits 1 for a person
    assert (
        "needs a person: 1 unexpected receipt(s): the provider shows a reply for an action Conduit "
        "closed or has not sent (0 new in this report, 1 found again): "
        "/admin/reconcile/finding/?queue=unexpected_receipts"
    ) in out


def test_the_admin_queue_lists_it_and_an_acknowledgement_closes_it(buried, client, scan):
    action, _, source, _ = buried
    client.force_login(member("operator_test", "operators"))
    queue = client.get("/admin/reconcile/finding/?queue=unexpected_receipts")
    assert queue.status_code == 200
    page = queue.content.decode()
    assert action.reply_key[:12] in page and escape(DeliveryState.CLOSED_NO_REPLY.label) in page
    finding = Finding.objects.get(kind="UNEXPECTED_RECEIPT")
    client.post(
        "/admin/reconcile/finding/",
        {
            "action": "acknowledge",
            "_selected_action": [finding.pk],
            "confirm": "yes",
            "note": "the customer got it; fine",
        },
    )
    finding.refresh_from_db()
    assert (finding.decision, finding.decided_by) == ("CLOSED", "operator_test")
    assert (
        action.reply_key[:12]
        not in client.get("/admin/reconcile/finding/?queue=unexpected_receipts").content.decode()
    )
    # The event's other reply still waits for review (that needs a person); decide it so
    # doctor's exit speaks of the receipt alone.
    ReplyAction.objects.filter(delivery_state="REVIEW_PENDING").update(delivery_state="CLOSED_NO_REPLY")
    assert run("doctor")[0] == 0
    scan(source)  # the same receipt, the action in the same state: acknowledged, not raised again
    assert Finding.objects.filter(kind="UNEXPECTED_RECEIPT").count() == 1
    assert run("doctor")[0] == 0


def test_a_receipt_under_a_key_never_planned_is_counted_too(source_side, deliver, scan):
    state, source = source_side
    held_and_delivered(state, deliver)
    state.apply("f" * 64, None, "msg_test_000001")  # a reply Conduit never planned
    scan(source)
    assert Finding.objects.filter(kind="UNKNOWN_RECEIPT").count() == 1
    code, out = run("doctor")
    assert code == 1 and "unexpected receipts 1" in out
    scan(source)
    assert Finding.objects.filter(kind="UNKNOWN_RECEIPT").count() == 1  # one open row per reply and kind
