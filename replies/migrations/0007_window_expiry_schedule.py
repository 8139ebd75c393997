"""The private-reply window's schedule: every minute, fill unknown deadlines and close what expired."""

from django.db import migrations

NAME = "conduit: close expired reply windows"
FUNC = "replies.tasks.close_expired_windows"


def forwards(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.update_or_create(
        name=NAME, defaults={"func": FUNC, "schedule_type": "I", "minutes": 1, "repeats": -1}
    )


def backwards(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("replies", "0006_reply_deadline_and_budgets"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
