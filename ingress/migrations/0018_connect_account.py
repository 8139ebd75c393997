"""Owners connect accounts through the platforms' login flows (the Connect buttons)."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

PERMISSION = ("ingress", "connect_account")


def grant_to_owners(apps, schema_editor):
    app_config = apps.get_app_config("ingress")
    app_config.models_module = True
    create_permissions(app_config, apps=apps, verbosity=0)
    app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    owners, _ = Group.objects.get_or_create(name="owners")
    owners.permissions.add(
        Permission.objects.get(content_type__app_label=PERMISSION[0], codename=PERMISSION[1])
    )


def revoke(apps, schema_editor):
    Permission = apps.get_model("auth", "Permission")
    permission = Permission.objects.filter(
        content_type__app_label=PERMISSION[0], codename=PERMISSION[1]
    ).first()
    if permission is not None:
        permission.group_set.clear()
        permission.user_set.clear()


class Migration(migrations.Migration):
    dependencies = [("ingress", "0017_deletion_requests_and_disconnect")]

    operations = [
        migrations.AlterModelOptions(
            name="source",
            options={
                "ordering": ["name"],
                "permissions": [
                    ("authorize_connection", "Can authorise a source's account connection"),
                    ("disconnect_account", "Can disconnect a source's account"),
                    ("connect_account", "Can connect an account through its platform's login"),
                ],
            },
        ),
        migrations.RunPython(grant_to_owners, revoke),
    ]
