"""References checked once per statement (conduit.references) hold what the foreign keys held.

Each reference replaced a foreign key on a table written a set at a time: a scan's
staged rows (run), a report's findings (report, action) and the event and action
histories (event, action). Each must refuse what the key refused, lock what it locked, keep its
target from being deleted, and fail when its triggers are taken away.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass
from typing import Callable

import pytest
from django.db import IntegrityError, connection, connections, transaction
from django.utils import timezone

from conduit.references import Reference
from ingress.models import EventTransition, InboundEvent
from ingress.services import source_register
from reconcile.models import Finding, ReconcileReport, ReconcileRun, StagedEvent, StagedReceipt
from reconcile.staging import STAGED_RECEIPT_COLUMNS, rows_copy
from replies.models import ReplyAction, ReplyTransition
from tests.conftest import account_campaign

# -- the references, each with a way to make its target and a row referring to it ----------------

_serial = itertools.count()  # distinct names and keys for every row a test makes


def _source():
    """A source of its own for each run (a source has one active scan at a time)."""
    n = next(_serial)
    source, _ = source_register(
        name=f"references_test_{n}",
        adapter="sandbox-social",
        account_ref=f"acct_test_refs_{n}",
        event_types=["comment.created"],
        purposes=["public_ack"],
        trigger_keywords=["CHECKLIST"],
        secret_env="CONDUIT_SOURCE_TEST_SECRET",
    )
    return source


def _run() -> int:
    """A bare run (no history, no scan state naming it): only the rows under test refer to it."""
    now = timezone.now()
    return ReconcileRun.objects.create(
        source=_source(), trigger="command", requested_by="tester", until=now, created_at=now
    ).pk


def _report() -> int:
    run = ReconcileRun.objects.get(pk=_run())
    return ReconcileReport.objects.create(
        run=run, source=run.source, created_at=timezone.now(), summary={}
    ).pk


def _event() -> InboundEvent:
    source, now, n = _source(), timezone.now(), next(_serial)
    return InboundEvent.objects.create(
        event_key=f"sandbox-social:acct_test_refs:comment.created:evt_test_ref_{n}",
        source=source,
        source_system="sandbox-social",
        source_account_ref="acct_test_refs",
        source_event_id=f"evt_test_ref_{n}",
        event_type="comment.created",
        conversation_ref="post_test_1",
        message_ref=f"msg_test_ref_{n}",
        sender_ref="person_test_1",
        occurred_at=now,
        occurred_at_original=now.isoformat(),
        payload_hash="0" * 64,
        contract_version="event-v1",
        canary=False,
        trigger_rule_version=1,
        trigger_match=True,
        event_state="RECORD_READY",
        reconcile_status="UNRECONCILED",
        first_received_at=now,
        last_received_at=now,
        seen_count=1,
        message_text="CHECKLIST",
    )


def _action() -> int:
    event = _event()
    return ReplyAction.objects.create(
        reply_key=f"{next(_serial):064x}",
        event_id=event.event_key,
        purpose="public_ack",
        campaign=account_campaign(event.source),
        campaign_version=1,
        approval_state="APPROVED",
        delivery_state="SENT",
        created_at=timezone.now(),
    ).pk


def _staged_event(run_id: int) -> None:
    StagedEvent.objects.create(
        run_id=run_id,
        event_key=f"sandbox-social:acct_test_refs:comment.created:evt_test_{next(_serial)}",
        payload_hash="0" * 64,
        source_event_id="evt_test_9",
        event_type="comment.created",
        conversation_ref="post_test_1",
        message_ref="msg_test_9",
        sender_ref="person_test_1",
        occurred_at=timezone.now(),
        occurred_at_original="2026-01-01T00:00:00Z",
        text="CHECKLIST",
    )


def _history(event_id: int) -> None:
    EventTransition.objects.create(
        event_id=event_id,
        ledger="event_reconcile",
        prior_state="UNRECONCILED",
        next_state="MATCHED",
        at=timezone.now(),
        actor="tester",
        reason_code="x",
    )


@dataclass(frozen=True)
class Case:
    reference: Reference
    target: Callable[[], int]  # makes a target row: its key
    refer: Callable[[int], None]  # writes a row referring to that key
    model: type  # the referring rows' model

    def __str__(self) -> str:
        return self.reference.name


CASES = [
    Case(
        Reference("reconcile_stagedevent", "run_id", "reconcile_reconcilerun"),
        _run,
        _staged_event,
        StagedEvent,
    ),
    Case(
        Reference("reconcile_stagedreceipt", "run_id", "reconcile_reconcilerun"),
        _run,
        lambda run_id: StagedReceipt.objects.create(
            run_id=run_id, reply_key=f"{next(_serial):064x}", provider_reply_id="m", event_key="k"
        ),
        StagedReceipt,
    ),
    Case(
        Reference("reconcile_finding", "report_id", "reconcile_reconcilereport"),
        _report,
        lambda report_id: Finding.objects.create(report_id=report_id, kind="MISSING_LOCAL"),
        Finding,
    ),
    Case(
        Reference("reconcile_finding", "action_id", "reply_actions"),
        _action,
        lambda action_id: Finding.objects.create(
            report_id=_report(), kind="RECEIPT_MISSING", action_id=action_id
        ),
        Finding,
    ),
    Case(
        Reference("inbound_event_transitions", "event_id", "inbound_events"),
        lambda: _event().pk,
        _history,
        EventTransition,
    ),
    Case(
        Reference("reply_action_transitions", "action_id", "reply_actions"),
        _action,
        lambda action_id: ReplyTransition.objects.create(
            action_id=action_id,
            ledger="reply",
            prior_state="SENDING",
            next_state="SENT",
            at=timezone.now(),
            actor="tester",
            reason_code="x",
        ),
        ReplyTransition,
    ),
]


def _missing(case: Case) -> int:
    key = case.target()  # one real row, so "missing" is past every key the test made
    return key + 1_000_000


def _drop_triggers(reference: Reference) -> None:
    with connection.cursor() as cursor:
        for sql in reference.postgres_drop_triggers():  # the functions stay
            cursor.execute(sql)


def _put_back(reference: Reference) -> None:
    with connection.cursor() as cursor:
        for sql in reference.postgres_triggers():
            cursor.execute(sql, None)


pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("case", CASES, ids=str)
def test_the_reference_is_held_by_its_triggers_and_no_key(case):
    r = case.reference
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_constraint c JOIN pg_attribute a ON a.attrelid = c.conrelid "
            "AND a.attnum = ANY(c.conkey) WHERE c.contype = 'f' AND c.conrelid = %s::regclass "
            "AND a.attname = %s",
            [r.table, r.column],
        )
        assert cursor.fetchone()[0] == 0
        cursor.execute(
            "SELECT tgname FROM pg_trigger WHERE NOT tgisinternal AND tgname LIKE %s", [r.name + "%"]
        )
        assert sorted(row[0] for row in cursor.fetchall()) == sorted(
            f"{r.name}_{suffix}" for suffix in ("insert", "update", "kept", "kept_truncate")
        )


@pytest.mark.parametrize("case", CASES, ids=str)
def test_a_row_referring_to_nothing_is_refused(case):
    missing = _missing(case)
    count = case.model.objects.count()
    with pytest.raises(IntegrityError, match="no such"), transaction.atomic():
        case.refer(missing)
    assert case.model.objects.count() == count


@pytest.mark.parametrize("case", CASES, ids=str)
def test_a_row_moved_to_refer_to_nothing_is_refused(case):
    key = case.target()
    case.refer(key)
    rows = case.model.objects.filter(**{case.reference.column: key})
    with pytest.raises(IntegrityError, match="no such"), transaction.atomic():
        rows.update(**{case.reference.column: key + 1_000_000})
    assert rows.count() == 1


@pytest.mark.parametrize("case", CASES, ids=str)
def test_a_referred_row_is_neither_deleted_nor_renumbered(case):
    r = case.reference
    key = case.target()
    case.refer(key)
    with connection.cursor() as cursor:
        for sql in (
            f"DELETE FROM {r.target} WHERE {r.target_column} = %s",
            f"UPDATE {r.target} SET {r.target_column} = {r.target_column} + 1000000 "
            f"WHERE {r.target_column} = %s",
        ):
            with pytest.raises(IntegrityError, match="still referred to"), transaction.atomic():
                cursor.execute(sql, [key])
        # Once nothing refers to it, it goes.
        case.model.objects.filter(**{r.column: key}).delete()
        cursor.execute(f"DELETE FROM {r.target} WHERE {r.target_column} = %s", [key])
        assert cursor.rowcount == 1


@pytest.mark.parametrize("case", CASES, ids=str)
def test_positive_control_without_the_triggers_nothing_is_refused(case):
    """Take the reference's triggers away (rolled back with the test's transaction): the row
    referring to nothing is written and the target goes from under its rows, so each test
    above would fail."""
    r = case.reference
    _drop_triggers(r)
    case.refer(_missing(case))
    key = case.target()
    case.refer(key)
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {r.target} WHERE {r.target_column} = %s", [key])
        assert cursor.rowcount == 1


def test_a_copied_page_referring_to_no_run_is_refused_whole():
    """The COPY a scan stages a page by: one row of a missing run refuses the statement."""
    run = _run()
    rows = [(run, f"{n:064x}", f"msg_test_{n}", f"key_{n}") for n in range(3)] + [
        (run + 1_000_000, "f" * 64, "msg_test_x", "key_x")
    ]
    with pytest.raises(IntegrityError, match="no such"), transaction.atomic():
        rows_copy(StagedReceipt, STAGED_RECEIPT_COLUMNS, rows)
    assert not StagedReceipt.objects.exists()
    rows_copy(StagedReceipt, STAGED_RECEIPT_COLUMNS, rows[:3])
    assert StagedReceipt.objects.filter(run_id=run).count() == 3


def test_django_deletes_still_cascade_and_set_null():
    """on_delete runs before the delete, as it did with the keys: a run goes with its staged
    rows; an action's findings lose their action."""
    run = _run()
    _staged_event(run)
    ReconcileRun.objects.get(pk=run).delete()
    assert not StagedEvent.objects.exists()
    action = _action()
    Finding.objects.create(report_id=_report(), kind="RECEIPT_MISSING", action_id=action)
    ReplyAction.objects.get(pk=action).delete()
    assert Finding.objects.get().action_id is None


