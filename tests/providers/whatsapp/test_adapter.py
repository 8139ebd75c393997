"""The WhatsApp adapter's field map on synthetic bodies in the Cloud API's shape: each message type,
statuses as receipts, opaque sender refs, and the body's split by phone number."""

from __future__ import annotations

import json

import pytest

from conduit.providers.base import SecretUnavailable, SourceConfig, StatusItem
from conduit.providers.registry import get_adapter
from conduit.providers.whatsapp.webhook import sender_ref
from tests.providers.whatsapp.conftest import BUYER, NUMBER, body, change, status, text_message, wamid

ADAPTER = get_adapter("meta-whatsapp")
KEY = b"k" * 32
CONFIG = SourceConfig(
    name="wa-test",
    source_system="meta-whatsapp",
    account_ref=NUMBER,
    event_types=frozenset({"message.created"}),
    contract_version="whatsapp-v1",
    canary=False,
    ref_key=KEY,
)


def parse(raw: bytes, config: SourceConfig = CONFIG):
    return ADAPTER.parse(body=raw, config=config)


def message(kind: str, part: dict | None, n: int = 1) -> dict:
    item = {"from": BUYER, "id": wamid(n), "timestamp": "1764000000", "type": kind}
    if part is not None:
        item[kind] = part
    return change({"contacts": [{"profile": {"name": "Test Person 01"}, "wa_id": BUYER}], "messages": [item]})


def test_a_text_message_is_one_event_keyed_by_its_wamid():
    parsed = parse(body(text_message(1, "What is the price?", at=1764000000)))
    (event,) = parsed.observations
    assert event.event_key == f"meta-whatsapp:{NUMBER}:message.created:{wamid(1)}"
    assert event.text == "What is the price?" and event.handle == "Test Person 01"
    assert event.occurred_at.timestamp() == 1764000000 and event.occurred_at_original == "1764000000"
    assert event.message_ref == wamid(1) and event.address == BUYER


def test_the_sender_ref_is_opaque_and_stable():
    (event,) = parse(body(text_message(1, "hi"))).observations
    assert BUYER not in event.sender_ref and BUYER not in event.event_key and BUYER not in event.payload_hash
    assert event.sender_ref == sender_ref(key=KEY, account=NUMBER, wa_id=BUYER)
    assert event.conversation_ref == event.sender_ref
    (again,) = parse(body(text_message(2, "hello"))).observations
    assert again.sender_ref == event.sender_ref
    other = SourceConfig(**{**CONFIG.__dict__, "ref_key": b"x" * 32})
    (keyed_otherwise,) = parse(body(text_message(1, "hi")), other).observations
    assert keyed_otherwise.sender_ref != event.sender_ref  # a key, not a bare hash of the number


def test_without_a_key_a_number_is_never_hashed_bare():
    unkeyed = SourceConfig(**{**CONFIG.__dict__, "ref_key": b""})
    with pytest.raises(SecretUnavailable):
        parse(body(text_message(1, "hi")), unkeyed)


def test_the_address_is_content_not_contract():
    (event,) = parse(body(text_message(1, "hi"))).observations
    assert BUYER not in json.dumps(event.contract_values(), default=str)


@pytest.mark.parametrize(
    "kind, part, text",
    [
        (
            "interactive",
            {"type": "button_reply", "button_reply": {"id": "b1", "title": "Yes please"}},
            "Yes please",
        ),
        ("interactive", {"type": "list_reply", "list_reply": {"id": "l1", "title": "Size M"}}, "Size M"),
        ("button", {"payload": "p", "text": "Tell me more"}, "Tell me more"),
        (
            "image",
            {"id": "1000000000001", "mime_type": "image/jpeg", "sha256": "ab", "caption": "this one?"},
            "this one?",
        ),
        ("image", {"id": "1000000000001", "mime_type": "image/jpeg", "sha256": "ab"}, ""),
        ("audio", {"id": "1000000000002", "mime_type": "audio/ogg"}, ""),
    ],
)
def test_replies_choices_and_media_are_messages(kind, part, text):
    (event,) = parse(body(message(kind, part))).observations
    assert event.event_type == "message.created" and event.text == text


@pytest.mark.parametrize("kind", ["reaction", "system", "unsupported", "location", "order"])
def test_reactions_system_and_other_types_are_counted_not_kept(kind):
    parsed = parse(body(message(kind, {"x": "y"})))
    assert not parsed.observations and not parsed.rejections
    assert parsed.ignored == {f"whatsapp.{kind}": 1}


@pytest.mark.parametrize(
    "mutate, reason",
    [
        (lambda m: m.pop("id"), "missing_identity"),
        (lambda m: m.pop("from"), "missing_identity"),
        (lambda m: m.update({"from": "+1 555"}), "invalid_identity"),
        (lambda m: m.update({"timestamp": "yesterday"}), "invalid_occurred_at"),
        (lambda m: m.pop("text"), "invalid_body"),
    ],
)
def test_a_message_without_what_it_needs_is_refused(mutate, reason):
    item = text_message(1, "hi")
    mutate(item["value"]["messages"][0])
    parsed = parse(body(item))
    assert [r.reason_code for r in parsed.rejections] == [reason]


def test_statuses_are_receipts_never_events():
    key = "a" * 64
    parsed = parse(body(status(wamid(9), "sent", key=key), status(wamid(9), "failed", error=131026)))
    assert not parsed.observations
    assert parsed.statuses == [
        StatusItem(0, wamid(9), "sent", parsed.statuses[0].occurred_at, correlation=key, error_code=""),
        StatusItem(
            1, wamid(9), "failed", parsed.statuses[1].occurred_at, correlation="", error_code="131026"
        ),
    ]


def test_a_body_is_split_by_phone_number():
    other = text_message(2, "for the other number")
    other["value"]["metadata"]["phone_number_id"] = "100000000000999"
    parsed = parse(body(text_message(1, "mine"), other))
    assert [o.text for o in parsed.observations] == ["mine"]
