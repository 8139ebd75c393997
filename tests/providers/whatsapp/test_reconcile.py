"""Reconciliation of a WhatsApp source, honestly: nothing to read back (the family's limitation
is reported), and a reply SENT long ago of which the platform reported no status is a finding for
a person, never a resend."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from ingress.models import MessageStatus
from reconcile.models import Finding
from reconcile.scan import scan_until_done
from replies.ledger import reply_action_transition
from replies.models import ReplyAction, ReplyTransition
from replies.services import reply_approve
from tests.providers.whatsapp.conftest import body, routed, status, text_message, wamid

SENT_ID = wamid(700)


@pytest.fixture
def sent(whatsapp_source, deliver):
    """A reply SENT 25 hours ago (by its history) with the wamid WhatsApp answered."""
    routed(whatsapp_source)
    deliver(body(text_message(1, "price please")))
    action = ReplyAction.objects.get()
    assert reply_approve(action_id=action.pk, actor="reviewer_test").ok
    for before, after in (("APPROVED", "SENDING"), ("SENDING", "SENT")):
        assert reply_action_transition(
            action_id=action.pk,
            to=after,
            actor="test",
            reason_code="test",
            expected=before,
            extra={"provider_reply_id": SENT_ID} if after == "SENT" else None,
        ).applied
    ReplyTransition.objects.filter(action=action, next_state="SENT").update(
        at=timezone.now() - timedelta(hours=25)
    )
    return action


def scan(source):
    return scan_until_done(source=source, trigger="command", actor="tester")


def test_a_sent_reply_with_no_status_is_a_finding_never_a_resend(sent, whatsapp_source):
    assert scan(whatsapp_source).state == "published"
    (finding,) = Finding.objects.filter(kind="NO_STATUS")
    assert finding.reply_key == sent.reply_key and finding.repair == "none"
    sent.refresh_from_db()
    assert sent.delivery_state == "SENT" and sent.attempt_count == 0
    scan(whatsapp_source)  # found again while open: no second row
    assert Finding.objects.filter(kind="NO_STATUS").count() == 1


def test_a_reply_whose_status_came_is_no_finding(sent, whatsapp_source, deliver):
    deliver(body(status(SENT_ID, "delivered", key=sent.reply_key)))
    assert MessageStatus.objects.filter(provider_id=SENT_ID).exists()
    scan(whatsapp_source)
    assert not Finding.objects.filter(kind="NO_STATUS").exists()


def test_a_recent_send_is_not_yet_silent(sent, whatsapp_source):
    ReplyTransition.objects.filter(action=sent, next_state="SENT").update(at=timezone.now())
    scan(whatsapp_source)
    assert not Finding.objects.filter(kind="NO_STATUS").exists()
