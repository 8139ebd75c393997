"""Every reply action and every copy belongs to a campaign (0011 gave the old ones theirs). SQLite
remakes the actions' table for NOT NULL: their statement references step aside meanwhile."""

import django.db.models.deletion
from django.db import migrations, models

from conduit.references import Reference, sqlite_table_remade


class Migration(migrations.Migration):
    dependencies = [
        # The findings' reference to the actions exists before the actions' table is remade.
        ("reconcile", "0018_credentials_refresh_schedule"),
        ("replies", "0011_account_keywords_become_campaigns"),
    ]

    operations = sqlite_table_remade(
        Reference("reply_action_transitions", "action_id", "reply_actions"),
        Reference("reconcile_finding", "action_id", "reply_actions"),
        operations=[
            migrations.AlterField(
                model_name="replyaction",
                name="campaign",
                field=models.ForeignKey(
                    db_index=False,
                    on_delete=django.db.models.deletion.PROTECT,
                    related_name="actions",
                    to="replies.campaign",
                ),
            ),
            migrations.AlterField(
                model_name="replyaction",
                name="campaign_version",
                field=models.PositiveIntegerField(),
            ),
            migrations.AlterField(
                model_name="replycopy",
                name="campaign",
                field=models.ForeignKey(
                    on_delete=django.db.models.deletion.PROTECT, related_name="copies", to="replies.campaign"
                ),
            ),
        ],
    )
