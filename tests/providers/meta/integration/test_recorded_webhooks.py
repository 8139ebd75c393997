"""Each recorded Meta webhook body (fixtures/meta_*/recorded/webhook_*.json) maps to what Conduit
must make of it: one test per body, through the adapters' `parse`, as the endpoint would route it.

The bodies are real ones (Meta's samples and bodies other projects logged), their ids, names and
texts replaced shape for shape (fixtures/meta_recorded_PROVENANCE.md). Each entry is routed to
the source owning its account, so a body is parsed for the account of its first entry.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conduit.providers.base import SourceConfig
from conduit.providers.meta.adapters import MetaInstagramAdapter, MetaPageAdapter
from conduit.providers.meta.webhook import CONTRACT_VERSION, EVENT_TYPES

FIXTURES = Path(__file__).resolve().parents[4] / "fixtures"
# WhatsApp's recorded material is held by tests/providers/whatsapp/ and tests/simulators/.
INSTAGRAM_AND_PAGE = ("meta_instagram", "meta_page")
ADAPTERS = {"instagram": MetaInstagramAdapter, "page": MetaPageAdapter}

# What each body must become: ("event", type, source_event_id, conversation_ref, sender_ref),
# ("own", kind, provider_id, parent_ref, correlation), ("ignored", name) or ("rejected", reason).
EXPECTED = {
    # Meta's App Dashboard sample: entry id "0", no creation time (the entry's stands in).
    "meta_instagram/webhook_comments__dashboard_sample": [
        ("event", "comment.created", "100000901", "70000901", "1000000902")
    ],
    # The account's own comment, with Meta's `self_ig_scoped_id`: evidence, never an event.
    "meta_instagram/webhook_comments__self_authored": [
        ("own", "comment", "17919000000000901", "18172000000000901", "")
    ],
    # An echo of the account's DM (Instagram echoes arrive in `messaging`, without metadata).
    "meta_instagram/webhook_messaging__echo": [
        (
            "own",
            "message",
            "aWdfZAG1faXRlbToxOklHTWVzc2FnZAUlEOjE3ODQxMDAwMDAwMDAwOTA0OjM0MDI4MDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMD"
            "AwMDAwMDkwNDozMjUwMzAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDkwMQZDZD",
            "1129800000000901",
            "",
        )
    ],
    # A DM: its 164-character mid is the key, whole.
    "meta_instagram/webhook_messaging__message": [
        (
            "event",
            "message.created",
            "aWdfZAG1faXRlbToxOklHTWVzc2FnZAUlEOjE3ODQxMDAwMDAwMDAwOTA1OjM0MDI4MDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMD"
            "AwMDAwMDkwNTozMTQ5MzAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDkwMQZDZD",
            "24286000000000901",
            "24286000000000901",
        )
    ],
    "meta_instagram/webhook_messaging__seen": [("ignored", "messaging.read")],
    # A story mention is a DM with an attachment and no text: a message, its text empty.
    "meta_instagram/webhook_messaging__story_mention": [
        (
            "event",
            "message.created",
            "aWdfZAG1faXRlbToxOklHTWVzc2FnZAUlEOjE3ODQxMDAwMDAwMDAwOTA3OjM0MDI4MDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMD"
            "AwMDAwMDkwNjozMTU5NDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDkwMQZDZD",
            "25071000000000901",
            "25071000000000901",
        )
    ],
    # A 2024 Page comment: `from`, and a nested `post` object the map does not need.
    "meta_page/webhook_feed__comment_add": [
        (
            "event",
            "comment.created",
            "712750000000901_1063800000000901",
            "206070000000901_712750000000901",
            "24266000000000901",
        )
    ],
    # The Graph 2.11 shape (restfb#817): `from` replaced `sender_id`/`sender_name`.
    "meta_page/webhook_feed__comment_add_v2_11": [
        ("event", "comment.created", "900000901_1491800000000901", "100000901_900000901", "123450000000901")
    ],
    # Before 2.11 Meta named the author `sender_id`/`sender_name`: no `from.id`, so quarantined.
    "meta_page/webhook_feed__comment_edited_legacy": [("rejected", "missing_identity")],
    "meta_page/webhook_feed__comment_hide_legacy": [("rejected", "missing_identity")],
    # The sample's `from` is the Page itself: the Page's own removal is counted, not an event.
    "meta_page/webhook_feed__comment_remove": [("ignored", "own.comment.removed")],
    # Meta's message-echoes sample (Messenger's 2016 mid form): metadata comes back as correlation.
    "meta_page/webhook_messaging__echo_metadata": [
        (
            "own",
            "message",
            "mid.1457764197618:6ea7e301a58ca15b4c",
            "10000000901",
            "DEVELOPER_DEFINED_METADATA_STRING",
        )
    ],
    # `message_edit` is not a message: counted, never an event (nor quarantined).
    "meta_page/webhook_messaging__message_edit": [("ignored", "messaging.other")],
    # A Messenger DM with Wit.ai's `nlp` block: an 88-character `m_` mid is the key.
    "meta_page/webhook_messaging__message_nlp": [
        (
            "event",
            "message.created",
            "m_1IRGFvmaqMbCC8vq59gbxaeBlR2r8eBZdDeANEjr-ysC0FFajKSejYNlRGa4Xb9a3v7E9VV4FmNTZII1YHy5Kb",
            "24266000000000901",
            "24266000000000901",
        )
    ],
}
RECORDED = sorted(
    f"{path.parent.parent.name}/{path.stem}"
    for d in INSTAGRAM_AND_PAGE
    for path in FIXTURES.glob(f"{d}/recorded/webhook_*.json")
)


def parse(name: str):
    body = (FIXTURES / name.replace("/", "/recorded/", 1)).with_suffix(".json").read_bytes()
    document = json.loads(body)
    adapter = ADAPTERS[document["object"]]()
    config = SourceConfig(
        name="recorded",
        source_system=adapter.source_system,
        account_ref=str(document["entry"][0]["id"]),
        event_types=frozenset(EVENT_TYPES),
        contract_version=CONTRACT_VERSION,
        canary=False,
    )
    return adapter.parse(body=body, config=config)


def outcomes(parsed) -> list[tuple]:
    found = [
        ("event", o.event_type, o.source_event_id, o.conversation_ref, o.sender_ref)
        for o in parsed.observations
    ]
    found += [("own", o.kind, o.provider_id, o.parent_ref, o.correlation) for o in parsed.own]
    found += [("ignored", name) for name, count in parsed.ignored.items() for _ in range(count)]
    found += [("rejected", r.reason_code) for r in parsed.rejections]
    return found


def test_every_recorded_body_has_its_expectation():
    assert RECORDED == sorted(EXPECTED)


@pytest.mark.parametrize("name", RECORDED)
def test_a_recorded_body_maps_to_its_expectation(name):
    parsed = parse(name)
    assert outcomes(parsed) == EXPECTED[name]
    for observation in parsed.observations:
        # Keys carry ids whole: nothing of Meta's id is cut to fit.
        assert observation.event_key.endswith(observation.source_event_id)


def test_real_instagram_mids_are_long_and_fit_the_ledgers():
    """Recorded Instagram mids are 164 characters: the keys keep them whole (ingress allows 200)."""
    (observation,) = parse("meta_instagram/webhook_messaging__message").observations
    assert len(observation.source_event_id) == 164 and observation.source_event_id.startswith("aWdf")
    assert len(observation.event_key) <= 512