# -- with another transaction at the same time: the check locks the target as a key's check would --


def _background(work: Callable[[], None], outcome: dict) -> threading.Thread:
    def run():
        try:
            work()
            outcome["result"] = "done"
        except IntegrityError as exc:
            outcome["result"] = f"refused: {exc}"
        finally:
            connections["default"].close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _still_waiting(thread: threading.Thread, seconds: float = 0.5) -> bool:
    time.sleep(seconds)
    return thread.is_alive()


def _delete_run(run: int) -> None:
    with connections["default"].cursor() as cursor:
        cursor.execute("DELETE FROM reconcile_reconcilerun WHERE id = %s", [run])


STAGED_RUN = CASES[0].reference


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("triggers", ["kept", "dropped"])
def test_a_run_deleted_while_its_page_is_staged_waits_then_is_refused(triggers):
    """A page stages rows for a run (uncommitted) while another connection deletes the run:
    the delete waits for the page's commit, then is refused; no staged row is left without
    its run. The control drops the triggers: nothing waits and the rows are orphaned."""
    run = _run()
    if triggers == "dropped":
        _drop_triggers(STAGED_RUN)
    outcome: dict = {}
    try:
        with transaction.atomic():
            _staged_event(run)
            thread = _background(lambda: _delete_run(run), outcome)
            waited = _still_waiting(thread)
        thread.join(10)
        orphaned = (
            StagedEvent.objects.filter(run_id=run).exists()
            and not ReconcileRun.objects.filter(pk=run).exists()
        )
        if triggers == "kept":
            assert waited and "still referred to" in outcome["result"] and not orphaned
        else:
            assert not waited and outcome["result"] == "done" and orphaned
    finally:
        if triggers == "dropped":  # committed: put them back as the migration wrote them
            StagedEvent.objects.all().delete()
            _put_back(STAGED_RUN)


