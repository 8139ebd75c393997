"""Campaigns: per-account trigger rules with versioned copy and variants (data: 0011)."""

import django.db.models.deletion
from django.db import migrations, models

from conduit.references import Reference, sqlite_table_remade


class Migration(migrations.Migration):
    dependencies = [
        # Going back remakes the actions' table on SQLite: the findings' reference steps aside too.
        ("reconcile", "0018_credentials_refresh_schedule"),
        ("ingress", "0019_event_campaign_matched"),
        ("replies", "0009_action_history_checked_per_statement"),
    ]

    operations = sqlite_table_remade(
        Reference("reply_action_transitions", "action_id", "reply_actions"),
        Reference("reconcile_finding", "action_id", "reply_actions"),
        operations=[
            migrations.CreateModel(
                name="CampaignVersion",
                fields=[
                    (
                        "id",
                        models.BigAutoField(
                            auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                        ),
                    ),
                    ("version", models.PositiveIntegerField()),
                    ("rule", models.JSONField()),
                    ("copy", models.JSONField(default=dict)),
                    ("created_by", models.CharField(max_length=150)),
                    ("created_at", models.DateTimeField()),
                ],
                options={
                    "db_table": "reply_campaign_versions",
                    "ordering": ["campaign", "-version"],
                },
            ),
            migrations.AddField(
                model_name="replyaction",
                name="campaign_version",
                field=models.PositiveIntegerField(null=True),
            ),
            migrations.AddField(
                model_name="replycopy",
                name="copy_set",
                field=models.PositiveIntegerField(default=1, editable=False),
            ),
            migrations.AddField(
                model_name="replycopy",
                name="variant",
                field=models.PositiveSmallIntegerField(default=1, editable=False),
            ),
            migrations.CreateModel(
                name="Campaign",
                fields=[
                    (
                        "id",
                        models.BigAutoField(
                            auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                        ),
                    ),
                    ("name", models.CharField(max_length=100, unique=True)),
                    (
                        "every_post",
                        models.BooleanField(
                            default=False, help_text="Every post of the account, now and later."
                        ),
                    ),
                    (
                        "posts",
                        models.JSONField(
                            blank=True, default=list, help_text="The posts or media it covers (their ids)."
                        ),
                    ),
                    (
                        "keywords",
                        models.JSONField(
                            blank=True, default=list, help_text="Any of these as a whole word, ignoring case."
                        ),
                    ),
                    (
                        "any_comment",
                        models.BooleanField(
                            default=False, help_text="Every comment matches, whatever it says."
                        ),
                    ),
                    (
                        "top_level_only",
                        models.BooleanField(
                            default=False,
                            help_text="Only comments on the post itself, not replies to other comments.",
                        ),
                    ),
                    (
                        "purposes",
                        models.JSONField(
                            default=list, help_text="The source's purposes this campaign answers with."
                        ),
                    ),
                    ("starts_at", models.DateTimeField()),
                    ("ends_at", models.DateTimeField(blank=True, null=True)),
                    (
                        "state",
                        models.CharField(
                            choices=[
                                ("draft", "Draft"),
                                ("active", "Active"),
                                ("paused", "Paused"),
                                ("ended", "Ended"),
                            ],
                            default="draft",
                            max_length=16,
                        ),
                    ),
                    ("activated_at", models.DateTimeField(blank=True, editable=False, null=True)),
                    ("version", models.PositiveIntegerField(default=1, editable=False)),
                    ("account_default", models.BooleanField(default=False, editable=False)),
                    ("created_by", models.CharField(editable=False, max_length=150)),
                    ("created_at", models.DateTimeField(auto_now_add=True)),
                    ("updated_at", models.DateTimeField(auto_now=True)),
                    (
                        "source",
                        models.ForeignKey(
                            on_delete=django.db.models.deletion.CASCADE,
                            related_name="campaigns",
                            to="ingress.source",
                        ),
                    ),
                ],
                options={
                    "db_table": "reply_campaigns",
                    "ordering": ["source", "name"],
                    "permissions": [("edit_campaign", "Can create and change campaigns and their copy")],
                },
            ),
            migrations.AddField(
                model_name="replyaction",
                name="campaign",
                field=models.ForeignKey(
                    db_index=False,
                    null=True,
                    on_delete=django.db.models.deletion.PROTECT,
                    related_name="actions",
                    to="replies.campaign",
                ),
            ),
            migrations.AddField(
                model_name="replycopy",
                name="campaign",
                field=models.ForeignKey(
                    null=True,
                    on_delete=django.db.models.deletion.PROTECT,
                    related_name="copies",
                    to="replies.campaign",
                ),
            ),
            migrations.AddConstraint(
                model_name="replycopy",
                constraint=models.UniqueConstraint(
                    fields=("campaign", "purpose", "copy_set", "variant"), name="reply_copy_variant_unique"
                ),
            ),
            migrations.AddConstraint(
                model_name="replycopy",
                constraint=models.CheckConstraint(
                    condition=models.Q(("variant__gte", 1)), name="reply_copy_variant_positive"
                ),
            ),
            migrations.AddField(
                model_name="campaignversion",
                name="campaign",
                field=models.ForeignKey(
                    on_delete=django.db.models.deletion.CASCADE,
                    related_name="versions",
                    to="replies.campaign",
                ),
            ),
            migrations.AddConstraint(
                model_name="campaign",
                constraint=models.CheckConstraint(
                    condition=models.Q(("state__in", ["draft", "active", "paused", "ended"])),
                    name="campaign_state_valid",
                ),
            ),
            migrations.AddConstraint(
                model_name="campaign",
                constraint=models.CheckConstraint(
                    condition=models.Q(
                        ("ends_at__isnull", True), ("ends_at__gt", models.F("starts_at")), _connector="OR"
                    ),
                    name="campaign_ends_after_start",
                ),
            ),
            migrations.AddConstraint(
                model_name="campaign",
                constraint=models.CheckConstraint(
                    condition=models.Q(
                        models.Q(("state", "active"), _negated=True),
                        ("activated_at__isnull", False),
                        _connector="OR",
                    ),
                    name="campaign_active_since",
                ),
            ),
            migrations.AddConstraint(
                model_name="campaign",
                constraint=models.UniqueConstraint(
                    condition=models.Q(("account_default", True)),
                    fields=("source",),
                    name="campaign_one_account_default",
                ),
            ),
            migrations.AddConstraint(
                model_name="campaignversion",
                constraint=models.UniqueConstraint(
                    fields=("campaign", "version"), name="campaign_version_unique"
                ),
            ),
        ],
    )
