"""Group commit (conduit/groupcommit.py) with real threads on PostgreSQL: who shares a commit, and
how each failure is answered."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from django.db import DatabaseError, IntegrityError, OperationalError, connection, transaction

from conduit.groupcommit import GroupCommit
from tests.conftest import shell_with

pytestmark = pytest.mark.django_db(transaction=True)

HOLD = 7_000_031  # the advisory lock that keeps the first statement's commit in flight
HELD = 60.0  # patience while a test holds the commit in flight: queued statements wait for it
FIRST = "SELECT pg_advisory_xact_lock(%s), %s::int, txid_current()"
INSERT = "INSERT INTO gc_test (k, who) VALUES (%s, %s) RETURNING who, txid_current()"


def _dsn() -> str:
    s = connection.settings_dict
    return f"host={s['HOST']} port={s['PORT']} user={s['USER']} dbname={s['NAME']}"


@pytest.fixture
def table():
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE gc_test (k int UNIQUE DEFERRABLE INITIALLY DEFERRED, who int)")
    yield
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE gc_test")


class Threads:
    """Each statement run by GroupCommit.fetchall from a thread of its own: its rows or its error."""

    def __init__(self, group_commit: GroupCommit) -> None:
        self.group_commit = group_commit
        self.answers: dict[int, object] = {}
        self.threads: list[threading.Thread] = []

    def start(self, who: int, sql: str, params: tuple, order: str = "", last: str | None = None) -> None:
        def run() -> None:
            try:
                self.answers[who] = self.group_commit.fetchall(sql, params, order=order, last=last)
            except Exception as exc:  # the thread's answer, as its request would meet it
                self.answers[who] = exc
            finally:
                connection.close()

        thread = threading.Thread(target=run)
        self.threads.append(thread)
        thread.start()

    def join(self) -> None:
        for thread in self.threads:
            thread.join(timeout=30)
            assert not thread.is_alive()


def _queued(group_commit: GroupCommit, count: int) -> None:
    deadline = time.monotonic() + 10
    while group_commit.waiting() < count:
        assert time.monotonic() < deadline, f"{group_commit.waiting()} statements queued, not {count}"
        time.sleep(0.01)


def _held_then_queued(group_commit: GroupCommit, statements: list[tuple]) -> Threads:
    """Statement 0 in flight (blocked on HOLD), then `statements` queued behind it, then released.

    A statement is (who, sql, params) with the order key f"{who:04}", or (who, sql, params, order,
    last) with its key range."""
    with psycopg.connect(_dsn(), autocommit=True) as holder:
        threads = _in_flight(group_commit, holder)
        for who, sql, params, *keys in statements:
            order, last = keys or (f"{who:04}", f"{who:04}")
            threads.start(who, sql, params, order=order, last=last)
        _queued(group_commit, len(statements))
        holder.execute("SELECT pg_advisory_unlock(%s)", (HOLD,))
    threads.join()
    return threads


def _stored() -> dict[int, int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT who, k FROM gc_test")
        return dict(cursor.fetchall())


def test_statements_that_arrive_while_a_commit_is_in_flight_share_the_next_one(table):
    group_commit = GroupCommit(patience=HELD)
    threads = _held_then_queued(group_commit, [(n, INSERT, (n, n)) for n in range(1, 6)])

    (first,) = threads.answers[0]
    assert first[1] == 0
    # Each thread got its own statement's rows back.
    assert {who: rows[0][0] for who, rows in threads.answers.items() if who} == {n: n for n in range(1, 6)}
    shared = {rows[0][1] for who, rows in threads.answers.items() if who}
    assert len(shared) == 1, "the five queued statements did not share one transaction"
    assert shared != {first[2]}, "the queued statements joined the commit that was already in flight"
    assert _stored() == {n: n for n in range(1, 6)}
    assert group_commit.waiting() == 0


def test_a_statement_that_arrives_alone_runs_at_once_in_its_own_transaction(table):
    group_commit = GroupCommit(patience=HELD)
    answers = [group_commit.fetchall(INSERT, (n, n)) for n in range(3)]
    assert len({rows[0][1] for rows in answers}) == 3
    assert _stored() == {0: 0, 1: 1, 2: 2}


def test_a_statement_failing_in_a_group_rolls_it_back_and_each_runs_alone(table):
    group_commit = GroupCommit(patience=HELD)
    statements = [(1, INSERT, (1, 1)), (2, "SELECT 1 / (%s - 2)", (2,)), (3, INSERT, (3, 3))]
    threads = _held_then_queued(group_commit, statements)

    # The failing statement meets its own error; the others are answered and stored, each by a
    # commit of its own (the group they shared was rolled back).
    assert isinstance(threads.answers[2], DatabaseError)
    assert "division by zero" in str(threads.answers[2])
    assert not isinstance(threads.answers[1], Exception), threads.answers[1]
    assert not isinstance(threads.answers[3], Exception), threads.answers[3]
    assert threads.answers[1][0][0] == 1 and threads.answers[3][0][0] == 3
    assert threads.answers[1][0][1] != threads.answers[3][0][1]
    assert _stored() == {1: 1, 3: 3}


def test_a_commit_the_server_refuses_leaves_nothing_and_each_runs_alone(table):
    group_commit = GroupCommit(patience=HELD)
    # Both take k = 5: the deferred unique check refuses the group's COMMIT.
    threads = _held_then_queued(group_commit, [(1, INSERT, (5, 1)), (2, INSERT, (5, 2))])

    # Alone, one of them commits and the other is refused at its own commit.
    refused = [who for who in (1, 2) if isinstance(threads.answers[who], IntegrityError)]
    assert len(refused) == 1, threads.answers
    (kept,) = {1, 2} - set(refused)
    assert threads.answers[kept][0][0] == kept
    assert _stored() == {kept: 5}


class _LostBeforeCommit(GroupCommit):
    """The group's connection is cut after its statements ran, before its COMMIT."""

    def execute(self, group):
        answers = super().execute(group)
        pid = connection.connection.info.backend_pid
        with psycopg.connect(_dsn(), autocommit=True) as other:
            other.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
        return answers


