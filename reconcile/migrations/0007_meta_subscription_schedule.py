"""The daily read of each Meta source's subscribed_apps (Meta unsubscribes silently)."""

from django.db import migrations

SCHEDULE = ("conduit: check Meta subscriptions", "reconcile.tasks.meta_subscriptions_check")


def forwards(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.update_or_create(
        name=SCHEDULE[0], defaults={"func": SCHEDULE[1], "schedule_type": "D", "repeats": -1}
    )


def backwards(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=SCHEDULE[0]).delete()


class Migration(migrations.Migration):
    dependencies = [("reconcile", "0006_one_open_finding_per_reply_kind"), ("ingress", "0006_meta_sources")]
    operations = [migrations.RunPython(forwards, backwards)]
