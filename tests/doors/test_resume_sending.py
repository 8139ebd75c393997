"""Resuming a source's sends after its token was replaced asks first, as every consequential
action does: the confirmation page changes nothing, Confirm clears the flag."""

from __future__ import annotations

import pytest

from ingress.models import Source
from tests.doors.conftest import make_user, sign_in
from tests.providers.meta.integration.conftest import IG_ACCOUNT, _meta_env, register_meta  # noqa: F401 (autouse fixture)

CHANGELIST = "/admin/ingress/source/"


@pytest.fixture
def dead_token(db):
    source = register_meta("ig-reauth-test", "meta-instagram", IG_ACCOUNT)
    Source.objects.filter(pk=source.pk).update(needs_reauth=True)
    return source


def test_resume_sending_shows_a_confirmation_then_applies(client, dead_token, monkeypatch):
    from conduit.providers.meta import tokens

    # The door is what is tested here; the Graph call with the new token is answered as a success
    # (tests/providers/meta/sending/test_token_refresh.py holds the call to the simulator).
    monkeypatch.setattr(tokens, "token_verify", lambda **call: "")
    sign_in(client, make_user("owner"), verified=False)
    form = {"action": "reauthorized", "_selected_action": [dead_token.pk]}
    page = client.post(CHANGELIST, form)
    assert page.status_code == 200 and b"Resume sending" in page.content
    assert b"Its waiting sends go out with the token now stored for it" in page.content
    dead_token.refresh_from_db()
    assert dead_token.needs_reauth  # asking changed nothing

    client.post(CHANGELIST, {**form, "confirm": "yes"})
    dead_token.refresh_from_db()
    assert not dead_token.needs_reauth


def test_resume_sending_is_refused_while_the_token_variable_is_empty(client, dead_token, monkeypatch):
    monkeypatch.delenv(dead_token.token_env)
    sign_in(client, make_user("owner"), verified=False)
    response = client.post(
        CHANGELIST,
        {"action": "reauthorized", "_selected_action": [dead_token.pk], "confirm": "yes"},
        follow=True,
    )
    assert "set the new token first" in " ".join(str(m) for m in response.context["messages"])
    dead_token.refresh_from_db()
    assert dead_token.needs_reauth
