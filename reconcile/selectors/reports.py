"""Reads of one reconciliation report: its decisions, its repair outcomes, its JSON export."""

from __future__ import annotations

from typing import Any

from django.db.models import Exists, OuterRef, Q

from ingress.models import QuarantineReceipt
from reconcile.models import Finding, ReconcileReport

DECISION_FIELDS = ("decision", "decided_by", "decided_at", "decision_reason", "decision_result")


def _finding_row(finding) -> dict[str, Any]:
    row = {
        "kind": finding.kind,
        "event_key": finding.event_key,
        "reply_key": finding.reply_key,
        "repair": finding.repair,
        "repair_outcome": finding.repair_outcome,
        "detail": finding.detail,
    }
    if finding.repair_code:
        row["repair_code"] = finding.repair_code
    if finding.quarantine_receipt:
        row["quarantine_receipt"] = str(finding.quarantine_receipt)
    if finding.decision:
        row.update({f: getattr(finding, f) for f in DECISION_FIELDS})
        row["decided_at"] = finding.decided_at.isoformat()
    return row


def report_decisions(report) -> list[dict[str, Any]]:
    """Every human decision taken on the report's findings, whenever taken, oldest first: each
    queue records on the finding (reconcile.services)."""
    decided = report.findings.exclude(decision="").order_by("decided_at", "id")
    return [_finding_row(f) for f in decided]


def report_later_decisions(report) -> list[dict[str, Any]]:
    """The decisions a person took on the source after the report before this one was written,
    up to this one: on earlier reports' findings (each row names its `report`), and quarantine
    reviews of the source's receipts that no finding carries (those are a finding's decision).
    So a decision taken after its own report is written is in the next report too."""
    previous = (
        ReconcileReport.objects.filter(source_id=report.source_id, pk__lt=report.pk)
        .order_by("-pk")
        .values_list("created_at", flat=True)
        .first()
    )

    def since_previous(field: str) -> Q:
        return Q(**{f"{field}__lte": report.created_at}) & (
            Q(**{f"{field}__gt": previous}) if previous else Q()
        )

    earlier = (
        Finding.objects.filter(
            since_previous("decided_at"), report__source_id=report.source_id, report_id__lt=report.pk
        )
        .exclude(decision="")
        .order_by("decided_at", "id")
    )
    rows = [{**_finding_row(f), "report": f.report_id} for f in earlier]
    reviews = (
        QuarantineReceipt.objects.filter(since_previous("reviewed_at"), source_id=report.source_id)
        .exclude(Exists(Finding.objects.filter(quarantine_receipt=OuterRef("receipt_id"))))
        .order_by("reviewed_at", "id")
    )
    rows += [
        {
            "kind": "QUARANTINE_RECEIPT",
            "receipt_id": str(r.receipt_id),
            "reason_code": r.reason_code,
            "decision": r.state,
            "decided_by": r.reviewed_by,
            "decided_at": r.reviewed_at.isoformat(),
            "decision_reason": r.review_note[:500],
            "decision_result": f"quarantine receipt {r.state.lower()}",
        }
        for r in reviews
    ]
    return sorted(rows, key=lambda row: row["decided_at"])


def repair_outcomes(report) -> dict[str, int]:
    """How the report's planned repairs ended: applied, refused, failed, still planned."""
    from django.db.models import Count

    rows = (
        report.findings.exclude(repair_outcome="").order_by().values("repair_outcome").annotate(n=Count("id"))
    )
    return {row["repair_outcome"]: row["n"] for row in rows}


def report_json_chunks(report):
    """The report as one JSON document, streamed: summary, decisions, then every finding."""
    import json

    head = {
        **report.summary,
        "report": report.pk,
        "created_at": report.created_at.isoformat(),
        "repair_outcomes": repair_outcomes(report),
        "decisions": report_decisions(report),
        "decisions_since_previous_report": report_later_decisions(report),
    }
    yield json.dumps(head)[:-1] + ', "findings": ['
    first = True
    for finding in report.findings.order_by("id").iterator(chunk_size=2000):
        yield ("" if first else ",") + json.dumps(_finding_row(finding))
        first = False
    yield "]}"
