"""Statuses find the reply holding their message id (a status without the reply key): an index on
the receipts actions hold, built without blocking writes on PostgreSQL. Declared here only, not in
the model's Meta, as a migration built CONCURRENTLY cannot be one Django autodetects."""

from django.db import migrations

INDEX = "reply_action_provider_reply_id"


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {INDEX} ON reply_actions (provider_reply_id) "
            "WHERE provider_reply_id <> ''"
        )
    else:
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {INDEX} ON reply_actions (provider_reply_id) "
            "WHERE provider_reply_id <> ''"
        )


def drop(apps, schema_editor):
    concurrently = "CONCURRENTLY " if schema_editor.connection.vendor == "postgresql" else ""
    schema_editor.execute(f"DROP INDEX {concurrently}IF EXISTS {INDEX}")


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("replies", "0016_replycopy_template")]

    operations = [migrations.RunPython(create, drop)]
