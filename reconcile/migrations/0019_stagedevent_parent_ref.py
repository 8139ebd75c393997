"""A staged comment keeps the comment it answers, for a campaign's top-level-only rule."""

from django.db import migrations, models

from conduit.references import Reference, sqlite_table_remade


class Migration(migrations.Migration):
    dependencies = [
        ("reconcile", "0018_credentials_refresh_schedule"),
    ]

    operations = sqlite_table_remade(
        Reference("reconcile_stagedevent", "run_id", "reconcile_reconcilerun"),
        operations=[
            migrations.AddField(
                model_name="stagedevent",
                name="parent_ref",
                field=models.CharField(blank=True, db_default="", max_length=200),
            ),
        ],
    )
