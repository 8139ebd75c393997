"""The event admin's exact search by source event id and message ref, each by an index."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("ingress", "0007_source_needs_reauth"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="inboundevent",
            index=models.Index(fields=["source_event_id"], name="inbound_event_source_event_id"),
        ),
        migrations.AddIndex(
            model_name="inboundevent",
            index=models.Index(fields=["message_ref"], name="inbound_event_message_ref"),
        ),
    ]
