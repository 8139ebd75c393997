"""Approval approves the text the confirmation showed, never a newer one.

The hole this closes: an owner added copy v3 while a reviewer's confirmation page showed v2;
Confirm approved v3. The confirmation page now carries the copy version it showed, and a newer
version refuses the approval with "the copy changed: review again".
"""

from __future__ import annotations

import re

import pytest

from replies.models import ReplyAction
from replies.services import reply_copy_create
from tests.doors.conftest import make_user, sign_in

QUEUE = "/admin/replies/reviewqueue/"
HIDDEN = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)"')
NEW_TEXT = "A newer text the reviewer never read."


@pytest.fixture
def pending(provider, wire, planned):
    wire(provider())
    public_ack, _ = planned()
    return public_ack


def _confirmation(client, action: ReplyAction) -> tuple[str, list[tuple[str, str]]]:
    """The confirmation page a reviewer sees, and the form it would send back on Confirm."""
    page = client.post(QUEUE, {"action": "approve", "index": 0, "_selected_action": [action.pk]})
    assert page.status_code == 200
    text = page.content.decode()
    form = HIDDEN.findall(text[text.index('<form method="post">') :])
    return text, form


def _confirm(client, form: list[tuple[str, str]]) -> str:
    response = client.post(QUEUE, dict(form), follow=True)
    return " ".join(str(m) for m in response.context["messages"])


def test_a_copy_added_while_the_page_was_open_refuses_the_approval(client, pending):
    sign_in(client, make_user("reviewer"), verified=False)
    page, form = _confirmation(client, pending)
    assert "(copy v1)" in page

    # An owner saves a new copy while the reviewer reads v1.
    source = pending.event.source
    reply_copy_create(
        source_id=source.pk,
        purpose=pending.purpose,
        channel=pending.purpose,
        text=NEW_TEXT,
        actor="owner_test",
    )

    said = _confirm(client, form)
    assert "the copy changed: review again" in said and "shown copy v1; the newest is v2" in said
    pending.refresh_from_db()
    assert (pending.delivery_state, pending.copy_version) == ("REVIEW_PENDING", "")

    # Reviewing again shows v2, and confirming that approves v2: the text that was read.
    page, form = _confirmation(client, pending)
    assert NEW_TEXT in page
    assert "Approve replies: 1 done." in _confirm(client, form)
    pending.refresh_from_db()
    assert (pending.delivery_state, pending.copy_version) == ("APPROVED", "v2")


def test_a_confirmation_that_names_no_copy_is_refused(client, pending):
    """A Confirm posted without the page's pin (a crafted request, a page from before) approves nothing."""
    sign_in(client, make_user("reviewer"), verified=False)
    _, form = _confirmation(client, pending)
    said = _confirm(client, [(k, v) for k, v in form if not k.startswith("pin_")])
    assert "the copy changed: review again" in said
    pending.refresh_from_db()
    assert pending.delivery_state == "REVIEW_PENDING"


def test_control_the_copy_unchanged_the_confirmation_approves(client, pending):
    sign_in(client, make_user("reviewer"), verified=False)
    _, form = _confirmation(client, pending)
    assert "Approve replies: 1 done." in _confirm(client, form)
    pending.refresh_from_db()
    assert (pending.delivery_state, pending.copy_version) == ("APPROVED", "v1")


def test_the_confirmation_carries_the_copy_version_it_shows(client, pending):
    sign_in(client, make_user("reviewer"), verified=False)
    page, form = _confirmation(client, pending)
    assert "(copy v1)" in page and ("pin_%d" % pending.pk, "v1") in form


def test_the_page_shows_and_pins_one_read_of_the_copy(client, pending, monkeypatch):
    """A copy saved while the confirmation page is being built: the text shown and the version
    pinned are still one copy's, so Confirm approves nothing the reviewer did not read."""
    from replies import selectors

    real = selectors.copy_for
    calls = []

    def copy_for(action):
        copy = real(action)
        calls.append(copy.copy_version)
        if len(calls) == 1:  # an owner saves v2 right after the page read v1
            reply_copy_create(
                source_id=action.event.source_id,
                purpose=action.purpose,
                channel=pending.purpose,
                text=NEW_TEXT,
                actor="owner_test",
            )
        return copy

    monkeypatch.setattr(selectors, "copy_for", copy_for)
    sign_in(client, make_user("reviewer"), verified=False)
    page, form = _confirmation(client, pending)
    assert "(copy v1)" in page and ("pin_%d" % pending.pk, "v1") in form
    monkeypatch.setattr(selectors, "copy_for", real)
    assert "the copy changed: review again" in _confirm(client, form)
    pending.refresh_from_db()
    assert pending.delivery_state == "REVIEW_PENDING"
