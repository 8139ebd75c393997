"""WhatsApp: an event keeps the address a reply goes to; statuses are a ledger of their own.

SQLite remakes the events table for the new column: the transitions' statement reference steps
aside meanwhile (conduit.references.sqlite_table_remade).
"""

import django.db.models.deletion
from django.db import migrations, models

import conduit.content
from conduit.references import Reference, sqlite_table_remade


class Migration(migrations.Migration):
    dependencies = [
        ("ingress", "0023_search_indexes"),
    ]

    operations = [
        *sqlite_table_remade(
            Reference("inbound_event_transitions", "event_id", "inbound_events"),
            operations=[
                migrations.AddField(
                    model_name="inboundevent",
                    name="reply_address",
                    field=conduit.content.ContentField(blank=True, db_default=""),
                ),
            ],
        ),
        migrations.CreateModel(
            name="MessageStatus",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "provider_id",
                    models.CharField(help_text="The message's id on the platform (a wamid).", max_length=200),
                ),
                ("status", models.CharField(max_length=32)),
                (
                    "correlation",
                    models.CharField(
                        blank=True,
                        help_text="What the platform carried back: the reply key Conduit sent.",
                        max_length=512,
                    ),
                ),
                ("error_code", models.CharField(blank=True, max_length=16)),
                ("occurred_at", models.DateTimeField()),
                ("first_seen_at", models.DateTimeField()),
                ("seen_count", models.PositiveIntegerField(default=1)),
                ("reviewed_at", models.DateTimeField(blank=True, null=True)),
                ("reviewed_by", models.CharField(blank=True, db_default="", max_length=150)),
                (
                    "source",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="ingress.source",
                    ),
                ),
            ],
            options={
                "verbose_name_plural": "message statuses",
                "db_table": "ingress_message_statuses",
                "ordering": ["occurred_at", "id"],
            },
        ),
        migrations.CreateModel(
            name="UndeliveredMessage",
            fields=[],
            options={
                "verbose_name": "sent message the platform could not deliver",
                "verbose_name_plural": "sent messages the platform could not deliver",
                "proxy": True,
                "indexes": [],
                "constraints": [],
            },
            bases=("ingress.messagestatus",),
        ),
        migrations.AddIndex(
            model_name="messagestatus",
            index=models.Index(
                condition=models.Q(("reviewed_at__isnull", True), ("status", "failed")),
                fields=["occurred_at"],
                name="message_status_unreviewed",
            ),
        ),
        migrations.AddIndex(
            model_name="messagestatus",
            index=models.Index(fields=["correlation"], name="message_status_correlation"),
        ),
        migrations.AddConstraint(
            model_name="messagestatus",
            constraint=models.UniqueConstraint(
                fields=("source", "provider_id", "status"), name="message_status_unique"
            ),
        ),
        migrations.AddConstraint(
            model_name="messagestatus",
            constraint=models.CheckConstraint(
                condition=models.Q(("status", ""), _negated=True), name="message_status_named"
            ),
        ),
        migrations.AddConstraint(
            model_name="messagestatus",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("reviewed_at__isnull", True),
                    models.Q(("reviewed_by", ""), _negated=True),
                    _connector="OR",
                ),
                name="message_status_reviewer",
            ),
        ),
    ]
