"""A finding's report is indexed by (report, kind) alone: the FK's own index only slowed the writes."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("reconcile", "0008_finding_reply_kind"),
    ]

    operations = [
        migrations.AlterField(
            model_name="finding",
            name="report",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="findings",
                to="reconcile.reconcilereport",
            ),
        ),
    ]
