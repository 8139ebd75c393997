"""WhatsApp end to end against the Graph simulator: a buyer's message becomes one event, its reply
goes out once, and the statuses the simulator posts (signed, reordered, repeated) are delivered to
Conduit's callback as Meta sends them. A send the simulator applied and never answered waits in
SEND_STATUS_UNKNOWN until a status carrying its reply key settles it; past the 24-hour window the
reply goes out as the copy's template, or not at all."""

from __future__ import annotations

import json
import time

import pytest

from ingress.models import InboundEvent, MessageStatus
from replies.models import ReplyAction, ReplyTransition, SendAttempt
from replies.sender import reply_send
from replies.services import reply_approve
from tests.providers.meta.sending.conftest import APP_ID, capture, graph, sim  # noqa: F401 (fixtures)
from tests.providers.whatsapp.conftest import register_meta, routed

NUMBER = "100000000000911"
WABA = "100000000000910"
BUYER = "12015550123"
TEMPLATE = {"name": "price_list", "language": "en_US", "parameters": []}
HOURS_25 = 25 * 3600


def whatsapp(graph, path: str, body: dict | None = None, method: str = "POST") -> dict:
    return sim(graph, f"/_sim/whatsapp/{path}", body, method=method)


@pytest.fixture
def number(graph, db):
    """A phone number at the simulator (the test app subscribed to it) and its Conduit source."""
    whatsapp(graph, "numbers", {"phone_number_id": NUMBER, "waba_id": WABA, "app_id": APP_ID})
    return register_meta(
        "wa-sim-test",
        "meta-whatsapp",
        NUMBER,
        graph_url=graph.url,
        event_types=["message.created"],
        purposes=["private_delivery"],
        contract_version="whatsapp-v1",
    )


def bodies_after(capture, seen: int, count: int) -> list[bytes]:
    """The `count` bodies the simulator posted after the first `seen`, waited for."""
    capture.wait(seen + count)
    assert len(capture.bodies) >= seen + count, f"{len(capture.bodies) - seen} of {count} bodies came"
    return list(capture.bodies[seen : seen + count])


def statuses_of(raw: list[bytes]) -> list[tuple[str, str]]:
    found = []
    for one in raw:
        for entry in json.loads(one)["entry"]:
            for change in entry["changes"]:
                found += [(s["status"], s["id"]) for s in change["value"].get("statuses", [])]
    return found


def buyer_writes(graph, capture, deliver, text: str = "What is the price?", **extra) -> ReplyAction:
    """The buyer's message as the simulator notifies it, delivered twice (Meta delivers at least
    once): one event and its planned reply, which a reviewer then approves or not."""
    seen = len(capture.bodies)
    whatsapp(graph, "messages", {"phone_number_id": NUMBER, "from": BUYER, "text": text, **extra})
    (message,) = bodies_after(capture, seen, 1)
    deliver(message)
    deliver(message)
    assert InboundEvent.objects.count() == 1
    return ReplyAction.objects.get()


def test_a_keyword_message_is_answered_once_and_its_statuses_make_its_history(
    graph, capture, number, deliver
):
    """Done means: one event, the approved reply sent once, its statuses reordered and repeated:
    SENT with the status history, one SENT transition."""
    routed(number, url=graph.url)
    action = buyer_writes(graph, capture, deliver)
    assert reply_approve(action_id=action.pk, actor="reviewer_test").ok
    whatsapp(graph, "status_plan", {"shuffle": True, "duplicate": 1, "seed": "e2e"})
    seen = len(capture.bodies)
    assert reply_send(action_id=action.pk) == "SENT"
    action.refresh_from_db()
    reported = bodies_after(capture, seen, 6)
    order = [state for state, _ in statuses_of(reported)]
    assert sorted(order) == ["delivered", "delivered", "read", "read", "sent", "sent"]
    assert order != sorted(order, key=["sent", "delivered", "read"].index)  # really out of order
    assert {id for _, id in statuses_of(reported)} == {action.provider_reply_id}
    for raw in reported:
        deliver(raw)
    action.refresh_from_db()
    assert action.delivery_state == "SENT"
    assert ReplyTransition.objects.filter(action=action, next_state="SENT").count() == 1
    history = MessageStatus.objects.filter(provider_id=action.provider_reply_id)
    assert dict(history.values_list("status", "seen_count")) == {"sent": 2, "delivered": 2, "read": 2}
    assert set(history.values_list("correlation", flat=True)) == {action.reply_key}
    assert whatsapp(graph, "sent", method="GET")["by_callback_data"] == {action.reply_key: 1}
    (sent,) = whatsapp(graph, "sent", method="GET")["sent"]
    assert sent["type"] == "text" and sent["to"] == BUYER
    assert sent["context"] == {"message_id": InboundEvent.objects.get().source_event_id}


