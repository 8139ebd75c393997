"""Reconciliation's writes a person asks for: a scan now, decisions on retry candidates and
unknown sends (each recorded on the findings, docs/concepts/reconciliation.md#decisions: "the
report records every human decision"), and the record of an acceptance run.

The machinery lives in its own rooms: reconcile.scan (lease, read, stage),
reconcile.publication (compare, report, repair, checkpoint) and reconcile.poll.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db.models import QuerySet

from conduit.code_version import code_version
from ingress.models import Source
from reconcile import clock
from reconcile.lease import scan_state_for
from reconcile.models import AcceptanceRun, Decision, Finding, FindingKind, ScanState
from replies.services import Result, reply_close, unknown_authorize_retry

logger = logging.getLogger("conduit.reconcile")

# What a person's resolution of a reply action (replies' `person_resolved`) records on its findings.
RESOLUTION_DECISIONS = {
    "confirm_sent": Decision.CONFIRMED_SENT,
    "authorize_retry": Decision.RETRY_AUTHORIZED,
    "retry_now": Decision.RETRY_AUTHORIZED,
    "close": Decision.CLOSED,
}
# The findings that resolution decides: the action's sends that a scan left to a person (a SENT
# reply whose receipt went missing, marked unknown; an unknown send a retry may be safe for).
DECIDED_BY_RESOLUTION = (FindingKind.RECEIPT_MISSING, FindingKind.RETRY_CANDIDATE)
# What a person's quarantine review records on the findings its receipt explains.
REVIEW_DECISIONS = {"DISMISSED": Decision.DISMISSED, "CORRECTED": Decision.CORRECTED}


def reconcile_request(*, source: Source, actor: str) -> None:
    """An operator asks for a scan: the source stays due until one that starts after this completes."""
    scan_state_for(source)
    now = clock.now()
    ScanState.objects.filter(source=source).update(requested_at=now, requested_by=actor, next_due_at=now)
    logger.info("reconcile requested source=%s actor=%s", source.name, actor)


def finding_decide(*, finding_id: int, decision: str, actor: str, reason: str) -> Result:
    """A person decides a RETRY_CANDIDATE: retry under the same reply key, or close.

    Retry goes through the sender's own unknown-send path, which looks the receipt up again
    first; close goes through the reply ledger's close. Either records the decision on the
    action's open findings (`decision_record_resolution`, in the move's transaction) with this
    reason; a race between two people is the reply ledger's compare-and-set: the second finds the
    action no longer in SEND_STATUS_UNKNOWN, and the finding keeps the first decision.
    """
    reason = reason.strip()
    if not reason:
        return Result(False, "give a reason: it is kept in the report")
    if decision not in (Decision.RETRY_AUTHORIZED, Decision.CLOSED):
        return Result(False, f"a decision is one of {Decision.RETRY_AUTHORIZED}, {Decision.CLOSED}")
    finding = Finding.objects.get(pk=finding_id)
    if finding.kind != FindingKind.RETRY_CANDIDATE or finding.action_id is None:
        return Result(False, "only a retry candidate with its action can be decided")
    if finding.decision:
        return Result(False, f"already decided: {finding.decision} by {finding.decided_by}")
    if decision == Decision.RETRY_AUTHORIZED:
        result = unknown_authorize_retry(action_id=finding.action_id, actor=actor, reason=reason)
    else:
        result = reply_close(
            action_id=finding.action_id, actor=actor, reason_code="closed_after_reconcile", reason=reason
        )
    logger.info("finding decided finding=%s decision=%s ok=%s", finding_id, decision, result.ok)
    return result


def findings_decided(*, findings: QuerySet, decision: str, actor: str, reason: str, result: str) -> int:
    """Record one person's decision on those of `findings` still undecided, in the caller's
    transaction (a finding a later scan found again is one decision); how many it recorded."""
    return findings.filter(decision="").update(
        decision=decision,
        decided_by=actor,
        decided_at=clock.now(),
        decision_reason=reason[:500],
        decision_result=result[:256],
    )


def decision_record_resolution(
    *, action_id: int, how: str, actor: str, reason: str, result: str, **_
) -> None:
    """replies' `person_resolved`: the action's open RECEIPT_MISSING and RETRY_CANDIDATE findings
    record the person's decision, whichever queue it was taken in
    (docs/concepts/reconciliation.md#decisions: the report records every human decision)."""
    findings = Finding.objects.filter(action_id=action_id, kind__in=DECIDED_BY_RESOLUTION)
    n = findings_decided(
        findings=findings, decision=RESOLUTION_DECISIONS[how], actor=actor, reason=reason, result=result
    )
    if n:
        logger.info("resolution recorded action=%s how=%s findings=%s", action_id, how, n)


def decision_record_review(*, receipt_id: str, outcome: str, actor: str, note: str, **_) -> None:
    """ingress' `quarantine_reviewed`: the findings whose repair this receipt refused (a replay
    ingest quarantined) record the review."""
    findings = Finding.objects.filter(quarantine_receipt=receipt_id)
    said = "dismissed" if outcome == "DISMISSED" else "marked corrected"
    n = findings_decided(
        findings=findings,
        decision=REVIEW_DECISIONS[outcome],
        actor=actor,
        reason=note or f"quarantine receipt {said} by a person",
        result=f"quarantine receipt {receipt_id} {said}",
    )
    if n:
        logger.info("quarantine review recorded receipt=%s findings=%s", receipt_id, n)


def acceptance_run_record(
    *, ran_by: str, started_at: datetime, finished_at: datetime, failed_check: str = ""
) -> AcceptanceRun:
    """Record one `manage.py acceptance` run on this deployment (its database), on the code version
    running now: passed when no check failed and no control stayed green (`failed_check` names the
    first that did). Called after the run's throwaway database is gone, so the row is the real one's."""
    run = AcceptanceRun.objects.create(
        ran_by=ran_by,
        started_at=started_at,
        finished_at=finished_at,
        code_version=code_version(),
        passed=not failed_check,
        failed_check=failed_check[:300],
    )
    logger.info(
        "acceptance run=%s passed=%s code_version=%s ran_by=%s", run.pk, run.passed, run.code_version, ran_by
    )
    return run
