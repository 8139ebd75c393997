"""Deletion requests a platform relays are recorded (the status page answers from them), a stored
token records whose grant it is, and owners may disconnect a source's account."""

from django.contrib.auth.management import create_permissions
from django.db import migrations, models

PERMISSION = ("ingress", "disconnect_account")
# Owners also read the deletion requests (Ingress > Deletion requests).
OWNER_PERMISSIONS = (PERMISSION, ("ingress", "view_deletionrequest"))


def grant_to_owners(apps, schema_editor):
    app_config = apps.get_app_config("ingress")
    app_config.models_module = True
    create_permissions(app_config, apps=apps, verbosity=0)
    app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    owners, _ = Group.objects.get_or_create(name="owners")
    for app_label, codename in OWNER_PERMISSIONS:
        owners.permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))


def revoke(apps, schema_editor):
    Permission = apps.get_model("auth", "Permission")
    for app_label, codename in OWNER_PERMISSIONS:
        permission = Permission.objects.filter(content_type__app_label=app_label, codename=codename).first()
        if permission is not None:
            permission.group_set.clear()
            permission.user_set.clear()


class Migration(migrations.Migration):
    dependencies = [
        ("ingress", "0016_source_credentials"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="source",
            options={
                "ordering": ["name"],
                "permissions": [
                    ("authorize_connection", "Can authorise a source's account connection"),
                    ("disconnect_account", "Can disconnect a source's account"),
                ],
            },
        ),
        migrations.AddField(
            model_name="sourcecredential",
            name="grantor_ref",
            field=models.CharField(blank=True, db_index=True, editable=False, max_length=32),
        ),
        migrations.CreateModel(
            name="DeletionRequest",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("confirmation_code", models.CharField(editable=False, max_length=32)),
                ("request_digest", models.CharField(editable=False, max_length=64)),
                ("user_digest", models.CharField(editable=False, max_length=64)),
                ("app_id", models.CharField(editable=False, max_length=32)),
                ("issued_at", models.DateTimeField(editable=False)),
                ("received_at", models.DateTimeField(editable=False)),
                (
                    "status",
                    models.CharField(choices=[("COMPLETED", "Completed")], editable=False, max_length=16),
                ),
                ("events_blanked", models.PositiveIntegerField(default=0, editable=False)),
                ("sources_disconnected", models.PositiveIntegerField(default=0, editable=False)),
                ("completed_at", models.DateTimeField(blank=True, editable=False, null=True)),
            ],
            options={
                "db_table": "ingress_deletion_requests",
                "ordering": ["-id"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("confirmation_code",), name="deletion_confirmation_code_unique"
                    ),
                    models.UniqueConstraint(
                        fields=("request_digest",), name="deletion_request_digest_unique"
                    ),
                    models.CheckConstraint(
                        condition=models.Q(("status__in", ["COMPLETED"])), name="deletion_status_valid"
                    ),
                    models.CheckConstraint(
                        condition=models.Q(("confirmation_code__regex", "^[A-Za-z0-9_-]{16,32}$")),
                        name="deletion_code_shape",
                    ),
                    models.CheckConstraint(
                        condition=models.Q(
                            ("request_digest__regex", "^[0-9a-f]{64}$"),
                            ("user_digest__regex", "^[0-9a-f]{64}$"),
                        ),
                        name="deletion_digests_are_sha256",
                    ),
                    models.CheckConstraint(
                        condition=models.Q(("completed_at__isnull", False), ("status", "COMPLETED")),
                        name="deletion_completed_at",
                    ),
                ],
            },
        ),
        migrations.RunPython(grant_to_owners, revoke),
    ]
