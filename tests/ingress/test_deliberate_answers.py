"""The webhook's deliberate answers: every authentic input ends accepted, duplicate or quarantined;
nothing forged.

One test per numbered promise below.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import threading
import time
from datetime import datetime, timezone

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from ingress.models import Delivery, InboundEvent, ProofFailureWindow, QuarantineReceipt
from replies.models import ReplyAction
from tests.conftest import SECRET_ENV, TEST_SECRET, fixture_body, sign
from tests.reconcile.conftest import body as batch_body
from tests.reconcile.conftest import item

pytestmark = pytest.mark.usefixtures("sandbox_source")


def raw_event(**leaves: str) -> bytes:
    """A one-event body whose leaves are spliced in as raw JSON text (so they can be hostile)."""
    event = item(1)
    text = json.dumps({"account": "acct_test_01", "events": [event]})
    for name, raw in leaves.items():
        if name in event:
            text = text.replace(f'"{name}": {json.dumps(event[name])}', f'"{name}": {raw}')
        else:
            text = text.replace('"text": ', f'"{name}": {raw}, "text": ', 1)
    return text.encode()


# -- 1. poison deliveries ----------------------------------------------------


@pytest.mark.parametrize(
    "leaves, reason",
    [
        ({"text": '"\\ud800"'}, "invalid_body"),
        ({"note": '"a\\udfffb"'}, "invalid_body"),
        ({"score": "1e400"}, "invalid_body"),
        ({"score": "-1e400"}, "invalid_body"),
        ({"score": "0.1e99999"}, "invalid_body"),
        ({"created_at": '"0001-01-01T00:00:00+01:00"'}, "invalid_occurred_at"),
        ({"created_at": '"9999-12-31T23:00:00-05:00"'}, "invalid_occurred_at"),
        ({"id": '"evt_test_\\ud800"'}, "invalid_identity"),
    ],
)
def test_poison_leaves_are_quarantined_with_a_receipt_never_a_500(deliver, leaves, reason):
    client = Client(raise_request_exception=False)
    body = raw_event(**leaves)
    response = client.post(
        "/webhooks/sandbox/", data=body, content_type="application/json", headers=sign(body)
    )
    assert response.status_code == 202, response.content
    assert [r["reason_code"] for r in response.json()["results"] if r["result"] == "quarantined"] == [reason]
    receipt = QuarantineReceipt.objects.get()
    assert (receipt.reason_code, receipt.authenticated) == (reason, True)
    assert InboundEvent.objects.count() == 0


def test_one_poison_member_refuses_the_whole_body_and_nothing_else_is_lost(deliver):
    """docs/concepts/event-contract.md#batches: "Any invalid member rolls back the entire batch"; the body is answered 2xx once."""
    events = [item(n) for n in range(1, 1000)]
    document = {"account": "acct_test_01", "events": events}
    text = json.dumps(document)[:-2] + ', {"id": "evt_test_x", "score": 1e400}]}'
    body = text.encode()
    response = deliver(body)
    assert response.status_code == 202
    payload = response.json()
    assert payload["accepted"] is False and len(payload["receipt_ids"]) == 1
    assert sum(r["result"] == "rolled_back" for r in payload["results"]) == 999
    receipt = QuarantineReceipt.objects.get()
    assert receipt.invalid_members == [{"index": 999, "reason_code": "missing_identity"}]
    assert InboundEvent.objects.count() == Delivery.objects.count() == ReplyAction.objects.count() == 0


# -- 3. secrets are strictly what docs/configuration.md says ----------------------------


