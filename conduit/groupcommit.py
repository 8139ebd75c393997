"""Group commit: statements that reach one process while a commit is in flight share the next one.

A statement that runs in its own transaction (autocommit) pays a commit of its own: a round trip
and a WAL flush. Where those are cheap, sharing them does not pay: a statement queued here does
not run while the commit in flight does, where alone it would run at once on its own thread's
connection. Where they are dear (a flush of milliseconds, a database a network away), it may. So
it is on only with CONDUIT_GROUP_COMMIT=on (docs/benchmarks.md#group-commit). Here the first
thread to arrive while no group is running leads: it runs its own statement at once, alone in a
transaction, exactly as it would without this module. Threads that arrive while that commit is in
flight queue; when it ends, the first of them leads the queue as one group: every queued statement
in one transaction on its own connection, one commit, and each thread gets its rows back only
after that commit. A thread that comes alone is never kept waiting for company, and one that has
queued for `patience` without its group starting (the commit in flight waits on a lock) leaves the
queue and runs alone.

A failure answers each statement as it would alone:

- a statement that fails inside the group (a refusal the statement raises, a value the database
  refuses, a deadlock with another process's group), or anything failing before the COMMIT,
  rolls the group back; nothing of it was committed, so each of its threads runs its statement
  again, alone, on its own connection, and meets its own answer;
- a COMMIT the server refuses (a deferred check) left nothing standing either: each runs alone;
- a group whose COMMIT was lost with its connection may or may not have committed, as a lone
  statement in that plight: each thread gets that error, and its request answers 503 so the
  sender retries (the ledgers' unique keys make a retry converge).

A group takes, of the longest-queued statements, those whose key ranges (`order` to `last`: a
body's first and last event keys) follow one another without overlap, and runs them in key order:
it locks its rows in key order, as a lone statement does. A lone statement chosen as the victim of
a deadlock against a group (bodies meeting on a delivery id as well) wrote nothing and runs again.
docs/internals.md#group-commit.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any, Sequence

from django.conf import settings
from django.db import DatabaseError, OperationalError, connection, transaction

logger = logging.getLogger("conduit.groupcommit")

_ALONE = object()  # the group was rolled back before its commit: run the statement alone
DEADLOCK = "40P01"  # SQLSTATE deadlock_detected
DEADLOCK_ATTEMPTS = 3


@dataclass(eq=False)
class _Statement:
    """A queued statement, and how its thread learns its answer."""

    sql: str
    params: Sequence[Any]
    order: str  # the first key it locks
    last: str  # the last key it locks
    done: threading.Event
    lead: list | None = None  # the group this thread is to run, set when it is woken to lead
    rows: Any = None  # list of rows, _ALONE, _Lost, or the exception its own statement raised


@dataclass
class _Lost:
    """The group's COMMIT was lost with its connection: the error, for each thread to raise anew."""

    error: Exception


