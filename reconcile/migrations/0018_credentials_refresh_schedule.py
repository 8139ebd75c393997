"""The hourly refresh of stored access tokens (Instagram Login tokens die after 60 days unrefreshed)."""

from django.db import migrations

SCHEDULE = ("conduit: refresh access tokens", "reconcile.tasks.credentials_refresh")


def forwards(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.update_or_create(
        name=SCHEDULE[0], defaults={"func": SCHEDULE[1], "schedule_type": "H", "repeats": -1}
    )


def backwards(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=SCHEDULE[0]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("reconcile", "0017_acceptance_runs"),
        ("ingress", "0016_source_credentials"),
        ("django_q", "0001_initial"),
    ]
    operations = [migrations.RunPython(forwards, backwards)]
