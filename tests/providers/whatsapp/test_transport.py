"""The WhatsApp transport against a loopback stand-in: the message it writes (text in context
inside the window, the template past it, the reply key as callback data), and what each answer
means for the reply (errors as data, ambiguity kept ambiguous)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler

import pytest

from conduit.providers.base import (
    RECIPIENT_THROTTLED,
    THROTTLED,
    Ambiguous,
    NotSent,
    OutboundReply,
    SendFailure,
)
from conduit.providers.whatsapp import errors
from conduit.providers.whatsapp.transport import MetaWhatsAppTransport
from tests.providers.whatsapp.conftest import BUYER, NUMBER, wamid

KEY = "ab" * 32
TEMPLATE = {"name": "order_update", "language": "en_US", "parameters": ["the price list"]}
SENT = {
    "messaging_product": "whatsapp",
    "contacts": [{"input": BUYER, "wa_id": BUYER}],
    "messages": [{"id": wamid(900)}],
}


class Stub:
    """A loopback Cloud API answering each POST with the next (status, document), keeping the requests."""

    def __init__(self, loopback, answers: list[tuple[int, dict]]):
        self.requests: list[tuple[str, dict]] = []
        self.headers: list[dict] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                stub.requests.append((self.path, json.loads(raw)))
                stub.headers.append(dict(self.headers))
                status, document = answers.pop(0)
                payload = json.dumps(document).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = loopback(Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v26.0"


def reply(
    *, until: datetime | None = None, template: dict | None = None, address: str = BUYER
) -> OutboundReply:
    return OutboundReply(
        reply_key=KEY,
        event_key=f"meta-whatsapp:{NUMBER}:message.created:{wamid(1)}",
        purpose="private_delivery",
        channel="whatsapp",
        copy_version="v1",
        text="Thanks! The price list is on its way.",
        conversation_ref="wa_test",
        message_ref=wamid(1),
        address=address,
        template=template,
        free_form_until=until,
    )


def transport(stub: Stub) -> MetaWhatsAppTransport:
    return MetaWhatsAppTransport(stub.url, token="wa-token-test-only", account_ref=NUMBER, timeout=2)


SOON = datetime.now(timezone.utc) + timedelta(hours=3)
PAST = datetime.now(timezone.utc) - timedelta(hours=1)


def test_inside_the_window_a_text_in_context_with_the_reply_key(loopback):
    stub = Stub(loopback, [(200, SENT)])
    receipt = transport(stub).send(reply(until=SOON, template=TEMPLATE))
    assert receipt.provider_reply_id == wamid(900)
    ((path, sent),) = stub.requests
    assert path.startswith(f"/v26.0/{NUMBER}/messages") and "access_token" not in path
    # As every recorded Cloud API call: the token as a bearer header, the message as JSON.
    assert stub.headers[0]["Authorization"] == "Bearer wa-token-test-only"
    assert stub.headers[0]["Content-Type"] == "application/json"
    assert sent == {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": BUYER,
        "context": {"message_id": wamid(1)},
        "type": "text",
        "text": {"preview_url": False, "body": "Thanks! The price list is on its way."},
        "biz_opaque_callback_data": KEY,
    }


def test_past_the_window_the_template(loopback):
    stub = Stub(loopback, [(200, SENT)])
    transport(stub).send(reply(until=PAST, template=TEMPLATE))
    ((_, sent),) = stub.requests
    assert sent["type"] == "template" and "text" not in sent
    assert sent["template"] == {
        "name": "order_update",
        "language": {"code": "en_US"},
        "components": [{"type": "body", "parameters": [{"type": "text", "text": "the price list"}]}],
    }
    assert sent["biz_opaque_callback_data"] == KEY


def test_past_the_window_without_a_template_nothing_is_sent(loopback):
    stub = Stub(loopback, [])
    with pytest.raises(NotSent) as refused:
        transport(stub).send(reply(until=PAST))
    assert refused.value.code == "outside_service_window" and not refused.value.retryable
    assert stub.requests == []


def test_a_purged_address_sends_nothing(loopback):
    stub = Stub(loopback, [])
    with pytest.raises(NotSent) as refused:
        transport(stub).send(reply(until=SOON, address=""))
    assert refused.value.code == "reply_address_missing" and stub.requests == []


def _error(code: int) -> dict:
    return {
        "error": {"message": f"(#{code}) test", "type": "OAuthException", "code": code, "fbtrace_id": "Atest"}
    }


# The refusals worth trying again: the number's throughput (the whole number pauses) and the pair
# rate (only the reply to that one person waits). Every other refusal is final.
RETRYABLE = {THROTTLED, RECIPIENT_THROTTLED}


def _answer(loopback, code: int) -> SendFailure:
    """What the transport raises when the Cloud API answers 400 with error `code`."""
    stub = Stub(loopback, [(400, _error(code))])
    with pytest.raises(SendFailure) as failed:
        transport(stub).send(reply(until=SOON))
    return failed.value


def _check_row(failure: SendFailure, outcome: type[SendFailure], reason: str) -> None:
    """The check each table row is held to (and the positive control breaks)."""
    assert isinstance(failure, outcome), f"{failure!r} is not {outcome.__name__}"
    assert failure.code == reason
    if outcome is NotSent:
        assert failure.reached, f"{failure!r} did not reach WhatsApp"
        assert failure.retryable == (reason in RETRYABLE), f"{failure!r} retryable={failure.retryable}"


@pytest.mark.parametrize(
    "code, outcome, reason",
    [
        (131047, NotSent, "outside_service_window"),
        (131026, NotSent, "undeliverable"),
        (130429, NotSent, "throttled"),
        (131056, NotSent, "recipient_throttled"),
        (131049, NotSent, "marketing_limited"),
        (132001, NotSent, "template_refused"),
        (100, NotSent, "invalid_parameter"),
        (190, NotSent, "token_invalid"),
        (131005, NotSent, "permission_missing"),
        (3, NotSent, "capability_missing"),
        (131000, Ambiguous, "whatsapp_unknown_error"),
        (999999, Ambiguous, "whatsapp_unknown_code"),
    ],
)
def test_each_error_means_what_the_table_says(loopback, code, outcome, reason):
    _check_row(_answer(loopback, code), outcome, reason)


def test_a_server_error_is_ambiguous(loopback):
    stub = Stub(loopback, [(500, _error(131047))])
    with pytest.raises(Ambiguous) as failed:
        transport(stub).send(reply(until=SOON))
    assert failed.value.code == "whatsapp_server_error"


def test_an_answer_without_the_message_id_is_ambiguous(loopback):
    stub = Stub(loopback, [(200, {"messaging_product": "whatsapp", "messages": []})])
    with pytest.raises(Ambiguous) as failed:
        transport(stub).send(reply(until=SOON))
    assert failed.value.code == "unreadable_receipt"


def test_every_row_names_its_documentation_and_a_stable_reason():
    assert all(
        row.meaning.source.startswith("docs/platforms/whatsapp.md#error-meanings") for row in errors.ROWS
    )
    assert all(row.meaning.reason.isidentifier() and row.meaning.reason.islower() for row in errors.ROWS)
    assert errors.meaning(None, 132015).reason == "template_refused"  # the 132000 series
    assert errors.meaning(None, 250).reason == "permission_missing"  # 200-299


def test_positive_control_a_table_calling_throttling_ambiguous_fails_the_retry_row(loopback, monkeypatch):
    """Break the guard: 130429 read as ambiguous. The throttled row's own check (not applied,
    retryable) then fails, and for the reason it names: the answer is no longer a NotSent."""
    # As built, the row's check holds.
    _check_row(_answer(loopback, 130429), NotSent, THROTTLED)
    ambiguous = errors.Row(130429, None, None, errors.UNKNOWN)
    monkeypatch.setitem(errors._BY_CODE, 130429, ambiguous)
    failure = _answer(loopback, 130429)
    assert isinstance(failure, Ambiguous)
    with pytest.raises(AssertionError, match=r"MetaAmbiguous\('whatsapp_unknown_code'\) is not NotSent"):
        _check_row(failure, NotSent, THROTTLED)


def test_the_numbers_send_budget_is_its_documented_throughput():
    """80 messages a second per phone number (130429's limit); the pair rate has no counted budget."""
    from conduit.providers.registry import send_budget_default

    assert send_budget_default(adapter="meta-whatsapp", transport_name="meta-whatsapp-message") == (80, 1)


def test_a_whatsapp_source_is_never_routed_through_a_comment_transport(whatsapp_source):
    """The rule both ways: the comment transports answer Instagram's and Pages' sources only, and
    planning would never pick them for a WhatsApp source either."""
    from django.core.exceptions import ValidationError

    from conduit.providers.registry import transports_for
    from replies.services import reply_route_declare

    with pytest.raises(ValidationError, match="'meta-comment-reply' cannot answer a 'meta-whatsapp' source"):
        reply_route_declare(
            source_id=whatsapp_source.pk,
            purpose="private_delivery",
            transport_name="meta-comment-reply",
            target_url="http://127.0.0.1:9/v26.0",
        )
    # What planning may pick for each platform's sources (the same declaration).
    assert set(transports_for("meta-whatsapp")) == {"meta-whatsapp-message", "sandbox"}
    assert set(transports_for("meta-page")) == {
        "meta-comment-reply",
        "meta-private-reply",
        "sandbox",
    }
