"""The event ledger's pages keep room for one more version of each row (fillfactor 50).

Every event row is updated after it is written: reconcile marks each one (status
and `reconciled_at`) on every scan, and a duplicate delivery moves its count. None
of those columns is indexed, so with room on the row's own page PostgreSQL makes the
update HOT: no new entry in the table's six indexes. Packed pages (fillfactor 100)
force every such update onto another page with an entry in every index, and after
one scan the table has grown to twice its packed size anyway, its indexes bloated
besides. PostgreSQL only (conduit.storage.fillfactor).
"""

from django.db import migrations

from conduit.storage import fillfactor


class Migration(migrations.Migration):
    dependencies = [("ingress", "0009_conduit_refuse")]

    operations = [fillfactor("inbound_events", 50)]
