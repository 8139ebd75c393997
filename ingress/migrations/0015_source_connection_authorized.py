"""Sources record who authorised their account's connection, and when; owners may authorise it.

Seed 000 keeps account connection a human-only step, and a live route may be enabled only once a
person authorised its source's connection (docs/concepts/acceptance.md#live). Existing sources
start unauthorised: an owner authorises each (Ingress > Sources, "Authorize account connection").
"""

from django.contrib.auth.management import create_permissions
from django.db import migrations, models

PERMISSION = ("ingress", "authorize_connection")


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
    dependencies = [
        ("ingress", "0014_source_app_id"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="source",
            options={
                "ordering": ["name"],
                "permissions": [("authorize_connection", "Can authorise a source's account connection")],
            },
        ),
        migrations.AddField(
            model_name="source",
            name="connection_authorized_at",
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="source",
            name="connection_authorized_by",
            field=models.CharField(blank=True, editable=False, max_length=150),
        ),
        migrations.AddConstraint(
            model_name="source",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("connection_authorized_at__isnull", True), ("connection_authorized_by", "")),
                    models.Q(
                        models.Q(("connection_authorized_by", ""), _negated=True),
                        ("connection_authorized_at__isnull", False),
                    ),
                    _connector="OR",
                ),
                name="source_connection_authorized_by_and_at",
            ),
        ),
        migrations.RunPython(grant_to_owners, revoke),
    ]
