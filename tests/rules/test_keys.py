"""Key derivation: event_key, reply_key and the canonical hash, exactly as docs/concepts/keys.md states them."""

import hashlib
import json
import math
from datetime import datetime, timezone

import pytest

from conduit.canonical import canonical_json, payload_hash, sha256_hex
from conduit.providers.base import Observation, event_key
from replies.contract import reply_key

REFS = dict(
    source_system="sandbox_social",
    source_account_ref="acct_test_01",
    event_type="comment.created",
    source_event_id="evt_test_01",
    conversation_ref="post_test_01",
    message_ref="comment_test_01",
)


def _hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_with_a_provider_event_id_the_key_is_the_id_qualified_by_source_account_and_type():
    """docs/concepts/keys.md#event-key: "source_event_id: Provider event identifier when available"."""
    assert event_key(**REFS) == "sandbox_social:acct_test_01:comment.created:evt_test_01"


@pytest.mark.parametrize("field", ["source_system", "source_account_ref", "event_type", "source_event_id"])
def test_each_qualifier_of_a_provider_id_changes_the_key(field):
    assert event_key(**{**REFS, field: REFS[field] + "x"}) != event_key(**REFS)


@pytest.mark.parametrize("field", ["conversation_ref", "message_ref"])
def test_with_a_provider_id_the_message_refs_do_not_enter_the_key(field):
    assert event_key(**{**REFS, field: "other"}) == event_key(**REFS)


def test_without_an_event_id_the_key_is_the_sha256_of_the_stable_refs_joined_by_bars():
    """docs/concepts/event-contract.md#invariants: "event_key comes from stable source identifiers"."""
    refs = {**REFS, "source_event_id": ""}
    assert event_key(**refs) == _hex(
        "sandbox_social|acct_test_01|comment.created|post_test_01|comment_test_01"
    )


@pytest.mark.parametrize(
    "field", ["source_system", "source_account_ref", "event_type", "conversation_ref", "message_ref"]
)
def test_without_an_event_id_every_stable_ref_changes_the_key(field):
    refs = {**REFS, "source_event_id": ""}
    assert event_key(**{**refs, field: refs[field] + "x"}) != event_key(**refs)


def test_an_observation_derives_its_key_from_its_own_refs_only():
    """docs/concepts/keys.md#event-key: "Receipt time and message text never act as the sole key"."""
    common = dict(
        index=0,
        sender_ref="user_test_01",
        occurred_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc),
        occurred_at_original="2026-01-02T03:04:05Z",
        payload_hash="0" * 64,
        contract_version="1",
        canary=False,
        text="hello",
    )
    with_id = Observation(**REFS, **common)
    assert with_id.event_key == event_key(**REFS)
    without_id = Observation(**{**REFS, "source_event_id": ""}, **common)
    assert without_id.event_key == event_key(**{**REFS, "source_event_id": ""})
    assert without_id.event_key != with_id.event_key
    other_text = Observation(**REFS, **{**common, "text": "other", "index": 3})
    assert other_text.event_key == with_id.event_key


def test_reply_key_is_sha256_of_reply_bar_event_key_bar_purpose():
    """docs/concepts/keys.md#reply-key: reply_key = SHA-256("reply|" + event_key + "|" + purpose)."""
    key = event_key(**REFS)
    assert reply_key(key, "public_ack") == _hex("reply|" + key + "|public_ack")
    assert reply_key(key, "public_ack") != reply_key(key, "private_delivery")
    # The separators keep ("a|b", "c") and ("a", "b|c") apart only by position; both bars matter.
    assert reply_key("evt", "ack") == _hex("reply|evt|ack")


def test_sha256_hex_takes_text_as_utf8_and_bytes_as_they_are():
    assert sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert sha256_hex(b"abc") == sha256_hex("abc")
    assert sha256_hex("é") == hashlib.sha256("é".encode("utf-8")).hexdigest()


def test_canonical_json_is_sorted_compact_and_utf8():
    assert canonical_json({"b": 1, "a": [1, {"d": "é", "c": None}]}) == (
        '{"a":[1,{"c":null,"d":"é"}],"b":1}'.encode("utf-8")
    )


def test_canonical_json_refuses_values_json_cannot_carry():
    with pytest.raises(ValueError):
        canonical_json({"x": math.nan})
    with pytest.raises(ValueError):
        canonical_json({"x": math.inf})


def test_payload_hash_ignores_key_order_and_whitespace_but_not_values():
    body = json.loads('{ "b" : 1, "a" : "é" }')
    assert payload_hash(body) == _hex('{"a":"é","b":1}')
    assert payload_hash({"a": "é", "b": 1}) == payload_hash(body)
    assert payload_hash({"a": "é", "b": 2}) != payload_hash(body)
