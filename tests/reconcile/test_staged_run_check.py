"""A staged row's run is held by triggers checked once per statement (reconcile migration 0010).

The foreign key it replaces checked and locked the run once per staged row; a page's
COPY of a thousand rows paid a thousand checks at commit. The triggers must refuse
what the foreign key refused, lock what it locked, and fail when taken away.
"""

from __future__ import annotations

import importlib
import threading
import time

import pytest
from django.db import IntegrityError, connection, connections, transaction
from django.utils import timezone

from ingress.services import source_register
from reconcile.models import ReconcileRun, StagedEvent, StagedReceipt
from reconcile.staging import STAGED_RECEIPT_COLUMNS, rows_copy

MIGRATION = importlib.import_module("reconcile.migrations.0010_staged_run_checked_per_statement")

TRIGGERS = [(table, f"{table}_{op}_runs_exist") for table in ("reconcile_stagedevent", "reconcile_stagedreceipt")
            for op in ("insert", "update")] + [("reconcile_reconcilerun", "reconcile_reconcilerun_keeps_staging")]


def _run() -> ReconcileRun:
    """A bare run (no history rows, no scan state naming it): only the staged rows refer to it."""
    source, _ = source_register(
        name=f"staged_check_{ReconcileRun.objects.count()}", adapter="sandbox-social",
        account_ref="acct_test_staged", event_types=["comment.created"], purposes=["public_ack"],
        trigger_keywords=["CHECKLIST"], secret_env="CONDUIT_TEST_SECRET")
    now = timezone.now()
    return ReconcileRun.objects.create(source=source, trigger="command", requested_by="tester", until=now,
                                       created_at=now)


def _event(run_id: int, n: int = 0) -> StagedEvent:
    return StagedEvent(run_id=run_id, event_key=f"sandbox-social:acct_test_staged:comment.created:evt_test_{n}",
                       payload_hash="0" * 64, source_event_id=f"evt_test_{n}", event_type="comment.created",
                       conversation_ref="post_test_1", message_ref=f"msg_test_{n}", sender_ref="person_test_1",
                       occurred_at=timezone.now(), occurred_at_original="2026-01-01T00:00:00Z", text="CHECKLIST")


def _missing_run_id() -> int:
    return (ReconcileRun.objects.order_by("-id").values_list("id", flat=True).first() or 0) + 1000


def _triggers_dropped() -> None:
    with connection.cursor() as cursor:
        for table, name in TRIGGERS:
            cursor.execute(f"DROP TRIGGER {name} ON {table}")


pytestmark = pytest.mark.django_db