@pytest.mark.django_db(transaction=True)
def test_a_page_staged_while_its_run_is_deleted_waits_then_is_refused():
    """The other order: the run's delete is uncommitted when the page names the run. The check
    waits on the run's row; once the delete commits, the page is refused."""
    run = _run()
    deleted, release = threading.Event(), threading.Event()

    def delete():
        with transaction.atomic():
            _delete_run(run)
            deleted.set()
            release.wait(10)

    deleter = _background(delete, {})
    assert deleted.wait(10)
    outcome: dict = {}
    stager = _background(lambda: _staged_event(run), outcome)
    assert _still_waiting(stager)  # on the run's row, which the uncommitted delete holds
    release.set()
    deleter.join(10)
    stager.join(10)
    assert outcome["result"].startswith("refused") and "no such" in outcome["result"]
    assert not StagedEvent.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_run_this_transaction_updated_is_not_locked_again_and_still_kept():
    """The check locks no row version its own transaction wrote (the scan updates its run in the
    page's transaction): a concurrent delete already waits for that transaction, and once it
    commits the delete is refused. The test above (a run written earlier) is the control: there
    the lock is what makes the delete wait."""
    run = _run()
    outcome: dict = {}
    with transaction.atomic():
        ReconcileRun.objects.filter(pk=run).update(pages=1)
        _staged_event(run)
        thread = _background(lambda: _delete_run(run), outcome)
        waited = _still_waiting(thread)
    thread.join(10)
    assert waited and "still referred to" in outcome["result"]
    assert ReconcileRun.objects.filter(pk=run).exists() and StagedEvent.objects.filter(run_id=run).exists()
