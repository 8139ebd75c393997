"""Retention for WhatsApp: past its source's period a buyer's message keeps its key, hashes and
states, and loses its content: the text, the profile name (the handle) and the phone number a
reply was addressed to, on the event and on anything a scan staged of it.

Each test has a positive control: the purge run with the number left out of its update (the
real purge, one column dropped), where the test's own check must fail."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db.models import QuerySet
from django.utils import timezone

from ingress.models import InboundEvent
from ingress.services import retention_purge
from reconcile.models import ReconcileRun, StagedEvent
from reconcile.retention import staging_purge
from tests.providers.whatsapp.conftest import BUYER, body, text_message

NAME = "Test Person 01"
KEPT = ("event_key", "sender_ref", "payload_hash", "event_state", "seen_count")


@pytest.fixture
def event(whatsapp_source, deliver):
    """A buyer's message, received one minute more than the source's retention period ago."""
    deliver(body(text_message(1, "What is the price?", name=NAME)))
    event = InboundEvent.objects.get()
    assert (event.reply_address, event.sender_handle, event.message_text) == (
        BUYER,
        NAME,
        "What is the price?",
    )
    assert BUYER not in event.sender_ref and BUYER not in event.event_key  # opaque as received
    InboundEvent.objects.filter(pk=event.pk).update(
        first_received_at=timezone.now() - timedelta(days=whatsapp_source.retention_days, minutes=1)
    )
    return event


def _skipping(monkeypatch, model, column: str) -> None:
    """Positive control: every update of `model` leaves `column` as it was."""
    update = QuerySet.update

    def update_without(self, **values):
        if self.model is model:
            values.pop(column, None)
        return update(self, **values)

    monkeypatch.setattr(QuerySet, "update", update_without)


@pytest.mark.parametrize("purge", ["as_built", "positive_control_number_kept"])
def test_the_number_handle_and_text_of_an_event_past_retention_are_blank(event, monkeypatch, purge):
    before = InboundEvent.objects.values(*KEPT).get(pk=event.pk)
    with monkeypatch.context() as patched:
        if purge == "positive_control_number_kept":
            _skipping(patched, InboundEvent, "reply_address")
        assert retention_purge()["wa-test"] == 1
    event.refresh_from_db()

    def check() -> None:
        assert event.reply_address == "", "the phone number outlived the retention period"
        assert (event.sender_handle, event.message_text) == ("", "")
        assert event.content_purged_at is not None
        assert InboundEvent.objects.values(*KEPT).get(pk=event.pk) == before

    if purge == "as_built":
        check()
    else:
        with pytest.raises(AssertionError, match="the phone number outlived the retention period"):
            check()


@pytest.mark.parametrize("purge", ["as_built", "positive_control_number_kept"])
def test_what_a_scan_staged_of_it_is_blank_too(event, whatsapp_source, monkeypatch, purge):
    """A WhatsApp scan stages nothing as built (the Cloud API lists no messages): the staged row
    is written here as a scan of this source would stage the message, so the staged purge is
    shown to blank it whatever adapter staged it."""
    now = timezone.now()
    run = ReconcileRun.objects.create(
        source=whatsapp_source,
        trigger="command",
        requested_by="tester",
        until=now,
        created_at=now - timedelta(days=whatsapp_source.retention_days, minutes=1),
    )
    StagedEvent.objects.create(
        run=run,
        event_key=event.event_key,
        payload_hash=event.payload_hash,
        source_event_id=event.source_event_id,
        event_type=event.event_type,
        conversation_ref=event.conversation_ref,
        message_ref=event.message_ref,
        sender_ref=event.sender_ref,
        occurred_at=event.occurred_at,
        occurred_at_original=event.occurred_at_original,
        text=event.message_text,
        handle=event.sender_handle,
        address=event.reply_address,
    )
    with monkeypatch.context() as patched:
        if purge == "positive_control_number_kept":
            _skipping(patched, StagedEvent, "address")
        assert staging_purge() == 1
    staged = StagedEvent.objects.values("address", "handle", "text", "event_key").get()

    def check() -> None:
        assert staged["address"] == "", "the staged phone number outlived the retention period"
        assert (staged["handle"], staged["text"]) == ("", "")
        assert staged["event_key"] == event.event_key  # the scan's row stays, its content goes

    if purge == "as_built":
        check()
    else:
        with pytest.raises(AssertionError, match="the staged phone number outlived the retention period"):
            check()
