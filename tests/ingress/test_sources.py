"""Source registration: idempotent, identity never moves silently, trigger rules are versioned."""

import pytest
from django.core.management import CommandError, call_command

from ingress.models import InboundEvent, Source
from ingress.services import SourceConflict, source_register, source_update
from replies.services.campaigns import keywords_of
from tests.conftest import SECRET_ENV, fixture_body

ARGS = [
    "sandbox",
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


@pytest.mark.django_db
def test_register_source_command_is_idempotent(capsys):
    call_command("register_source", *ARGS)
    first = Source.objects.get()
    call_command("register_source", *ARGS)
    out = capsys.readouterr().out
    assert "registered" in out and "unchanged" in out
    again = Source.objects.get()
    assert (again.pk, again.updated_at) == (first.pk, first.updated_at)
    assert (again.source_system, again.purposes, keywords_of(again)) == (
        "sandbox-social",
        ["public_ack", "private_delivery"],
        ["CHECKLIST"],
    )


@pytest.mark.django_db
def test_conflicting_values_are_refused_with_each_difference_named():
    call_command("register_source", *ARGS)
    changed = [a if a != "acct_test_01" else "acct_test_02" for a in ARGS]
    with pytest.raises(CommandError, match="account_ref: registered 'acct_test_01', given 'acct_test_02'"):
        call_command("register_source", *changed)
    assert Source.objects.get().account_ref == "acct_test_01"


@pytest.mark.django_db
def test_one_account_cannot_be_registered_twice_under_two_names():
    """docs/platforms/sources.md#rename: the same values under a new name rename the one source
    (tests/ingress/test_source_rename.py); other values under a new name are refused."""
    call_command("register_source", *ARGS)
    with pytest.raises(CommandError, match="already registered as source 'sandbox' with other values"):
        call_command("register_source", "sandbox-two", *ARGS[1:], "--retention-days", "7")
    call_command("register_source", "sandbox-two", *ARGS[1:])
    assert list(Source.objects.values_list("name", flat=True)) == ["sandbox-two"]


@pytest.mark.django_db
def test_the_database_enforces_source_identity():
    from django.db import IntegrityError, transaction

    call_command("register_source", *ARGS)
    with pytest.raises(IntegrityError), transaction.atomic():
        Source.objects.create(
            name="other",
            adapter="sandbox-social",
            source_system="sandbox-social",
            account_ref="acct_test_01",
            event_types=["comment.created"],
            secret_env=SECRET_ENV,
        )


@pytest.mark.django_db
@pytest.mark.parametrize(
    "args, message",
    [
        (["--secret-env", "whsec_literal_value"], "NAME of an environment variable"),
        (["--purpose", "Public Ack"], "purposes are lower-case"),
    ],
)
def test_invalid_registrations_are_refused_clearly(args, message):
    base = ARGS[:-2] if args[0] == "--secret-env" else ARGS  # --secret-env repeats only for Meta's rotation
    with pytest.raises(CommandError, match=message):
        call_command("register_source", *base, *args)
    assert Source.objects.count() == 0


def test_unknown_adapter_is_refused_by_the_command():
    with pytest.raises(CommandError, match="invalid choice"):
        call_command(
            "register_source",
            "x",
            "--adapter",
            "nope",
            "--account-ref",
            "a",
            "--event-type",
            "t",
            "--secret-env",
            "X",
        )


def test_account_ref_cannot_change_after_registration(sandbox_source, deliver):
    """docs/platforms/sources.md#immutable: "Registrations are immutable for one runtime instance",
    events or not."""
    with pytest.raises(SourceConflict, match="cannot change after registration"):
        source_update(source_id=sandbox_source.pk, changes={"account_ref": "acct_test_03"})
    deliver(fixture_body("comment__northstar"))
    with pytest.raises(SourceConflict, match="cannot change after registration"):
        source_update(source_id=sandbox_source.pk, changes={"account_ref": "acct_test_02"})
    assert Source.objects.get().account_ref == "acct_test_01"


def test_a_renamed_source_keeps_its_history(sandbox_source, deliver, client):
    deliver(fixture_body("comment__northstar"))
    source_update(source_id=sandbox_source.pk, changes={"name": "sandbox-renamed"})
    assert InboundEvent.objects.get().source.name == "sandbox-renamed"
    assert deliver(fixture_body("comment__northstar"), source="sandbox").status_code == 404
    response = deliver(fixture_body("comment__northstar"), source="sandbox-renamed")
    assert response.json()["results"][0]["result"] == "duplicate"


def test_new_trigger_keywords_are_a_new_rule_version_recorded_on_events(sandbox_source, deliver):
    deliver(fixture_body("comment__no_trigger"))
    updated = source_update(source_id=sandbox_source.pk, changes={"trigger_keywords": ["post"]})
    assert updated.trigger_rule_version == 2
    unchanged = source_update(source_id=sandbox_source.pk, changes={"retention_days": 7})
    assert unchanged.trigger_rule_version == 2
    deliver(fixture_body("comment__offset_time").replace(b"CHECKLIST", b"great post"))
    versions = dict(InboundEvent.objects.values_list("source_event_id", "trigger_rule_version"))
    assert versions == {"evt_test_0043": 1, "evt_test_0044": 2}
    assert InboundEvent.objects.get(source_event_id="evt_test_0044").trigger_match is True


def test_register_source_accepts_a_canary_flag_from_trusted_configuration(db):
    source, created = source_register(
        name="canary",
        adapter="sandbox-social",
        account_ref="acct_test_09",
        event_types=["comment.created"],
        purposes=[],
        trigger_keywords=[],
        secret_env=SECRET_ENV,
        canary=True,
    )
    assert created and source.canary


def test_the_hot_path_source_read_matches_the_orm(sandbox_source):
    from ingress.selectors import source_by_name

    fast, orm = source_by_name("sandbox"), Source.objects.get(name="sandbox")
    for field in Source._meta.concrete_fields:
        assert getattr(fast, field.attname) == getattr(orm, field.attname), field.name
        assert type(getattr(fast, field.attname)) is type(getattr(orm, field.attname)), field.name
    assert source_by_name("nobody") is None


@pytest.mark.django_db(transaction=True)
def test_post_fixture_signs_and_delivers_over_http(live_server, sandbox_source, capsys):
    from tests.conftest import FIXTURES

    call_command(
        "post_fixture",
        str(FIXTURES / "sandbox_social" / "comment__northstar.json"),
        "--source",
        "sandbox",
        "--url",
        live_server.url,
    )
    assert "HTTP 200" in capsys.readouterr().out
    assert InboundEvent.objects.get().seen_count == 1
    with pytest.raises(CommandError, match="no source named"):
        call_command("post_fixture", "x.json", "--source", "nobody", "--url", live_server.url)


@pytest.mark.django_db
def test_register_source_sets_up_copy_and_transport_in_one_idempotent_command(capsys):
    from replies.models import ReplyCopy

    args = [
        *ARGS,
        "--copy",
        "public_ack=Thanks, the checklist is on its way.",
        "--copy",
        "private_delivery=Here is the checklist.",
        "--channel",
        "private_delivery=dm",
        "--transport",
        "sandbox",
        "--transport-url",
        "http://127.0.0.1:8765",
    ]
    call_command("register_source", *args)
    call_command("register_source", *args)
    out = capsys.readouterr().out
    assert "copy public_ack: approved as v1" in out and "copy public_ack: unchanged" in out
    source = Source.objects.get()
    assert source.source_url == "http://127.0.0.1:8765"  # the read side follows --transport-url
    routes = {r.purpose: (r.transport_name, r.target_url) for r in source.reply_routes.all()}
    assert routes == {p: ("sandbox", "http://127.0.0.1:8765") for p in ("public_ack", "private_delivery")}
    assert "route public_ack: sandbox http://127.0.0.1:8765 (declared)" in out
    assert "route public_ack: sandbox http://127.0.0.1:8765 (unchanged)" in out
    copies = dict(ReplyCopy.objects.values_list("purpose", "channel"))
    assert copies == {"public_ack": "public_ack", "private_delivery": "dm"}
    with pytest.raises(CommandError, match="already has approved copy v1"):
        call_command("register_source", *[a.replace("on its way", "coming") for a in args])
    with pytest.raises(CommandError, match="not declared with --purpose: other"):
        call_command("register_source", *ARGS, "--copy", "other=x")
    with pytest.raises(CommandError, match="takes PURPOSE=VALUE"):
        call_command("register_source", *ARGS, "--copy", "public_ack")
    with pytest.raises(CommandError, match="unknown transport"):
        call_command(
            "register_source",
            "sandbox-3",
            *ARGS[1:4],
            "acct_test_33",
            *ARGS[5:],
            "--transport",
            "carrier-pigeon",
        )
    assert ReplyCopy.objects.count() == 2


@pytest.mark.django_db
def test_register_source_routes_each_purpose_on_its_own(capsys):
    """docs/platforms/sources.md#routes: one source sends its public acknowledgement through one transport and its
    private delivery through another; --route names a purpose's transport and URL."""
    from replies.models import ReplyRoute

    args = [
        *ARGS,
        "--transport-url",
        "http://127.0.0.1:8001",
        "--route",
        "private_delivery=sandbox,http://127.0.0.1:8002",
        "--source-url",
        "http://127.0.0.1:8003",
    ]
    call_command("register_source", *args)
    call_command("register_source", *args)  # idempotent
    routes = dict(ReplyRoute.objects.values_list("purpose", "target_url"))
    assert routes == {"public_ack": "http://127.0.0.1:8001", "private_delivery": "http://127.0.0.1:8002"}
    assert Source.objects.get().source_url == "http://127.0.0.1:8003"  # --source-url wins for reads
    assert "route private_delivery: sandbox http://127.0.0.1:8002 (unchanged)" in capsys.readouterr().out
    moved = [a.replace(":8002", ":8009") for a in args]
    with pytest.raises(CommandError, match="already routed otherwise.*target_url"):
        call_command("register_source", *moved)
    with pytest.raises(CommandError, match="not declared with --purpose: other"):
        call_command("register_source", *ARGS, "--route", "other=sandbox")
    with pytest.raises(CommandError, match=r"takes PURPOSE=TRANSPORT\[,URL\]"):
        call_command("register_source", *ARGS, "--route", "public_ack=,http://x")
    with pytest.raises(CommandError, match="unknown transport"):
        call_command(
            "register_source",
            "sandbox-4",
            *ARGS[1:4],
            "acct_test_44",
            *ARGS[5:],
            "--route",
            "public_ack=carrier-pigeon",
        )
    # A transport that serves only another adapter's sources (WhatsApp's, from a phone number).
    with pytest.raises(CommandError, match="'meta-whatsapp-message' cannot answer a 'sandbox-social' source"):
        call_command(
            "register_source",
            "sandbox-4",
            *ARGS[1:4],
            "acct_test_44",
            *ARGS[5:],
            "--route",
            "private_delivery=meta-whatsapp-message",
        )
    assert not Source.objects.filter(name="sandbox-4").exists()  # all or nothing
    assert dict(ReplyRoute.objects.values_list("purpose", "target_url")) == routes


def test_the_source_identity_rule_is_one_function_every_path_asks(sandbox_source, monkeypatch):
    """docs/concepts/keys.md#source-identity: one source-identity rule (platform + account), asked by registration,
    edit and the admin form. Positive control: with the rule patched away, registration no
    longer refuses politely and only the database constraint stops the duplicate."""
    from django.db import IntegrityError

    from ingress.selectors import source_identity_holder
    from ingress.services import sources

    assert source_identity_holder(adapter="sandbox-social", account_ref="acct_test_01") == sandbox_source
    assert (
        source_identity_holder(
            adapter="sandbox-social", account_ref="acct_test_01", other_than=sandbox_source.pk
        )
        is None
    )
    kwargs = dict(
        adapter="sandbox-social",
        account_ref="acct_test_01",
        event_types=["comment.created"],
        purposes=[],
        trigger_keywords=[],
        secret_env=SECRET_ENV,
    )
    with pytest.raises(SourceConflict, match="already registered as source 'sandbox'"):
        source_register(name="second", **kwargs)
    monkeypatch.setattr(sources, "source_identity_holder", lambda **kw: None)
    with pytest.raises(IntegrityError):
        source_register(name="second", **kwargs)


@pytest.mark.django_db
def test_the_docs_register_source_example_works_as_written(capsys):
    """docs/platforms/sources.md's example runs as printed (beside the demo's and the canary's accounts)."""
    import re
    import shlex
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "docs" / "platforms" / "sources.md").read_text()
    block = readme[readme.index("## Registering a source") :]
    (example,) = re.findall(r"```sh\n(python manage\.py register_source shop .*?)\n```", block, flags=re.S)
    argv = shlex.split(example.replace("\\\n", " "))
    assert argv[:3] == ["python", "manage.py", "register_source"]
    call_command(*argv[2:])
    source = Source.objects.get(name="shop")
    assert (source.account_ref, source.purposes) == ("acct_test_03", ["public_ack", "private_delivery"])
    assert "registered" in capsys.readouterr().out