@pytest.mark.parametrize(
    "secret",
    [
        base64.b64encode(b"conduit-test-only-signing-key-01").decode(),  # no whsec_ prefix
        "whsec_" + base64.b64encode(b"conduit-test-only-signing-key-01").decode()[:-2] + "!!",
        "whsec_" + base64.b64encode(b"conduit-test-only-signing-key-01").decode().rstrip("="),
        "whsec_",
        "whsec_ " + base64.b64encode(b"conduit-test-only-signing-key-01").decode(),
    ],
    ids=["no-prefix", "bad-characters", "bad-padding", "empty", "space"],
)
def test_a_secret_that_is_not_strict_whsec_base64_is_503(deliver, monkeypatch, secret):
    monkeypatch.setenv(SECRET_ENV, secret)
    body = fixture_body("comment__northstar")
    response = deliver(body, headers=sign(body))  # signed with the real test secret
    assert response.status_code == 503
    assert response.json()["code"] == "source_secret_unavailable"
    assert response["Retry-After"]
    assert QuarantineReceipt.objects.count() == InboundEvent.objects.count() == 0


# -- 4. key rotation ----------------------------------------------------------


@pytest.mark.parametrize("junk", ["v1,not*base64", "v1", "", "v1,", ",abc", "v2"])
def test_a_malformed_entry_beside_a_valid_one_is_skipped(deliver, junk):
    body = fixture_body("comment__northstar")
    headers = sign(body)
    headers["webhook-signature"] = f"{junk}  {headers['webhook-signature']} {junk}"
    response = deliver(body, headers=headers)
    assert response.status_code == 200, response.json()


def test_a_rotated_list_with_a_wrong_but_well_formed_entry_still_verifies(deliver):
    body = fixture_body("comment__northstar")
    headers = sign(body)
    old = "v1," + base64.b64encode(b"\x00" * 32).decode()
    headers["webhook-signature"] = f"{old} {headers['webhook-signature']}"
    assert deliver(body, headers=headers).status_code == 200


@pytest.mark.parametrize(
    "header, code",
    [
        ("v1,not*base64 v1 ,", "malformed_proof_headers"),
        ("v1," + base64.b64encode(b"\x00" * 32).decode(), "invalid_signature"),
    ],
)
def test_an_entirely_malformed_or_unmatched_list_is_refused(deliver, header, code):
    body = fixture_body("comment__northstar")
    headers = {**sign(body), "webhook-signature": header}
    response = deliver(body, headers=headers)
    assert (response.status_code, response.json()["code"]) == (401, code)


def test_our_verification_agrees_with_the_standardwebhooks_package():
    """The package stays the oracle: what it signs, we verify; what we sign, it verifies."""
    from standardwebhooks.webhooks import Webhook

    from conduit.providers.sandbox.webhook import SandboxSocialAdapter

    adapter = SandboxSocialAdapter()
    at = datetime.now(timezone.utc)
    body = fixture_body("comment__northstar")
    theirs = Webhook(TEST_SECRET).sign(msg_id="msg_test_1", timestamp=at, data=body.decode())
    ours = adapter.sign(body=body, secret=TEST_SECRET, delivery_id="msg_test_1", at=at)
    assert ours["webhook-signature"] == theirs
    Webhook(TEST_SECRET).verify(body, ours, json_parse=False)  # raises if it disagrees


# -- 5. source names ------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "%00sandbox",
        "sand%0Abox",
        "sand%0D%0AINFO%20conduit.ingress%20x",
        "sandbox%C2%85",
        "s" * 65,
        "%F0%9F%92%A5",
    ],
)
def test_an_invalid_source_name_is_404_without_touching_the_database(name, caplog):
    client = Client(raise_request_exception=False)
    body = fixture_body("comment__northstar")
    with CaptureQueriesContext(connection) as queries, caplog.at_level(logging.INFO):
        response = client.post(
            f"/webhooks/{name}/", data=body, content_type="application/json", headers=sign(body)
        )
    assert (response.status_code, response.json()["code"]) == (404, "unknown_source")
    assert len(queries) == 0
    assert all("\n" not in r.getMessage() and "\x00" not in r.getMessage() for r in caplog.records)


