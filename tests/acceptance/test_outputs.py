"""The outputs in the acceptance report (docs/concepts/acceptance.md#report): "Return the event contract, field map, storage
schema, state transition table, synthetic fixture, canary result, reconciliation report,
acceptance report, and a human-held checklist." Each section read from where its truth lives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from conduit.canonical import sha256_hex
from conduit.providers.base import Observation, SourceConfig
from conduit.providers.registry import get_adapter
from platforms.meta.field_maps import meta_field_maps
from platforms.sandbox.acceptance import Harness
from reconcile.proof import acceptance, outputs

FIXTURES = Path(settings.BASE_DIR) / "fixtures"


# -- the storage schema: tables, columns, types and constraints from the models and the database --


@pytest.mark.django_db
def test_the_storage_schema_lists_every_ledger_table_with_its_columns_types_and_constraints():
    schema = {table["table"]: table for table in outputs.storage_schema()}
    assert list(schema) == [m._meta.db_table for m in outputs.ledger_models()]
    assert {"inbound_events", "reply_actions"} <= set(schema)
    with connection.cursor() as cursor:
        for model in outputs.ledger_models():
            table = schema[model._meta.db_table]
            in_db = [
                c.name for c in connection.introspection.get_table_description(cursor, model._meta.db_table)
            ]
            assert [c["name"] for c in table["columns"]] == in_db, model
            types = {c["name"]: c["type"] for c in table["columns"]}
            for field in model._meta.concrete_fields:
                if field.db_type(connection) is not None:
                    assert types[field.column] == field.db_type(connection), (model, field.column)
            constraints = {c["name"]: c for c in table["constraints"]}
            assert set(constraints) == set(
                connection.introspection.get_constraints(cursor, model._meta.db_table)
            )
            # Every constraint the model declares is in the database under its name, of its kind.
            for declared in table["unique"]:
                assert constraints[declared]["kind"] == "unique", declared
            for declared in table["checks"]:
                assert constraints[declared]["kind"] == "check", declared

    events = schema["inbound_events"]
    columns = {c["name"]: c for c in events["columns"]}
    assert columns["event_key"]["null"] is False and columns["event_key"]["type"].startswith("varchar")
    assert columns["seen_count"]["null"] is False
    unique = {c["name"]: c for c in events["constraints"]}["inbound_event_key_unique"]
    assert (unique["kind"], unique["columns"]) == ("unique", ["event_key"])
    replies = schema["reply_actions"]
    assert {c["name"]: c for c in replies["constraints"]}["reply_action_key_unique"]["columns"] == [
        "reply_key"
    ]
    assert {c["name"]: c for c in replies["columns"]}["event_key"]["references"] == "inbound_events.event_key"
    if connection.vendor == "postgresql":
        assert unique["definition"] == "UNIQUE (event_key)"
        for table in schema.values():
            for check in table["checks"]:
                assert {c["name"]: c for c in table["constraints"]}[check]["definition"].startswith("CHECK ")


# -- the synthetic fixture: the exact body the checks deliver ------------------------------------


def test_the_synthetic_fixture_is_the_exact_body_the_checks_deliver(db):
    fixture = outputs.synthetic_fixture()
    h = Harness()
    posted = []
    real_post = h.client.post

    def recording_post(path, data=None, **kwargs):
        posted.append(data)
        return real_post(path, data=data, **kwargs)

    h.client.post = recording_post
    try:
        assert acceptance.event_identity(h) == []
    finally:
        h.close()
    body = (FIXTURES / "sandbox_social" / "comment__northstar.json").read_bytes()
    assert fixture["file"] == "fixtures/sandbox_social/comment__northstar.json"
    assert fixture["body"].encode() == body and fixture["sha256"] == sha256_hex(body)
    assert posted.count(body) == 2  # the Northstar fixture, delivered twice as the row says
    config = SourceConfig(
        name="sandbox",
        source_system="sandbox-social",
        account_ref="acct_test_01",
        event_types=frozenset({"comment.created"}),
        contract_version="event-v1",
        canary=False,
    )
    (observation,) = get_adapter("sandbox-social").parse(body=body, config=config).observations
    assert (
        observation.event_key
        == fixture["event_key"]
        == "sandbox-social:acct_test_01:comment.created:evt_test_0042"
    )
    assert fixture["purposes"] == ["public_ack", "private_delivery"]
    assert fixture["canary_run"] is None


def test_the_synthetic_fixture_carries_the_body_the_canary_run_posted():
    summary = {"run_id": "0123456789ab", "event_key": "k", "fixture": {"template": "t", "body": "{}"}}
    assert outputs.synthetic_fixture(summary)["canary_run"] == {
        "run_id": "0123456789ab",
        "template": "t",
        "event_key": "k",
        "body": "{}",
    }


# -- the Meta field maps: read from the Meta adapters' declaration, held to what they do -----------

# Which fixture shows each row of the declared table (a row without one fails the test).
META_ROW_FIXTURES = {
    "instagram.comments, instagram.live_comments": [("meta-instagram", "meta_instagram/comment__created")],
    "page.feed, item comment, verb add": [("meta-page", "meta_page/comment__add")],
    "page.feed, verb edited": [("meta-page", "meta_page/comment__edited")],
    "page.feed, verb remove": [("meta-page", "meta_page/comment__remove")],
    "page.feed, verb hide / unhide": [("meta-page", "meta_page/comment__hide")],
    "messaging, standby (both objects); instagram.messages changes": [
        ("meta-instagram", "meta_instagram/message__created"),
        ("meta-page", "meta_page/message__created"),
    ],
}


def _item(document: dict) -> tuple[dict, dict]:
    """The fixture's one item (a change's value, or a messaging event) and its entry."""
    (entry,) = document["entry"]
    if "messaging" in entry:
        return entry["messaging"][0], entry
    return entry["changes"][0]["value"], entry


def _source_value(name: str, item: dict, entry: dict) -> str:
    """What a source named in the table's prose is in a fixture's item."""
    paths = {
        "comment id": lambda: item["id"],
        "media id": lambda: item["media"]["id"],
        "from.id": lambda: item["from"]["id"],
        "comment_id": lambda: item["comment_id"],
        "post_id": lambda: item["post_id"],
        "mid": lambda: item["message"]["mid"],
        "sender.id": lambda: item["sender"]["id"],
        "<comment_id>@<sha256(message)[:16]>": lambda: (
            f"{item['comment_id']}@{sha256_hex(item['message'])[:16]}"
        ),
        "<comment_id>@<created_time or entry time>": lambda: (
            f"{item['comment_id']}@{item.get('created_time') or entry['time']}"
        ),
    }
    if name not in paths:
        return f"<the table names a source this test does not know: {name!r}>"
    return str(paths[name]())


def meta_map_disagreements(maps: dict) -> list[str]:
    """Every way the declared Meta field maps and the adapters' normalization of the fixtures differ."""
    found = []
    rows = {row["source"]: row for row in maps["maps"]}
    if set(rows) != set(META_ROW_FIXTURES):
        found.append(
            f"rows declared {sorted(rows)} are not the rows with fixtures {sorted(META_ROW_FIXTURES)}"
        )
    for source, cases in META_ROW_FIXTURES.items():
        row = rows.get(source)
        if row is None:
            continue
        for adapter_name, fixture in cases:
            body = (FIXTURES / f"{fixture}.json").read_bytes()
            document = json.loads(body)
            item, entry = _item(document)
            adapter = get_adapter(adapter_name)
            config = SourceConfig(
                name="maps",
                source_system=adapter.source_system,
                account_ref=entry["id"],
                event_types=frozenset(f.event_type for f in adapter.families),
                contract_version=maps["contract_version"],
                canary=False,
            )
            parsed = adapter.parse(body=body, config=config)
            observations = [o for o in parsed.observations if isinstance(o, Observation)]
            if len(observations) != 1:
                found.append(
                    f"{fixture}: {adapter_name} made {len(observations)} events ({parsed.rejections})"
                )
                continue
            (o,) = observations
            if o.event_type not in [t.strip() for t in row["event_type"].split("/")]:
                found.append(f"{fixture}: event type {o.event_type}, the map says {row['event_type']}")
            if o.source_event_id != _source_value(row["event_id"], item, entry):
                found.append(f"{fixture}: id {o.source_event_id}, the map says {row['event_id']}")
            expected_key = (
                maps["key_form"]
                .replace("<adapter>", adapter.source_system)
                .replace("<account>", entry["id"])
                .replace("<type>", o.event_type)
                .replace("<id>", o.source_event_id)
            )
            if o.event_key != expected_key:
                found.append(f"{fixture}: key {o.event_key}, the map's form gives {expected_key}")
            if o.contract_version != maps["contract_version"]:
                found.append(
                    f"{fixture}: contract {o.contract_version}, the map is {maps['contract_version']}"
                )
            for ref, named in row["refs"].items():
                if getattr(o, ref) != _source_value(named, item, entry):
                    found.append(f"{fixture}: {ref} is {getattr(o, ref)}, the map says {named}")
    return found


