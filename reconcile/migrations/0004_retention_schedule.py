"""The daily retention purge."""

from django.db import migrations

SCHEDULE = ("conduit: purge retained content", "reconcile.tasks.purge_retained")


def forwards(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.update_or_create(
        name=SCHEDULE[0], defaults={"func": SCHEDULE[1], "schedule_type": "D", "repeats": -1}
    )


def backwards(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=SCHEDULE[0]).delete()


class Migration(migrations.Migration):
    dependencies = [("reconcile", "0003_canary_report"), ("ingress", "0003_content_purged_at")]
    operations = [migrations.RunPython(forwards, backwards)]
