"""Each event records the campaign that matched it, that campaign's version, and the comment it answers."""

from django.db import migrations, models

from conduit.references import Reference, sqlite_table_remade


class Migration(migrations.Migration):
    dependencies = [
        ("ingress", "0018_connect_account"),
    ]

    operations = sqlite_table_remade(
        Reference("inbound_event_transitions", "event_id", "inbound_events"),
        operations=[
            migrations.AddField(
                model_name="inboundevent",
                name="trigger_campaign",
                field=models.BigIntegerField(blank=True, null=True),
            ),
            migrations.AddField(
                model_name="inboundevent",
                name="trigger_campaign_version",
                field=models.PositiveIntegerField(blank=True, null=True),
            ),
            migrations.AddField(
                model_name="inboundevent",
                name="parent_ref",
                field=models.CharField(blank=True, db_default="", max_length=200),
            ),
        ],
    )
