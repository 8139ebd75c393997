"""PostgreSQL planner settings for the statements of one block, inside the caller's transaction."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from django.db import transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from psycopg import pq


@contextmanager
def planner_settings(connection: BaseDatabaseWrapper, **settings: str) -> Iterator[None]:
    """Run the block's statements with `settings` (`enable_nestloop="off"`), then put back what
    was in force before, so the rest of the transaction plans as it would have.

    Transaction-local (`set_config(..., true)`), so it needs a transaction: outside one each
    setting would end with its own statement, and this refuses. A block that leaves the transaction
    to be rolled back (a failed statement, or an error Django marked for rollback) leaves the
    settings to that rollback, which undoes them, and its own error goes up as it was."""
    if connection.get_autocommit():
        raise transaction.TransactionManagementError("planner_settings needs a transaction")
    names = list(settings)
    assign = "SELECT " + ", ".join(["set_config(%s, %s, true)"] * len(names))
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + ", ".join(["current_setting(%s)"] * len(names)), names)
        before = cursor.fetchone()
        cursor.execute(assign, [v for pair in settings.items() for v in pair])
        try:
            yield
        finally:
            healthy = connection.connection.info.transaction_status == pq.TransactionStatus.INTRANS
            if healthy and not connection.needs_rollback:
                cursor.execute(assign, [v for pair in zip(names, before) for v in pair])
