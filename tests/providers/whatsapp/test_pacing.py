"""WhatsApp's pair rate (131056: too many messages to one person) holds back only the reply to
that person: it waits FAILED_BEFORE_SEND for its backoff, and the number's replies to other people
go out at once; the number's throughput limit (130429) still pauses every reply of the number."""

from __future__ import annotations

import pytest
from django.utils import timezone

from conduit.providers.base import THROTTLED
from conduit.providers.whatsapp import errors
from ingress.models import InboundEvent
from replies.models import ReplyAction, SendBudget
from replies.sender import reply_send
from replies.services import reply_approve
from tests.providers.meta.sending.conftest import capture, graph, sim  # noqa: F401 (fixtures)
from tests.providers.whatsapp.conftest import routed
from tests.providers.whatsapp.test_simulated import NUMBER, bodies_after, number  # noqa: F401 (fixture)

BUYERS = ("12015550131", "12015550132")


def _account_wide(monkeypatch) -> None:
    """The control: 131056 read as the number's own throttling, as it once was."""
    rows = tuple(
        errors._throttled(131056, "too many messages to this one person") if row.code == 131056 else row
        for row in errors.ROWS
    )
    assert {r.meaning.reason for r in rows if r.code == 131056} == {THROTTLED}
    monkeypatch.setattr(errors, "_BY_CODE", {row.code: row for row in rows if row.code_to is None})


def _approved_replies(graph, capture, deliver, number) -> list[ReplyAction]:
    """One message from each buyer, delivered as the simulator notifies it, each reply approved."""
    routed(number, url=graph.url)
    for buyer in BUYERS:
        seen = len(capture.bodies)
        sim(graph, "/_sim/whatsapp/messages", {"phone_number_id": NUMBER, "from": buyer, "text": "price?"})
        (message,) = bodies_after(capture, seen, 1)
        deliver(message)
    assert InboundEvent.objects.count() == len(BUYERS)
    actions = list(ReplyAction.objects.order_by("id"))
    for action in actions:
        assert reply_approve(action_id=action.pk, actor="reviewer_test").ok
    return actions


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("scope", ["as_built", "positive_control_pair_rate_pauses_the_number"])
def test_the_pair_rate_holds_back_only_the_reply_to_that_person(
    graph, capture, deliver, number, monkeypatch, scope
):
    if scope != "as_built":
        _account_wide(monkeypatch)
    first, second = _approved_replies(graph, capture, deliver, number)
    sim(graph, "/_sim/faults", {"mode": "error", "code": 131056, "status": 400, "path_contains": "/messages"})
    before = timezone.now()
    assert reply_send(action_id=first.pk) == "FAILED_BEFORE_SEND"
    first.refresh_from_db()
    assert first.last_error_code == ("recipient_throttled" if scope == "as_built" else "throttled")
    assert first.next_attempt_at is not None and first.next_attempt_at > before  # it waits, then retries
    paused = SendBudget.objects.filter(paused_until__gt=timezone.now()).values_list("pause_reason", flat=True)
    second_state = reply_send(action_id=second.pk)
    if scope == "as_built":
        assert list(paused) == []  # the number is not held back
        assert second_state == "SENT"  # the other buyer's reply goes out at once
        assert sim(graph, "/_sim/whatsapp/sent", method="GET")["by_callback_data"] == {second.reply_key: 1}
    else:
        assert list(paused) == ["throttled"]
        assert second_state == "deferred_budget"


@pytest.mark.django_db(transaction=True)
def test_the_number_s_throughput_limit_still_pauses_every_reply_of_the_number(
    graph, capture, deliver, number
):
    first, second = _approved_replies(graph, capture, deliver, number)
    sim(graph, "/_sim/faults", {"mode": "error", "code": 130429, "status": 400, "path_contains": "/messages"})
    assert reply_send(action_id=first.pk) == "FAILED_BEFORE_SEND"
    assert reply_send(action_id=second.pk) == "deferred_budget"
    assert sim(graph, "/_sim/whatsapp/sent", method="GET")["by_callback_data"] == {}
