"""The subscription schedule's task renamed: existing schedule rows call it by its new path."""

from django.db import migrations

OLD = "reconcile.tasks.meta_subscriptions_check"
NEW = "reconcile.tasks.subscriptions_check"


def forwards(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(func=OLD).update(func=NEW)


def backwards(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(func=NEW).update(func=OLD)


class Migration(migrations.Migration):
    dependencies = [("reconcile", "0014_content_declared"), ("django_q", "0001_initial")]
    operations = [migrations.RunPython(forwards, backwards)]
