"""The admin says only what happened, and help texts survive the admin's HTML."""

from __future__ import annotations

import pytest
from django.apps import apps

from ingress.models import Source
from replies.models import ReplyAction
from tests.reconcile.conftest import approved_and_sent, held_and_delivered
from tests.replies.test_replies_admin import act, member

pytestmark = pytest.mark.django_db


def _unknown(source_side, deliver, mode: str) -> ReplyAction:
    state, _ = source_side
    action = held_and_delivered(state, deliver)
    assert approved_and_sent(state, action, mode) in ("SEND_STATUS_UNKNOWN", "FAILED_BEFORE_SEND")
    ReplyAction.objects.filter(pk=action.pk).update(delivery_state="SEND_STATUS_UNKNOWN")
    return action


def test_a_lookup_that_finds_the_receipt_says_marked_sent_and_nothing_else(client, source_side, deliver):
    """The page never says both "marked SENT, nothing resent" and "Authorize a retry ...: 1 done"."""
    action = _unknown(source_side, deliver, "drop_after_accept")  # applied: the lookup finds it
    client.force_login(member("operator_test", "operators"))
    page = act(client, "unknownsendqueue", "authorize_retry", [action], confirm="yes").content.decode()
    action.refresh_from_db()
    assert action.delivery_state == "SENT"
    assert "marked SENT, nothing resent" in page
    assert "done." not in page and "retry authorized" not in page


def test_a_lookup_that_finds_nothing_says_retry_authorized_and_nothing_else(client, source_side, deliver):
    action = _unknown(source_side, deliver, "refuse")  # nothing applied: the lookup finds none
    client.force_login(member("operator_test", "operators"))
    page = act(client, "unknownsendqueue", "authorize_retry", [action], confirm="yes").content.decode()
    action.refresh_from_db()
    assert action.delivery_state in ("APPROVED", "SENDING", "SENT")
    assert "retry authorized under the same reply key" in page
    assert "done." not in page and "marked SENT" not in page


def test_the_sources_form_shows_the_webhook_path_with_its_placeholder(admin_client):
    """Never "URL slug: /webhooks//" (a `<name>` eaten as HTML: the admin renders help
    text as HTML)."""
    page = admin_client.get("/admin/ingress/source/add/").content.decode()
    assert "/webhooks//" not in page
    assert "/webhooks/NAME/" in page


def test_control_a_help_text_with_angle_brackets_is_eaten(admin_client, monkeypatch):
    """Positive control: the old help text renders as the defect showed it."""
    monkeypatch.setattr(Source._meta.get_field("name"), "help_text", "URL slug: /webhooks/<name>/")
    page = admin_client.get("/admin/ingress/source/add/").content.decode()
    # Sent to the browser as a tag, not as text: a browser shows "URL slug: /webhooks//".
    assert "URL slug: /webhooks/<name>/" in page and "&lt;name&gt;" not in page


@pytest.mark.parametrize("app", ["ingress", "replies", "reconcile"])
def test_no_help_text_holds_markup(app):
    """The admin renders help text as HTML, so a placeholder in angle brackets disappears."""
    offending = [
        f"{model.__name__}.{field.name}: {field.help_text}"
        for model in apps.get_app_config(app).get_models()
        for field in model._meta.get_fields()
        if "<" in str(getattr(field, "help_text", "") or "")
    ]
    assert offending == []