def test_the_meta_field_maps_are_the_adapters_declaration_and_agree_with_what_they_do():
    maps = meta_field_maps()
    assert (
        maps["contract_version"] == "meta-v1" and maps["declared_in"] == "conduit/providers/meta/webhook.py"
    )
    assert maps["key_form"] == "<adapter>:<account>:<type>:<id>"
    assert {row["source"] for row in maps["maps"]} == set(META_ROW_FIXTURES)
    instagram = next(r for r in maps["maps"] if r["source"].startswith("instagram.comments"))
    assert instagram["refs"] == {
        "conversation_ref": "media id",
        "message_ref": "comment id",
        "sender_ref": "from.id",
    }
    assert meta_map_disagreements(maps) == []
    assert {name: [f["event_type"] for f in a["families"]] for name, a in maps["adapters"].items()} == {
        name: [f.event_type for f in get_adapter(name).families] for name in ("meta-instagram", "meta-page")
    }


def test_the_meta_map_check_fails_when_the_adapter_maps_otherwise(monkeypatch):
    """Plant a drift: the Instagram adapter takes the conversation from the comment id. The map
    (unchanged) and the adapter disagree, and the check says where."""
    from dataclasses import replace

    from conduit.providers.meta.webhook import MetaInstagramWebhook

    real = MetaInstagramWebhook.change

    def drifted(self, *args, **kwargs):
        result = real(self, *args, **kwargs)
        return (
            replace(result, conversation_ref=result.message_ref)
            if isinstance(result, Observation)
            else result
        )

    monkeypatch.setattr(MetaInstagramWebhook, "change", drifted)
    found = meta_map_disagreements(meta_field_maps())
    assert any(
        "comment__created: conversation_ref is 17900000000000001, the map says media id" in f for f in found
    ), found


def test_the_meta_map_check_fails_when_the_declaration_changes(monkeypatch):
    """Plant the other drift: the declared table says the sender comes from the media id."""
    from conduit.providers.meta import webhook

    monkeypatch.setattr(
        webhook,
        "__doc__",
        webhook.__doc__.replace(
            "conversation: media id; message: comment id; sender: from.id",
            "conversation: media id; message: comment id; sender: media id",
        ),
    )
    assert any(
        "sender_ref is 17841400000000901, the map says media id" in f
        for f in meta_map_disagreements(meta_field_maps())
    )


# -- the human-held checklist -------------------------------------------------------------------


def test_the_human_held_checklist_names_quarantine_decisions_and_account_connection():
    """docs/concepts/acceptance.md#human-held: "require human review before correction" (quarantine); "Leave the live transport
    disabled until the acceptance contract passes and a human authorizes the account connection"."""
    items = outputs.HUMAN_HELD
    assert any(
        item.startswith("Quarantine decisions:") and "reviewed by a human before any correction" in item
        for item in items
    )
    assert any(
        item.startswith("Account connection:") and "authorizes connecting each account" in item
        for item in items
    )
