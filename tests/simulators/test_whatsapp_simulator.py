"""The Graph simulator's WhatsApp Cloud API: sends applied once and answered, the 24-hour window by
the simulator's clock, templates, Meta's refusals, status webhooks as planned, faults on the send,
and buyers' messages signed over the exact bytes in WhatsApp's recorded shape."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import socket
import time
import urllib.error

import pytest

from simulators.meta import serve
from tests.simulators.meta.helpers import APP_ID, APP_SECRET, Receiver, call, wait_for

NUMBER = "105670000000002"  # 15 digits, as recorded phone number ids
WABA = "106500000000001"
DISPLAY = "15550100100"
BUYER = "15550100019"
KEY = "a" * 63 + "1"  # a 64-hex reply key, as Conduit sends in biz_opaque_callback_data
DAY = 24 * 3600
WAMID = re.compile(r"wamid\.[A-Za-z0-9+/]+=*")


@pytest.fixture
def receiver():
    receiver = Receiver()
    yield receiver
    receiver.close()


@pytest.fixture
def sim(receiver):
    simulator = serve(port=0, callback=receiver.url, app_id=APP_ID, app_secret=APP_SECRET, hang_seconds=3)
    control(simulator, "numbers", phone_number_id=NUMBER, waba_id=WABA, display_phone_number=DISPLAY)
    yield simulator
    simulator.close()


def control(sim, route: str, *, method: str = "POST", **body) -> dict:
    status, answer, _ = call(
        f"{sim.root}/_sim/whatsapp/{route}", method=method, body=body if method == "POST" else None
    )
    assert status == 200, answer
    return answer


def buyer_writes(sim, **data) -> str:
    return control(sim, "messages", **{"phone_number_id": NUMBER, "from": BUYER, "text": "Hello?", **data})[
        "id"
    ]


def text_body(text: str = "Thanks, it ships today.", **extra) -> dict:
    return {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": BUYER,
        "type": "text",
        "text": {"preview_url": False, "body": text},
        "biz_opaque_callback_data": KEY,
        **extra,
    }


def template_body(name: str = "order_update", code: str = "en_US") -> dict:
    return {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": BUYER,
        "type": "template",
        "template": {
            "name": name,
            "language": {"code": code},
            "components": [{"type": "body", "parameters": [{"type": "text", "text": "A-1"}]}],
        },
        "biz_opaque_callback_data": KEY,
    }


def send(sim, body: dict, **kwargs) -> tuple[int, dict, dict]:
    return call(f"{sim.url}/{NUMBER}/messages", method="POST", body=body, **kwargs)


def verify(raw: bytes, headers: dict) -> dict:
    """What Conduit's endpoint does: HMAC-SHA256 over the received bytes, constant-time compare."""
    expected = "sha256=" + hmac.new(APP_SECRET.encode(), raw, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(headers["X-Hub-Signature-256"], expected)
    return json.loads(raw)


def statuses(receiver: Receiver, count: int, *, after: int = 0) -> list[dict]:
    """The status objects of the receiver's bodies after the first `after`, one per body."""
    bodies = [verify(raw, headers) for raw, headers in wait_for(receiver, after + count)[after:]]
    found = []
    for body in bodies:
        (entry,) = body["entry"]
        (change,) = entry["changes"]
        assert entry["id"] == WABA and change["field"] == "messages"
        (status,) = change["value"]["statuses"]
        found.append(status)
    return found


def sent(sim) -> dict:
    return control(sim, "sent", method="GET")


# -- the send ------------------------------------------------------------------------------------


def test_a_text_reply_in_the_window_is_applied_once_and_answered(sim, receiver):
    buyer_writes(sim)
    status, answer, _ = send(sim, text_body(context={"message_id": "wamid.X"}))
    assert status == 200
    wamid = answer["messages"][0]["id"]
    assert answer == {
        "messaging_product": "whatsapp",
        "contacts": [{"input": BUYER, "wa_id": BUYER}],
        "messages": [{"id": wamid}],
    }
    assert WAMID.fullmatch(wamid) and len(wamid) == 58  # as recorded for an 11-digit number
    decoded = base64.b64decode(wamid.removeprefix("wamid."))
    assert decoded[3 : 3 + len(BUYER)] == BUYER.encode() and 0x11 in decoded  # outgoing marker
    log = sent(sim)
    assert log["by_callback_data"] == {KEY: 1}
    (row,) = log["sent"]
    assert (row["id"], row["to"], row["type"], row["text"]) == (
        wamid,
        BUYER,
        "text",
        "Thanks, it ships today.",
    )
    assert row["biz_opaque_callback_data"] == KEY and row["context"] == {"message_id": "wamid.X"}


def test_every_applied_send_is_counted_per_reply_key(sim, receiver):
    """The simulator applies what it is sent, as WhatsApp does: a second send of one key counts 2,
    which is what a test of Conduit's at-most-once holds it against."""
    buyer_writes(sim)
    assert send(sim, text_body())[0] == 200
    assert send(sim, text_body())[0] == 200
    assert sent(sim)["by_callback_data"] == {KEY: 2}


def test_the_bearer_header_and_registered_tokens_are_checked(sim, receiver):
    buyer_writes(sim)
    token = call(f"{sim.root}/_sim/tokens", method="POST", body={"token": "EAAgood", "expires_in": 3600})[1]
    assert token["token"] == "EAAgood"
    status, answer, _ = send(sim, text_body(), token="EAAother")
    assert status == 400 and answer["error"]["code"] == 190
    assert send(sim, text_body(), token="EAAgood")[0] == 200
    status, _, _ = call(
        f"{sim.url}/{NUMBER}/messages",
        method="POST",
        body=text_body(),
        token=None,
        params={},
    )
    assert status == 400  # no token at all: 104
    assert sent(sim)["by_callback_data"] == {KEY: 1}


def test_a_number_given_as_a_json_number_is_answered_as_a_string(sim, receiver):
    buyer_writes(sim)
    status, answer, _ = send(sim, text_body(to=int(BUYER)))
    assert status == 200 and answer["contacts"] == [{"input": BUYER, "wa_id": BUYER}]


# -- the window, templates, refusals ---------------------------------------------------------------


def test_a_text_past_24_hours_by_the_clock_is_131047_and_applies_nothing(sim, receiver):
    buyer_writes(sim)
    call(f"{sim.root}/_sim/clock", method="POST", body={"advance_seconds": DAY + 60})
    status, answer, _ = send(sim, text_body())
    assert status == 400
    error = answer["error"]
    assert (error["message"], error["type"], error["code"]) == (
        "(#131047) Re-engagement message",
        "OAuthException",
        131047,
    )
    assert (
        error["error_data"]["messaging_product"] == "whatsapp"
        and "24 hours" in error["error_data"]["details"]
    )
    assert sent(sim)["sent"] == []
    time.sleep(0.2)
    assert len(receiver.received) == 1  # the buyer's message only: no statuses
    buyer_writes(sim)  # the buyer writes again: the window reopens
    assert send(sim, text_body())[0] == 200


def test_a_text_to_a_buyer_who_never_wrote_is_131047(sim, receiver):
    status, answer, _ = send(sim, text_body())
    assert status == 400 and answer["error"]["code"] == 131047


def test_an_unknown_template_is_132001_and_a_registered_one_is_accepted(sim, receiver):
    status, answer, _ = send(sim, template_body())
    assert status == 400
    assert answer["error"]["code"] == 132001
    assert answer["error"]["error_data"]["details"] == "template name (order_update) does not exist in en_US"
    control(sim, "templates", phone_number_id=NUMBER, name="order_update")
    assert send(sim, template_body(code="pt_BR"))[1]["error"]["code"] == 132001  # another language
    status, answer, _ = send(sim, template_body())  # outside any window: a template may go
    assert status == 200
    assert answer["messages"][0]["message_status"] == "accepted"
    (row,) = sent(sim)["sent"]
    assert row["type"] == "template" and row["template"]["name"] == "order_update"


@pytest.mark.parametrize(
    "change",
    [
        {"to": None},
        {"to": "not a number"},
        {"type": None},
        {"type": "sticker"},
        {"text": {"body": ""}},
        {"text": None},
        {"messaging_product": None},
        {"biz_opaque_callback_data": "x" * 513},
    ],
)
def test_a_bad_to_type_or_body_is_100_in_whatsapps_envelope(sim, receiver, change):
    buyer_writes(sim)
    body = {k: v for k, v in {**text_body(), **change}.items() if v is not None}
    status, answer, _ = send(sim, body)
    assert status == 400
    error = answer["error"]
    assert (error["code"], error["message"], error["type"]) == (
        100,
        "(#100) Invalid parameter",
        "OAuthException",
    )
    assert set(error) == {"message", "type", "code", "error_data", "fbtrace_id"}
    assert error["error_data"]["messaging_product"] == "whatsapp" and error["error_data"]["details"]
    assert sent(sim)["sent"] == []


def test_an_unregistered_phone_number_id_is_graphs_unknown_node(sim, receiver):
    status, answer, _ = call(f"{sim.url}/123123/messages", method="POST", body=text_body())
    assert status == 400
    error = answer["error"]
    assert (error["code"], error["error_subcode"], error["type"]) == (100, 33, "GraphMethodException")
    assert error["message"].startswith("Unsupported post request. Object with ID '123123' does not exist")


# -- statuses --------------------------------------------------------------------------------------


def test_statuses_come_sent_delivered_read_each_in_its_own_body(sim, receiver):
    buyer_writes(sim)
    wamid = send(sim, text_body())[1]["messages"][0]["id"]
    found = statuses(receiver, 3, after=1)
    assert [s["status"] for s in found] == ["sent", "delivered", "read"]
    assert {s["id"] for s in found} == {wamid}
    assert all(s["recipient_id"] == BUYER and s["biz_opaque_callback_data"] == KEY for s in found)
    assert all(re.fullmatch(r"\d{10}", s["timestamp"]) for s in found)
    sent_status, delivered, read = found
    assert set(sent_status["conversation"]) == {"id", "expiration_timestamp", "origin"}
    assert sent_status["conversation"]["origin"] == {"type": "service"}
    assert sent_status["pricing"] == {"billable": True, "pricing_model": "CBP", "category": "service"}
    assert set(delivered["conversation"]) == {"id", "origin"}
    assert delivered["conversation"]["id"] == sent_status["conversation"]["id"]
    assert set(read) == {"id", "status", "timestamp", "recipient_id", "biz_opaque_callback_data"}
    time.sleep(0.2)
    assert len(receiver.received) == 4


def test_a_shuffled_plan_sends_the_same_statuses_out_of_order(sim, receiver):
    buyer_writes(sim)
    control(sim, "status_plan", shuffle=True, seed=7)
    send(sim, text_body())
    order = [s["status"] for s in statuses(receiver, 3, after=1)]
    assert sorted(order) == ["delivered", "read", "sent"] and order != ["sent", "delivered", "read"]


def test_a_duplicating_plan_repeats_each_status(sim, receiver):
    buyer_writes(sim)
    control(sim, "status_plan", duplicate=1)
    send(sim, text_body())
    found = statuses(receiver, 6, after=1)
    assert [s["status"] for s in found] == ["sent", "sent", "delivered", "delivered", "read", "read"]
    assert found[0] == found[1]


def test_a_failing_plan_sends_failed_after_sent(sim, receiver):
    buyer_writes(sim)
    assert control(sim, "status_plan", fail_code=131026)["statuses"] == ["sent"]
    wamid = send(sim, text_body())[1]["messages"][0]["id"]
    first, failed = statuses(receiver, 2, after=1)
    assert first["status"] == "sent" and failed["status"] == "failed" and failed["id"] == wamid
    assert failed["errors"] == [
        {
            "code": 131026,
            "title": "Receiver is incapable of receiving this message",
            "message": "Receiver is incapable of receiving this message",
            "error_data": {"details": "Message Undeliverable."},
            "href": "https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes/",
        }
    ]
    # Meta returns biz_opaque_callback_data on sent/delivered/read only: a failure is matched by wamid.
    assert "biz_opaque_callback_data" not in failed and "conversation" not in failed


def test_an_empty_plan_sends_no_statuses_and_delete_restores_the_default(sim, receiver):
    buyer_writes(sim)
    control(sim, "status_plan", statuses=[])
    send(sim, text_body())
    time.sleep(0.3)
    assert len(receiver.received) == 1
    assert control(sim, "status_plan", method="DELETE")["statuses"] == ["sent", "delivered", "read"]
    send(sim, text_body())
    assert [s["status"] for s in statuses(receiver, 3, after=1)] == ["sent", "delivered", "read"]


def test_a_bad_plan_is_refused_with_what_to_fix(sim, receiver):
    status, answer, _ = call(
        f"{sim.root}/_sim/whatsapp/status_plan", method="POST", body={"statuses": ["accepted"]}
    )
    assert status == 400 and "statuses" in answer["error"]


def test_statuses_wait_for_notify_when_batching(receiver):
    with serve(port=0, callback=receiver.url, app_id=APP_ID, app_secret=APP_SECRET, batch=True) as sim:
        control(sim, "numbers", phone_number_id=NUMBER, waba_id=WABA)
        buyer_writes(sim)
        send(sim, text_body())
        assert receiver.received == []
        call(f"{sim.root}/_sim/notify", method="POST", body={})
        (body,) = [verify(raw, headers) for raw, headers in receiver.received]
        (entry,) = body["entry"]
        assert set(entry) == {"id", "changes"}  # no `time` on WhatsApp's entries
        kinds = [next(k for k in c["value"] if k in ("messages", "statuses")) for c in entry["changes"]]
        assert kinds == ["messages", "statuses", "statuses", "statuses"]


# -- faults on the send ----------------------------------------------------------------------------


def fault(sim, **data) -> None:
    status, answer, _ = call(f"{sim.root}/_sim/faults", method="POST", body=data)
    assert status == 200, answer


def test_apply_then_timeout_applies_the_send_and_never_answers(sim, receiver):
    buyer_writes(sim)
    fault(sim, mode="apply_then_timeout", path_contains="/messages", hang_seconds=2)
    with pytest.raises((TimeoutError, socket.timeout, urllib.error.URLError)):
        send(sim, text_body(), timeout=0.5)
    assert sent(sim)["by_callback_data"] == {KEY: 1}
    found = statuses(receiver, 3, after=1)  # the statuses still come: they settle the ambiguity
    assert {s["biz_opaque_callback_data"] for s in found} == {KEY}
    fired = call(f"{sim.root}/_sim/faults")[1]["fired"]
    assert [(f["mode"], f["target"]) for f in fired] == [("apply_then_timeout", KEY)]


@pytest.mark.parametrize("mode", ["apply_then_error", "apply_then_drop"])
def test_the_other_apply_then_modes_apply_the_send(sim, receiver, mode):
    buyer_writes(sim)
    fault(sim, mode=mode, code=131000, status=500)
    status, answer, _ = (None, None, None)
    try:
        status, answer, _ = send(sim, text_body())
    except (urllib.error.URLError, ConnectionError):
        pass
    if mode == "apply_then_error":
        assert status == 500 and answer["error"]["code"] == 131000 and "error_data" in answer["error"]
    assert sent(sim)["by_callback_data"] == {KEY: 1}


@pytest.mark.parametrize("mode", ["timeout", "drop"])
def test_timeout_and_drop_apply_nothing(sim, receiver, mode):
    buyer_writes(sim)
    fault(sim, mode=mode, hang_seconds=1)
    with pytest.raises((TimeoutError, socket.timeout, urllib.error.URLError, ConnectionError)):
        send(sim, text_body(), timeout=0.5)
    assert sent(sim)["sent"] == []


def test_a_planted_throughput_error_answers_whatsapps_shape_and_applies_nothing(sim, receiver):
    buyer_writes(sim)
    fault(sim, mode="error", code=130429, path_contains=f"/{NUMBER}/messages")
    status, answer, _ = send(sim, text_body())
    assert status == 400
    error = answer["error"]
    assert (error["message"], error["code"], error["error_subcode"]) == (
        "(#130429) Rate limit hit",
        130429,
        2494055,
    )
    assert error["error_data"] == {
        "messaging_product": "whatsapp",
        "details": "Cloud API message throughput has been reached.",
    }
    fault(sim, mode="error", code=131056)
    status, answer, _ = send(sim, {k: v for k, v in text_body().items() if k != "biz_opaque_callback_data"})
    assert (
        status == 400
        and answer["error"]["code"] == 131056
        and "pair rate limit" in answer["error"]["message"]
    )
    assert sent(sim)["sent"] == []
    fired = call(f"{sim.root}/_sim/faults")[1]["fired"]
    assert [f["target"] for f in fired] == [KEY, BUYER]  # the reply key, else the recipient


# -- buyers' messages ------------------------------------------------------------------------------


def test_a_buyers_text_is_notified_in_whatsapps_shape_signed_over_the_exact_bytes(sim, receiver):
    id = buyer_writes(sim, text="Ça va? 👋 https://x.test/a", name="Zoë", timestamp=1_780_000_000)
    raw, headers = receiver.received[-1]
    assert raw.isascii() and b"\\u00c7a va? \\ud83d\\udc4b" in raw and b"https:\\/\\/x.test\\/a" in raw
    body = verify(raw, headers)
    assert body == {
        "object": "whatsapp_business_account",
        "entry": [
            {
                "id": WABA,
                "changes": [
                    {
                        "value": {
                            "messaging_product": "whatsapp",
                            "metadata": {"display_phone_number": DISPLAY, "phone_number_id": NUMBER},
                            "contacts": [{"profile": {"name": "Zoë"}, "wa_id": BUYER}],
                            "messages": [
                                {
                                    "from": BUYER,
                                    "id": id,
                                    "timestamp": "1780000000",
                                    "text": {"body": "Ça va? 👋 https://x.test/a"},
                                    "type": "text",
                                }
                            ],
                        },
                        "field": "messages",
                    }
                ],
            }
        ],
    }
    assert list(body["entry"][0]["changes"][0]) == ["value", "field"]  # recorded key order
    assert WAMID.fullmatch(id) and 0x12 in base64.b64decode(id.removeprefix("wamid."))  # incoming
    forged = "sha256=" + hmac.new(b"another-secret", raw, hashlib.sha256).hexdigest()
    assert not hmac.compare_digest(headers["X-Hub-Signature-256"], forged)
    reencoded = json.dumps(body).encode()
    assert (
        hmac.new(APP_SECRET.encode(), reencoded, hashlib.sha256).hexdigest()
        not in headers["X-Hub-Signature-256"]
    )


@pytest.mark.parametrize(
    ("kind", "part"),
    [
        ("interactive", {"type": "button_reply", "button_reply": {"id": "yes-1", "title": "Yes"}}),
        ("button", {"payload": "yes-1", "text": "Yes"}),
    ],
)
def test_a_buyers_button_reply_carries_its_context(sim, receiver, kind, part):
    buyer_writes(sim, type=kind, text="Yes", payload="yes-1", context="wamid.ours")
    message = verify(*receiver.received[-1])["entry"][0]["changes"][0]["value"]["messages"][0]
    assert message["context"] == {"from": DISPLAY, "id": "wamid.ours"}
    assert message["type"] == kind and message[kind] == part


def test_a_buyers_image_and_reaction(sim, receiver):
    buyer_writes(sim, type="image", text="")
    image = verify(*receiver.received[-1])["entry"][0]["changes"][0]["value"]["messages"][0]["image"]
    assert set(image) == {"mime_type", "sha256", "id"}
    buyer_writes(sim)
    wamid = send(sim, text_body())[1]["messages"][0]["id"]
    wait_for(receiver, 5)
    buyer_writes(sim, type="reaction", text="👍")
    reactions = [
        verify(raw, headers)["entry"][0]["changes"][0]["value"]
        for raw, headers in receiver.received
        if b'"reaction"' in raw
    ]
    assert reactions[-1]["messages"][0]["reaction"] == {"message_id": wamid, "emoji": "👍"}


def test_notify_false_records_the_message_without_a_webhook(sim, receiver):
    buyer_writes(sim, notify=False)
    assert receiver.received == []
    assert send(sim, text_body())[0] == 200  # the window is open all the same


def test_an_unregistered_number_or_type_is_a_bad_control_request(sim, receiver):
    status, answer, _ = call(
        f"{sim.root}/_sim/whatsapp/messages",
        method="POST",
        body={"phone_number_id": "999", "from": BUYER, "text": "x"},
    )
    assert status == 400 and "POST /_sim/whatsapp/numbers" in answer["error"]
    status, _, _ = call(
        f"{sim.root}/_sim/whatsapp/messages",
        method="POST",
        body={"phone_number_id": NUMBER, "from": BUYER, "type": "sticker"},
    )
    assert status == 400


def test_an_unsubscribed_waba_gets_no_webhooks(sim, receiver):
    call(
        f"{sim.root}/_sim/subscriptions",
        method="POST",
        body={"account": WABA, "app_id": APP_ID, "fields": []},
    )
    buyer_writes(sim)
    send(sim, text_body())
    time.sleep(0.3)
    assert receiver.received == []


def test_a_restart_loses_nothing(tmp_path, receiver):
    path = str(tmp_path / "sim.sqlite")
    with serve(port=0, state_path=path) as first:
        control(first, "numbers", phone_number_id=NUMBER, waba_id=WABA)
        control(first, "templates", phone_number_id=NUMBER, name="order_update")
        buyer_writes(first)
        control(first, "status_plan", statuses=["sent"])
        send(first, text_body())
    with serve(port=0, state_path=path, callback=receiver.url, app_id=APP_ID, app_secret=APP_SECRET) as again:
        assert sent(again)["by_callback_data"] == {KEY: 1}
        assert send(again, text_body())[0] == 200  # the buyer's window is kept
        assert send(again, template_body())[0] == 200  # so is the template
        assert control(again, "status_plan", method="GET")["statuses"] == ["sent"]
