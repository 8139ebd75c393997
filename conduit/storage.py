"""Storage parameters the migrations set on PostgreSQL tables (a no-op elsewhere)."""

from __future__ import annotations

from django.db import migrations


def fillfactor(table: str, value: int) -> migrations.RunPython:
    """Fill `table`'s pages to `value` percent (100 in reverse), leaving room for updates in place.

    An update that changes no indexed column and finds room on its row's page is HOT:
    the new row version stays on the page and no index gets an entry. It applies to
    pages written from now on (VACUUM FULL or pg_repack rewrites the others)."""
    def set_to(percent: int):
        def apply(apps, schema_editor):
            if schema_editor.connection.vendor == "postgresql":
                schema_editor.execute(f"ALTER TABLE {table} SET (fillfactor = {percent})")
        return apply
    return migrations.RunPython(set_to(value), set_to(100))
