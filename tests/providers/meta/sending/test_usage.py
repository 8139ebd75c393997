"""Usage headers near the limit pause the account on success: Meta answered the reply, and its
X-Business-Use-Case-Usage says the account is at >= 90 %, so the account's next sends wait."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from replies.models import ReplyAction, SendBudget
from replies.sender import reply_send
from replies.services import reply_approve
from tests.providers.meta.sending.conftest import applied, ig_comment_body, meta_source, sim

MEDIA = "17800000000000601"
COMMENTS = ["17900000000000601", "17900000000000602"]


@pytest.fixture
def two_approved(graph, db, deliver, monkeypatch):
    from replies import sender

    monkeypatch.setattr(sender, "enqueue_send", lambda action_id: None)
    source = meta_source(graph, kind="instagram", purposes={"public_ack": "meta-comment-reply"})
    for comment in COMMENTS:
        sim(
            graph,
            "/_sim/comments",
            {
                "account": source.account_ref,
                "media_id": MEDIA,
                "id": comment,
                "text": "price?",
                "from_id": "17841400000000901",
            },
        )
        deliver(ig_comment_body(comment, MEDIA))
    actions = list(ReplyAction.objects.order_by("id"))
    for action in actions:
        assert reply_approve(action_id=action.pk, actor="reviewer_test").ok
    return source, actions


def test_a_success_with_usage_near_the_limit_pauses_the_account(two_approved, graph):
    """docs/platforms/meta.md#send-budgets: "A throttling answer or usage headers near the limit pause that account until
    `estimated_time_to_regain_access`"."""
    source, (first, second) = two_approved
    sim(graph, "/_sim/faults", {"mode": "usage", "call_count": 95, "retry_minutes": 2, "method": "POST"})
    assert reply_send(action_id=first.pk) == "SENT"
    budget = SendBudget.objects.get(source=source, purpose="public_ack")
    assert budget.pause_reason == "usage_near_limit"
    assert (
        timezone.now() + timedelta(seconds=110)
        < budget.paused_until
        < timezone.now() + timedelta(seconds=125)
    )
    assert reply_send(action_id=second.pk) == "deferred_budget"
    assert applied(graph)["public"] == {COMMENTS[0]: 1}


def test_usage_below_the_limit_pauses_nothing(two_approved, graph):
    """Positive control of the threshold: at 50 % both send."""
    source, (first, second) = two_approved
    sim(graph, "/_sim/faults", {"mode": "usage", "call_count": 50, "retry_minutes": 2, "method": "POST"})
    assert reply_send(action_id=first.pk) == "SENT"
    assert reply_send(action_id=second.pk) == "SENT"
    assert not SendBudget.objects.filter(source=source, paused_until__isnull=False).exists()
