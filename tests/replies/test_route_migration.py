"""The data migration that turns each source's reply fields into one reply route per purpose."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

BEFORE = [("replies", "0004_stranded_send_queue"), ("ingress", "0004_proof_failure_windows")]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_each_source_gets_a_route_per_purpose_with_its_transport_url_and_live_flag():
    """The migration carries existing data over. A pending action of a purpose no longer declared keeps
    the route it had; whoever could enable live sending for a source still can, for its routes."""
    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes()
    try:
        old = _migrate(BEFORE)
        Source = old.get_model("ingress", "Source")
        live = Source.objects.create(
            name="live",
            adapter="sandbox-social",
            source_system="sandbox-social",
            account_ref="acct_test_m1",
            event_types=["comment.created"],
            purposes=["public_ack", "private_delivery"],
            secret_env="X",
            transport="sandbox",
            transport_url="http://127.0.0.1:8111",
            live_send_enabled=True,
        )
        Source.objects.create(
            name="quiet",
            adapter="sandbox-social",
            source_system="sandbox-social",
            account_ref="acct_test_m2",
            event_types=["comment.created"],
            purposes=[],
            secret_env="X",
        )
        now = timezone.now()
        event = old.get_model("ingress", "InboundEvent").objects.create(
            event_key="sandbox-social:evt_test_m1",
            source=live,
            source_system="sandbox-social",
            source_account_ref="acct_test_m1",
            event_type="comment.created",
            conversation_ref="c",
            message_ref="m",
            sender_ref="s",
            occurred_at=now,
            occurred_at_original="x",
            payload_hash="h",
            contract_version="event-v1",
            canary=False,
            trigger_rule_version=1,
            trigger_match=True,
            event_state="RECORD_READY",
            first_received_at=now,
            last_received_at=now,
        )
        old.get_model("replies", "ReplyAction").objects.create(
            reply_key="k" * 64,
            event=event,
            purpose="retired_purpose",
            created_at=now,
        )
        Permission = old.get_model("auth", "Permission")
        User = old.get_model("auth", "User")
        holder = User.objects.create(username="owner_by_hand_test")
        # A flush between tests recreates only today's permissions: make the old one as it was.
        source_type = old.get_model("contenttypes", "ContentType").objects.get_or_create(
            app_label="ingress", model="source"
        )[0]
        holder.user_permissions.add(
            Permission.objects.get_or_create(
                content_type=source_type,
                codename="enable_live_send",
                defaults={"name": "Can enable live sending for a source"},
            )[0]
        )

        new = _migrate(leaves)
        routes = {
            (r.source.name, r.purpose): (r.transport_name, r.target_url, r.live_send_enabled)
            for r in new.get_model("replies", "ReplyRoute").objects.select_related("source")
        }
        expected = ("sandbox", "http://127.0.0.1:8111", True)
        assert routes == {
            ("live", "public_ack"): expected,
            ("live", "private_delivery"): expected,
            ("live", "retired_purpose"): expected,
        }
        granted = set(
            new.get_model("auth", "User")
            .objects.get(username="owner_by_hand_test")
            .user_permissions.values_list("content_type__app_label", "codename")
        )
        assert ("replies", "enable_live_send") in granted
        owners = set(
            new.get_model("auth", "Group")
            .objects.get(name="owners")
            .permissions.values_list("content_type__app_label", "codename")
        )
        assert {
            ("replies", c) for c in ("enable_live_send", "change_replyroute", "view_replyroute")
        } <= owners
    finally:
        _migrate(leaves)
