"""A finding's report and action are checked once per statement (conduit.references).

A report writes its findings a kind at a time (INSERT ... SELECT); as foreign keys, `report_id`
and `action_id` cost a lookup and a row lock per finding at commit.
"""

import django.db.models.deletion
from django.db import migrations, models

from conduit.references import Reference, checked_per_statement


class Migration(migrations.Migration):
    dependencies = [
        ("reconcile", "0010_staged_run_checked_per_statement"),
        ("replies", "0008_review_queue_order_index"),
    ]

    operations = [
        migrations.AlterField(
            model_name="finding",
            name="action",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="findings",
                to="replies.replyaction",
            ),
        ),
        migrations.AlterField(
            model_name="finding",
            name="report",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="findings",
                to="reconcile.reconcilereport",
            ),
        ),
        checked_per_statement(
            Reference("reconcile_finding", "report_id", "reconcile_reconcilereport"),
            Reference("reconcile_finding", "action_id", "reply_actions"),
        ),
    ]
