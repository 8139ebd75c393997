"""Meta's deauthorize and data deletion callbacks (docs/platforms/meta.md#app-review): a verified
`signed_request` disconnects the person's sources and blanks the retained text they sent; the
deletion answers Meta's `{"url", "confirmation_code"}` and its status page answers in counts; a
refused request changes nothing and logs codes only; a retry changes nothing more."""

from __future__ import annotations

import base64
import json
import logging
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import urlencode

import pytest
from cryptography.fernet import Fernet

from conduit.providers.meta.signed_request import signature_of, signed_request_sign, signed_user_request
from ingress.deletion_requests import DeletionRequest
from ingress.models import InboundEvent, Source, SourceCredential
from ingress.services.credentials import credential_store
from ingress.services.disconnect import credential_grantor_set
from tests.providers.meta.integration.conftest import (
    APP_ID,
    APP_SECRET,
    IG_ACCOUNT,
    NEXT_ENV,
    NEXT_SECRET,
    meta_body,
)

FIXTURES = Path(__file__).resolve().parents[4] / "fixtures"
# Reserved, synthetic ids: the commenter of the fixtures, and an app-scoped id of the person who
# granted the Page's token.
COMMENTER = "17841400000000901"
GRANTOR = "100000000000777"
COMMENT_TEXT = "What is the price of the checklist?"
SIGNED_AT = datetime(2026, 1, 2, tzinfo=timezone.utc)


def signed(user_id: str | int | None = COMMENTER, *, secret: str = APP_SECRET, **extra) -> str:
    payload = {"algorithm": "HMAC-SHA256", "issued_at": int(SIGNED_AT.timestamp()), **extra}
    if user_id is not None:
        payload["user_id"] = user_id
    return signed_request_sign(payload, secret=secret)


def flipped(value: str) -> str:
    """The same request with one byte of its signature changed."""
    encoded_signature, payload = value.split(".")
    raw = bytearray(base64.urlsafe_b64decode(encoded_signature + "=" * (-len(encoded_signature) % 4)))
    raw[7] ^= 0x01
    return base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("=") + "." + payload


@pytest.fixture
def keys(settings):
    settings.CONDUIT_CREDENTIAL_KEYS = (Fernet.generate_key().decode(),)


@pytest.fixture
def callback(client):
    def _post(kind: str, value: str | None, *, app_id: str = APP_ID, form: dict | None = None):
        fields = form if form is not None else {"signed_request": value}
        return client.post(
            f"/webhooks/meta/{app_id}/{kind}/",
            data=urlencode(fields, doseq=True),
            content_type="application/x-www-form-urlencoded",
        )

    return _post


@pytest.fixture
def world(meta_sources, post_meta, keys):
    """The fixtures' Instagram comment recorded, and the Page's token stored with its grantor."""
    assert post_meta(meta_body("meta_instagram/comment__created")).status_code == 200
    page = meta_sources["page"]
    credential_store(
        source_id=page.pk,
        token="page-token-test-only-0001",
        actor="owner_test",
        issued_at=SIGNED_AT - timedelta(days=1),
    )
    credential_grantor_set(source_id=page.pk, grantor_ref=GRANTOR)
    Source.objects.filter(pk=page.pk).update(
        connection_authorized_by="owner_test", connection_authorized_at=SIGNED_AT - timedelta(days=1)
    )
    return meta_sources


def _state() -> tuple:
    """Everything a refused request must leave as it was."""
    return (
        list(InboundEvent.objects.order_by("pk").values_list("event_key", "payload_hash", "message_text")),
        list(SourceCredential.objects.values_list("source_id", "sealed_token")),
        list(Source.objects.order_by("pk").values_list("needs_reauth", "connection_authorized_by")),
        DeletionRequest.objects.count(),
    )


# --- the format ----------------------------------------------------------------------------------


def test_metas_documented_example_is_the_format_we_sign_and_verify():
    """Meta's own example (fixtures/meta_page/recorded/signed_request__documented.json): its signature is
    our HMAC of its encoded payload under its secret, and signing its payload gives it back byte for byte."""
    example = json.loads(
        (FIXTURES / "meta_page" / "recorded" / "signed_request__documented.json").read_text()
    )
    encoded_signature, encoded_payload = example["signed_request"].split(".")
    assert "=" not in example["signed_request"]  # padding stripped
    assert base64.urlsafe_b64decode(encoded_signature + "=") == signature_of(encoded_payload, b"secret")
    assert json.loads(base64.urlsafe_b64decode(encoded_payload + "=")) == example["payload"]
    ours = base64.urlsafe_b64encode(json.dumps(example["payload"], separators=(",", ":")).encode()).decode()
    assert ours.rstrip("=") == encoded_payload


def test_a_signed_request_names_its_user_and_time_and_takes_a_numeric_user_id_too():
    assert signed_user_request(signed(), secret=APP_SECRET).user_id == COMMENTER
    request = signed_user_request(signed(int(GRANTOR)), secret=APP_SECRET)
    assert (request.user_id, request.issued_at) == (GRANTOR, SIGNED_AT)


