from django.db import migrations

import conduit.content


class Migration(migrations.Migration):
    dependencies = [
        ("reconcile", "0013_references_checked_again"),
    ]

    # The columns keep their types: only Django's state learns which hold buyer content (or a
    # digest of it) and that variable names are matched whole. No database operation (SQLite
    # would rebuild the tables, and their reference triggers with them).
    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="stagedevent",
                    name="payload_hash",
                    field=conduit.content.ContentDigestField(max_length=64),
                ),
                migrations.AlterField(
                    model_name="stagedevent",
                    name="text",
                    field=conduit.content.ContentField(blank=True),
                ),
            ],
            database_operations=[],
        ),
    ]
