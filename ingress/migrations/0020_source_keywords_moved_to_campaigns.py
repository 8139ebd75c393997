"""A source's keyword list lives in its every-post campaign now (replies 0011 moved it)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("ingress", "0019_event_campaign_matched"),
        ("replies", "0011_account_keywords_become_campaigns"),
    ]

    operations = [
        migrations.RemoveField(model_name="source", name="trigger_keywords"),
    ]
