"""Database-specific SQL the migrations run: storage parameters, and the per-vendor runner."""

from __future__ import annotations

from typing import Callable

from django.db import migrations

Statements = Callable[[str], list[str] | None]  # vendor -> its statements (None: unsupported)


def vendor_sql(forwards: Statements, backwards: Statements) -> migrations.RunPython:
    """A RunPython running each vendor's statements, as given, without parameters (a `%s` in
    them stays as written). A vendor whose statements are None is refused by name."""

    def run(statements: Statements):
        def apply(apps, schema_editor):
            vendor = schema_editor.connection.vendor
            sql = statements(vendor)
            if sql is None:
                raise NotImplementedError(f"this migration has no SQL for {vendor}")
            for statement in sql:
                schema_editor.execute(statement, None)

        return apply

    return migrations.RunPython(run(forwards), run(backwards))


def fillfactor(table: str, value: int) -> migrations.RunPython:
    """Fill `table`'s pages to `value` percent (100 in reverse), leaving room for updates in place.

    An update that changes no indexed column and finds room on its row's page is HOT:
    the new row version stays on the page and no index gets an entry. It applies to
    pages written from now on (VACUUM FULL or pg_repack rewrites the others).
    PostgreSQL only; nothing to do elsewhere."""

    def set_to(percent: int) -> Statements:
        return lambda vendor: (
            [f"ALTER TABLE {table} SET (fillfactor = {percent})"] if vendor == "postgresql" else []
        )

    return vendor_sql(set_to(value), set_to(100))
