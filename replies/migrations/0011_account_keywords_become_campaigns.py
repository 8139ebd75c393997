"""Each source's keyword list and copy become its every-post campaign, so nothing changes.

The campaign is active since always (it matches what the source-wide keywords matched), answers
with every purpose the source declares (an empty purpose list), and holds the source's copy
versions as its copy sets, numbered by age (their names, v1, v2, ..., are kept, so approved
replies still find their text). Going back is refused while other campaigns exist. Every reply action is the campaign's, at version 1. Events recorded before campaigns
keep no campaign: their trigger_rule_version names the source-wide rule they were matched under.
The owners group and a new "campaign editors" group get the campaign permissions.
"""

from datetime import datetime, timezone

from django.contrib.auth.management import create_permissions
from django.db import migrations

SINCE_ALWAYS = datetime(1970, 1, 1, tzinfo=timezone.utc)
GROUPS = {
    "owners": ["view_campaign", "edit_campaign"],
    "campaign editors": ["view_campaign", "edit_campaign"],
    "reviewers": ["view_campaign"],
}


def forwards(apps, schema_editor):
    Source = apps.get_model("ingress", "Source")
    Campaign = apps.get_model("replies", "Campaign")
    CampaignVersion = apps.get_model("replies", "CampaignVersion")
    ReplyCopy = apps.get_model("replies", "ReplyCopy")
    ReplyAction = apps.get_model("replies", "ReplyAction")
    now = datetime.now(timezone.utc)
    taken = set(Campaign.objects.values_list("name", flat=True))
    for source in Source.objects.order_by("pk"):
        copies = list(ReplyCopy.objects.filter(source=source).order_by("purpose", "id"))
        has_actions = ReplyAction.objects.filter(event__source=source).exists()
        if not (source.trigger_keywords or copies or has_actions):
            continue
        name, n = f"{source.name}: every post"[:100], 1
        while name in taken:
            n += 1
            name = f"{source.name[:80]}: every post ({n})"
        taken.add(name)
        campaign = Campaign.objects.create(
            name=name,
            source=source,
            every_post=True,
            posts=[],
            keywords=list(source.trigger_keywords),
            purposes=[],
            starts_at=SINCE_ALWAYS,
            state="active",
            activated_at=now,
            account_default=True,
            version=1,
            created_by="migration",
        )
        # Copy sets numbered by age (id), as the newest copy was the current one; names are kept.
        sets: dict[str, int] = {}
        latest: dict[str, str] = {}
        for copy in copies:
            sets[copy.purpose] = sets.get(copy.purpose, 0) + 1
            copy.campaign, copy.copy_set, copy.variant = campaign, sets[copy.purpose], 1
            copy.save(update_fields=["campaign", "copy_set", "variant"])
            latest[copy.purpose] = copy.copy_version
        CampaignVersion.objects.create(
            campaign=campaign,
            version=1,
            rule={
                "every_post": True,
                "posts": [],
                "keywords": list(source.trigger_keywords),
                "any_comment": False,
                "top_level_only": False,
                "purposes": [],
                "starts_at": SINCE_ALWAYS.isoformat(),
                "ends_at": None,
            },
            copy={purpose: [version] for purpose, version in latest.items()},
            created_by="migration",
            created_at=now,
        )
        ReplyAction.objects.filter(event__source=source).update(campaign=campaign, campaign_version=1)
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for group_name, codenames in GROUPS.items():
        group, _ = Group.objects.get_or_create(name=group_name)
        group.permissions.add(
            *Permission.objects.filter(content_type__app_label="replies", codename__in=codenames)
        )


def backwards(apps, schema_editor):
    Campaign = apps.get_model("replies", "Campaign")
    made = Campaign.objects.filter(account_default=False)
    if made.exists():
        # Their copy and replies have no place before campaigns: going back would hand a post's
        # copy to the whole account.
        raise RuntimeError(
            f"{made.count()} campaign(s) besides the accounts' every-post ones exist "
            f"({', '.join(made.order_by('name').values_list('name', flat=True)[:5])}): going back "
            "would give their copy to every post; keep this migration"
        )
    apps.get_model("replies", "ReplyAction").objects.update(campaign=None, campaign_version=None)
    apps.get_model("replies", "ReplyCopy").objects.update(campaign=None)
    Source = apps.get_model("ingress", "Source")
    for campaign in Campaign.objects.filter(account_default=True):
        Source.objects.filter(pk=campaign.source_id).update(trigger_keywords=campaign.keywords)
    apps.get_model("replies", "CampaignVersion").objects.all().delete()
    Campaign.objects.all().delete()
    apps.get_model("auth", "Group").objects.filter(name="campaign editors").delete()


class Migration(migrations.Migration):
    dependencies = [
        ("replies", "0010_campaigns"),
        ("ingress", "0019_event_campaign_matched"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]
    operations = [migrations.RunPython(forwards, backwards)]
