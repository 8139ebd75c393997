"""Every human decision lands on its findings: a quarantine review too.

A finding whose repair a quarantine receipt refused (a replay ingest quarantined) names that
receipt; its review is the finding's decision (DISMISSED, CORRECTED). The database refuses
any other decision value, and indexes the decided findings by time (a report lists those taken
since the one before it). SQLite remakes the table for the check: the findings' statement
references step aside meanwhile (conduit.references.sqlite_table_remade).
"""

from django.db import migrations, models

from conduit.references import Reference, sqlite_table_remade

FINDING_REFERENCES = (
    Reference("reconcile_finding", "report_id", "reconcile_reconcilereport"),
    Reference("reconcile_finding", "action_id", "reply_actions"),
)
DECISIONS = ["RETRY_AUTHORIZED", "CLOSED", "CONFIRMED_SENT", "DISMISSED", "CORRECTED"]


class Migration(migrations.Migration):
    dependencies = [
        ("reconcile", "0015_subscriptions_check_renamed"),
        ("replies", "0009_action_history_checked_per_statement"),
    ]

    operations = [
        migrations.AddField(
            model_name="finding",
            name="quarantine_receipt",
            field=models.UUIDField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="finding",
            name="decision",
            field=models.CharField(
                blank=True, choices=[(d, d.replace("_", " ").title()) for d in DECISIONS], max_length=32
            ),
        ),
        migrations.AddIndex(
            model_name="finding",
            index=models.Index(
                condition=models.Q(("quarantine_receipt__isnull", False)),
                fields=["quarantine_receipt"],
                name="finding_quarantine_receipt",
            ),
        ),
        migrations.AddIndex(
            model_name="finding",
            index=models.Index(
                condition=models.Q(("decision", ""), _negated=True),
                fields=["decided_at"],
                name="finding_decided_at",
            ),
        ),
        *sqlite_table_remade(
            *FINDING_REFERENCES,
            operations=[
                migrations.AddConstraint(
                    model_name="finding",
                    constraint=models.CheckConstraint(
                        condition=models.Q(("decision__in", ["", *DECISIONS])), name="finding_decision_valid"
                    ),
                ),
            ],
        ),
    ]