# --- data deletion -------------------------------------------------------------------------------


def test_a_deletion_request_blanks_the_persons_text_keeps_the_event_and_answers_metas_shape(
    world, callback, client
):
    before = InboundEvent.objects.get(sender_ref=COMMENTER)
    assert before.message_text == COMMENT_TEXT
    response = callback("deletion", signed())
    assert response.status_code == 200
    answer = response.json()
    assert set(answer) == {"url", "confirmation_code"}
    code = answer["confirmation_code"]
    assert answer["url"] == f"http://testserver/webhooks/meta/{APP_ID}/deletion/{code}/"

    after = InboundEvent.objects.get(pk=before.pk)
    assert after.message_text == "" and after.content_purged_at is not None
    assert (after.event_key, after.payload_hash, after.event_state) == (
        before.event_key,
        before.payload_hash,
        before.event_state,
    )
    row = DeletionRequest.objects.get()
    assert (row.confirmation_code, row.status, row.events_blanked, row.sources_disconnected) == (
        code,
        "COMPLETED",
        1,
        0,
    )
    assert COMMENTER not in {row.user_digest, row.request_digest}  # the person's id is not kept

    page = client.get(answer["url"])
    assert page.status_code == 200 and page["Content-Type"].startswith("text/html")
    text = page.content.decode()
    assert code in text and "completed" in text and "1 retained message" in text
    assert COMMENT_TEXT not in text and COMMENTER not in text


def test_the_same_deletion_request_again_answers_the_same_code_and_counts_nothing_twice(world, callback):
    value = signed()
    first = callback("deletion", value).json()
    # New text from the same person after the request: a retry of the old request leaves it.
    InboundEvent.objects.filter(sender_ref=COMMENTER).update(message_text="a later message")
    second = callback("deletion", value)
    assert second.status_code == 200 and second.json() == first
    assert DeletionRequest.objects.count() == 1 and DeletionRequest.objects.get().events_blanked == 1
    assert InboundEvent.objects.get(sender_ref=COMMENTER).message_text == "a later message"


def test_the_grantors_deletion_request_disconnects_the_source_their_token_connected(world, callback):
    page = world["page"]
    assert callback("deletion", signed(GRANTOR)).status_code == 200
    page.refresh_from_db()
    assert not SourceCredential.objects.filter(source=page).exists()
    assert page.needs_reauth and page.connection_authorized_by == ""
    assert InboundEvent.objects.get(sender_ref=COMMENTER).message_text == COMMENT_TEXT  # not theirs
    assert DeletionRequest.objects.get().sources_disconnected == 1


def test_the_status_page_answers_only_its_own_app_and_code(world, callback, client):
    code = callback("deletion", signed()).json()["confirmation_code"]
    assert client.get(f"/webhooks/meta/{APP_ID}/deletion/{code[:-1]}x/").status_code == 404
    assert client.get(f"/webhooks/meta/900000000000002/deletion/{code}/").status_code == 404
    assert client.get(f"/webhooks/meta/{APP_ID}/deletion/short/").status_code == 404


# --- deauthorize ---------------------------------------------------------------------------------


def test_a_deauthorization_wipes_the_grantors_token_stops_sends_and_keeps_history(world, callback):
    page = world["page"]
    events = InboundEvent.objects.count()
    response = callback("deauthorize", signed(GRANTOR))
    assert response.status_code == 200 and response.json() == {"disconnected": 1}
    page.refresh_from_db()
    assert not SourceCredential.objects.filter(source=page).exists()
    assert page.needs_reauth and page.connection_authorized_at is None
    assert InboundEvent.objects.count() == events and Source.objects.filter(pk=page.pk).exists()
    # Meta retries: the same request again changes nothing more.
    assert callback("deauthorize", signed(GRANTOR)).json() == {"disconnected": 0}


def test_with_instagram_login_the_user_is_the_account_and_its_source_is_disconnected(world, callback):
    assert callback("deauthorize", signed(IG_ACCOUNT)).json() == {"disconnected": 1}
    assert Source.objects.get(account_ref=IG_ACCOUNT).needs_reauth
    assert not Source.objects.get(pk=world["page"].pk).needs_reauth


def test_a_deauthorization_signed_before_the_token_was_stored_leaves_the_new_connection(world, callback):
    """A copy of an old request, replayed after the account was connected again, is about the old grant."""
    page = world["page"]
    SourceCredential.objects.filter(source=page).update(issued_at=SIGNED_AT + timedelta(hours=1))
    assert callback("deauthorize", signed(GRANTOR)).json() == {"disconnected": 0}
    assert SourceCredential.objects.filter(source=page).exists()
    assert not Source.objects.get(pk=page.pk).needs_reauth


