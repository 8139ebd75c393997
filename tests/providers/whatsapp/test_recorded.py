"""Recorded WhatsApp material (fixtures/meta_whatsapp/recorded/, provenance beside it): each webhook
body through the adapter, each Graph answer through the transport. One test per recorded file."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from conduit.providers.base import Ambiguous, NotSent, SourceConfig
from conduit.providers.registry import get_adapter
from tests.providers.whatsapp.test_transport import Stub, reply, transport

RECORDED = Path(__file__).resolve().parents[3] / "fixtures" / "meta_whatsapp" / "recorded"
WEBHOOKS = sorted(RECORDED.glob("webhook_*.json"))
ANSWERS = sorted(RECORDED.glob("answer_*.json"))
ADAPTER = get_adapter("meta-whatsapp")
IGNORED = {"reaction", "system", "unsupported", "unsupported_documented", "unknown_legacy"}


def config(account: str) -> SourceConfig:
    return SourceConfig(
        name="wa-recorded",
        source_system="meta-whatsapp",
        account_ref=account,
        event_types=frozenset({"message.created"}),
        contract_version="whatsapp-v1",
        canary=False,
        ref_key=b"r" * 32,
    )


def _values(document: dict) -> list[dict]:
    return [change["value"] for entry in document["entry"] for change in entry["changes"]]


def test_the_corpus_is_there():
    assert len(WEBHOOKS) >= 20 and len(ANSWERS) >= 6
    provenance = (RECORDED / "PROVENANCE.md").read_text()
    assert all(path.name in provenance for path in WEBHOOKS + ANSWERS)


@pytest.mark.parametrize("path", WEBHOOKS, ids=lambda p: p.stem)
def test_each_recorded_body_is_understood(path):
    raw = path.read_bytes()
    document = json.loads(raw)
    (value,) = _values(document)
    account = value["metadata"]["phone_number_id"]
    parsed = ADAPTER.parse(body=raw, config=config(account))
    assert not parsed.rejections, parsed.rejections
    kind, _, variant = path.stem.removeprefix("webhook_").partition("__")
    if kind == "statuses":
        (status,) = parsed.statuses
        recorded = value["statuses"][0]
        assert (status.provider_id, status.status) == (recorded["id"], recorded["status"])
        assert status.occurred_at == datetime.fromtimestamp(int(recorded["timestamp"]), tz=timezone.utc)
        assert status.status == variant.split("_")[0] or variant.startswith("v24")
        if recorded.get("errors"):
            assert status.error_code == str(recorded["errors"][0]["code"])
        assert not parsed.observations
    elif variant in IGNORED:
        assert not parsed.observations and sum(parsed.ignored.values()) == 1
    else:
        (event,) = parsed.observations
        message = value["messages"][0]
        assert event.source_event_id == message["id"] == event.message_ref
        assert event.address == message.get("from", "") and message.get("from", "-") not in event.sender_ref
        assert event.occurred_at_original == message["timestamp"]
        assert event.event_key == f"meta-whatsapp:{account}:message.created:{message['id']}"


# What each recorded answer means for a reply: a receipt (the wamid), or the table's outcome.
OUTCOMES = {
    "answer_messages__sent": "receipt",
    "answer_messages__template_accepted": "receipt",
    "answer_error__100_invalid_parameter": (NotSent, "invalid_parameter"),
    "answer_error__100_read_outgoing_message": (NotSent, "invalid_parameter"),
    "answer_error__100_unknown_phone_number_id": (NotSent, "invalid_parameter"),
    "answer_error__130429_throughput_documented": (NotSent, "throttled"),
    "answer_error__132001_template": (NotSent, "template_refused"),
    "answer_error__190_token": (NotSent, "token_invalid"),
}


def test_every_recorded_answer_has_its_outcome():
    assert {p.stem for p in ANSWERS} == set(OUTCOMES)


@pytest.mark.parametrize("path", ANSWERS, ids=lambda p: p.stem)
def test_each_recorded_answer_means_what_the_table_says(path, loopback):
    document = json.loads(path.read_bytes())
    expected = OUTCOMES[path.stem]
    stub = Stub(loopback, [(200 if expected == "receipt" else 400, document)])
    outbound = reply(until=datetime.now(timezone.utc) + timedelta(hours=1))
    if expected == "receipt":
        assert transport(stub).send(outbound).provider_reply_id == document["messages"][0]["id"]
        return
    outcome, reason = expected
    with pytest.raises((NotSent, Ambiguous)) as failed:
        transport(stub).send(outbound)
    assert isinstance(failed.value, outcome) and failed.value.code == reason
