"""The sandbox-social adapter: Standard Webhooks proof and the frozen field map (pure, no ORM)."""

from datetime import datetime, timedelta, timezone

import pytest

from conduit.canonical import canonical_json, payload_hash, sha256_hex
from conduit.providers.base import (
    Observation,
    ProofError,
    SecretUnavailable,
    SourceConfig,
)
from conduit.providers.registry import get_adapter
from conduit.providers.sandbox import standard_webhooks
from conduit.providers.sandbox.webhook import FIELD_MAP
from tests.conftest import TEST_SECRET, fixture_body, sign

ADAPTER = get_adapter("sandbox-social")
CONFIG = SourceConfig(
    name="sandbox",
    source_system="sandbox-social",
    account_ref="acct_test_01",
    event_types=frozenset({"comment.created"}),
    contract_version="event-v1",
    canary=False,
)

# The Standard Webhooks specification's published test vector.
VECTOR_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
VECTOR_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
VECTOR_TIMESTAMP = 1614265330
VECTOR_BODY = b'{"test": 2432232314}'
VECTOR_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def verify(body: bytes, headers: dict, *, now: datetime | None = None, secret: str = TEST_SECRET):
    return ADAPTER.verify(body=body, headers=headers, secret=secret, now=now or datetime.now(timezone.utc))


def test_published_vector_verifies(monkeypatch):
    at = datetime.fromtimestamp(VECTOR_TIMESTAMP, tz=timezone.utc)

    class Frozen(datetime):
        @classmethod
        def now(cls, tz=None):
            return at

    # The library checks the window on its own clock; freeze it at the vector's time.
    monkeypatch.setattr("standardwebhooks.webhooks.datetime", Frozen)
    headers = {
        "webhook-id": VECTOR_ID,
        "webhook-timestamp": str(VECTOR_TIMESTAMP),
        "webhook-signature": VECTOR_SIGNATURE,
    }
    assert verify(VECTOR_BODY, headers, now=at, secret=VECTOR_SECRET).delivery_id == VECTOR_ID
    assert ADAPTER.sign(body=VECTOR_BODY, secret=VECTOR_SECRET, delivery_id=VECTOR_ID, at=at) == headers
    tampered = dict(headers, **{"webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE0"})
    with pytest.raises(ProofError) as refused:
        verify(VECTOR_BODY, tampered, now=at, secret=VECTOR_SECRET)
    assert refused.value.code in {"invalid_signature", "malformed_proof_headers"}


def test_signature_list_accepts_any_matching_entry_for_rotation():
    body = fixture_body("comment__northstar")
    headers = sign(body)
    other = sign(body, secret="whsec_" + "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUE=")
    headers["webhook-signature"] = f"{other['webhook-signature']} {headers['webhook-signature']}"
    assert verify(body, headers).delivery_id == headers["webhook-id"]


@pytest.mark.parametrize(
    "mutate, code",
    [
        (lambda h: h.pop("webhook-signature"), "missing_proof_headers"),
        (lambda h: h.pop("webhook-id"), "missing_proof_headers"),
        (lambda h: h.pop("webhook-timestamp"), "missing_proof_headers"),
        (lambda h: h.update({"webhook-timestamp": "soon"}), "malformed_proof_headers"),
        (lambda h: h.update({"webhook-timestamp": "1e9"}), "malformed_proof_headers"),
        (lambda h: h.update({"webhook-timestamp": "-5"}), "malformed_proof_headers"),
        (lambda h: h.update({"webhook-timestamp": "999999999999"}), "malformed_proof_headers"),
        (lambda h: h.update({"webhook-timestamp": "9" * 40}), "malformed_proof_headers"),
        (lambda h: h.update({"webhook-timestamp": "١٢٣"}), "malformed_proof_headers"),
        (lambda h: h.update({"webhook-signature": "v1"}), "malformed_proof_headers"),
        (lambda h: h.update({"webhook-signature": "v1,%%%not-base64"}), "malformed_proof_headers"),
        (lambda h: h.update({"webhook-signature": "v1,a,b"}), "malformed_proof_headers"),
        (lambda h: h.update({"webhook-signature": "v2,abcd"}), "invalid_signature"),
        (lambda h: h.update({"webhook-signature": "v1,AAAA"}), "invalid_signature"),
        (lambda h: h.update({"webhook-id": "x" * 201}), "malformed_proof_headers"),
        (lambda h: h.update({"webhook-id": "line\nbreak"}), "malformed_proof_headers"),
    ],
)
def test_malformed_or_wrong_proof_is_a_clean_refusal(mutate, code):
    body = fixture_body("comment__northstar")
    headers = sign(body)
    mutate(headers)
    with pytest.raises(ProofError) as refused:
        verify(body, headers)
    assert refused.value.code == code