def test_the_log_boundary_escapes_control_characters_so_no_line_is_forged():
    from conduit.logging import BoundaryFilter

    record = logging.LogRecord(
        "conduit.ingress",
        logging.INFO,
        __file__,
        1,
        "source=%s delivery=%s",
        ("x\r\n2026-01-01 INFO conduit.ingress forged", "d\x00\x1b[31m\u2028"),
        None,
    )
    BoundaryFilter().filter(record)
    message = record.getMessage()
    assert message == ("source=x\\r\\n2026-01-01 INFO conduit.ingress forged delivery=d\\x00\\x1b[31m\\u2028")


# -- 6. encoding -----------------------------------------------------------------


def _sign_bytes(body: bytes) -> dict[str, str]:
    """Sign raw bytes the way a provider does, whatever their encoding."""
    key = base64.b64decode(TEST_SECRET.removeprefix("whsec_"))
    timestamp = str(int(time.time()))
    digest = hmac.new(key, f"msg_test_raw.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return {
        "webhook-id": "msg_test_raw",
        "webhook-timestamp": timestamp,
        "webhook-signature": "v1," + base64.b64encode(digest).decode(),
    }


@pytest.mark.parametrize(
    "encode",
    [
        lambda text: text.encode("latin-1"),
        lambda text: text.encode("utf-16-le"),
        lambda text: text.encode("utf-16"),
        lambda text: text.encode("utf-32"),
        lambda text: b"\xef\xbb\xbf" + text.encode("utf-8"),
    ],
    ids=["latin-1", "utf-16-no-bom", "utf-16-bom", "utf-32", "utf-8-bom"],
)
def test_an_authentic_body_that_is_not_plain_utf8_is_quarantined_as_authentic(deliver, encode):
    text = fixture_body("comment__northstar").decode().replace("CHECKLIST", "CHECKLIST s\u00e9ance")
    body = encode(text)
    response = deliver(body, headers=_sign_bytes(body))
    assert response.status_code == 202, response.json()
    assert response.json()["results"][0]["reason_code"] == "unparsable_body"
    receipt = QuarantineReceipt.objects.get()
    assert (receipt.authenticated, receipt.delivery_id) == (True, "msg_test_raw")
    assert InboundEvent.objects.count() == 0


def test_duplicate_json_keys_have_no_single_meaning_and_are_refused(deliver):
    body = fixture_body("comment__northstar").replace(b'"id":', b'"id": "evt_test_other", "id":', 1)
    response = deliver(body)
    assert (response.status_code, response.json()["results"][0]["reason_code"]) == (202, "unparsable_body")


# -- 7. one receipt is one sighting ------------------------------------------------


def test_the_same_event_twice_in_one_body_counts_one_receipt(deliver):
    response = deliver(batch_body(item(1), item(1)))
    assert response.status_code == 200
    assert [r["result"] for r in response.json()["results"]] == ["accepted", "duplicate"]
    assert InboundEvent.objects.get().seen_count == 1
    deliver(batch_body(item(1), item(1)))
    assert InboundEvent.objects.get().seen_count == 2


def test_the_same_event_twice_with_different_payloads_refuses_the_body(deliver):
    response = deliver(batch_body(item(1), item(1, text="CHECKLIST edited")))
    assert response.status_code == 202
    assert QuarantineReceipt.objects.get().invalid_members == [
        {"index": 1, "reason_code": "identity_conflict"}
    ]
    assert InboundEvent.objects.count() == 0


def test_an_identity_conflict_refuses_the_whole_batch_and_claims_nothing(deliver):
    deliver(batch_body(item(1)))
    response = deliver(batch_body(item(2), item(1, text="CHECKLIST edited")))
    assert response.status_code == 202
    assert [r["result"] for r in response.json()["results"]] == ["rolled_back", "quarantined"]
    assert list(InboundEvent.objects.values_list("source_event_id", "seen_count")) == [("evt_test_000001", 1)]
    assert Delivery.objects.count() == 1


