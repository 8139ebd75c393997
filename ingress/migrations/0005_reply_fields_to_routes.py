"""Sources lose their reply fields: replies.0005 copied them into reply routes first."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("ingress", "0004_proof_failure_windows"),
        # The routes are filled from these fields before they go.
        ("replies", "0005_reply_routes"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="source",
            options={"ordering": ["name"]},
        ),
        migrations.RemoveField(
            model_name="source",
            name="live_send_enabled",
        ),
        migrations.RemoveField(
            model_name="source",
            name="transport",
        ),
        migrations.AlterField(
            model_name="source",
            name="transport_url",
            field=models.URLField(
                blank=True, help_text="Base URL reconciliation reads the source's pages from."
            ),
        ),
        # Sends moved to reply routes; what stays on the source is where its pages are read.
        migrations.RenameField(model_name="source", old_name="transport_url", new_name="source_url"),
    ]