def test_the_triggers_replace_the_foreign_keys():
    """The staged tables no longer carry a foreign key to the run: the triggers are the check."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT conrelid::regclass::text FROM pg_constraint WHERE contype = 'f' "
                       "AND conrelid IN ('reconcile_stagedevent'::regclass, 'reconcile_stagedreceipt'::regclass)")
        assert cursor.fetchall() == []
        cursor.execute("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal AND tgname = ANY(%s)",
                       [[name for _, name in TRIGGERS]])
        assert sorted(row[0] for row in cursor.fetchall()) == sorted(name for _, name in TRIGGERS)


def test_a_staged_event_naming_no_run_is_refused():
    with pytest.raises(IntegrityError, match="does not exist"), transaction.atomic():
        _event(_missing_run_id()).save()
    assert not StagedEvent.objects.exists()


def test_a_copied_page_naming_no_run_is_refused_whole():
    """The COPY a page is staged by: one row of a missing run refuses the statement."""
    run = _run()
    rows = [(run.pk, f"{n:064x}", f"msg_test_{n}", f"key_{n}") for n in range(3)]
    rows.append((_missing_run_id(), "f" * 64, "msg_test_x", "key_x"))
    with pytest.raises(IntegrityError, match="does not exist"), transaction.atomic():
        rows_copy(StagedReceipt, STAGED_RECEIPT_COLUMNS, rows)
    assert not StagedReceipt.objects.exists()
    rows_copy(StagedReceipt, STAGED_RECEIPT_COLUMNS, rows[:3])
    assert StagedReceipt.objects.filter(run=run).count() == 3


def test_moving_a_staged_row_to_no_run_is_refused():
    run = _run()
    _event(run.pk).save()
    with pytest.raises(IntegrityError, match="does not exist"), transaction.atomic():
        StagedEvent.objects.update(run_id=_missing_run_id())
    assert StagedEvent.objects.get().run_id == run.pk


def test_a_run_with_staged_rows_is_neither_deleted_nor_renumbered_in_sql():
    run = _run()
    StagedReceipt.objects.create(run=run, reply_key="a" * 64, provider_reply_id="msg_test_1", event_key="k")
    with connection.cursor() as cursor:
        for sql in ("DELETE FROM reconcile_reconcilerun WHERE id = %s",
                    "UPDATE reconcile_reconcilerun SET id = id + 1000 WHERE id = %s"):
            with pytest.raises(IntegrityError, match="still has staged rows"), transaction.atomic():
                cursor.execute(sql, [run.pk])
    assert ReconcileRun.objects.filter(pk=run.pk).exists()
    # Other updates of the run are untouched, and Django's CASCADE still deletes it with its rows.
    ReconcileRun.objects.filter(pk=run.pk).update(pages=3)
    run.delete()
    assert not StagedReceipt.objects.exists()


def test_positive_control_without_the_triggers_a_row_naming_no_run_is_kept():
    """Take the triggers away (rolled back with the test's transaction): the orphan the tests
    above refuse is written, and the run goes from under its staged rows."""
    _triggers_dropped()
    _event(_missing_run_id()).save()
    run = _run()
    _event(run.pk, 1).save()
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM reconcile_reconcilerun WHERE id = %s", [run.pk])
    assert StagedEvent.objects.count() == 2


# -- with another transaction at the same time: the check locks the run as a foreign key would ----

def _in_thread(sql: str, params: list, outcome: dict) -> threading.Thread:
    def work():
        try:
            with connections["default"].cursor() as cursor:
                cursor.execute(sql, params)
            outcome["result"] = "done"
        except IntegrityError as exc:
            outcome["result"] = f"refused: {exc}"
        finally:
            connections["default"].close()
    thread = threading.Thread(target=work)
    thread.start()
    return thread


def _waits(thread: threading.Thread, seconds: float = 0.5) -> bool:
    time.sleep(seconds)
    return thread.is_alive()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("triggers", ["kept", "dropped"])
def test_a_run_deleted_while_its_page_is_staged_waits_then_is_refused(triggers):
    """A page stages rows for a run (uncommitted) while another connection deletes the run:
    the delete waits for the page's commit, then is refused; no staged row is left without
    its run. The control drops the triggers: nothing waits and the rows are orphaned."""
    run = _run()
    if triggers == "dropped":
        _triggers_dropped()
    outcome: dict = {}
    try:
        with transaction.atomic():
            _event(run.pk).save()
            thread = _in_thread("DELETE FROM reconcile_reconcilerun WHERE id = %s", [run.pk], outcome)
            waited = _waits(thread)
        thread.join(10)
        orphaned = StagedEvent.objects.filter(run_id=run.pk).exists() and not ReconcileRun.objects.filter(
            pk=run.pk).exists()
        if triggers == "kept":
            assert waited
            assert outcome["result"].startswith("refused") and "still has staged rows" in outcome["result"]
            assert not orphaned
        else:
            assert not waited and outcome["result"] == "done" and orphaned
    finally:
        if triggers == "dropped":  # committed: put the triggers back as the migration wrote them
            StagedEvent.objects.all().delete()
            with connection.cursor() as cursor:
                for sql in MIGRATION.POSTGRES_CREATE:
                    if "CREATE TRIGGER" in sql:
                        cursor.execute(sql, None)


@pytest.mark.django_db(transaction=True)
def test_a_page_staged_while_its_run_is_deleted_waits_then_is_refused():
    """The other order: the run's delete is uncommitted when the page's COPY names it. The
    check waits on the run's row lock; once the delete commits, the page is refused."""
    run = _run()
    outcome: dict = {}
    deleted = threading.Event()
    release = threading.Event()

    def delete():
        with transaction.atomic(using="default"):
            with connections["default"].cursor() as cursor:
                cursor.execute("DELETE FROM reconcile_reconcilerun WHERE id = %s", [run.pk])
            deleted.set()
            release.wait(10)
        connections["default"].close()

    deleter = threading.Thread(target=delete)
    deleter.start()
    assert deleted.wait(10)

    def stage():
        try:
            _event(run.pk).save()
            outcome["result"] = "staged"
        except IntegrityError as exc:
            outcome["result"] = f"refused: {exc}"
        finally:
            connections["default"].close()

    stager = threading.Thread(target=stage)
    stager.start()
    assert _waits(stager)  # on the run's row, which the uncommitted delete holds
    release.set()
    deleter.join(10)
    stager.join(10)
    assert outcome["result"].startswith("refused") and "does not exist" in outcome["result"]
    assert not StagedEvent.objects.exists()
