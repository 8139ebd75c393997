"""Unexpected receipts: a person acknowledges a reply the provider shows that Conduit closed,
has not sent, or never planned (UNEXPECTED_RECEIPT, UNKNOWN_RECEIPT findings).

Nothing can take a delivered reply back, and the repair table (docs/concepts/reconciliation.md#repairs)
allows no move for it,
so the decision is an acknowledgement: recorded on the finding (actor, time, reason), shown
in its report, and the finding leaves the queue and `doctor`. A later scan that sees the same
receipt with the action in the same state adds no new finding (reconcile.publication).
"""

from __future__ import annotations

import logging

from django.db import transaction

from reconcile.models import Decision, Finding
from reconcile.selectors import RECEIPT_KINDS
from reconcile.services import findings_decided
from replies.services import Result

logger = logging.getLogger("conduit.reconcile")


def unexpected_receipt_acknowledge(*, finding_id: int, actor: str, reason: str) -> Result:
    """Record a person's acknowledgement of an unexpected receipt (Decision.CLOSED: the finding
    is closed; the reply ledger is not moved)."""
    reason = reason.strip()
    if not reason:
        return Result(False, "give a reason: it is kept in the report")
    with transaction.atomic():
        finding = Finding.objects.select_for_update().get(pk=finding_id)
        if finding.kind not in RECEIPT_KINDS:
            return Result(False, "only an unexpected receipt can be acknowledged here")
        if finding.decision:
            return Result(False, f"already acknowledged by {finding.decided_by}")
        state = finding.action.delivery_state if finding.action_id else "no action"
        result = Result(True, f"acknowledged: the provider holds this reply; the ledger keeps {state}")
        findings_decided(
            findings=Finding.objects.filter(pk=finding.pk),
            decision=Decision.CLOSED,
            actor=actor,
            reason=reason,
            result=result.message,
        )
    logger.info("unexpected receipt acknowledged finding=%s", finding_id)
    return result