def test_a_commit_lost_with_its_connection_answers_every_statement_with_the_error(table):
    group_commit = _LostBeforeCommit(patience=HELD)
    threads = _held_then_queued(group_commit, [(1, INSERT, (1, 1)), (2, INSERT, (2, 2))])

    # Whether the commit happened is unknown to the process, as for a lone statement whose
    # connection was lost: each request answers 503 and the sender retries. Here it had not.
    assert isinstance(threads.answers[1], OperationalError)
    assert isinstance(threads.answers[2], OperationalError)
    assert _stored() == {}
    assert threads.answers[0][0][1] == 0  # the lone statement before them was not touched


def test_queued_statements_run_in_their_order_key(table):
    group_commit = GroupCommit(patience=HELD)
    # Queued 3, 1, 2 (orders "0003", "0001", "0002"): the group inserts 1, 2, 3.
    threads = _held_then_queued(group_commit, [(3, INSERT, (3, 3)), (1, INSERT, (1, 1)), (2, INSERT, (2, 2))])
    assert len({rows[0][1] for who, rows in threads.answers.items() if who}) == 1
    with connection.cursor() as cursor:
        cursor.execute("SELECT who FROM gc_test ORDER BY ctid")
        assert [who for (who,) in cursor.fetchall()] == [1, 2, 3]


def _in_flight(group_commit: GroupCommit, holder) -> Threads:
    """Statement 0 started on `group_commit` and held in flight on HOLD, which `holder` holds."""
    holder.execute("SELECT pg_advisory_lock(%s)", (HOLD,))
    threads = Threads(group_commit)
    threads.start(0, FIRST, (HOLD, 0))
    deadline = time.monotonic() + 10
    while not holder.execute(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
    ).fetchone()[0]:
        assert time.monotonic() < deadline, "the first statement never waited on the lock"
        time.sleep(0.01)
    return threads


def test_inside_a_transaction_the_statement_runs_in_it_while_a_commit_is_in_flight(
    table, settings, monkeypatch
):
    from conduit import groupcommit

    settings.CONDUIT_GROUP_COMMIT = True
    group_commit = GroupCommit(patience=HELD)
    monkeypatch.setattr(groupcommit, "_process", group_commit)
    with psycopg.connect(_dsn(), autocommit=True) as holder:
        threads = _in_flight(group_commit, holder)
        with transaction.atomic():
            started = time.monotonic()
            rows = groupcommit.shared_fetchall(INSERT, (1, 1))
            # At once: not queued behind the held commit (whose queue would keep it HELD seconds).
            assert time.monotonic() - started < HELD / 6
            with connection.cursor() as cursor:
                cursor.execute("SELECT txid_current()")
                assert rows[0][1] == cursor.fetchone()[0]
        holder.execute("SELECT pg_advisory_unlock(%s)", (HOLD,))
    threads.join()
    assert _stored() == {1: 1}


