"""Holes an adversarial pass looks for in the receipt rule, edits and planning: each test asserts
the promise the hole would break."""

from __future__ import annotations

import json

import pytest

from ingress.models import InboundEvent
from replies.models import ReplyAction
from replies.sender import reply_send
from replies.services import reply_approve, unknown_authorize_retry
from tests.providers.meta.integration.conftest import APP_ID, APP_SECRET, PAGE_ACCOUNT
from tests.providers.meta.integration.test_graph_as_meta import (
    BUYER,
    comment,
    scan,
    source_with_routes,
    where,
)
from tests.providers.meta.integration.test_reconcile import graph, loopback_only, sim  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db(transaction=True)
OTHER_BUYER = "17841400000000902"


def _quiet(graph, source):
    """No webhook of the account's own items comes: only the scan can see them."""
    sim(graph, "/_sim/subscriptions", {"account": source.account_ref, "app_id": APP_ID, "fields": []})


def test_instagram_reply_to_a_reply_is_not_taken_for_the_top_level_comments_reply(graph):
    """Instagram puts a reply to a reply on the top-level comment's thread (the simulator too).
    T's reply timed out unapplied; R's reply (R answers T) applied behind a lost answer. The one own
    comment under T is R's reply, never T's: T must stay SEND_STATUS_UNKNOWN."""
    source = source_with_routes(graph, "instagram", purposes=("public_ack",))
    top = comment(graph, source, "instagram", "price please")
    reply = comment(graph, source, "instagram", "price for me too", sender=OTHER_BUYER, parent_id=top)
    actions = {a.event.message_ref: a for a in ReplyAction.objects.select_related("event")}
    assert set(actions) == {top, reply}
    for action in actions.values():
        assert reply_approve(action_id=action.pk, actor="reviewer_test").ok
    _quiet(graph, source)
    sim(graph, "/_sim/faults", {"mode": "timeout", "method": "POST", "hang_seconds": 2, "count": 1})
    assert reply_send(action_id=actions[top].pk) == "SEND_STATUS_UNKNOWN"
    sim(graph, "/_sim/faults", {"mode": "apply_then_timeout", "hang_seconds": 2, "count": 1})
    assert reply_send(action_id=actions[reply].pk) == "SEND_STATUS_UNKNOWN"
    assert sim(graph, "/_sim/applied", method="GET")["public"] != {}
    scan(source)
    actions[top].refresh_from_db()
    # The buyer of T never got a reply: T's action must not be SENT.
    assert actions[top].delivery_state == "SEND_STATUS_UNKNOWN", (
        actions[top].delivery_state,
        actions[top].provider_reply_id,
    )


def test_a_private_reply_resolved_by_lookup_does_not_lend_its_message_to_the_buyers_other_action(graph):
    """Page: one buyer, two comments, one private reply each. A1 applied behind a lost answer, a person
    authorised the retry and the lookup found `private_reply_conversation` (SENT under the conversation
    id); A2 timed out unapplied. The conversation read shows A1's message: it is A1's, never A2's."""
    source = source_with_routes(graph, "page", purposes=("private_delivery",))
    first = comment(graph, source, "page", "price please")
    second = comment(graph, source, "page", "price, other post?")
    by_ref = {a.event.message_ref: a for a in ReplyAction.objects.select_related("event")}
    a1, a2 = by_ref[first], by_ref[second]
    for action in (a1, a2):
        assert reply_approve(action_id=action.pk, actor="reviewer_test").ok
    _quiet(graph, source)
    sim(graph, "/_sim/faults", {"mode": "apply_then_drop", "count": 1})
    assert reply_send(action_id=a1.pk) == "SEND_STATUS_UNKNOWN"
    sim(graph, "/_sim/faults", {"mode": "timeout", "method": "POST", "hang_seconds": 2, "count": 1})
    assert reply_send(action_id=a2.pk) == "SEND_STATUS_UNKNOWN"
    assert sim(graph, "/_sim/applied", method="GET")["private"] == {first: 1}
    assert unknown_authorize_retry(action_id=a1.pk, actor="reviewer_test").ok
    a1.refresh_from_db()
    assert a1.delivery_state == "SENT"  # provider_reply_id: the conversation id, not the message id
    scan(source)
    a2.refresh_from_db()
    assert a2.delivery_state == "SEND_STATUS_UNKNOWN", (a2.delivery_state, a2.provider_reply_id)