def test_body_changed_after_signing_is_refused():
    body = fixture_body("comment__northstar")
    headers = sign(body)
    with pytest.raises(ProofError) as refused:
        verify(body.replace(b"CHECKLIST", b"CHECKLISX"), headers)
    assert refused.value.code == "invalid_signature"


def test_the_proof_covers_the_bytes_whatever_their_encoding():
    """A non-UTF-8 body is judged by its signature, not by its encoding."""
    key = standard_webhooks.secret_key(TEST_SECRET)
    body = b"\xff\xfe{}"
    headers = {
        "webhook-id": "msg_test_raw",
        "webhook-timestamp": str(int(datetime.now(timezone.utc).timestamp())),
    }
    headers["webhook-signature"] = standard_webhooks.signature(
        key=key, delivery_id="msg_test_raw", timestamp=headers["webhook-timestamp"], body=body
    )
    assert verify(body, headers).delivery_id == "msg_test_raw"
    with pytest.raises(ProofError) as refused:
        verify(body, {**headers, "webhook-signature": sign(b"{}")["webhook-signature"]})
    assert refused.value.code == "invalid_signature"


@pytest.mark.parametrize("offset, code", [(-301, "stale_timestamp"), (301, "future_timestamp")])
def test_timestamp_window_is_five_minutes_both_ways(offset, code):
    body = fixture_body("comment__northstar")
    now = datetime.now(timezone.utc)
    with pytest.raises(ProofError) as refused:
        verify(body, sign(body, at=now + timedelta(seconds=offset)), now=now)
    assert refused.value.code == code
    # Just inside the window passes.
    inside = now + timedelta(seconds=offset - 2 if offset > 0 else offset + 2)
    assert verify(body, sign(body, at=inside), now=now)


@pytest.mark.parametrize("secret", ["", "whsec_", "whsec_!!!not base64!!!"])
def test_unusable_secret_is_an_operator_error_not_a_client_refusal(secret):
    body = fixture_body("comment__northstar")
    with pytest.raises(SecretUnavailable):
        verify(body, sign(body), secret=secret)


def test_northstar_maps_onto_the_event_contract():
    parsed = ADAPTER.parse(body=fixture_body("comment__northstar"), config=CONFIG)
    assert parsed.rejections == []
    (obs,) = parsed.observations
    assert obs.event_key == "sandbox-social:acct_test_01:comment.created:evt_test_0042"
    assert (obs.source_event_id, obs.event_type, obs.conversation_ref, obs.message_ref, obs.sender_ref) == (
        "evt_test_0042",
        "comment.created",
        "post_test_07",
        "msg_test_0042",
        "person_test_09",
    )
    assert obs.occurred_at == datetime(2026, 1, 15, 14, 30, tzinfo=timezone.utc)
    assert obs.contract_version == "event-v1"
    assert obs.canary is False
    event = {
        "id": "evt_test_0042",
        "type": "comment.created",
        "post_id": "post_test_07",
        "comment_id": "msg_test_0042",
        "from_id": "person_test_09",
        "created_at": "2026-01-15T14:30:00Z",
        "text": "CHECKLIST",
    }
    assert obs.payload_hash == sha256_hex(canonical_json(event)) == payload_hash(event)


def test_offset_is_normalized_to_utc_and_kept_for_audit():
    (obs,) = ADAPTER.parse(body=fixture_body("comment__offset_time"), config=CONFIG).observations
    assert obs.occurred_at == datetime(2026, 1, 15, 14, 30, tzinfo=timezone.utc)
    assert obs.occurred_at_original == "2026-01-15T16:30:00+02:00"


def test_without_event_id_the_key_is_the_sha256_of_stable_refs():
    (obs,) = ADAPTER.parse(body=fixture_body("comment__no_event_id"), config=CONFIG).observations
    assert obs.event_key == sha256_hex(
        "sandbox-social|acct_test_01|comment.created|post_test_07|msg_test_0042"
    )


def test_receipt_time_and_text_never_enter_the_key():
    first = ADAPTER.parse(body=fixture_body("comment__northstar"), config=CONFIG).observations[0]
    edited = ADAPTER.parse(body=fixture_body("comment__changed_payload"), config=CONFIG).observations[0]
    assert first.event_key == edited.event_key
    assert first.payload_hash != edited.payload_hash


def test_canary_comes_from_trusted_config_never_the_payload():
    body = fixture_body("comment__northstar").replace(b'"account"', b'"canary": true, "account"')
    (obs,) = ADAPTER.parse(body=body, config=CONFIG).observations
    assert obs.canary is False
    canary_config = SourceConfig(**{**CONFIG.__dict__, "canary": True})
    (obs,) = ADAPTER.parse(body=fixture_body("comment__northstar"), config=canary_config).observations
    assert obs.canary is True


def test_field_map_is_frozen():
    with pytest.raises(TypeError):
        FIELD_MAP["id"] = "something_else"  # type: ignore[index]
    assert set(FIELD_MAP.values()) <= set(Observation.__dataclass_fields__)
