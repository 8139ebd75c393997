"""The three back-office groups and the sender's safety-net schedules."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

GROUPS = {
    # Reviewers approve and close pending replies and review quarantine.
    "reviewers": [
        ("replies", "view_replyaction"),
        ("replies", "approve_replyaction"),
        ("replies", "view_reviewqueue"),
        ("replies", "view_replycopy"),
        ("ingress", "view_inboundevent"),
        ("ingress", "view_quarantinereceipt"),
        ("ingress", "review_quarantinereceipt"),
    ],
    # Operators resolve SEND_STATUS_UNKNOWN.
    "operators": [
        ("replies", "view_replyaction"),
        ("replies", "resolve_unknown_send"),
        ("replies", "view_unknownsendqueue"),
        ("replies", "view_sendattempt"),
        ("ingress", "view_inboundevent"),
    ],
    # Owners manage sources and copy, and alone may enable live sending.
    "owners": [
        ("ingress", "view_source"),
        ("ingress", "change_source"),
        ("ingress", "add_source"),
        ("ingress", "enable_live_send"),
        ("replies", "view_replycopy"),
        ("replies", "add_replycopy"),
    ],
}

SCHEDULES = [
    ("conduit: send due replies", "replies.tasks.send_due"),
    ("conduit: sweep stuck SENDING", "replies.tasks.sweep_sending"),
]


def forwards(apps, schema_editor):
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for name, perms in GROUPS.items():
        group, _ = Group.objects.get_or_create(name=name)
        for app_label, codename in perms:
            group.permissions.add(
                Permission.objects.get(content_type__app_label=app_label, codename=codename)
            )
    Schedule = apps.get_model("django_q", "Schedule")
    for name, func in SCHEDULES:
        Schedule.objects.update_or_create(
            name=name, defaults={"func": func, "schedule_type": "I", "minutes": 1, "repeats": -1}
        )


def backwards(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=GROUPS).delete()
    apps.get_model("django_q", "Schedule").objects.filter(name__in=[n for n, _ in SCHEDULES]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("replies", "0001_initial"),
        ("ingress", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]
    operations = [migrations.RunPython(forwards, backwards)]
