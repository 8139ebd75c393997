"""Retention: message content goes after the source's period; keys, hashes and states stay."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from ingress.models import InboundEvent
from replies.models import ReplyAction
from tests.conftest import fixture_body

pytestmark = pytest.mark.django_db


def test_purge_blanks_old_content_only_and_dry_run_changes_nothing(sandbox_source, deliver):
    deliver(fixture_body("comment__northstar"))
    deliver(fixture_body("comment__no_trigger"))
    old = InboundEvent.objects.get(source_event_id="evt_test_0042")
    InboundEvent.objects.filter(pk=old.pk).update(
        first_received_at=timezone.now() - timedelta(days=sandbox_source.retention_days, minutes=1)
    )
    before = InboundEvent.objects.values("event_key", "payload_hash", "event_state", "seen_count").get(
        pk=old.pk
    )
    actions = list(ReplyAction.objects.values_list("reply_key", "delivery_state"))

    out = io.StringIO()
    call_command("purge_retained", "--dry-run", stdout=out)
    assert "sandbox: would purge the message text of 1 event(s)" in out.getvalue()
    assert InboundEvent.objects.get(pk=old.pk).message_text == "CHECKLIST"

    out = io.StringIO()
    call_command("purge_retained", stdout=out)
    assert "sandbox: purged the message text of 1 event(s)" in out.getvalue()
    old.refresh_from_db()
    assert old.message_text == "" and old.content_purged_at is not None
    assert (
        InboundEvent.objects.values("event_key", "payload_hash", "event_state", "seen_count").get(pk=old.pk)
        == before
    )
    assert list(ReplyAction.objects.values_list("reply_key", "delivery_state")) == actions
    assert (
        InboundEvent.objects.get(source_event_id="evt_test_0043").message_text != ""
    )  # still within its period


def test_stalled_scan_staging_is_purged_too(source_side, settings):
    from reconcile.models import ReconcileRun, StagedEvent
    from reconcile.scan import reconcile_page
    from tests.reconcile.conftest import item

    settings.CONDUIT_RECONCILE_PAGE_SIZE = 1
    state, source = source_side
    state.hold_events(item(1, from_handle="buyer_test_09"), item(2, from_handle="buyer_test_09"))
    assert reconcile_page(source=source).state == "staged"
    assert StagedEvent.objects.get().handle == "buyer_test_09"  # the author's handle is staged too
    ReconcileRun.objects.update(created_at=timezone.now() - timedelta(days=source.retention_days + 1))
    from reconcile.tasks import purge_retained

    assert purge_retained() == 1
    assert StagedEvent.objects.values_list("text", "handle").get() == ("", "")


def test_the_daily_schedule_exists():
    from django_q.models import Schedule

    assert Schedule.objects.filter(func="reconcile.tasks.purge_retained", schedule_type="D").exists()
