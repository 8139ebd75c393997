"""A staged event keeps its author's handle, as the event it becomes does (ingress 0021)."""

from django.db import migrations

import conduit.content
from conduit.references import Reference, sqlite_table_remade


class Migration(migrations.Migration):
    dependencies = [
        ("reconcile", "0020_human_labels"),
    ]

    operations = sqlite_table_remade(
        Reference("reconcile_stagedevent", "run_id", "reconcile_reconcilerun"),
        operations=[
            migrations.AddField(
                model_name="stagedevent",
                name="handle",
                field=conduit.content.ContentField(blank=True, db_default=""),
            ),
        ],
    )
