"""Reads of one reconciliation report: its decisions, its repair outcomes, its JSON export."""

from __future__ import annotations

from typing import Any

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
    if finding.decision:
        row.update({f: getattr(finding, f) for f in DECISION_FIELDS})
        row["decided_at"] = finding.decided_at.isoformat()
    return row


def report_decisions(report) -> list[dict[str, Any]]:
    """Every human decision taken on the report's findings, oldest first: the retry-candidate
    queue's and the unknown-send queue's alike (both record on the finding)."""
    decided = report.findings.exclude(decision="").order_by("decided_at", "id")
    return [_finding_row(f) for f in decided]


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
    }
    yield json.dumps(head)[:-1] + ', "findings": ['
    first = True
    for finding in report.findings.order_by("id").iterator(chunk_size=2000):
        yield ("" if first else ",") + json.dumps(_finding_row(finding))
        first = False
    yield "]}"