def test_a_comment_whose_author_differs_on_read_back_is_an_identity_conflict_not_an_edit(graph, client):
    """edits_seen takes ANY payload difference of a read Page comment for an edit: a comment accepted
    with another author (or post, or parent) and the same text is an identity conflict (docs/concepts/keys.md#identity-conflict),
    never a fabricated `comment.edited` event."""
    from conduit.providers.meta.webhook import signature_header

    source = source_with_routes(graph, "page", purposes=("public_ack",))
    post = where("page")["post_id"]
    cid = comment(graph, source, "page", "hello there", notify=False)
    body = json.dumps(
        {
            "object": "page",
            "entry": [
                {
                    "id": PAGE_ACCOUNT,
                    "time": 1764583200,
                    "changes": [
                        {
                            "field": "feed",
                            "value": {
                                "item": "comment",
                                "verb": "add",
                                "comment_id": cid,
                                "post_id": post,
                                "parent_id": post,
                                "from": {"id": OTHER_BUYER, "name": "Someone"},
                                "message": "hello there",
                                "created_time": 1764583200,
                            },
                        }
                    ],
                }
            ],
        }
    ).encode()
    response = client.post(
        f"/webhooks/meta/{APP_ID}/",
        data=body,
        content_type="application/json",
        headers={"X-Hub-Signature-256": signature_header(body=body, secret=APP_SECRET)},
    )
    assert response.status_code == 200 and InboundEvent.objects.count() == 1
    counts = scan(source).summary["counts"]
    edits = list(
        InboundEvent.objects.filter(event_type="comment.edited").values_list("source_event_id", flat=True)
    )
    assert edits == [], f"an edit was fabricated: {edits}; counts {counts}"
    assert counts["identity_conflicts"] == 1, counts


def test_a_dm_plans_no_comment_purpose_on_a_source_whose_routes_are_not_declared_yet(graph):
    """purposes_answering plans a purpose with no route "as before": on a Meta source registered with
    public_ack/private_delivery and no route yet (routes are a separate step), a DM with the trigger
    word plans both, which no Meta transport can ever send."""
    from tests.providers.meta.integration.conftest import IG_ACCOUNT, register_meta

    sim(graph, "/_sim/accounts", {"id": IG_ACCOUNT, "object": "instagram", "app_id": APP_ID})
    source = register_meta(
        "ig-noroute",
        "meta-instagram",
        IG_ACCOUNT,
        graph_url=graph.instagram_url,
        purposes=["public_ack", "private_delivery"],
    )
    sim(
        graph,
        "/_sim/messages",
        {"account": source.account_ref, "from_id": BUYER, "text": "price?", "notify": True},
    )
    event = InboundEvent.objects.get(event_type="message.created")
    assert list(ReplyAction.objects.filter(event=event).values_list("purpose", flat=True)) == [], (
        event.event_state
    )


def test_a_sent_public_reply_to_an_ad_comment_stays_sent(graph):
    """/{ig-media-id}/comments does not return comments on ads (declared), so neither the account's reply
    under one: "not compared" is not "missing", yet the reply's purpose is compared for every action."""
    source = source_with_routes(graph, "instagram", purposes=("public_ack",))
    media = sim(graph, "/_sim/media", {"account": source.account_ref, "ad_id": "ad_test_1"})["id"]
    sim(
        graph,
        "/_sim/comments",
        {
            "account": source.account_ref,
            "media_id": media,
            "text": "price please",
            "from_id": BUYER,
            "notify": True,
        },
    )
    (action,) = ReplyAction.objects.all()
    assert reply_approve(action_id=action.pk, actor="reviewer_test").ok
    assert reply_send(action_id=action.pk) == "SENT"
    for _ in range(2):
        counts = scan(source).summary["counts"]
    action.refresh_from_db()
    assert action.delivery_state == "SENT", counts
