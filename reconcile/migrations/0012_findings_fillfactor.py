"""Findings' pages keep room for one more version of each row (fillfactor 50).

A finding with a repair is written planned and updated once with its outcome
(`repair_outcome`, `repair_code`: neither indexed nor in an index's condition). With
room on its page the update is HOT: no new entry in the table's indexes (conduit.storage).
"""

from django.db import migrations

from conduit.storage import fillfactor


class Migration(migrations.Migration):
    dependencies = [("reconcile", "0011_findings_checked_per_statement")]

    operations = [fillfactor("reconcile_finding", 50)]
