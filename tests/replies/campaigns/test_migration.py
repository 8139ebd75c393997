"""The data migration that makes each source's keyword list and copy its every-post campaign."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from tests.replies.test_route_migration import _migrate

BEFORE = [("replies", "0009_action_history_checked_per_statement"), ("ingress", "0018_connect_account")]


def _source(apps, name: str, account: str, keywords: list[str]):
    return apps.get_model("ingress", "Source").objects.create(
        name=name,
        adapter="sandbox-social",
        source_system="sandbox-social",
        account_ref=account,
        event_types=["comment.created"],
        purposes=["public_ack", "private_delivery"],
        trigger_keywords=keywords,
        secret_env="X",
    )


@pytest.mark.django_db(transaction=True)
def test_keywords_and_copy_become_the_every_post_campaign_and_nothing_changes():
    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes()
    try:
        old = _migrate(BEFORE)
        shop = _source(old, "shop", "acct_test_m1", ["CHECKLIST", "guide"])
        _source(old, "quiet", "acct_test_m2", [])  # no keywords, no copy, no reply: no campaign
        odd = _source(old, "odd", "acct_test_m3", [])
        Copy = old.get_model("replies", "ReplyCopy")
        for version, text in (("v1", "First text"), ("v2", "Second text")):
            Copy.objects.create(
                source=shop,
                purpose="public_ack",
                channel="public_reply",
                text=text,
                copy_version=version,
                created_by="owner_test",
            )
        # Names out of order: sets follow the rows' age, and the newest stays the current copy.
        for version, text in (("legacy", "Oldest"), ("v1", "Newest")):
            Copy.objects.create(
                source=odd,
                purpose="public_ack",
                channel="dm",
                text=text,
                copy_version=version,
                created_by="owner_test",
            )
        now = timezone.now()
        event = old.get_model("ingress", "InboundEvent").objects.create(
            event_key="sandbox-social:acct_test_m1:comment.created:evt_test_m1",
            source=shop,
            source_system="sandbox-social",
            source_account_ref="acct_test_m1",
            event_type="comment.created",
            conversation_ref="post_test",
            message_ref="m",
            sender_ref="s",
            occurred_at=now,
            occurred_at_original="x",
            payload_hash="h",
            contract_version="event-v1",
            canary=False,
            trigger_rule_version=3,
            trigger_match=True,
            event_state="RECORD_READY",
            first_received_at=now,
            last_received_at=now,
        )
        old.get_model("replies", "ReplyAction").objects.create(
            reply_key="k" * 64,
            event=event,
            purpose="public_ack",
            copy_version="v1",
            channel="public_reply",
            approval_state="APPROVED",
            delivery_state="SENT",
            created_at=now,
        )

        new = _migrate(leaves)
        Campaign = new.get_model("replies", "Campaign")
        campaign = Campaign.objects.get(source__name="shop")
        odd_sets = (
            new.get_model("replies", "ReplyCopy").objects.filter(source__name="odd").order_by("copy_set")
        )
        assert [(c.copy_version, c.copy_set) for c in odd_sets] == [("legacy", 1), ("v1", 2)]
        assert Campaign.objects.count() == 2
        assert (campaign.name, campaign.source.name, campaign.state, campaign.account_default) == (
            "shop: every post",
            "shop",
            "active",
            True,
        )
        assert (campaign.every_post, campaign.keywords, campaign.purposes, campaign.version) == (
            True,
            ["CHECKLIST", "guide"],
            [],
            1,
        )
        assert campaign.starts_at.year == 1970  # matches whatever the keywords matched
        copies = (
            new.get_model("replies", "ReplyCopy").objects.filter(source__name="shop").order_by("copy_set")
        )
        assert [(c.copy_version, c.copy_set, c.variant, c.campaign_id) for c in copies] == [
            ("v1", 1, 1, campaign.pk),
            ("v2", 2, 1, campaign.pk),
        ]
        action = new.get_model("replies", "ReplyAction").objects.get()
        assert (action.campaign_id, action.campaign_version, action.copy_version) == (campaign.pk, 1, "v1")
        version = new.get_model("replies", "CampaignVersion").objects.get(campaign=campaign)
        assert (version.rule["keywords"], version.copy) == (["CHECKLIST", "guide"], {"public_ack": ["v2"]})
        # Recorded events keep what they were matched under, and no campaign.
        kept = new.get_model("ingress", "InboundEvent").objects.get()
        assert (kept.trigger_rule_version, kept.trigger_campaign, kept.parent_ref) == (3, None, "")
        editors = set(
            new.get_model("auth", "Group")
            .objects.get(name="campaign editors")
            .permissions.values_list("codename", flat=True)
        )
        assert {"view_campaign", "edit_campaign"} <= editors

        # And back: the keyword list returns to its source.
        back = _migrate(BEFORE)
        assert back.get_model("ingress", "Source").objects.get(name="shop").trigger_keywords == [
            "CHECKLIST",
            "guide",
        ]
    finally:
        _migrate(leaves)
