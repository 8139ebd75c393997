"""Prepared statements that outlive a schema change (CONDUIT_DB_PREPARE_THRESHOLD).

A statement prepared on a connection keeps its result's column types; once a
migration changes one (a column widened), PostgreSQL refuses every later run of
it ("cached plan must not change result type") until the connection goes.
Outside a transaction nothing ran, so the cursor forgets the connection's
prepared statements (DEALLOCATE ALL, which psycopg sees and forgets its own)
and runs the statement once more. Inside one the transaction is already failed:
the error stands, and the rollback that follows makes psycopg forget them.
"""

from __future__ import annotations

import psycopg
from psycopg.pq import TransactionStatus

from conduit.sql import fast_paths

STALE_PLAN = "cached plan must not change result type"


def _recovering(base: type) -> type:
    class RecoveringCursor(base):
        def execute(self, query, params=None, **kwargs):
            try:
                return super().execute(query, params, **kwargs)
            except psycopg.errors.FeatureNotSupported as exc:
                if (
                    STALE_PLAN not in str(exc)
                    or self.connection.info.transaction_status != TransactionStatus.IDLE
                ):
                    raise
                super().execute("DEALLOCATE ALL")
                return super().execute(query, params, **kwargs)

    return RecoveringCursor


_CURSORS: dict[type, type] = {}


def recovering_cursors(sender, connection, **kwargs) -> None:
    """connection_created: a server-binding connection's cursors recover from a stale prepared plan."""
    if not fast_paths(connection):
        return
    from django.db.backends.postgresql.base import ServerBindingCursor

    raw = connection.connection
    factory = raw.cursor_factory
    if (
        isinstance(factory, type)
        and issubclass(factory, ServerBindingCursor)
        and factory not in _CURSORS.values()
    ):
        raw.cursor_factory = _CURSORS.setdefault(factory, _recovering(factory))