def test_a_statement_queued_past_its_patience_runs_alone(table):
    """A statement in flight that waits (here on a lock) does not hold up the queue for longer
    than its patience: the queued statement leaves the queue and commits on its own meanwhile."""
    group_commit = GroupCommit(patience=0.2)
    with psycopg.connect(_dsn(), autocommit=True) as holder:
        threads = _in_flight(group_commit, holder)
        queued = Threads(group_commit)
        queued.start(1, INSERT, (1, 1))
        queued.threads[0].join(timeout=10)
        stored_while_held = _stored()
        holder.execute("SELECT pg_advisory_unlock(%s)", (HOLD,))
    threads.join()
    queued.join()
    assert stored_while_held == {1: 1}, "the queued statement waited for the held commit"
    assert group_commit.waiting() == 0


class _FailingBeforeCommit(GroupCommit):
    """The group fails before its COMMIT with an error that is not the database's."""

    def execute(self, group):
        raise RuntimeError("planted")


def test_a_group_that_fails_before_its_commit_runs_each_statement_alone(table):
    group_commit = _FailingBeforeCommit(patience=HELD)
    threads = _held_then_queued(group_commit, [(1, INSERT, (1, 1)), (2, INSERT, (2, 2))])
    assert not isinstance(threads.answers[1], Exception), threads.answers[1]
    assert not isinstance(threads.answers[2], Exception), threads.answers[2]
    assert _stored() == {1: 1, 2: 2}


def test_statements_whose_key_ranges_overlap_never_share_a_group(table):
    """A group locks its bodies' keys one after another: it takes only bodies whose key ranges
    follow one another, so it locks in key order, as a lone body does, and meets no deadlock
    with one. The overlapping body waits for the next group."""
    group_commit = GroupCommit(patience=HELD)
    threads = _held_then_queued(
        group_commit,
        [(1, INSERT, (1, 1), "a", "c"), (2, INSERT, (2, 2), "b", "b"), (3, INSERT, (3, 3), "d", "e")],
    )
    txid = {who: rows[0][1] for who, rows in threads.answers.items() if who}
    assert txid[1] == txid[3], "the bodies whose ranges follow one another were not grouped"
    assert txid[2] != txid[1], "a body inside another's key range joined its group"
    assert _stored() == {1: 1, 2: 2, 3: 3}


def test_a_lone_statement_chosen_as_a_deadlocks_victim_runs_again(table, monkeypatch):
    from conduit import groupcommit

    calls = []
    real = groupcommit._execute

    def deadlocked_once(sql, params):
        calls.append(sql)
        if len(calls) == 1:
            raise DatabaseError("deadlock detected") from psycopg.errors.DeadlockDetected("planted")
        return real(sql, params)

    monkeypatch.setattr(groupcommit, "_execute", deadlocked_once)
    assert GroupCommit().fetchall(INSERT, (1, 1))[0][0] == 1
    assert len(calls) == 2
    assert _stored() == {1: 1}


def test_a_lone_statement_failing_otherwise_is_not_run_again(table, monkeypatch):
    from conduit import groupcommit

    calls = []

    def failing(sql, params):
        calls.append(sql)
        raise DatabaseError("unique violation") from psycopg.errors.UniqueViolation("planted")

    monkeypatch.setattr(groupcommit, "_execute", failing)
    with pytest.raises(DatabaseError):
        GroupCommit().fetchall(INSERT, (1, 1))
    assert len(calls) == 1


def test_a_group_takes_at_least_one_statement():
    with pytest.raises(ValueError):
        GroupCommit(max_group=0)


def _group_commit_setting(value: str | None):
    return shell_with(
        "CONDUIT_GROUP_COMMIT",
        value,
        "from django.conf import settings; print(settings.CONDUIT_GROUP_COMMIT)",
    )


@pytest.mark.parametrize("value, read", [(None, "False"), ("on", "True"), (" ON ", "True"), ("OFF", "False")])
def test_group_commit_is_off_unless_turned_on(value, read):
    run = _group_commit_setting(value)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().splitlines()[-1] == read


def test_a_group_commit_setting_other_than_on_or_off_is_refused_by_name():
    run = _group_commit_setting("yes")
    assert run.returncode != 0
    assert "CONDUIT_GROUP_COMMIT is on or off, not 'yes'" in run.stderr


def test_with_group_commit_off_a_statement_never_waits_for_a_group(table, settings, monkeypatch):
    from conduit import groupcommit

    settings.CONDUIT_GROUP_COMMIT = False

    def refuse(*args, **kwargs):
        raise AssertionError("the process's group was used with CONDUIT_GROUP_COMMIT=off")

    monkeypatch.setattr(groupcommit._process, "fetchall", refuse)
    assert groupcommit.shared_fetchall(INSERT, (1, 1))[0][0] == 1
