"""A staged row's run is checked once per statement, not once per row (conduit.references).

A scan stages each page (a thousand events and their receipts) by COPY. As a
foreign key, `run_id` cost a lookup and a row lock per staged row at commit, about
half of a page's write. The same rule is now held by triggers checked once per
statement; a run cannot be deleted from under its staged rows (Django's CASCADE
deletes them first, as before).
"""

from django.db import migrations, models

from conduit.references import Reference, checked_per_statement

RUN = "reconcile_reconcilerun"


def _run_field() -> models.ForeignKey:
    return models.ForeignKey(
        db_constraint=False,
        db_index=False,
        on_delete=models.CASCADE,
        related_name="+",
        to="reconcile.reconcilerun",
    )


class Migration(migrations.Migration):
    dependencies = [("reconcile", "0009_finding_report_index_folded")]

    operations = [
        migrations.AlterField(model_name="stagedevent", name="run", field=_run_field()),
        migrations.AlterField(model_name="stagedreceipt", name="run", field=_run_field()),
        checked_per_statement(
            Reference("reconcile_stagedevent", "run_id", RUN),
            Reference("reconcile_stagedreceipt", "run_id", RUN),
        ),
    ]
