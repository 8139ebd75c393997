"""Findings: each difference a person decides, written once per kind and subject."""

from __future__ import annotations

from django.db import connection
from django.db.models import Exists, F, OuterRef, Q, QuerySet

from reconcile.models import Finding, FindingKind, ReconcileReport, ReconcileRun, Repair, RepairOutcome
from reconcile.publication.compare import Comparison
from reconcile.selectors import PERSON_KINDS, RECEIPT_KINDS

# -- report -----------------------------------------------------------------

# Findings a person closes (decides or acknowledges). While one is open for a reply, a scan
# that finds the same thing again counts it in the report but adds no second row, so the
# queues and doctor agree; the database refuses a second open row
# (reconcile migration 0006, `finding_one_open_per_reply_kind`).
# A receipt a person acknowledged stays acknowledged while the action stays in the state seen.


def already_recorded(kind: str, *, actions: bool) -> Q:
    """Rows (reply actions, or staged receipts) whose finding of `kind` is already open, or,
    for a receipt kind, already acknowledged for the action state this row shows."""
    same = Finding.objects.filter(kind=kind, reply_key=OuterRef("reply_key"))
    recorded = Exists(same.filter(decision=""))
    if kind in RECEIPT_KINDS:
        state = OuterRef("delivery_state") if actions else ""
        recorded |= Exists(same.filter(action_state=state))
    return recorded


def _findings_write(
    report: ReconcileReport,
    kind: str,
    rows: QuerySet,
    repair: str,
    detail: str,
    *,
    actions: bool,
    total: int | None,
) -> int:
    """Write one finding per row (reply actions, or else staged receipts), in one statement
    inside the database (no table is held in memory).

    A kind a person closes gets no second row for a reply while one is open (PERSON_KINDS).
    Returns how many rows were left out for that reason: `total` (the kind's count in the
    report, when the caller has it) less the rows written."""
    found = rows
    if kind in PERSON_KINDS:
        rows = rows.filter(~already_recorded(kind, actions=actions))
    fields = ("event_id", "reply_key", "id", "delivery_state") if actions else ("event_key", "reply_key")
    written = _findings_insert_select(report, kind, rows.order_by(), fields, repair, detail)
    if kind not in PERSON_KINDS:
        return 0
    # Left out = found - written (one count, or none when the report counted the kind already).
    return max(0, (found.count() if total is None else total) - written)


def _findings_insert_select(
    report: ReconcileReport, kind: str, rows: QuerySet, fields: tuple[str, ...], repair: str, detail: str
) -> int:
    """One INSERT ... SELECT: the comparison's rows become findings inside the database, none
    read into Python (a set-based statement on PostgreSQL and SQLite alike)."""
    # Positional aliases c0.. so the outer SELECT names them alike whatever the row's model.
    rows = rows.values(**{f"c{i}": F(name) for i, name in enumerate(fields)})
    select, params = rows.query.get_compiler(connection=connection).as_sql()
    # Rows carry 1 (events), 2 (receipts) or 4 (actions) columns: the rest take their defaults.
    picked = [f"r.c{i}" for i in range(len(fields))] + ["''", "''", "NULL", "''"][len(fields) :]
    qn = connection.ops.quote_name
    columns = [
        "report",
        "kind",
        "event_key",
        "reply_key",
        "action",
        "action_state",
        "repair",
        "repair_outcome",
        "detail",
        "repair_code",
        "decision",
        "decided_by",
        "decision_reason",
        "decision_result",
    ]
    names = ", ".join(qn(Finding._meta.get_field(c).column) for c in columns)
    outcome = RepairOutcome.PLANNED if repair != Repair.NONE else ""
    sql = (
        f"INSERT INTO {qn(Finding._meta.db_table)} ({names}) "
        f"SELECT %s, %s, {', '.join(picked)}, %s, %s, %s, '', '', '', '', '' FROM ({select}) r"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [report.pk, kind, repair, outcome, detail, *params])
        return cursor.rowcount


