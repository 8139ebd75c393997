"""Approved replies through the Meta transports, against the Graph simulator: the sender's outcomes
follow Meta's error meanings, and a lookup can prove a reply an ambiguous answer hid."""

from __future__ import annotations

import pytest

from replies.models import ReplyAction
from replies.sender import reply_send
from replies.services import reply_approve, reply_copy_create, reply_route_declare, unknown_authorize_retry
from simulators.meta import serve
from tests.providers.meta.integration.conftest import IG_ACCOUNT, meta_body, register_meta

COMMENT = "17900000000000001"  # the comment of meta_instagram/comment__created
COPY = "Thanks! The details are on their way."


@pytest.fixture
def graph():
    simulator = serve()
    yield simulator
    simulator.close()


def sim(graph, path: str, body: dict | None = None, method: str = "POST") -> dict:
    return graph.control(path, body, method=method)


@pytest.fixture
def approved(graph, db, post_meta):
    """The Instagram comment delivered, its public_ack routed to meta-comment-reply at the simulator
    and approved: (action, graph)."""
    sim(graph, "/_sim/accounts", {"id": IG_ACCOUNT, "object": "instagram"})
    sim(
        graph,
        "/_sim/comments",
        {
            "account": IG_ACCOUNT,
            "media_id": "17800000000000001",
            "id": COMMENT,
            "text": "What is the price of the checklist?",
            "from_id": "17841400000000901",
            "notify": False,
        },
    )
    source = register_meta("ig-test", "meta-instagram", IG_ACCOUNT, graph_url=graph.instagram_url)
    reply_route_declare(
        source_id=source.pk,
        purpose="public_ack",
        transport_name="meta-comment-reply",
        target_url=graph.instagram_url,
    )
    reply_copy_create(
        source_id=source.pk, purpose="public_ack", channel="public_ack", text=COPY, actor="test"
    )
    assert post_meta(meta_body("meta_instagram/comment__created")).status_code == 200
    action = ReplyAction.objects.get()
    assert reply_approve(action_id=action.pk, actor="operator_test").ok
    return action


def applied(graph) -> dict:
    return sim(graph, "/_sim/applied", method="GET")


def test_an_approved_reply_reaches_instagram_once(approved, graph):
    assert reply_send(action_id=approved.pk) == "SENT"
    assert applied(graph)["public"] == {COMMENT: 1}
    reply_send(action_id=approved.pk)  # a redelivered task: nothing left to claim
    assert applied(graph)["public"] == {COMMENT: 1}


def test_a_throttled_reply_is_retried_automatically(approved, graph):
    sim(graph, "/_sim/faults", {"mode": "error", "code": 80002, "status": 400})
    assert reply_send(action_id=approved.pk) == "FAILED_BEFORE_SEND"
    approved.refresh_from_db()
    assert approved.next_attempt_at is not None and applied(graph)["public"] == {}


@pytest.mark.parametrize("code, subcode", [(100, 33), (10, 1893063)])
def test_a_refusal_retrying_cannot_cure_waits_for_a_person(approved, graph, code, subcode):
    sim(graph, "/_sim/faults", {"mode": "error", "code": code, "subcode": subcode, "status": 400})
    assert reply_send(action_id=approved.pk) == "FAILED_BEFORE_SEND"
    approved.refresh_from_db()
    assert approved.next_attempt_at is None  # no automatic retry into a dead token or a gone comment
    assert applied(graph)["public"] == {}


def test_a_190_marks_the_source_and_the_action_waits_with_it(approved, graph):
    """A dead token stops the source's sends: the action waits with it, nothing retried into it."""
    sim(graph, "/_sim/faults", {"mode": "error", "code": 190, "subcode": 460, "status": 400})
    assert reply_send(action_id=approved.pk) == "FAILED_BEFORE_SEND"
    approved.event.source.refresh_from_db()
    assert approved.event.source.needs_reauth
    assert reply_send(action_id=approved.pk) == "waiting_reauth" and applied(graph)["public"] == {}


def test_an_answer_lost_after_apply_is_unknown_and_the_lookup_proves_it_sent(approved, graph):
    sim(graph, "/_sim/faults", {"mode": "apply_then_timeout", "hang_seconds": 2})
    assert reply_send(action_id=approved.pk) == "SEND_STATUS_UNKNOWN"
    assert applied(graph)["public"] == {COMMENT: 1}
    # A person asks for a retry: the lookup reads the comment's thread first and finds the reply.
    result = unknown_authorize_retry(action_id=approved.pk, actor="operator_test")
    approved.refresh_from_db()
    assert approved.delivery_state == "SENT", result
    assert applied(graph)["public"] == {COMMENT: 1}  # nothing resent


def test_an_unknown_code_after_apply_is_never_retried(approved, graph):
    sim(graph, "/_sim/faults", {"mode": "apply_then_error", "code": 20, "subcode": 1772107, "status": 400})
    assert reply_send(action_id=approved.pk) == "SEND_STATUS_UNKNOWN"
    reply_send(action_id=approved.pk)  # nothing claims an unknown send
    approved.refresh_from_db()
    assert approved.delivery_state == "SEND_STATUS_UNKNOWN"
    assert applied(graph)["public"] == {COMMENT: 1}
