"""A restarted sandbox provider keeps its receipts, and a reconcile that finds
the same problem again adds no second open finding for the reply (the database refuses one)."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction

from conduit.providers.sandbox.transport import _discovered
from reconcile.models import Finding, ReconcileReport
from reconcile.publication import findings as publication
from replies.models import ReplyAction
from simulators.sandbox import serve
from tests.reconcile.conftest import approved_and_sent, held_and_delivered, item

pytestmark = pytest.mark.django_db

INDEX = "finding_one_open_per_reply_kind"


@pytest.fixture
def restartable(wire, tmp_path):
    """start(state_path): a sandbox provider on a free port, wired as the source's transport and read
    side; each call stops the previous one first (a restart), so only one runs at a time."""
    running = []

    def start(state_path=None):
        for server, state in running:
            server.shutdown()
            server.server_close()
            if state.store is not None:
                state.store.close()
        running.clear()
        _discovered.cache_clear()
        server, state = serve(port=0, state_path=str(state_path) if state_path else None, hang_seconds=1.0)
        running.append((server, state))
        state.url = f"http://127.0.0.1:{server.server_address[1]}"
        source = wire(state)
        state.hold_events = lambda *events: state.hold(source.account_ref, list(events))
        return state, source

    yield start
    for server, state in running:
        server.shutdown()
        server.server_close()


def doctor() -> tuple[int, str]:
    out = io.StringIO()
    try:
        call_command("doctor", stdout=out)
    except SystemExit as exit_:
        return exit_.code, out.getvalue()
    return 0, out.getvalue()


def test_a_provider_restarted_from_its_state_file_keeps_its_receipts(restartable, deliver, scan, tmp_path):
    """docs/concepts/reconciliation.md#repairs: "Local action says SENT and provider receipt is missing:
    Mark SEND_STATUS_UNKNOWN."
    A provider restarted from its state file still shows the reply it applied, so three reconciles
    after the restart find nothing new and the reply stays SENT."""
    path = tmp_path / "provider.sqlite3"
    state, source = restartable(path)
    action = held_and_delivered(state, deliver)
    assert approved_and_sent(state, action) == "SENT"
    scan(source)
    before = Finding.objects.count()
    for _ in range(3):
        state, source = restartable(path)
        assert state.applied == {action.reply_key: 1}  # what it applied, read back from the file
        scan(source)
    action.refresh_from_db()
    assert action.delivery_state == "SENT"
    assert Finding.objects.count() == before == 0
    # The event's other reply still waits for review, which needs a person; decided here
    # so doctor's exit speaks of reconciliation alone.
    ReplyAction.objects.filter(delivery_state="REVIEW_PENDING").update(delivery_state="CLOSED_NO_REPLY")
    assert doctor()[0] == 0


def test_control_an_in_memory_provider_forgets_and_the_reply_is_moved(restartable, deliver, scan):
    """Positive control for the test above: restarted without a state file (the old behaviour),
    the provider shows no receipt and the reconcile moves the SENT reply to SEND_STATUS_UNKNOWN."""
    state, source = restartable()
    action = held_and_delivered(state, deliver)
    assert approved_and_sent(state, action) == "SENT"
    state, source = restartable()
    state.hold_events(item(1))
    scan(source)
    action.refresh_from_db()
    assert action.delivery_state == "SEND_STATUS_UNKNOWN"
    assert Finding.objects.filter(kind="RECEIPT_MISSING").count() == 1


def _lost_receipt_then_three_scans(restartable, deliver, scan) -> ReplyAction:
    state, source = restartable()
    action = held_and_delivered(state, deliver)
    assert approved_and_sent(state, action) == "SENT"
    for _ in range(4):  # the first scan finds the receipt missing, the next three a retry candidate
        state, source = restartable()  # in memory: the receipt is lost on every restart
        state.hold_events(item(1))
        scan(source)
    return action


def test_three_reconciles_keep_one_open_retry_candidate_and_doctor_agrees(
    restartable, deliver, scan, admin_client
):
    """Not "9 rows for 3 replies after 3 restarts, while doctor said 3". A candidate found
    again while open is counted in each report but recorded once: the queue shows one row,
    doctor counts one, and each later report says it found it again."""
    action = _lost_receipt_then_three_scans(restartable, deliver, scan)
    candidates = Finding.objects.filter(kind="RETRY_CANDIDATE", action=action)
    assert candidates.count() == 1
    reports = list(ReconcileReport.objects.order_by("id"))
    assert [r.summary["counts"]["retry_candidates"] for r in reports] == [0, 1, 1, 1]
    assert [r.summary["needs_a_person"]["RETRY_CANDIDATE"] for r in reports[1:]] == [
        {"new": 1, "already_open": 0, "open": 1},
        {"new": 0, "already_open": 1, "open": 1},
        {"new": 0, "already_open": 1, "open": 1},
    ]
    queue = admin_client.get("/admin/reconcile/retrycandidatequeue/").content.decode()
    assert queue.count('name="_selected_action"') == 1 and action.reply_key[:12] in queue
    code, out = doctor()
    assert code == 1 and "retry candidates  1" in out


def test_control_without_the_guard_each_reconcile_adds_a_candidate(restartable, deliver, scan, monkeypatch):
    """Positive control: with publication's check and the database's index both taken away, the
    defect comes back (one new open candidate per reconcile)."""
    # Nothing counts as already recorded: Q(pk__in=[]) matches no row.
    monkeypatch.setattr(publication, "already_recorded", lambda kind, *, actions: publication.Q(pk__in=[]))
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX {INDEX}")  # rolled back with the test's transaction
    action = _lost_receipt_then_three_scans(restartable, deliver, scan)
    assert Finding.objects.filter(kind="RETRY_CANDIDATE", action=action, decision="").count() == 3


def _open_candidate(restartable, deliver, scan) -> Finding:
    state, source = restartable()
    action = held_and_delivered(state, deliver)
    approved_and_sent(state, action, "refuse")  # nothing applied...
    ReplyAction.objects.filter(pk=action.pk).update(delivery_state="SEND_STATUS_UNKNOWN")  # ...yet parked
    scan(source)
    return Finding.objects.get(kind="RETRY_CANDIDATE")


def _second_row(finding: Finding) -> None:
    Finding.objects.create(
        report=finding.report,
        kind=finding.kind,
        event_key=finding.event_key,
        reply_key=finding.reply_key,
        action=finding.action,
        detail="a second open row",
    )


def test_the_database_refuses_a_second_open_finding_for_a_reply_and_kind(restartable, deliver, scan):
    finding = _open_candidate(restartable, deliver, scan)
    with pytest.raises(IntegrityError), transaction.atomic():
        _second_row(finding)
    # A decided finding is not open: a new open one may follow it.
    Finding.objects.filter(pk=finding.pk).update(
        decision="CLOSED",
        decided_by="operator_test",
        decided_at=finding.report.created_at,
        decision_reason="checked",
    )
    _second_row(finding)
    assert Finding.objects.filter(kind="RETRY_CANDIDATE", decision="").count() == 1


def test_control_without_the_index_a_second_open_finding_goes_through(restartable, deliver, scan):
    finding = _open_candidate(restartable, deliver, scan)
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX {INDEX}")  # rolled back with the test's transaction
    _second_row(finding)
    assert Finding.objects.filter(kind="RETRY_CANDIDATE", decision="").count() == 2