# -- 8. quarantine flooding is bounded ----------------------------------------------


def _forge(client, code: str):
    body = fixture_body("comment__northstar")
    headers = sign(body)
    if code == "invalid_signature":
        headers["webhook-signature"] = "v1," + base64.b64encode(b"\x01" * 32).decode()
    else:
        headers.pop("webhook-signature")
    return client.post("/webhooks/sandbox/", data=body, content_type="application/json", headers=headers)


def test_forged_requests_write_one_receipt_per_code_and_minute(client):
    answers = [_forge(client, "invalid_signature") for _ in range(30)]
    answers += [_forge(client, "missing_proof_headers") for _ in range(5)]
    assert {a.status_code for a in answers} == {401}
    receipts = QuarantineReceipt.objects.all()
    assert sorted(receipts.values_list("reason_code", flat=True)) == [
        "invalid_signature",
        "missing_proof_headers",
    ]
    first = {a.json()["receipt_id"] for a in answers[:30]}
    assert len(first) == 1 and answers[1].json()["coalesced"] is True
    windows = dict(ProofFailureWindow.objects.values_list("reason_code", "failures"))
    assert windows == {"invalid_signature": 30, "missing_proof_headers": 5}


def test_the_next_minute_opens_a_new_window(client, monkeypatch):
    from django.utils import timezone as dj_timezone

    _forge(client, "invalid_signature")
    _forge(client, "invalid_signature")
    later = dj_timezone.now().replace(second=0, microsecond=0) + dj_timezone.timedelta(minutes=1)
    monkeypatch.setattr("ingress.services.ingest.timezone.now", lambda: later)
    _forge(client, "invalid_signature")
    assert QuarantineReceipt.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_concurrent_forgers_are_coalesced_and_an_authentic_delivery_still_lands(sandbox_source):
    """Real threads on PostgreSQL: 8 forgers, 15 requests each, beside authentic deliveries."""
    errors: list[BaseException] = []
    statuses: list[int] = []

    def forger():
        try:
            client = Client()
            statuses.extend(_forge(client, "invalid_signature").status_code for _ in range(15))
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=forger) for _ in range(8)]
    for thread in threads:
        thread.start()
    authentic = Client()
    accepted = []
    for n in range(1, 6):
        body = batch_body(item(n))
        accepted.append(
            authentic.post(
                "/webhooks/sandbox/", data=body, content_type="application/json", headers=sign(body)
            ).status_code
        )
    for thread in threads:
        thread.join()
    assert not errors
    assert statuses == [401] * 120 and accepted == [200] * 5
    windows = list(ProofFailureWindow.objects.values_list("failures", flat=True))
    assert sum(windows) == 120 and QuarantineReceipt.objects.count() == len(windows) <= 2
    assert InboundEvent.objects.count() == 5


# -- the store refuses a value: a refusal, not an outage ------------------------------


def test_identifiers_are_bounded_at_the_boundary_not_by_the_database(deliver):
    """200 characters fit (the key stays within 512); 201 is refused as invalid_identity, a 202
    with a receipt, never a database error."""
    assert deliver(batch_body(item(1, id="e" * 200))).status_code == 200
    response = deliver(batch_body(item(2, id="e" * 201)))
    assert response.status_code == 202
    assert response.json()["results"][0]["reason_code"] == "invalid_identity"