def test_a_request_signed_with_the_apps_second_secret_is_accepted(world, callback, monkeypatch):
    Source.objects.update(secret_env_next=NEXT_ENV)
    monkeypatch.setenv(NEXT_ENV, NEXT_SECRET)
    assert callback("deauthorize", signed(GRANTOR, secret=NEXT_SECRET)).json() == {"disconnected": 1}


def test_the_store_command_records_the_grantor_so_their_request_finds_the_source(
    meta_sources, keys, callback, monkeypatch
):
    import io
    import sys

    from django.core.management import call_command
    from django.core.management.base import CommandError

    page = meta_sources["page"]
    with pytest.raises(CommandError, match="not 1 to 32 digits"):
        call_command("credentials_store", "--source", page.name, "--grantor-id", "me")
    assert not SourceCredential.objects.exists()  # refused before anything was stored
    monkeypatch.setattr(sys, "stdin", io.StringIO("page-token-test-only-0003\n"))
    call_command("credentials_store", "--source", page.name, "--grantor-id", GRANTOR)
    assert SourceCredential.objects.get(source=page).grantor_ref == GRANTOR
    SourceCredential.objects.filter(source=page).update(issued_at=SIGNED_AT - timedelta(days=1))
    assert callback("deauthorize", signed(GRANTOR)).json() == {"disconnected": 1}


# --- refusals ------------------------------------------------------------------------------------


REFUSED = {
    "one_signature_byte_flipped": (lambda: flipped(signed(GRANTOR)), 401, "invalid_signature"),
    "another_apps_secret": (lambda: signed(GRANTOR, secret="f" * 32), 401, "invalid_signature"),
    "sha1_algorithm": (
        lambda: signed_request_sign(
            {"algorithm": "HMAC-SHA1", "issued_at": 1, "user_id": GRANTOR}, secret=APP_SECRET
        ),
        400,
        "unsupported_algorithm",
    ),
    "no_user_id": (lambda: signed(None), 400, "missing_user_id"),
    "no_issued_at": (
        lambda: signed_request_sign({"algorithm": "HMAC-SHA256", "user_id": GRANTOR}, secret=APP_SECRET),
        400,
        "malformed_signed_request",
    ),
    "not_base64url": (lambda: "abc$.def", 400, "malformed_signed_request"),
    "no_dot": (lambda: "abcdef", 400, "malformed_signed_request"),
    "signed_garbage": (
        lambda: (
            lambda p: (
                base64.urlsafe_b64encode(signature_of(p, APP_SECRET.encode())).decode().rstrip("=") + "." + p
            )
        )(base64.urlsafe_b64encode(b"not json").decode().rstrip("=")),
        400,
        "malformed_signed_request",
    ),
}


@pytest.mark.parametrize("kind", ["deauthorize", "deletion"])
@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_refused_request_changes_nothing_and_logs_codes_not_its_value(world, callback, caplog, kind, case):
    make, status, code = REFUSED[case]
    value = make()
    before = _state()
    with caplog.at_level(logging.WARNING, logger="conduit.ingress"):
        response = callback(kind, value)
    assert (response.status_code, response.json()["code"]) == (status, code)
    assert _state() == before
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert f"code={code}" in logged and f"app={APP_ID}" in logged
    for never in (value, value.split(".")[-1], APP_SECRET, GRANTOR):
        assert never not in logged


@pytest.mark.parametrize("kind", ["deauthorize", "deletion"])
def test_an_unknown_app_or_a_form_without_one_signed_request_is_refused(world, callback, kind):
    before = _state()
    assert callback(kind, signed(GRANTOR), app_id="900000000000002").status_code == 404
    assert callback(kind, signed(GRANTOR), app_id="not-an-app").status_code == 404
    assert callback(kind, None, form={}).status_code == 400
    assert callback(kind, None, form={"signed_request": ["a.b", "c.d"]}).status_code == 400
    assert _state() == before


@pytest.mark.django_db(transaction=True)
def test_copies_of_one_deletion_request_at_once_leave_one_row_and_one_code(live_server, world):
    """Meta may retry while the first is still running: the app's sources are locked first, so each
    copy after the first meets its row."""
    import http.client
    import threading
    from urllib.parse import urlsplit

    body = urlencode({"signed_request": signed()})
    parts = urlsplit(live_server.url)
    barrier, answers, lock = threading.Barrier(8), [], threading.Lock()

    def post() -> None:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        barrier.wait()
        conn.request(
            "POST",
            f"/webhooks/meta/{APP_ID}/deletion/",
            body=body,
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        response = conn.getresponse()
        with lock:
            answers.append((response.status, json.loads(response.read())))
        conn.close()

    threads = [threading.Thread(target=post) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert [status for status, _ in answers] == [200] * 8
    assert len({answer["confirmation_code"] for _, answer in answers}) == 1
    row = DeletionRequest.objects.get()
    assert row.events_blanked == 1 and answers[0][1]["confirmation_code"] == row.confirmation_code
