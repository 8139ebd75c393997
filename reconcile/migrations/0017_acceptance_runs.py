"""The record of `manage.py acceptance` runs, which owners and operators may read.

A live route may be enabled only while the latest run passed on the running code version
(docs/concepts/acceptance.md#live). Self-contained: it creates one table and grants its view
permission.
"""

from django.contrib.auth.management import create_permissions
from django.db import migrations, models

READERS = ("owners", "operators")


def grant_view(apps, schema_editor):
    app_config = apps.get_app_config("reconcile")
    app_config.models_module = True
    create_permissions(app_config, apps=apps, verbosity=0)
    app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    view = apps.get_model("auth", "Permission").objects.get(
        content_type__app_label="reconcile", codename="view_acceptancerun"
    )
    for name in READERS:
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.add(view)


class Migration(migrations.Migration):
    dependencies = [
        ("reconcile", "0016_finding_decisions_everywhere"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.CreateModel(
            name="AcceptanceRun",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("started_at", models.DateTimeField()),
                ("finished_at", models.DateTimeField()),
                (
                    "ran_by",
                    models.CharField(
                        help_text="Who ran it (--actor; the OS user by default).", max_length=150
                    ),
                ),
                (
                    "code_version",
                    models.CharField(
                        help_text="The code it ran: package version + digest of the Python sources.",
                        max_length=64,
                    ),
                ),
                ("passed", models.BooleanField()),
                (
                    "failed_check",
                    models.CharField(
                        blank=True,
                        help_text="The first check that failed, or control that stayed green (blank when it passed).",
                        max_length=300,
                    ),
                ),
            ],
            options={
                "db_table": "reconcile_acceptance_runs",
                "ordering": ["-id"],
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(
                            models.Q(("failed_check", ""), ("passed", True)),
                            models.Q(("passed", False), models.Q(("failed_check", ""), _negated=True)),
                            _connector="OR",
                        ),
                        name="acceptance_run_failure_named",
                    ),
                    models.CheckConstraint(
                        condition=models.Q(
                            models.Q(("ran_by", ""), _negated=True),
                            models.Q(("code_version", ""), _negated=True),
                        ),
                        name="acceptance_run_signed",
                    ),
                    models.CheckConstraint(
                        condition=models.Q(("finished_at__gte", models.F("started_at"))),
                        name="acceptance_run_finished_after_start",
                    ),
                ],
            },
        ),
        migrations.RunPython(grant_view, migrations.RunPython.noop),
    ]
