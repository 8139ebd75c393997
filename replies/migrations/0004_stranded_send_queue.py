"""The stranded-sends admin queue (a proxy) and its permission, granted to operators."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

# Operators also work the stranded-sends queue: retry now or close without reply.
OPERATOR_PERMISSIONS = ["view_strandedsendqueue", "resolve_stranded_send"]


def grant(apps, schema_editor):
    app_config = apps.get_app_config("replies")
    app_config.models_module = True
    create_permissions(app_config, apps=apps, verbosity=0)
    app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group, _ = Group.objects.get_or_create(name="operators")
    for codename in OPERATOR_PERMISSIONS:
        group.permissions.add(Permission.objects.get(content_type__app_label="replies", codename=codename))


def revoke(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for group in Group.objects.filter(name="operators"):
        group.permissions.remove(
            *Permission.objects.filter(content_type__app_label="replies", codename__in=OPERATOR_PERMISSIONS)
        )


class Migration(migrations.Migration):
    dependencies = [
        ("replies", "0003_claim_indexes"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.CreateModel(
            name="StrandedSendQueue",
            fields=[],
            options={
                "verbose_name": "stranded send",
                "verbose_name_plural": "stranded sends (FAILED_BEFORE_SEND, exhausted or stopped)",
                "permissions": [
                    ("resolve_stranded_send", "Can retry now or close stranded sends (FAILED_BEFORE_SEND)")
                ],
                "proxy": True,
                "indexes": [],
                "constraints": [],
            },
            bases=("replies.replyaction",),
        ),
        migrations.RunPython(grant, revoke),
    ]