# The event ledger's findings: the comparison's set each is, the report count its rows are,
# its repair and its detail. No kind here is one a person closes, so every row found is
# written, and the insert's row count is the report's count (no second pass to count it).
EVENT_FINDINGS = (
    (
        FindingKind.MISSING_LOCAL,
        "missing",
        "missing_found",
        Repair.REPLAYED,
        "the source has it and Conduit did not: replayed through ingest, replies held for review",
    ),
    (
        FindingKind.IDENTITY_CONFLICT,
        "conflicting",
        "identity_conflicts",
        Repair.NONE,
        "the source's payload differs from the one first accepted: the first stays",
    ),
    (
        FindingKind.SOURCE_UNVERIFIED,
        "unverified",
        "source_unverified",
        Repair.MARKED_UNVERIFIED,
        "no source evidence in this window: kept, marked SOURCE_UNVERIFIED",
    ),
)


def event_findings_write(report: ReconcileReport, comparison: Comparison) -> dict[str, int]:
    """The event ledger's findings (EVENT_FINDINGS); returns their report counts by name."""
    return {
        count: _findings_insert_select(
            report, kind, getattr(comparison, rows).order_by(), ("event_key",), repair, detail
        )
        for kind, rows, count, repair, detail in EVENT_FINDINGS
    }


def findings_write(
    report: ReconcileReport, run: ReconcileRun, comparison: Comparison, counts: dict[str, int] | None = None
) -> dict[str, int]:
    """Every finding of the report, each kind with the repair it plans
    (docs/concepts/reconciliation.md#repairs).

    Returns, per kind a person closes, how many this scan found again while already open
    (counted in the report, recorded once)."""
    event_findings_write(report, comparison)
    return reply_findings_write(report, run, comparison, counts)


def reply_findings_write(
    report: ReconcileReport, run: ReconcileRun, comparison: Comparison, counts: dict[str, int] | None = None
) -> dict[str, int]:
    """The reply ledger's and the page's findings; returns what findings_write returns."""
    c = comparison
    carried = {}
    # The report's own counts of the kinds a person closes (the same sets), so that what was
    # found again is the count less the rows written, without counting the sets again.
    totals = {
        FindingKind.RETRY_CANDIDATE: "retry_candidates",
        FindingKind.UNEXPECTED_RECEIPT: "unexpected_receipts",
        FindingKind.UNKNOWN_RECEIPT: "unknown_receipts",
    }
    total = {kind: counts[name] for kind, name in totals.items()} if counts else {}
    for kind, rows, repair, detail in (
        (
            FindingKind.RECEIPT_ATTACHED,
            c.attach,
            Repair.RECEIPT_ATTACHED,
            "the provider shows this reply applied: receipt attached, SENT",
        ),
        (
            FindingKind.RECEIPT_MISSING,
            c.lost,
            Repair.MARKED_UNKNOWN,
            "SENT locally, but the provider shows no such reply: SEND_STATUS_UNKNOWN, nothing resent",
        ),
        (
            FindingKind.RETRY_CANDIDATE,
            c.candidates,
            Repair.NONE,
            "no receipt on the provider's thread: a person decides whether the same key may run again",
        ),
        (
            FindingKind.UNEXPECTED_RECEIPT,
            c.unexpected,
            Repair.NONE,
            "the provider shows a reply for an action Conduit did not send",
        ),
        (
            FindingKind.NO_STATUS,
            c.silent,
            Repair.NONE,
            "SENT, but the platform has reported no status of the message since: nothing resent",
        ),
    ):
        if rows is None:  # a set the source cannot have (c.silent: no route expects statuses)
            carried[kind] = 0
            continue
        carried[kind] = _findings_write(
            report, kind, rows, repair, detail, actions=True, total=total.get(kind)
        )
    carried[FindingKind.UNKNOWN_RECEIPT] = _findings_write(
        report,
        FindingKind.UNKNOWN_RECEIPT,
        c.unknown_receipts,
        Repair.NONE,
        "the provider shows a reply under a key Conduit never planned",
        actions=False,
        total=total.get(FindingKind.UNKNOWN_RECEIPT),
    )
    # At most MAX_KEPT_REJECTIONS (reconcile.staging) rows: one insert.
    Finding.objects.bulk_create(
        [
            Finding(
                report=report,
                kind=FindingKind.INVALID_SOURCE_ITEM,
                detail=f"page {r['page']} item {r['index']}: {r['code']}",
            )
            for r in run.rejections
        ]
    )
    return {kind: carried[kind] for kind in PERSON_KINDS}
