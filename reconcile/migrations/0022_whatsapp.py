"""WhatsApp: a staged event keeps its reply address; a sent message with no status is a finding.

SQLite remakes the findings and staged-events tables: their statement references step aside
meanwhile (conduit.references.sqlite_table_remade).
"""

from django.db import migrations, models

import conduit.content
from conduit.references import Reference, sqlite_table_remade

REMADE = (
    Reference("reconcile_finding", "report_id", "reconcile_reconcilereport"),
    Reference("reconcile_finding", "action_id", "reply_actions"),
    Reference("reconcile_stagedevent", "run_id", "reconcile_reconcilerun"),
)


class Migration(migrations.Migration):
    dependencies = [
        ("reconcile", "0021_stagedevent_handle"),
        ("replies", "0016_replycopy_template"),
    ]

    operations = sqlite_table_remade(
        *REMADE,
        operations=[
            migrations.RemoveConstraint(
                model_name="finding",
                name="finding_kind_valid",
            ),
            migrations.AddField(
                model_name="stagedevent",
                name="address",
                field=conduit.content.ContentField(blank=True, db_default=""),
            ),
            migrations.AlterField(
                model_name="finding",
                name="kind",
                field=models.CharField(
                    choices=[
                        ("MISSING_LOCAL", "Missed webhook"),
                        ("SOURCE_UNVERIFIED", "Not seen on the source"),
                        ("IDENTITY_CONFLICT", "Same event, different content"),
                        ("RECEIPT_ATTACHED", "Receipt found"),
                        ("RECEIPT_MISSING", "Sent, receipt missing"),
                        ("RETRY_CANDIDATE", "Retry candidate"),
                        ("UNEXPECTED_RECEIPT", "Unexpected receipt"),
                        ("UNKNOWN_RECEIPT", "Unknown receipt"),
                        ("INVALID_SOURCE_ITEM", "Unreadable source item"),
                        ("NO_STATUS", "Sent, no status from the platform"),
                    ],
                    max_length=32,
                ),
            ),
            migrations.AddConstraint(
                model_name="finding",
                constraint=models.CheckConstraint(
                    condition=models.Q(
                        (
                            "kind__in",
                            [
                                "MISSING_LOCAL",
                                "SOURCE_UNVERIFIED",
                                "IDENTITY_CONFLICT",
                                "RECEIPT_ATTACHED",
                                "RECEIPT_MISSING",
                                "RETRY_CANDIDATE",
                                "UNEXPECTED_RECEIPT",
                                "UNKNOWN_RECEIPT",
                                "INVALID_SOURCE_ITEM",
                                "NO_STATUS",
                            ],
                        )
                    ),
                    name="finding_kind_valid",
                ),
            ),
        ],
    )
