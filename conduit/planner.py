"""PostgreSQL planner settings for the statements of one block, inside the caller's transaction."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from django.db.backends.base.base import BaseDatabaseWrapper
from psycopg import pq


@contextmanager
def planner_settings(connection: BaseDatabaseWrapper, **settings: str) -> Iterator[None]:
    """Run the block's statements with `settings` (`enable_nestloop="off"`), then put back what
    was in force before, so the rest of the transaction plans as it would have.

    Transaction-local (`set_config(..., true)`): call it inside a transaction. A block that fails
    the transaction leaves the settings to its rollback, which undoes them."""
    names = list(settings)
    assign = "SELECT " + ", ".join(["set_config(%s, %s, true)"] * len(names))
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + ", ".join(["current_setting(%s)"] * len(names)), names)
        before = cursor.fetchone()
        cursor.execute(assign, [v for pair in settings.items() for v in pair])
        try:
            yield
        finally:
            if connection.connection.info.transaction_status != pq.TransactionStatus.INERROR:
                cursor.execute(assign, [v for pair in zip(names, before) for v in pair])