class GroupCommit:
    """One process's queue of statements waiting for the commit in flight (see the module).

    `max_group`: statements a group takes at most. `patience`: seconds a queued statement waits
    for its group to start before it leaves the queue and runs alone (a statement in flight that
    waits on a row lock must not hold up the process's other deliveries)."""

    def __init__(self, max_group: int = 64, patience: float = 0.25) -> None:
        if max_group < 1:
            raise ValueError("a group takes at least one statement")
        self.max_group, self.patience = max_group, patience
        self._lock = threading.Lock()
        self._leading = False
        self._queue: list[_Statement] = []

    def waiting(self) -> int:
        """How many statements are queued behind the commit in flight."""
        with self._lock:
            return len(self._queue)

    def fetchall(
        self, sql: str, params: Sequence[Any], *, order: str = "", last: str | None = None
    ) -> list[tuple]:
        """Run `sql` with `params` and return its rows once a commit holds what it wrote.

        `order` and `last`: the first and last keys the statement locks, in the order it locks
        them (`last` defaults to `order`). Must be called outside a transaction, on the thread's
        default connection."""
        with self._lock:
            lone = not self._leading
            if lone:
                self._leading = True
            else:
                statement = _Statement(sql, params, order, order if last is None else last, threading.Event())
                self._queue.append(statement)
        if lone:  # nothing in flight: at once, alone, as without this module
            try:
                return _alone(sql, params)
            finally:
                self._hand_over()
        if not statement.done.wait(self.patience):
            with self._lock:  # still queued after `patience`: the commit in flight is held up
                withdrawn = statement in self._queue
                if withdrawn:
                    self._queue.remove(statement)
            if withdrawn:
                return _alone(sql, params)
            statement.done.wait()  # taken into a group meanwhile
        if statement.lead is not None:
            self._lead(statement.lead)
        rows = statement.rows
        if rows is None:  # its leader stopped before the group's outcome was known
            raise DatabaseError("the shared commit was interrupted; nothing is known of it")
        if rows is _ALONE:
            return _alone(sql, params)
        if isinstance(rows, _Lost):
            raise OperationalError("the shared commit was lost with its connection") from rows.error
        if isinstance(rows, BaseException):
            raise rows
        return rows

    def _hand_over(self) -> None:
        """The commit in flight has ended: of the longest-queued statements, those whose key
        ranges follow one another without overlap, in key order, go to the first of them to lead;
        the rest stay queued, first in line."""
        with self._lock:
            if not self._queue:
                self._leading = False
                return
            head, group, after = self._queue[: self.max_group], [], None
            for statement in sorted(head, key=lambda s: s.order):
                if after is None or statement.order > after:
                    group.append(statement)
                    after = statement.last
            taken = {id(s) for s in group}
            later = [s for s in head if id(s) not in taken]  # in their places in line
            self._queue = later + self._queue[self.max_group :]
            group[0].lead = group
        group[0].done.set()

    def _lead(self, group: list[_Statement]) -> None:
        """Commit `group` on this thread's connection, hand the queue on, then answer the group."""
        try:
            if len(group) == 1:
                _run_one(group[0])
            else:
                self.run_group(group)
        finally:
            self._hand_over()
            for statement in group[1:]:  # the first is this thread
                statement.done.set()

    def run_group(self, group: list[_Statement]) -> None:
        """Every statement of `group` in one transaction, one commit; each statement's answer set."""
        raw, committing = None, False
        try:
            with transaction.atomic(durable=True):
                raw = connection.connection
                answers = self.execute(group)
                committing = True  # what raises from here on is the COMMIT
        except Exception as exc:
            if committing and (not isinstance(exc, DatabaseError) or raw.closed):
                # The commit was lost with its connection: it may have happened, as for a lone
                # statement in that plight (Django replaces a connection it lost).
                for statement in group:
                    statement.rows = _Lost(exc)
                return
            # Nothing of the group stands: a statement failed, the transaction never began, or
            # the server refused the COMMIT on a session that lives on.
            logger.info(
                "group of %d %s (%s): each statement runs alone",
                len(group),
                "refused at commit" if committing else "rolled back",
                type(exc).__name__,
            )
            for statement in group:
                statement.rows = _ALONE
        else:  # committed: only now is any answer handed out
            for statement, rows in zip(group, answers):
                statement.rows = rows

    @staticmethod
    def execute(group: list[_Statement]) -> list[list[tuple]]:
        """The group's statements, one after another, inside its transaction: their rows."""
        answers = []
        with connection.cursor() as cursor:
            for statement in group:
                cursor.execute(statement.sql, statement.params)
                answers.append(cursor.fetchall())
        return answers


def _run_one(statement: _Statement) -> None:
    try:
        statement.rows = _alone(statement.sql, statement.params)
    except Exception as exc:  # answered to the thread it belongs to
        statement.rows = exc


def _execute(sql: str, params: Sequence[Any]) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _alone(sql: str, params: Sequence[Any]) -> list[tuple]:
    """The statement in its own transaction. Chosen as a deadlock's victim (against a group,
    whose transaction holds several bodies' locks), it wrote nothing and runs again: a lone
    statement locks its keys in one order and meets no deadlock of its own."""
    attempt = 1
    while True:
        try:
            return _execute(sql, params)
        except DatabaseError as exc:
            if getattr(exc.__cause__, "sqlstate", None) != DEADLOCK or attempt == DEADLOCK_ATTEMPTS:
                raise
            attempt += 1
            logger.info("statement chosen as a deadlock's victim: it runs again (attempt %d)", attempt)


_process = GroupCommit()


def shared_fetchall(
    sql: str, params: Sequence[Any], *, order: str = "", last: str | None = None
) -> list[tuple]:
    """`sql`'s rows, the statement committed in the process's next shared commit
    (CONDUIT_GROUP_COMMIT=on), or alone in its own (off, the default)."""
    if connection.in_atomic_block or not connection.get_autocommit():
        return _execute(sql, params)  # the caller's transaction
    if not settings.CONDUIT_GROUP_COMMIT:
        return _alone(sql, params)
    return _process.fetchall(sql, params, order=order, last=last)
