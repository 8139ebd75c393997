"""An index on findings by (reply_key, kind): the scan's "already recorded?" probes.

Publication leaves out a finding a person closes when one is open for the reply, or (for a
receipt kind) acknowledged for the same action state. Without this index each probe read every
finding of the kind (finding_report_kind leads with the report), and a plan that ran the probe
per reply action took seconds at 100,000 actions.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("reconcile", "0007_meta_subscription_schedule")]
    operations = [
        migrations.AddIndex(
            model_name="finding",
            index=models.Index(fields=["reply_key", "kind"], name="finding_reply_kind"),
        ),
    ]
