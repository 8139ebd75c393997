"""The actions' event key keeps one index: the plain one, renamed `reply_action_event_key`.

Django gave the foreign key a second index on PostgreSQL (`varchar_pattern_ops`, for LIKE
'prefix%'), which no query of this column uses and every ingest paid for twice. The state
moves to an explicit index; the database keeps the index it has (renamed, not rebuilt, on
PostgreSQL) and drops the other. SQLite, which cannot rename an index, builds it anew.
"""

import django.db.models.deletion
from django.db import migrations, models

# Django's names for the foreign key's two indexes (the table, the column and their hash).
PLAIN = "reply_actions_event_key_b412ca78"
PATTERN = "reply_actions_event_key_b412ca78_like"
INDEX = "reply_action_event_key"


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX IF EXISTS {PATTERN}")
        schema_editor.execute(f"ALTER INDEX {PLAIN} RENAME TO {INDEX}")
    else:
        schema_editor.execute(f"DROP INDEX IF EXISTS {PLAIN}")
        schema_editor.execute(f"CREATE INDEX {INDEX} ON reply_actions (event_key)")


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER INDEX {INDEX} RENAME TO {PLAIN}")
        schema_editor.execute(f"CREATE INDEX {PATTERN} ON reply_actions (event_key varchar_pattern_ops)")
    else:
        schema_editor.execute(f"DROP INDEX IF EXISTS {INDEX}")
        schema_editor.execute(f"CREATE INDEX {PLAIN} ON reply_actions (event_key)")


class Migration(migrations.Migration):
    dependencies = [
        ("ingress", "0025_undelivered_messages_operators"),
        ("replies", "0017_provider_reply_id_index"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="replyaction",
                    name="event",
                    field=models.ForeignKey(
                        db_column="event_key",
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="reply_actions",
                        to="ingress.inboundevent",
                        to_field="event_key",
                    ),
                ),
                migrations.AddIndex(
                    model_name="replyaction",
                    index=models.Index(fields=["event"], name=INDEX),
                ),
            ],
            database_operations=[migrations.RunPython(forwards, backwards)],
        )
    ]
