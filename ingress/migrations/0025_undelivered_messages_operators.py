"""Operators read what the platform reported of each sent message and work the queue of messages
it could not deliver (Mark reviewed), as they work the other queues of sends' outcomes."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

OPERATOR_PERMISSIONS = ["view_messagestatus", "view_undeliveredmessage", "review_undeliveredmessage"]


def grant(apps, schema_editor):
    app_config = apps.get_app_config("ingress")
    app_config.models_module = True
    create_permissions(app_config, apps=apps, verbosity=0)
    app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group, _ = Group.objects.get_or_create(name="operators")
    for codename in OPERATOR_PERMISSIONS:
        group.permissions.add(Permission.objects.get(content_type__app_label="ingress", codename=codename))


def revoke(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for group in Group.objects.filter(name="operators"):
        group.permissions.remove(
            *Permission.objects.filter(content_type__app_label="ingress", codename__in=OPERATOR_PERMISSIONS)
        )


class Migration(migrations.Migration):
    dependencies = [
        ("ingress", "0024_whatsapp_statuses"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="undeliveredmessage",
            options={
                "permissions": [
                    (
                        "review_undeliveredmessage",
                        "Can mark a message the platform could not deliver reviewed",
                    )
                ],
                "verbose_name": "sent message the platform could not deliver",
                "verbose_name_plural": "sent messages the platform could not deliver",
            },
        ),
        migrations.RunPython(grant, revoke),
    ]
