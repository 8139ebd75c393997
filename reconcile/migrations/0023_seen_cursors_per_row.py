"""The cursors a scan generation was handed: a row each (SeenCursor), no longer a list on the run.

The list was rewritten, and read back, with every page: a generation of a thousand pages wrote
its run's row a thousand times, each time longer. The cursors of scans still reading move to
rows; a finished run's list held nothing still checked.

SQLite drops the list's column by remaking the runs' table: the staged rows' statement references
to it step aside meanwhile (conduit.references.sqlite_table_remade).
"""

import django.db.models.deletion
from django.db import migrations, models

from conduit.references import Reference, sqlite_table_remade

REMADE = (
    Reference("reconcile_stagedevent", "run_id", "reconcile_reconcilerun"),
    Reference("reconcile_stagedreceipt", "run_id", "reconcile_reconcilerun"),
)


def cursors_to_rows(apps, schema_editor):
    run_model = apps.get_model("reconcile", "ReconcileRun")
    seen_model = apps.get_model("reconcile", "SeenCursor")
    # Locked until the migration commits: a page an old worker commits meanwhile waits, then fails
    # on the dropped column and is read again, rather than adding a cursor after the copy.
    scanning = run_model.objects.select_for_update().filter(state="SCANNING")
    for run_id, digests in scanning.values_list("pk", "cursors_seen"):
        seen_model.objects.bulk_create(
            [seen_model(run_id=run_id, digest=d) for d in dict.fromkeys(digests or [])],
            batch_size=1000,
        )


def rows_to_cursors(apps, schema_editor):
    run_model = apps.get_model("reconcile", "ReconcileRun")
    seen_model = apps.get_model("reconcile", "SeenCursor")
    for run in run_model.objects.filter(state="SCANNING"):
        run.cursors_seen = list(
            seen_model.objects.filter(run_id=run.pk).order_by("pk").values_list("digest", flat=True)
        )
        run.save(update_fields=["cursors_seen"])


class Migration(migrations.Migration):
    dependencies = [
        ("reconcile", "0022_whatsapp"),
    ]

    operations = [
        migrations.CreateModel(
            name="SeenCursor",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("digest", models.CharField(max_length=64)),
                (
                    "run",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="reconcile.reconcilerun",
                    ),
                ),
            ],
            options={
                "db_table": "reconcile_seen_cursors",
                "constraints": [
                    models.UniqueConstraint(fields=("run", "digest"), name="seen_cursor_once_per_run")
                ],
            },
        ),
        migrations.RunPython(cursors_to_rows, rows_to_cursors),
        *sqlite_table_remade(
            *REMADE,
            operations=[migrations.RemoveField(model_name="reconcilerun", name="cursors_seen")],
        ),
    ]
