"""Adversarial probes of the references checked once per statement, against what a foreign key held."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from django.db import IntegrityError, connection, transaction

from reconcile.models import Finding, ReconcileRun, StagedReceipt
from tests.reconcile.test_references import CASES, _action, _report, _run

pytestmark = pytest.mark.django_db

_keys = iter(range(10**9))


def _key() -> str:
    return f"{next(_keys):064x}"


def _receipts(cursor, *run_ids) -> None:
    """One statement staging one receipt per run named (raw SQL: the statement is the unit)."""
    values = ", ".join(["(%s, %s, 'm', 'k')"] * len(run_ids))
    params = [p for run_id in run_ids for p in (run_id, _key())]
    cursor.execute(
        f"INSERT INTO reconcile_stagedreceipt (run_id, reply_key, provider_reply_id, event_key) "
        f"VALUES {values}",
        params,
    )


def _raw_run(cursor, source_id: int) -> int:
    """A run written by raw SQL (DISCARDED: outside the one-active-scan-per-source rule)."""
    cursor.execute(
        "INSERT INTO reconcile_reconcilerun (source_id, state, trigger, requested_by, complete_scan, scan_id, "
        "cursor, staged_bytes, pages, page_calls, staged_events, staged_receipts, rejections, "
        "rejection_count, created_at, discard_reason) VALUES (%s, 'DISCARDED', 'command', 'tester', true, '', "
        "'', 0, 0, 0, 0, 0, '[]', 0, now(), '') RETURNING id",
        [source_id],
    )
    return cursor.fetchone()[0]


def _orphans(cursor) -> int:
    cursor.execute(
        "SELECT count(*) FROM reconcile_stagedreceipt s WHERE NOT EXISTS "
        "(SELECT 1 FROM reconcile_reconcilerun r WHERE r.id = s.run_id)"
    )
    return cursor.fetchone()[0]


# -- one statement at a time, in the test's transaction -----------------------------------------


def test_insert_select_mixing_good_and_missing_targets_is_refused_whole():
    run = _run()
    with connection.cursor() as cursor, pytest.raises(IntegrityError, match="no such"), transaction.atomic():
        cursor.execute(
            "INSERT INTO reconcile_stagedreceipt (run_id, reply_key, provider_reply_id, event_key) "
            "SELECT r, md5(r::text || g::text), 'm', 'k' FROM (VALUES (%s), (%s)) v(r), "
            "generate_series(1, 3) g",
            [run, run + 1_000_000],
        )
    assert not StagedReceipt.objects.exists()


def test_on_conflict_do_update_moving_a_row_to_a_missing_target_is_refused():
    run, other = _run(), _run()
    key = _key()
    with connection.cursor() as cursor:
        _sql = (
            "INSERT INTO reconcile_stagedreceipt (run_id, reply_key, provider_reply_id, event_key) "
            "VALUES (%s, %s, 'm', 'k') ON CONFLICT (run_id, reply_key) DO UPDATE SET run_id = %s"
        )
        cursor.execute(_sql, [run, key, run])
        with pytest.raises(IntegrityError, match="no such"), transaction.atomic():
            cursor.execute(_sql, [run, key, other + 1_000_000])
        cursor.execute(_sql, [run, key, other])  # to a target that exists: allowed, as by a key
    assert StagedReceipt.objects.get().run_id == other


@pytest.mark.parametrize("action", ["insert", "update"])
def test_merge_writing_a_missing_target_is_refused(action):
    """PostgreSQL 15's MERGE fires the statement triggers (with transition tables) of its actions."""
    run = _run()
    key = _key()
    with connection.cursor() as cursor:
        if action == "update":
            _receipts(cursor, run)
            cursor.execute("UPDATE reconcile_stagedreceipt SET reply_key = %s", [key])
        merge = (
            "MERGE INTO reconcile_stagedreceipt s USING (VALUES (%s::bigint, %s)) v(run_id, reply_key) "
            "ON s.reply_key = v.reply_key "
            "WHEN MATCHED THEN UPDATE SET run_id = v.run_id "
            "WHEN NOT MATCHED THEN INSERT (run_id, reply_key, provider_reply_id, event_key) "
            "VALUES (v.run_id, v.reply_key, 'm', 'k')"
        )
        with pytest.raises(IntegrityError, match="no such"), transaction.atomic():
            cursor.execute(merge, [run + 1_000_000, key if action == "update" else _key()])
    assert list(StagedReceipt.objects.values_list("run_id", flat=True)) == (
        [run] if action == "update" else []
    )


