"""A Meta source acting with a stored (sealed) access token: sends, reads and checks go out with
it, no output carries it, and a token no key opens stops the send before any call."""

from __future__ import annotations

import io
import json
import logging
import sys

import pytest
from cryptography.fernet import Fernet
from django.contrib import admin
from django.core.management import call_command

from conduit.logging import boundary_scrub
from conduit.observability import before_send
from ingress.models import SourceCredential
from reconcile.models import ReconcileReport
from replies.sender import reply_send
from tests.providers.meta.integration.conftest import TOKEN_ENV
from tests.providers.meta.sending.conftest import applied, approved_comment, meta_source, sim

# A token of Meta's shape (EAA...): planted, searched for in every output below.
PLANTED = "EAAplantedTokenForLeakTest000000000000000000000000091z"
KEY = Fernet.generate_key().decode()
MEDIA = "17800000000000019"
WITHHELD = "withheld by the data boundary: it looked like a credential"


@pytest.fixture
def stored(graph, db, settings, monkeypatch, capsys):
    """An Instagram source whose only token is the stored one (its variable unset: the simulator
    answers 104 to a call without one), stored through the command as an operator would."""
    settings.CONDUIT_CREDENTIAL_KEYS = (KEY,)
    source = meta_source(graph, kind="instagram", purposes={"public_ack": "meta-comment-reply"})
    monkeypatch.delenv(TOKEN_ENV)
    monkeypatch.setattr(sys, "stdin", io.StringIO(PLANTED + "\n"))
    call_command("credentials_store", "--source", source.name, "--scopes", "instagram_business_basic")
    return source


def _comment(graph, deliver, source, comment: str):
    return approved_comment(graph, deliver, source, comment, MEDIA)


def test_the_stored_token_is_what_goes_out_and_no_output_carries_it(
    stored, graph, deliver, admin_client, api, caplog, capsys
):
    caplog.set_level(logging.DEBUG)
    outputs: dict[str, str] = {}

    # A send with the stored token: the simulator refuses a call without one (104), so SENT
    # proves the stored token went out.
    sent = _comment(graph, deliver, stored, "17900000000000201")
    assert reply_send(action_id=sent.pk) == "SENT"
    assert applied(graph)["public"] == {"17900000000000201": 1}
    # The hourly refresh (a day on): Meta's new token is stored, and searched for below too.
    from datetime import timedelta

    from django.utils import timezone

    from ingress.selectors import credential_token
    from ingress.services.credentials import credentials_refresh

    assert credentials_refresh(now=timezone.now() + timedelta(hours=25)) == {stored.name: "refreshed"}
    refreshed = credential_token(stored)
    assert refreshed and refreshed != PLANTED
    # Meta refusing it (190) runs the error path: its logs, the source's needs_reauth.
    refused = _comment(graph, deliver, stored, "17900000000000202")
    sim(graph, "/_sim/faults", {"mode": "error", "code": 190, "subcode": 460, "status": 400, "count": 1})
    assert reply_send(action_id=refused.pk) == "FAILED_BEFORE_SEND"

    call_command("reconcile", stored.name)  # reads Meta's pages with the stored token
    for args in (
        ("doctor",),
        ("doctor", "--json", "--no-meta-check"),
    ):  # the first reads subscribed_apps with it
        with pytest.raises(SystemExit):  # exit 1: the 190 needs a person
            call_command(*args)
    call_command("credentials_rotate", "--dry-run")
    out = capsys.readouterr()
    outputs["commands"] = out.out + out.err
    assert (
        f"access token      stored encrypted: …{refreshed[-4:]}; scopes instagram_business_basic" in out.out
    )

    report = ReconcileReport.objects.filter(source=stored).latest("id")
    for name, url in {
        "source page": f"/admin/ingress/source/{stored.pk}/change/",
        "source list": "/admin/ingress/source/",
        "source history": f"/admin/ingress/source/{stored.pk}/history/",
        "report page": f"/admin/reconcile/reconcilereport/{report.pk}/change/",
        "report export": f"/admin/reconcile/reconcilereport/{report.pk}/export/",
        "actions": "/admin/replies/replyaction/",
        "action page": f"/admin/replies/replyaction/{refused.pk}/change/",
    }.items():
        response = admin_client.get(url)
        assert response.status_code == 200, (name, response.status_code)
        body = b"".join(response.streaming_content) if response.streaming else response.content
        outputs[name] = body.decode()
    assert f"…{refreshed[-4:]}" in outputs["source page"]  # what the admin shows instead: its last four
    for name, url in {"events": "/api/events/", "schema": "/api/schema/"}.items():
        response = api.get(url)
        assert response.status_code == 200, name
        outputs[f"api {name}"] = response.content.decode()
    outputs["logs"] = "\n".join(
        f"{r.getMessage()} {r.exc_text or ''} {json.dumps(r.__dict__, default=repr)}" for r in caplog.records
    )
    # An error event carrying it (an exception whose text holds the token) leaves scrubbed.
    outputs["error event"] = json.dumps(
        before_send({"exception": {"values": [{"value": f"provider refused {PLANTED}"}]}}, {})
    )
    assert SourceCredential not in admin.site._registry  # no admin page of its own

    # The log boundary withholds a record carrying a registered token: none was even attempted.
    assert WITHHELD not in outputs["logs"]
    for name, text in outputs.items():
        for token in (PLANTED, refreshed):
            assert token not in text, f"a stored token appears in {name}"
            assert token[3:-4] not in text, f"most of a stored token appears in {name}"


def test_positive_control_a_record_carrying_the_stored_token_is_seen_withheld(stored, caplog):
    """What the search above relies on: the token was registered with the log boundary as it was
    stored, so a record carrying it is withheld (and seen so in the logs), and any other output
    scrubbed by the boundary drops it."""
    caplog.set_level(logging.DEBUG)
    logging.getLogger("conduit.planted").warning("token %s", PLANTED)
    assert WITHHELD in caplog.text and PLANTED not in caplog.text
    assert boundary_scrub(f"token {PLANTED}") == "[withheld by the data boundary: credential]"


def test_a_token_no_key_opens_stops_the_send_before_any_call_and_it_goes_once_the_key_is_back(
    stored, graph, deliver, settings
):
    from django.utils import timezone

    from replies.models import ReplyAction
    from replies.sender import reply_send_next

    action = _comment(graph, deliver, stored, "17900000000000203")
    settings.CONDUIT_CREDENTIAL_KEYS = (Fernet.generate_key().decode(),)  # the sealing key is gone
    calls = sim(graph, "/_sim/calls", method="GET")["calls"]
    assert reply_send(action_id=action.pk) == "FAILED_BEFORE_SEND"
    action.refresh_from_db()
    assert action.last_error_code == "credential_undecryptable"
    assert sim(graph, "/_sim/calls", method="GET")["calls"] == calls  # no call without the token
    assert applied(graph)["public"] == {}
    assert action.next_attempt_at is not None  # retried under its backoff, never sent without it

    settings.CONDUIT_CREDENTIAL_KEYS = (KEY,)  # the key is back
    ReplyAction.objects.filter(pk=action.pk).update(next_attempt_at=timezone.now())
    assert reply_send_next() == (action.pk, "SENT")
    assert applied(graph)["public"] == {"17900000000000203": 1}