@pytest.mark.parametrize("fault", ["apply_then_timeout", "apply_then_drop"])
def test_a_send_applied_without_an_answer_waits_until_its_status_comes(
    graph, capture, number, deliver, settings, fault
):
    """Done means: SEND_STATUS_UNKNOWN until the status carrying its reply key arrives, then SENT
    without a person; no resend in any case (the sender asked again claims nothing)."""
    settings.CONDUIT_TRANSPORT_TIMEOUT_SECONDS = 0.5
    routed(number, url=graph.url)
    action = buyer_writes(graph, capture, deliver)
    assert reply_approve(action_id=action.pk, actor="reviewer_test").ok
    sim(graph, "/_sim/faults", {"mode": fault, "path_contains": "/messages", "hang_seconds": 2})
    seen = len(capture.bodies)
    assert reply_send(action_id=action.pk) == "SEND_STATUS_UNKNOWN"
    assert reply_send(action_id=action.pk) == "not_claimed"  # never claimed again
    reported = bodies_after(capture, seen, 3)
    action.refresh_from_db()
    assert action.delivery_state == "SEND_STATUS_UNKNOWN" and action.provider_reply_id in ("", None)
    deliver(reported[0])  # `sent`, with biz_opaque_callback_data = the reply key
    action.refresh_from_db()
    assert action.delivery_state == "SENT"
    assert action.provider_reply_id == statuses_of(reported)[0][1]
    (settled,) = ReplyTransition.objects.filter(action=action, next_state="SENT")
    assert (settled.prior_state, settled.actor) == ("SEND_STATUS_UNKNOWN", "system:status")
    for raw in reported[1:]:
        deliver(raw)
    action.refresh_from_db()
    assert action.delivery_state == "SENT" and SendAttempt.objects.filter(action=action).count() == 1
    assert whatsapp(graph, "sent", method="GET")["by_callback_data"] == {action.reply_key: 1}


def test_past_the_window_free_form_is_refused_and_a_template_is_sent_as_the_template(
    graph, capture, number, deliver
):
    """Done means: approval 25 hours after the buyer's last message with free-form copy only is
    refused with the reason; with a template the reply goes out as that template, which the
    simulator (whose clock also says 25 hours) accepts where it would refuse text with 131047."""
    routed(number, url=graph.url)
    action = buyer_writes(graph, capture, deliver, timestamp=int(time.time()) - HOURS_25)
    refused = reply_approve(action_id=action.pk, actor="reviewer_test")
    assert not refused.ok and "no template" in refused.message
    routed(number, url=graph.url, template=TEMPLATE)  # the copy, changed to carry a template
    whatsapp(graph, "templates", {"phone_number_id": NUMBER, "name": "price_list", "language": "en_US"})
    approved = reply_approve(action_id=action.pk, actor="reviewer_test")
    assert approved.ok and "as template price_list" in approved.message, approved.message
    assert reply_send(action_id=action.pk) == "SENT"
    (sent,) = whatsapp(graph, "sent", method="GET")["sent"]
    assert sent["type"] == "template" and sent["template"]["name"] == "price_list"
    assert sent["template"]["language"] == {"code": "en_US"}
    assert sent["biz_opaque_callback_data"] == ReplyAction.objects.get().reply_key
