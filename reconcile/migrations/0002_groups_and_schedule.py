"""Operators decide reconciliation findings; the bounded reconcile poll runs every minute."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

OPERATOR_PERMISSIONS = [
    ("reconcile", "view_scanstate"),
    ("reconcile", "change_scanstate"),
    ("reconcile", "view_reconcilereport"),
    ("reconcile", "view_finding"),
    ("reconcile", "view_retrycandidatequeue"),
    ("reconcile", "decide_finding"),
]
SCHEDULE = ("conduit: reconcile due sources", "reconcile.tasks.reconcile_poll")


def forwards(apps, schema_editor):
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    operators, _ = Group.objects.get_or_create(name="operators")
    for app_label, codename in OPERATOR_PERMISSIONS:
        operators.permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    apps.get_model("django_q", "Schedule").objects.update_or_create(
        name=SCHEDULE[0], defaults={"func": SCHEDULE[1], "schedule_type": "I", "minutes": 1, "repeats": -1}
    )


def backwards(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=SCHEDULE[0]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("reconcile", "0001_initial"),
        ("replies", "0002_groups_and_schedules"),
    ]
    operations = [migrations.RunPython(forwards, backwards)]
