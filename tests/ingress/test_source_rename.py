"""Registering a source's account under a new name renames the source.

docs/platforms/sources.md#rename: "Registering the same namespace and Scope under a new name is a renamed configuration
entry: the stored source, checkpoint and history move to the new name and the old name is
released." Here the namespace is the platform and account (the source identity), the name is
the registration's name, and a registration whose other values differ is still refused.
"""

from __future__ import annotations

import logging

import pytest
from django.core.management import CommandError, call_command

from ingress.models import InboundEvent, Source
from ingress.services import SourceConflict, source_register
from reconcile.lease import scan_state_for
from reconcile.models import ScanState
from replies.models import ReplyAction, ReplyRoute
from tests.conftest import SECRET_ENV, fixture_body

# The sandbox source's registration (tests.conftest.sandbox_source), without its name.
SAME_VALUES = [
    "--adapter",
    "sandbox-social",
    "--account-ref",
    "acct_test_01",
    "--event-type",
    "comment.created",
    "--purpose",
    "public_ack",
    "--purpose",
    "private_delivery",
    "--trigger-keyword",
    "CHECKLIST",
    "--secret-env",
    SECRET_ENV,
]


def test_a_new_name_for_the_same_account_and_values_renames_the_source_and_keeps_its_history(
    sandbox_source, deliver, capsys, caplog, django_capture_on_commit_callbacks
):
    assert deliver(fixture_body("comment__northstar")).status_code == 200
    actions = set(ReplyAction.objects.values_list("pk", flat=True))
    assert len(actions) == 2
    scan_state_for(sandbox_source)  # its checkpoint's and schedule's row, held by the source row

    with (
        caplog.at_level(logging.INFO, logger="conduit.ingress"),
        django_capture_on_commit_callbacks(execute=True),
    ):
        call_command("register_source", "shop", *SAME_VALUES)
    out = capsys.readouterr().out

    # The same row under the new name: its events, replies, routes and scan state stay with it.
    renamed = Source.objects.get()
    assert (renamed.pk, renamed.name) == (sandbox_source.pk, "shop")
    assert InboundEvent.objects.filter(source__name="shop").count() == 1
    assert set(ReplyAction.objects.filter(event__source__name="shop").values_list("pk", flat=True)) == actions
    assert set(ReplyRoute.objects.filter(source=renamed).values_list("purpose", flat=True)) == {
        "public_ack",
        "private_delivery",
    }
    assert ScanState.objects.get().source_id == renamed.pk
    # The command and the log say what happened, and what it means for the webhook URL.
    assert "source shop: renamed from sandbox" in out
    assert "now /webhooks/shop/" in out and "/webhooks/sandbox/ answers 404" in out
    assert "The name sandbox is free" in out
    assert "source renamed name=shop from=sandbox" in caplog.text

    # The old name is released: its webhook path answers 404; the new one finds the same history.
    old = deliver(fixture_body("comment__northstar"), source="sandbox")
    assert old.status_code == 404 and old.json()["code"] == "unknown_source"
    again = deliver(fixture_body("comment__northstar"), source="shop")
    assert again.status_code == 200 and again.json()["results"][0]["result"] == "duplicate"
    assert InboundEvent.objects.get().seen_count == 2

    # ...and free for a new registration of another account.
    call_command(
        "register_source", "sandbox", *[v if v != "acct_test_01" else "acct_test_02" for v in SAME_VALUES]
    )
    assert "source sandbox: registered (/webhooks/sandbox/)" in capsys.readouterr().out
    fresh = Source.objects.get(name="sandbox")
    assert fresh.pk != renamed.pk and fresh.account_ref == "acct_test_02"
    assert not InboundEvent.objects.filter(source=fresh).exists()


def test_a_new_name_with_a_differing_value_is_refused_and_renames_nothing(sandbox_source, deliver):
    deliver(fixture_body("comment__northstar"))
    changed = [v if v != "CHECKLIST" else "PRICE" for v in SAME_VALUES]
    with pytest.raises(CommandError) as refused:
        call_command("register_source", "shop", *changed)
    message = str(refused.value)
    assert "already registered as source 'sandbox' with other values" in message
    assert "trigger_keywords: registered ['CHECKLIST'], given ['PRICE']" in message
    assert list(Source.objects.values_list("name", flat=True)) == ["sandbox"]
    assert deliver(fixture_body("comment__northstar")).status_code == 200  # still answers as before
    assert deliver(fixture_body("comment__northstar"), source="shop").status_code == 404


def test_a_rename_is_undone_with_the_command_that_refuses_its_route(sandbox_source):
    """The command registers, routes and records copy in one transaction: a route it refuses
    takes the rename back with it."""
    with pytest.raises(CommandError, match="already routed otherwise"):
        call_command(
            "register_source", "shop", *SAME_VALUES, "--route", "public_ack=sandbox,http://127.0.0.1:9"
        )
    assert list(Source.objects.values_list("name", flat=True)) == ["sandbox"]


def test_the_service_returns_the_renamed_source_with_the_name_it_released(sandbox_source):
    values = dict(
        adapter="sandbox-social",
        account_ref="acct_test_01",
        event_types=["comment.created"],
        purposes=["public_ack", "private_delivery"],
        trigger_keywords=["CHECKLIST"],
        secret_env=SECRET_ENV,
    )
    source, created = source_register(name="shop", **values)
    assert (source.pk, source.name, source.renamed_from, created) == (
        sandbox_source.pk,
        "shop",
        "sandbox",
        False,
    )
    again, created = source_register(name="shop", **values)  # the new name, registered again: unchanged
    assert (again.pk, created, getattr(again, "renamed_from", None)) == (sandbox_source.pk, False, None)
    with pytest.raises(SourceConflict, match="retention_days: registered 30, given 7"):
        source_register(name="shop-two", **{**values, "retention_days": 7})