@pytest.mark.parametrize("members", [1, 2], ids=["one_member", "two_members"])
def test_a_data_error_is_quarantined_not_a_503(deliver, monkeypatch, sandbox_source, members):
    """Positive control for the boundary: with contract_refusal switched off, the database's own
    refusal of an over-long key must still be a 202 refusal (unstorable_value), never store_unavailable.
    Two members go through the set-based path (several rows as one JSON parameter), which must
    leave the refusal to the column's own type, never cut the value to fit it."""
    import conduit.providers.base as base
    from ingress.services import source_update

    source_update(source_id=sandbox_source.pk, changes={"event_types": ["comment.created", "t" * 64]})
    monkeypatch.setattr(base, "contract_refusal", lambda observation: None)
    monkeypatch.setattr(base, "MAX_REF_LENGTH", 400)
    import conduit.providers.sandbox.webhook as sandbox_social

    monkeypatch.setattr(sandbox_social, "MAX_REF_LENGTH", 400)
    response = deliver(
        batch_body(*(item(n + 1, id=chr(ord("e") + n) * 400, type="t" * 64) for n in range(members)))
    )
    assert response.status_code == 202, response.json()
    assert response.json()["results"][0]["reason_code"] == "unstorable_value"
    assert InboundEvent.objects.count() == 0


# -- found by the adversarial pass ---------------------------------------------------


def test_a_refused_batch_names_its_stored_conflicts_too(deliver):
    """The one receipt lists each invalid member: a member that conflicts with a stored event
    is named even when another member already refused the body."""
    deliver(batch_body(item(1)))
    response = deliver(batch_body(item(2, type="nope"), item(1, text="CHECKLIST edited"), item(3)))
    assert [(r["index"], r["result"]) for r in response.json()["results"]] == [
        (0, "quarantined"),
        (1, "quarantined"),
        (2, "rolled_back"),
    ]
    receipt = QuarantineReceipt.objects.get()
    assert receipt.invalid_members == [
        {"index": 0, "reason_code": "event_type_not_allowed"},
        {"index": 1, "reason_code": "identity_conflict"},
    ]


def test_a_refused_body_with_a_reused_delivery_id_records_the_delivery_conflict(deliver):
    deliver(batch_body(item(1)), delivery_id="msg_test_dc")
    response = deliver(batch_body(item(2, type="nope")), delivery_id="msg_test_dc")
    assert response.status_code == 202
    receipt = QuarantineReceipt.objects.get()
    assert receipt.reason_code == "delivery_conflict"
    assert receipt.invalid_members == [{"index": 0, "reason_code": "event_type_not_allowed"}]


def test_redeliveries_of_a_refused_body_meet_its_first_receipt(client):
    """A refused body claims no delivery id; a retry (or a captured request replayed inside its
    signature window) must not write a receipt per copy."""
    payload = batch_body(item(1), item(2, type="nope"))
    headers = sign(payload, delivery_id="msg_test_refused")
    answers = [
        client.post("/webhooks/sandbox/", data=payload, content_type="application/json", headers=headers)
        for _ in range(5)
    ]
    assert {a.status_code for a in answers} == {202}
    assert len({a.json()["receipt_ids"][0] for a in answers}) == 1
    assert QuarantineReceipt.objects.count() == 1


@pytest.mark.parametrize("method", ["options", "get", "put", "delete"])
def test_only_post_is_answered(client, method):
    response = getattr(client, method)("/webhooks/sandbox/")
    assert (response.status_code, response.json()["code"]) == (405, "method_not_allowed")


def test_a_sender_configured_without_the_trailing_slash_is_not_redirected(client):
    payload = fixture_body("comment__northstar")
    response = client.post(
        "/webhooks/sandbox", data=payload, content_type="application/json", headers=sign(payload)
    )
    assert response.status_code == 200


def test_a_non_ascii_delivery_id_is_verified_as_its_sender_signed_it(client):
    """WSGI decodes header bytes as Latin-1; the sender signed the UTF-8 text of its id."""
    payload = fixture_body("comment__northstar")
    headers = sign(payload, delivery_id="msg_test_caf\u00e9")
    on_the_wire = {**headers, "webhook-id": "msg_test_caf\u00e9".encode("utf-8").decode("latin-1")}
    response = client.post(
        "/webhooks/sandbox/", data=payload, content_type="application/json", headers=on_the_wire
    )
    assert response.status_code == 200, response.json()
    assert Delivery.objects.get().delivery_id == "msg_test_caf\u00e9"
