"""The event ledger's pages keep room for one more version of each row (fillfactor 50).

Every event row is updated after it is written: reconcile marks each one (status
and `reconciled_at`) on every scan, and a duplicate delivery moves its count. None
of those columns is indexed, so with room on the row's own page PostgreSQL makes the
update HOT: no new entry in the table's six indexes. Packed pages (fillfactor 100)
force every such update onto another page with an entry in every index, and after
one scan the table has grown to twice its packed size anyway, its indexes bloated
besides. PostgreSQL only; it applies to pages written from now on (VACUUM FULL or
pg_repack rewrites existing ones).
"""

from django.db import migrations

TABLE = "inbound_events"


def fillfactor(value: int):
    def apply(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(f"ALTER TABLE {TABLE} SET (fillfactor = {value})")
    return apply


class Migration(migrations.Migration):
    dependencies = [("ingress", "0009_conduit_refuse")]

    operations = [migrations.RunPython(fillfactor(50), fillfactor(100))]
