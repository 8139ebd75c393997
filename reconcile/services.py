"""Reconciliation's writes a person asks for: a scan now, and decisions on retry candidates and
unknown sends (each recorded on the findings, docs/concepts/reconciliation.md#decisions: "the
report records every human decision").

The machinery lives in its own rooms: reconcile.scan (lease, read, stage),
reconcile.publication (compare, report, repair, checkpoint) and reconcile.poll.
"""

from __future__ import annotations

import logging

from django.db import transaction

from ingress.models import Source
from reconcile import clock
from reconcile.lease import scan_state_for
from reconcile.models import Decision, Finding, FindingKind, ScanState
from replies.services import (
    Result,
    reply_close,
    unknown_authorize_retry,
    unknown_confirm_sent,
)

logger = logging.getLogger("conduit.reconcile")

UNKNOWN_SEND_DECISIONS = {
    "confirm_sent": Decision.CONFIRMED_SENT,
    "authorize_retry": Decision.RETRY_AUTHORIZED,
    "close": Decision.CLOSED,
}


def reconcile_request(*, source: Source, actor: str) -> None:
    """An operator asks for a scan: the source stays due until one that starts after this completes."""
    scan_state_for(source)
    now = clock.now()
    ScanState.objects.filter(source=source).update(requested_at=now, requested_by=actor, next_due_at=now)
    logger.info("reconcile requested source=%s actor=%s", source.name, actor)


def finding_decide(*, finding_id: int, decision: str, actor: str, reason: str) -> Result:
    """A person decides a RETRY_CANDIDATE: retry under the same reply key, or close.

    Retry goes through the sender's own unknown-send path, which looks the
    receipt up again first; close goes through the reply ledger's close.
    Actor, time and reason are kept on the finding and appear in its report.
    The reply move and the finding's decision commit in one transaction (the
    sender's own atomic blocks nest as savepoints).
    """
    reason = reason.strip()
    if not reason:
        return Result(False, "give a reason: it is kept in the report")
    if decision not in (Decision.RETRY_AUTHORIZED, Decision.CLOSED):
        return Result(False, f"a decision is one of {Decision.RETRY_AUTHORIZED}, {Decision.CLOSED}")
    with transaction.atomic():
        finding = Finding.objects.select_for_update().get(pk=finding_id)
        if finding.kind != FindingKind.RETRY_CANDIDATE or finding.action_id is None:
            return Result(False, "only a retry candidate with its action can be decided")
        if finding.decision:
            return Result(False, f"already decided: {finding.decision} by {finding.decided_by}")
        # The reply ledger's compare-and-set decides a race between two people:
        # the second finds the action no longer in SEND_STATUS_UNKNOWN.
        if decision == Decision.RETRY_AUTHORIZED:
            result = unknown_authorize_retry(action_id=finding.action_id, actor=actor)
        else:
            result = reply_close(
                action_id=finding.action_id, actor=actor, reason_code="closed_after_reconcile"
            )
        if result.ok:
            _candidates_decided(
                action_id=finding.action_id, decision=decision, actor=actor, reason=reason, result=result
            )
    logger.info("finding decided finding=%s decision=%s ok=%s", finding_id, decision, result.ok)
    return result


def _candidates_decided(*, action_id: int, decision: str, actor: str, reason: str, result: Result) -> int:
    """Every undecided RETRY_CANDIDATE finding of the action records the decision (a candidate
    found by several scans is one decision), in the caller's transaction."""
    return Finding.objects.filter(kind=FindingKind.RETRY_CANDIDATE, action_id=action_id, decision="").update(
        decision=decision,
        decided_by=actor,
        decided_at=clock.now(),
        decision_reason=reason[:500],
        decision_result=result.message[:256],
    )


def unknown_send_decide(
    *, action_id: int, how: str, actor: str, note: str = "", close_reason: str = "closed_by_operator"
) -> Result:
    """A person resolves an action in the unknown-send queue; its open RETRY_CANDIDATE findings
    record the decision in the same transaction as the reply move (docs/concepts/reconciliation.md#decisions:
    the report records every human decision). `note` is the receipt id for `confirm_sent`."""
    if how not in UNKNOWN_SEND_DECISIONS:
        raise ValueError(f"unknown decision {how!r}")
    with transaction.atomic():
        # Lock the open findings first, so a concurrent finding_decide waits and then sees them decided.
        list(
            Finding.objects.select_for_update()
            .filter(kind=FindingKind.RETRY_CANDIDATE, action_id=action_id, decision="")
            .values_list("pk", flat=True)
        )
        if how == "confirm_sent":
            result = unknown_confirm_sent(action_id=action_id, actor=actor, provider_reply_id=note)
            reason = "confirmed sent in the unknown-send queue (receipt verified by the person)"
        elif how == "authorize_retry":
            result = unknown_authorize_retry(action_id=action_id, actor=actor)
            reason = note or "retry authorized in the unknown-send queue"
        else:
            result = reply_close(action_id=action_id, actor=actor, reason_code=close_reason)
            reason = note or "closed in the unknown-send queue"
        if result.ok:
            _candidates_decided(
                action_id=action_id,
                decision=UNKNOWN_SEND_DECISIONS[how],
                actor=actor,
                reason=reason,
                result=result,
            )
    logger.info("unknown send decided action=%s how=%s ok=%s", action_id, how, result.ok)
    return result
