"""Reply routes per (source, purpose), filled from the reply fields sources carried until now.

Each source's transport, transport URL and live flag become one route per
purpose it declares or has actions for (so a pending action of a purpose no
longer declared still has the route it had). Whoever could enable live sending
for a source (ingress.enable_live_send) may now do it for a route.
"""

import django.db.models.deletion
from django.contrib.auth.management import create_permissions
from django.db import migrations, models

OLD_PERMISSION = ("ingress", "enable_live_send")
NEW_PERMISSION = ("replies", "enable_live_send")
# Owners manage routes as they manage sources, and alone may enable live sending.
OWNER_PERMISSIONS = ["view_replyroute", "add_replyroute", "change_replyroute", "enable_live_send"]


def routes_from_sources(apps, schema_editor):
    Source = apps.get_model("ingress", "Source")
    ReplyAction = apps.get_model("replies", "ReplyAction")
    ReplyRoute = apps.get_model("replies", "ReplyRoute")
    for source in Source.objects.order_by("pk"):
        acted = ReplyAction.objects.filter(event__source=source).values_list("purpose", flat=True).distinct()
        purposes = dict.fromkeys([*source.purposes, *sorted(acted)])
        ReplyRoute.objects.bulk_create(
            ReplyRoute(
                source=source,
                purpose=purpose,
                transport_name=source.transport,
                target_url=source.transport_url,
                live_send_enabled=source.live_send_enabled,
            )
            for purpose in purposes
        )


def sources_from_routes(apps, schema_editor):
    Source = apps.get_model("ingress", "Source")
    ReplyRoute = apps.get_model("replies", "ReplyRoute")
    for source in Source.objects.order_by("pk"):
        route = ReplyRoute.objects.filter(source=source).order_by("purpose").first()
        if route is not None:
            Source.objects.filter(pk=source.pk).update(
                transport=route.transport_name,
                transport_url=route.target_url,
                live_send_enabled=ReplyRoute.objects.filter(source=source, live_send_enabled=True).exists(),
            )


def _permission(apps, app_label: str, codename: str):
    return (
        apps.get_model("auth", "Permission")
        .objects.filter(content_type__app_label=app_label, codename=codename)
        .first()
    )


def grant_route_permission(apps, schema_editor):
    app_config = apps.get_app_config("replies")
    app_config.models_module = True
    create_permissions(app_config, apps=apps, verbosity=0)
    app_config.models_module = None
    old, new = _permission(apps, *OLD_PERMISSION), _permission(apps, *NEW_PERMISSION)
    Group = apps.get_model("auth", "Group")
    User = apps.get_model("auth", "User")
    group, _ = Group.objects.get_or_create(name="owners")
    group.permissions.add(*(_permission(apps, "replies", codename) for codename in OWNER_PERMISSIONS))
    if old is not None:
        for holder in Group.objects.filter(permissions=old):
            holder.permissions.add(new)
        for holder in User.objects.filter(user_permissions=old):
            holder.user_permissions.add(new)


def revoke_route_permission(apps, schema_editor):
    for codename in OWNER_PERMISSIONS:
        permission = _permission(apps, "replies", codename)
        if permission is not None:
            permission.group_set.clear()
            permission.user_set.clear()


class Migration(migrations.Migration):
    dependencies = [
        ("ingress", "0004_proof_failure_windows"),
        ("replies", "0004_stranded_send_queue"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.CreateModel(
            name="ReplyRoute",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("purpose", models.CharField(max_length=64)),
                (
                    "transport_name",
                    models.CharField(
                        default="sandbox",
                        help_text="Where approved replies of this purpose are sent.",
                        max_length=64,
                    ),
                ),
                (
                    "target_url",
                    models.URLField(
                        blank=True, help_text="The transport's base URL, e.g. the sandbox provider's."
                    ),
                ),
                (
                    "live_send_enabled",
                    models.BooleanField(
                        default=False,
                        help_text="Owner only: allow a live transport (CONDUIT_LIVE_SEND=on must also be set).",
                    ),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                (
                    "source",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="reply_routes",
                        to="ingress.source",
                    ),
                ),
            ],
            options={
                "db_table": "reply_routes",
                "ordering": ["source", "purpose"],
                "permissions": [("enable_live_send", "Can enable live sending for a reply route")],
                "constraints": [
                    models.UniqueConstraint(fields=("source", "purpose"), name="reply_route_purpose_unique")
                ],
            },
        ),
        migrations.RunPython(routes_from_sources, sources_from_routes),
        migrations.RunPython(grant_route_permission, revoke_route_permission),
    ]
