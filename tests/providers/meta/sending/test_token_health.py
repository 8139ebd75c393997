"""Token health: a 190 marks the source needs_reauth, its sends stop within one claim, doctor names it,
and re-authorising resumes them without a duplicate."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from ingress.models import Source
from ingress.services import source_reauthorized
from replies.models import ReplyAction
from replies.sender import claim, deliver, reply_send, reply_send_next
from replies.services import reply_approve
from tests.providers.meta.sending.conftest import applied, ig_comment_body, meta_source, sim

COMMENTS = [f"1790000000000010{i}" for i in range(4)]


@pytest.fixture
def approved_four(graph, db, deliver):
    """Four Instagram comments, each with an approved public reply to the simulator."""
    source = meta_source(graph, kind="instagram", purposes={"public_ack": "meta-comment-reply"})
    for comment in COMMENTS:
        sim(
            graph,
            "/_sim/comments",
            {
                "account": source.account_ref,
                "media_id": "17800000000000009",
                "id": comment,
                "text": "price?",
                "from_id": "17841400000000901",
            },
        )
        deliver(ig_comment_body(comment, "17800000000000009"))
    for action_id in ReplyAction.objects.order_by("id").values_list("id", flat=True):
        assert reply_approve(action_id=action_id, actor="reviewer_test").ok
    return source


def _190_mid_run(graph) -> int:
    """Send one, let Meta answer 190 to the next, then count what the following claims take."""
    assert reply_send_next()[1] == "SENT"
    sim(graph, "/_sim/faults", {"mode": "error", "code": 190, "subcode": 460, "status": 400, "count": 1})
    assert reply_send_next()[1] == "FAILED_BEFORE_SEND"
    claimed = 0
    while reply_send_next() is not None:
        claimed += 1
    return claimed


def test_a_190_stops_the_sources_sends_within_one_claim_and_reauthorising_resumes_once(approved_four, graph):
    """docs/platforms/meta.md#token-health: "A 190 mid-run stops that source's sends within one claim and `doctor` says so;
    restoring the token resumes without a duplicate." """
    source = approved_four
    assert _190_mid_run(graph) == 0
    source.refresh_from_db()
    assert source.needs_reauth
    waiting = ReplyAction.objects.filter(delivery_state="APPROVED")
    assert waiting.count() == 2 and set(waiting.values_list("attempt_count", flat=True)) == {
        0
    }  # no attempt used
    # The task path (send_reply by id) waits too.
    assert reply_send(action_id=waiting.first().pk) == "waiting_reauth"
    refused = ReplyAction.objects.get(last_error_code="token_invalid")
    assert refused.delivery_state == "FAILED_BEFORE_SEND" and refused.attempt_count == 1

    out = io.StringIO()
    with pytest.raises(SystemExit) as exit_:
        call_command("doctor", "--no-meta-check", stdout=out)
    assert exit_.value.code == 1
    assert "ig-test" in out.getvalue() and "needs re-authorisation" in out.getvalue()

    source_reauthorized(source_id=source.pk, actor="owner_test")
    while reply_send_next() is not None:
        pass
    assert set(ReplyAction.objects.values_list("delivery_state", flat=True)) == {"SENT"}
    assert applied(graph)["public"] == {c: 1 for c in COMMENTS}  # no comment got two replies
    assert not Source.objects.get(pk=source.pk).needs_reauth


def test_reauthorising_without_a_token_is_refused(approved_four, monkeypatch):
    Source.objects.filter(pk=approved_four.pk).update(needs_reauth=True)
    monkeypatch.delenv("CONDUIT_SOURCE_TEST_META_TOKEN")
    with pytest.raises(ValueError, match="no access token"):
        source_reauthorized(source_id=approved_four.pk, actor="owner_test")
    assert Source.objects.get(pk=approved_four.pk).needs_reauth


def test_positive_control_a_claim_that_ignores_needs_reauth_keeps_sending(approved_four, graph, monkeypatch):
    """The guard removed (the claim takes a source needing re-auth): the check above fails."""
    from django.db.models import Q

    def due_without_reauth(now):
        due = Q(pk__in=[])
        for state, condition in claim.CLAIMABLE.items():
            due |= Q(delivery_state=state, **condition(now))
        return due

    real_due_sql = claim._due_sql

    def due_sql_without_reauth(a):  # the claims' plain-SQL rule, the same guard taken away
        sql, count = real_due_sql(a)
        head, rest = sql.split(" AND NOT EXISTS (SELECT 1 FROM inbound_events e JOIN ingress_source s", 1)
        return head + " AND NOT EXISTS" + rest.split(" AND NOT EXISTS", 1)[1], count

    real_held = deliver._held
    monkeypatch.setattr(claim, "_due", due_without_reauth)
    monkeypatch.setattr(claim, "_due_sql", due_sql_without_reauth)
    monkeypatch.setattr(
        deliver,
        "_held",
        lambda action, now: "" if real_held(action, now) == "waiting_reauth" else real_held(action, now),
    )
    assert _190_mid_run(graph) > 0


def test_a_throttling_answer_pauses_the_account_until_metas_estimate(approved_four, graph):
    """docs/platforms/meta.md#send-budgets: "A throttling answer ... pause[s] that account until `estimated_time_to_regain_access`";
    the waiting sends are deferred, not failed, and use no attempt."""
    from django.utils import timezone

    from replies.models import SendBudget

    sim(
        graph, "/_sim/faults", {"mode": "error", "code": 80002, "status": 400, "count": 1, "retry_minutes": 2}
    )
    assert reply_send_next()[1] == "FAILED_BEFORE_SEND"
    budget = SendBudget.objects.get(source=approved_four, purpose="public_ack")
    assert budget.pause_reason == "throttled"
    assert 100 < (budget.paused_until - timezone.now()).total_seconds() <= 120
    assert reply_send_next() is None  # the account waits
    assert set(
        ReplyAction.objects.filter(delivery_state="APPROVED").values_list("attempt_count", flat=True)
    ) == {0}
    SendBudget.objects.filter(pk=budget.pk).update(paused_until=timezone.now())  # Meta's estimate passed
    ReplyAction.objects.filter(delivery_state="FAILED_BEFORE_SEND").update(next_attempt_at=timezone.now())
    while reply_send_next() is not None:
        pass
    assert applied(graph)["public"] == {c: 1 for c in COMMENTS}