def test_a_null_action_refers_to_nothing_and_does_not_hide_a_missing_one():
    report, action = _report(), _action()
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO reconcile_finding (report_id, kind, event_key, reply_key, action_id, repair, "
            "repair_outcome, repair_code, action_state, detail, decision, decided_by, decision_reason, "
            "decision_result) SELECT %s, 'RECEIPT_MISSING', '', '', a, 'NONE', '', '', '', '', '', '', "
            "'', '' FROM (VALUES (NULL::bigint), (%s)) v(a)",
            [report, action],
        )
        with pytest.raises(IntegrityError, match="no such"), transaction.atomic():
            cursor.execute(
                "UPDATE reconcile_finding SET action_id = CASE WHEN action_id IS NULL THEN NULL ELSE %s END",
                [action + 1_000_000],
            )
        cursor.execute("UPDATE reconcile_finding SET action_id = NULL")
    assert list(Finding.objects.values_list("action_id", flat=True)) == [None, None]


def test_a_target_written_in_a_rolled_back_savepoint_is_missing():
    run = ReconcileRun.objects.get(pk=_run())
    with connection.cursor() as cursor:
        with pytest.raises(RuntimeError), transaction.atomic():
            gone = _raw_run(cursor, run.source_id)
            raise RuntimeError("roll the savepoint back")
        with transaction.atomic():  # a released savepoint's target is there
            kept = _raw_run(cursor, run.source_id)
        with pytest.raises(IntegrityError, match="no such"), transaction.atomic():
            _receipts(cursor, kept, gone)
        _receipts(cursor, kept)
        with pytest.raises(IntegrityError, match="still referred to"), transaction.atomic():
            cursor.execute("DELETE FROM reconcile_reconcilerun WHERE id = %s", [kept])


def test_a_target_deleted_by_the_statement_that_refers_to_it_is_refused():
    """A data-modifying CTE deletes the run while the same statement stages a row for it."""
    run = _run()
    with connection.cursor() as cursor:
        with pytest.raises(IntegrityError), transaction.atomic():
            cursor.execute(
                "WITH d AS (DELETE FROM reconcile_reconcilerun WHERE id = %s RETURNING id) "
                "INSERT INTO reconcile_stagedreceipt (run_id, reply_key, provider_reply_id, event_key) "
                "SELECT id, %s, 'm', 'k' FROM d",
                [run, _key()],
            )
        with pytest.raises(IntegrityError), transaction.atomic():
            cursor.execute(
                "WITH d AS (DELETE FROM reconcile_reconcilerun WHERE id = %s) "
                "INSERT INTO reconcile_stagedreceipt (run_id, reply_key, provider_reply_id, event_key) "
                "VALUES (%s, %s, 'm', 'k')",
                [run, run, _key()],
            )
        assert _orphans(cursor) == 0


@pytest.mark.parametrize("case", CASES, ids=str)
def test_truncating_a_referred_table_is_refused_or_takes_its_referring_rows(case):
    """A foreign key refuses TRUNCATE of the referred table unless the referring table goes in the
    same command (TRUNCATE ... CASCADE takes it). No target may go from under its rows."""
    r = case.reference
    case.refer(case.target())
    with connection.cursor() as cursor:
        try:
            with transaction.atomic():
                cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # Django's deferred keys: no pending events
                cursor.execute(f"TRUNCATE {r.target} CASCADE")
                cursor.execute(
                    f"SELECT count(*) FROM {r.table} t WHERE t.{r.column} IS NOT NULL AND NOT EXISTS "
                    f"(SELECT 1 FROM {r.target} p WHERE p.{r.target_column} = t.{r.column})"
                )
                orphans = cursor.fetchone()[0]
                raise RuntimeError("roll the truncate back")
        except IntegrityError:
            orphans = 0
        except RuntimeError:
            pass
    assert orphans == 0


# -- with other transactions at the same time (each its own connection) -------------------------


def _connect(**kwargs) -> psycopg.Connection:
    s = connection.settings_dict
    params = {"dbname": s["NAME"], "user": s["USER"], "host": s["HOST"] or None, "port": s["PORT"] or None}
    if s["PASSWORD"]:
        params["password"] = s["PASSWORD"]
    return psycopg.connect(**{k: v for k, v in params.items() if v is not None}, **kwargs)


def _in_thread(work) -> tuple[threading.Thread, dict]:
    outcome: dict = {}

    def run():
        try:
            outcome["result"] = work()
        except Exception as exc:  # noqa: BLE001 - the probe reports what the statement did
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def _cleanup(*runs: int) -> None:
    with _connect(autocommit=True) as c:
        c.execute("DELETE FROM reconcile_stagedreceipt WHERE run_id = ANY(%s)", [list(runs)])
        c.execute("DELETE FROM reconcile_reconcilerun WHERE id = ANY(%s)", [list(runs)])


@pytest.mark.django_db(transaction=True)
def test_a_target_committed_while_the_check_waits_is_locked_too():
    """The check locks (one snapshot) and then looks for missing targets (a later snapshot). A run
    committed between the two is found but never locked: another transaction deletes it while the
    staged row is uncommitted, and the row commits without its run. A key's check would have locked
    it (or, checking y before x was free, refused the row): never both allowed and unlocked."""
    x = _run()
    source_id = ReconcileRun.objects.get(pk=x).source_id
    y = None
    stager, other, deleter = _connect(), _connect(), _connect(autocommit=True)
    try:
        other.execute("SELECT 1 FROM reconcile_reconcilerun WHERE id = %s FOR UPDATE", [x])
        y = _raw_run(other.cursor(), source_id)  # uncommitted: the stager's lock statement won't see it
        thread, outcome = _in_thread(lambda: _receipts(stager.cursor(), x, y))
        time.sleep(0.5)
        other.commit()  # y is committed now; x is free
        thread.join(10)
        deleted = False
        if "error" in outcome:
            assert isinstance(outcome["error"], psycopg.errors.ForeignKeyViolation)
        else:
            deleter.execute("SET lock_timeout = '1s'")
            try:
                deleted = (
                    deleter.execute("DELETE FROM reconcile_reconcilerun WHERE id = %s", [y]).rowcount == 1
                )
            except (psycopg.errors.LockNotAvailable, psycopg.errors.ForeignKeyViolation):
                pass  # a key's lock makes the delete wait, then it is refused
        stager.commit()
        with _connect(autocommit=True) as c:
            orphans = _orphans(c.cursor())
        assert not deleted and orphans == 0
    finally:
        for c in (stager, other, deleter):
            c.close()
        _cleanup(x, *([y] if y else []))


@pytest.mark.django_db(transaction=True)
def test_a_row_moved_to_another_target_locks_that_target():
    run, other = _run(), _run()
    with _connect(autocommit=True) as c:
        _receipts(c.cursor(), run)
    mover, deleter = _connect(), _connect(autocommit=True)
    try:
        mover.execute("UPDATE reconcile_stagedreceipt SET run_id = %s WHERE run_id = %s", [other, run])
        deleter.execute("SET lock_timeout = '500ms'")
        with pytest.raises(psycopg.errors.LockNotAvailable):
            deleter.execute("DELETE FROM reconcile_reconcilerun WHERE id = %s", [other])
        mover.commit()
        with pytest.raises(psycopg.errors.ForeignKeyViolation):
            deleter.execute("DELETE FROM reconcile_reconcilerun WHERE id = %s", [other])
    finally:
        mover.close()
        deleter.close()
        _cleanup(run, other)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("first", ["zero_row_update", "zero_row_insert_select", "age_read"])
def test_a_target_another_transaction_wrote_is_locked_whatever_ran_first(first):
    """age() measures from a transaction id fixed at its first call in the transaction: before
    the transaction has an id of its own, that is the next id to be handed out. If another
    transaction takes that id (writing the run), the run's xmin has age 0 for the stager, whose
    check then skips its lock as if the stager had written it: a delete goes through."""
    probe = {
        "zero_row_update": "UPDATE reconcile_stagedreceipt SET event_key = event_key WHERE false",
        "zero_row_insert_select": "INSERT INTO reconcile_stagedreceipt (run_id, reply_key, provider_reply_id, "
        "event_key) SELECT run_id, reply_key, 'm', 'k' FROM reconcile_stagedreceipt "
        "WHERE false",
        "age_read": "SELECT max(age(xmin)) FROM reconcile_reconcilerun",
    }[first]
    x = _run()
    source_id = ReconcileRun.objects.get(pk=x).source_id
    y = None
    stager, deleter = _connect(), _connect(autocommit=True)
    try:
        stager.execute(probe)  # no write yet: the stager has no transaction id
        with _connect(autocommit=True) as other:
            y = _raw_run(other.cursor(), source_id)  # takes the next transaction id, committed
        _receipts(stager.cursor(), y)
        with stager.cursor() as c:
            c.execute(
                "SELECT age(xmin), xmin::text, pg_current_xact_id()::text FROM reconcile_reconcilerun "
                "WHERE id = %s",
                [y],
            )
            seen = c.fetchone()
        deleter.execute("SET lock_timeout = '1s'")
        try:
            deleted = deleter.execute("DELETE FROM reconcile_reconcilerun WHERE id = %s", [y]).rowcount == 1
        except (psycopg.errors.LockNotAvailable, psycopg.errors.ForeignKeyViolation):
            deleted = False
        stager.commit()
        with _connect(autocommit=True) as c:
            orphans = _orphans(c.cursor())
        assert not deleted and orphans == 0, seen
    finally:
        stager.close()
        deleter.close()
        _cleanup(x, *([y] if y else []))
