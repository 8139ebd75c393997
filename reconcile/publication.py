"""A complete generation's publication: compare, report, repair, then checkpoint and publish.

The final page's transaction compares the staged generation with both ledgers
and writes the report and its findings (seed 000: "write a report before any
repair"); the run moves to REPAIRING. Repairs then run in their own
transactions (reconcile.repairs); a last transaction counts on the report what
the replay of the missing events did (REPLAY_COUNTS), drops the staging,
advances the checkpoint and publishes the run. A crash in between leaves the
run REPAIRING: the next page call finishes it (`run_publish`) before anything else.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime

from django.db import connection, transaction
from django.db.models import (
    BooleanField,
    Case,
    Count,
    Exists,
    F,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
    When,
)

from conduit.providers.base import COMPLETE
from conduit.providers.registry import get_adapter, reads_off_host
from conduit.statemachine import transition
from conduit.timefmt import iso_z
from ingress.models import InboundEvent, QuarantineReceipt, QuarantineState, Source
from reconcile import clock
from reconcile.lease import LeaseLost, lease_check
from reconcile.models import (
    RUN_TABLE,
    Finding,
    FindingKind,
    ReconcileReport,
    ReconcileRun,
    ReconcileRunTransition,
    Repair,
    RepairOutcome,
    RunState,
    ScanState,
    StagedEvent,
    StagedReceipt,
)
from reconcile.repairs import CHUNK, RECONCILE_ACTOR, repairs_apply
from reconcile.schedule import schedule_after_publication
from reconcile.selectors import (
    PERSON_KINDS,
    RECEIPT_KINDS,
    open_retry_candidates,
    open_unexpected_receipts,
)
from reconcile.staging import bulk_session, staging_drop
from replies.models import DeliveryState as S
from replies.models import ReplyAction, ReplyRoute

logger = logging.getLogger("conduit.reconcile")

# A report's counts, in the order pages and printouts show them (JSON storage may reorder keys).
REPORT_COUNTS = (
    "events_compared", "events_local", "events_matched", "missing_found", "missing_recovered",
    "missing_replay_refused", "missing_replay_failed", "identity_conflicts", "source_unverified",
    "duplicates_converged", "actions_compared", "replies_confirmed", "receipts_attached",
    "sent_without_receipt", "retry_candidates", "unknown_sends", "sending_in_flight", "suppressed_actions",
    "unexpected_receipts", "unknown_receipts", "receipts_not_compared", "invalid_source_items",
    "quarantined_inputs", "page_calls", "external_calls",
)
UNCONFIRMED = (S.SENDING, S.SEND_STATUS_UNKNOWN)
# The counts of what the replay of the missing events did, by the outcome on their MISSING_LOCAL
# findings. The report is written before any repair (seed 000), so these are null in it until the
# repairs have run; the publishing transaction writes them. `missing_recovered` is seed 000's
# "missing records recovered": replays ingest applied, never one it refused.
REPLAY_COUNTS = {
    RepairOutcome.APPLIED: "missing_recovered",
    RepairOutcome.REFUSED: "missing_replay_refused",
    RepairOutcome.FAILED: "missing_replay_failed",
}


def _elapsed_ms(since: float) -> int:
    return round((time.monotonic() - since) * 1000)


# -- compare ------------------------------------------------------------------

@dataclass(frozen=True)
class Comparison:
    """The staged generation against both ledgers, as querysets not yet read."""

    local: QuerySet  # the source's events in the run's window
    missing: QuerySet  # staged, no local event under the key
    conflicting: QuerySet  # staged, a local event under the key with another payload
    matched: QuerySet  # local, staged with the same payload
    unverified: QuerySet  # local, not staged
    actions: QuerySet  # reply actions on staged events, annotated with the staged receipt
    attach: QuerySet  # a receipt for an action not yet confirmed
    lost: QuerySet  # SENT locally, no receipt
    candidates: QuerySet  # SEND_STATUS_UNKNOWN, no receipt
    unexpected: QuerySet  # a receipt for an action that was never sent
    unknown_receipts: QuerySet  # a receipt under a key Conduit never planned
    receipt: QuerySet  # the staged receipt of an outer action (for Exists/Subquery)
    compared_purposes: list[str] | None  # purposes whose receipts the read shows whenever they exist


def _local_in_window(source: Source, run: ReconcileRun) -> QuerySet:
    events = InboundEvent.objects.filter(source=source)
    if run.since is not None:
        events = events.filter(occurred_at__gte=run.since)
    if run.until is not None:
        events = events.filter(occurred_at__lt=run.until)
    return events


def recoverable(source: Source, events: QuerySet) -> QuerySet:
    """The events of families a complete read shows whole (seed 004's declaration): only their
    absence from the source says anything. A limited or unrecoverable family is never unverified."""
    adapter = get_adapter(source.adapter)
    declared = {family.event_type: family.recovery == COMPLETE for family in adapter.families}
    if adapter.undeclared_family("").recovery == COMPLETE:
        return events.exclude(event_type__in=sorted(t for t, whole in declared.items() if not whole))
    return events.filter(event_type__in=sorted(t for t, whole in declared.items() if whole))


def compared_purposes(source: Source) -> list[str] | None:
    """The purposes whose receipts the source's read shows whenever they exist (the reader's
    `receipt_transports`): only for their actions is "no receipt" a finding. None: every purpose."""
    transports = get_adapter(source.adapter).receipt_transports
    if transports is None:
        return None
    routes = ReplyRoute.objects.filter(source=source, transport_name__in=sorted(transports))
    return sorted(routes.values_list("purpose", flat=True))


def generation_compare(source: Source, run: ReconcileRun) -> Comparison:
    staged = StagedEvent.objects.filter(run=run)
    local = _local_in_window(source, run)
    same_key = InboundEvent.objects.filter(event_key=OuterRef("event_key"))
    in_source = staged.filter(event_key=OuterRef("event_key"))
    receipt = StagedReceipt.objects.filter(run=run, reply_key=OuterRef("reply_key"))
    actions = ReplyAction.objects.filter(
        Exists(staged.filter(event_key=OuterRef("event_id")))
    ).annotate(receipt_id=Subquery(receipt.values("provider_reply_id")[:1]))
    # EXISTS, not the annotated subquery's value: the database joins the staged receipts
    # once (a hash semi/anti-join) instead of probing them again for every action.
    with_receipt = Q(Exists(receipt))
    without_receipt = ~with_receipt
    purposes = compared_purposes(source)
    # An empty IN cannot be compiled into the findings' INSERT ... SELECT: a plain false instead.
    compared = actions if purposes is None else actions.filter(
        purpose__in=purposes) if purposes else actions.filter(Value(False, output_field=BooleanField()))
    return Comparison(
        local=local,
        missing=staged.filter(~Exists(same_key)),
        conflicting=staged.filter(Exists(same_key.exclude(payload_hash=OuterRef("payload_hash")))),
        matched=local.filter(Exists(in_source.filter(payload_hash=OuterRef("payload_hash")))),
        unverified=recoverable(source, local).filter(~Exists(in_source)),
        actions=actions,
        attach=actions.filter(with_receipt, delivery_state__in=UNCONFIRMED),
        lost=compared.filter(without_receipt, delivery_state=S.SENT),
        candidates=compared.filter(without_receipt, delivery_state=S.SEND_STATUS_UNKNOWN),
        compared_purposes=purposes,
        unexpected=actions.filter(with_receipt).exclude(delivery_state__in=(*UNCONFIRMED, S.SENT)),
        unknown_receipts=StagedReceipt.objects.filter(run=run).filter(
            ~Exists(ReplyAction.objects.filter(reply_key=OuterRef("reply_key")))),
        receipt=receipt,
    )


def _actions_by_state(comparison: Comparison) -> dict[tuple[str, bool, bool], int]:
    """Every action count from one grouped read: (state, has a receipt, compared) -> actions."""
    purposes = comparison.compared_purposes
    compared = Value(True) if purposes is None else Case(
        When(purpose__in=purposes, then=Value(True)), default=Value(False),
        output_field=BooleanField()) if purposes else Value(False)
    grouped = comparison.actions.annotate(has_receipt=Exists(comparison.receipt), is_compared=compared).values(
        "delivery_state", "has_receipt", "is_compared")
    return {(row["delivery_state"], row["has_receipt"], row["is_compared"]): row["n"]
            for row in grouped.annotate(n=Count("pk")).order_by()}


def report_counts(source: Source, run: ReconcileRun, comparison: Comparison,
                  found: dict[str, int] | None = None) -> dict[str, int]:
    """The report's counts, in the order of REPORT_COUNTS.

    `found` holds the counts of EVENT_FINDINGS as their inserts wrote them; without it
    those sets are counted here."""
    if found is None:
        found = {count: getattr(comparison, rows).count() for _, rows, count, _, _ in EVENT_FINDINGS}
    by_state = _actions_by_state(comparison)

    def n(*states: str, receipt: bool | None = None, compared: bool | None = None) -> int:
        return sum(v for (state, has, seen), v in by_state.items()
                   if state in states and (receipt is None or has == receipt)
                   and (compared is None or seen == compared))

    quarantined = QuarantineReceipt.objects.filter(source=source, state=QuarantineState.QUARANTINED)
    if run.since is not None:
        quarantined = quarantined.filter(received_at__gte=run.since)
    attached = n(*UNCONFIRMED, receipt=True)
    # One pass over the matched events for both of their counts.
    matched = comparison.matched.aggregate(n=Count("pk"), duplicates=Sum(F("seen_count") - 1))
    lost = n(S.SENT, receipt=False, compared=True)
    candidates = n(S.SEND_STATUS_UNKNOWN, receipt=False, compared=True)
    return {
        "events_compared": run.staged_events,
        "events_local": comparison.local.count(),
        "events_matched": matched["n"],
        "missing_found": found["missing_found"],
        # What the replay did: not known until the repairs have run (replay_counts_record).
        **dict.fromkeys(REPLAY_COUNTS.values()),
        "identity_conflicts": found["identity_conflicts"],
        "source_unverified": found["source_unverified"],
        "duplicates_converged": matched["duplicates"] or 0,
        "actions_compared": sum(by_state.values()),
        "replies_confirmed": n(S.SENT, receipt=True) + attached,
        "receipts_attached": attached,
        "sent_without_receipt": lost,
        "retry_candidates": candidates,
        "unknown_sends": lost + candidates,
        "sending_in_flight": n(S.SENDING, receipt=False),
        "suppressed_actions": n(S.SUPPRESSED_TEST),
        "unexpected_receipts": sum(v for (state, has, _), v in by_state.items()
                                   if has and state not in (*UNCONFIRMED, S.SENT)),
        # Sent or parked, routed where the read cannot show every receipt: "not compared" is not
        # "missing" (Instagram's and Messenger's private replies, say), so no finding is made of them.
        "receipts_not_compared": n(S.SENT, S.SEND_STATUS_UNKNOWN, receipt=False, compared=False),
        "unknown_receipts": comparison.unknown_receipts.count(),
        "invalid_source_items": run.rejection_count,
        "quarantined_inputs": quarantined.count(),
        "page_calls": run.page_calls,
        "external_calls": run.page_calls if reads_off_host(source.adapter, source.source_url) else 0,
    }


def report_summary(source: Source, run: ReconcileRun, counts: dict[str, int], now: datetime) -> dict:
    return {
        "source": source.name,
        "source_system": source.source_system,
        "account_ref": source.account_ref,
        "run": run.pk,
        "trigger": run.trigger,
        "requested_by": run.requested_by,
        "contract_version": source.contract_version,
        "window": {"since": iso_z(run.since), "until": iso_z(run.until)},
        "source_cursor": {"scan_id": run.scan_id, "pages": run.pages, "complete_scan": run.complete_scan,
                          "checkpoint_until": iso_z(run.until) if run.complete_scan else None},
        "started_at": iso_z(run.first_page_at),
        "published_at": iso_z(now),
        "counts": counts,
    }


# -- report -----------------------------------------------------------------

# Findings a person closes (decides or acknowledges). While one is open for a reply, a scan
# that finds the same thing again counts it in the report but adds no second row, so the
# queues and doctor agree (issue 15); the database refuses a second open row
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


def _findings_write(report: ReconcileReport, kind: str, rows: QuerySet, repair: str = Repair.NONE,
                    detail: str = "", *, actions: bool = False, receipts: bool = False,
                    total: int | None = None) -> int:
    """Write one finding per row, in one statement inside the database (no table is held in memory).

    A kind a person closes gets no second row for a reply while one is open (PERSON_KINDS).
    Returns how many rows were left out for that reason: `total` (the kind's count in the
    report, when the caller has it) less the rows written."""
    found = rows
    if kind in PERSON_KINDS:
        rows = rows.filter(~already_recorded(kind, actions=actions))
    if actions:
        fields = ("event_id", "reply_key", "id", "delivery_state")
    elif receipts:
        fields = ("event_key", "reply_key")
    else:
        fields = ("event_key",)
    written = _findings_insert_select(report, kind, rows.order_by(), fields, repair, detail)
    if kind not in PERSON_KINDS:
        return 0
    # Left out = found - written (one count, or none when the report counted the kind already).
    return max(0, (found.count() if total is None else total) - written)


def _findings_insert_select(report: ReconcileReport, kind: str, rows: QuerySet, fields: tuple[str, ...],
                            repair: str, detail: str) -> int:
    """One INSERT ... SELECT: the comparison's rows become findings inside the database, none
    read into Python (a set-based statement on PostgreSQL and SQLite alike)."""
    # Positional aliases c0.. so the outer SELECT names them alike whatever the row's model.
    rows = rows.values(**{f"c{i}": F(name) for i, name in enumerate(fields)})
    select, params = rows.query.get_compiler(connection=connection).as_sql()
    # Rows carry 1 (events), 2 (receipts) or 4 (actions) columns: the rest take their defaults.
    picked = [f"r.c{i}" for i in range(len(fields))] + ["''", "''", "NULL", "''"][len(fields):]
    qn = connection.ops.quote_name
    columns = ["report", "kind", "event_key", "reply_key", "action", "action_state", "repair", "repair_outcome",
               "detail", "repair_code", "decision", "decided_by", "decision_reason", "decision_result"]
    names = ", ".join(qn(Finding._meta.get_field(c).column) for c in columns)
    outcome = RepairOutcome.PLANNED if repair != Repair.NONE else ""
    sql = (f"INSERT INTO {qn(Finding._meta.db_table)} ({names}) "
           f"SELECT %s, %s, {', '.join(picked)}, %s, %s, %s, '', '', '', '', '' FROM ({select}) r")
    with connection.cursor() as cursor:
        cursor.execute(sql, [report.pk, kind, repair, outcome, detail, *params])
        return cursor.rowcount


# The event ledger's findings: the comparison's set each is, the report count its rows are,
# its repair and its detail. No kind here is one a person closes, so every row found is
# written, and the insert's row count is the report's count (no second pass to count it).
EVENT_FINDINGS = (
    (FindingKind.MISSING_LOCAL, "missing", "missing_found", Repair.REPLAYED,
     "the source has it and Conduit did not: replayed through ingest, replies held for review"),
    (FindingKind.IDENTITY_CONFLICT, "conflicting", "identity_conflicts", Repair.NONE,
     "the source's payload differs from the one first accepted: the first stays"),
    (FindingKind.SOURCE_UNVERIFIED, "unverified", "source_unverified", Repair.MARKED_UNVERIFIED,
     "no source evidence in this window: kept, marked SOURCE_UNVERIFIED"),
)


def event_findings_write(report: ReconcileReport, comparison: Comparison) -> dict[str, int]:
    """The event ledger's findings (EVENT_FINDINGS); returns their report counts by name."""
    return {count: _findings_insert_select(report, kind, getattr(comparison, rows).order_by(), ("event_key",),
                                           repair, detail)
            for kind, rows, count, repair, detail in EVENT_FINDINGS}


def findings_write(report: ReconcileReport, run: ReconcileRun, comparison: Comparison,
                   counts: dict[str, int] | None = None) -> dict[str, int]:
    """Every finding of the report, each kind with the repair it plans (seed 000's repair table).

    Returns, per kind a person closes, how many this scan found again while already open
    (counted in the report, recorded once)."""
    event_findings_write(report, comparison)
    return reply_findings_write(report, run, comparison, counts)


def reply_findings_write(report: ReconcileReport, run: ReconcileRun, comparison: Comparison,
                         counts: dict[str, int] | None = None) -> dict[str, int]:
    """The reply ledger's and the page's findings; returns what findings_write returns."""
    c = comparison
    carried = {}
    # The report's own counts of the kinds a person closes (the same sets), so that what was
    # found again is the count less the rows written, without counting the sets again.
    totals = {FindingKind.RETRY_CANDIDATE: "retry_candidates", FindingKind.UNEXPECTED_RECEIPT: "unexpected_receipts",
              FindingKind.UNKNOWN_RECEIPT: "unknown_receipts"}
    total = {kind: counts[name] for kind, name in totals.items()} if counts else {}
    for kind, rows, repair, detail in (
        (FindingKind.RECEIPT_ATTACHED, c.attach, Repair.RECEIPT_ATTACHED,
         "the provider shows this reply applied: receipt attached, SENT"),
        (FindingKind.RECEIPT_MISSING, c.lost, Repair.MARKED_UNKNOWN,
         "SENT locally, but the provider shows no such reply: SEND_STATUS_UNKNOWN, nothing resent"),
        (FindingKind.RETRY_CANDIDATE, c.candidates, Repair.NONE,
         "no receipt on the provider's thread: a person decides whether the same key may run again"),
        (FindingKind.UNEXPECTED_RECEIPT, c.unexpected, Repair.NONE,
         "the provider shows a reply for an action Conduit did not send"),
    ):
        carried[kind] = _findings_write(report, kind, rows, repair, detail, actions=True, total=total.get(kind))
    carried[FindingKind.UNKNOWN_RECEIPT] = _findings_write(
        report, FindingKind.UNKNOWN_RECEIPT, c.unknown_receipts, Repair.NONE,
        "the provider shows a reply under a key Conduit never planned", receipts=True,
        total=total.get(FindingKind.UNKNOWN_RECEIPT))
    Finding.objects.bulk_create([
        Finding(report=report, kind=FindingKind.INVALID_SOURCE_ITEM,
                detail=f"page {r['page']} item {r['index']}: {r['code']}")
        for r in run.rejections
    ], batch_size=CHUNK)
    return {kind: carried[kind] for kind in PERSON_KINDS}


def attention_summary(report: ReconcileReport, carried: dict[str, int]) -> dict:
    """What of this report waits for a person: per kind a person closes, the findings this report
    added, those it found again while already open, and all still open for the source."""
    mine = Q(report__source_id=report.source_id)
    open_now = dict(open_unexpected_receipts().filter(mine).order_by().values("kind")
                    .annotate(n=Count("id")).values_list("kind", "n"))
    open_now["RETRY_CANDIDATE"] = open_retry_candidates().filter(mine).count()
    added = dict(report.findings.filter(kind__in=PERSON_KINDS).order_by().values("kind")
                 .annotate(n=Count("id")).values_list("kind", "n"))
    return {kind: {"new": added.get(kind, 0), "already_open": carried.get(kind, 0),
                   "open": open_now.get(kind, 0)} for kind in PERSON_KINDS}


def report_write(source: Source, run: ReconcileRun) -> ReconcileReport:
    """Compare the complete staged generation with both ledgers; write the report and its findings.

    Runs in the final page's transaction; no repair touches a ledger here.
    """
    now = clock.now()
    timer = time.monotonic()
    # The comparison hashes a whole generation against the ledgers: room for its joins in
    # memory and no JIT compilation, for this transaction only.
    bulk_session()
    comparison = generation_compare(source, run)
    # The report and its findings are written before any repair touches a ledger. The
    # event findings come first: their inserts' row counts are three of the report's counts.
    report = ReconcileReport.objects.create(run=run, source=source, created_at=now, summary={})
    counts = report_counts(source, run, comparison, found=event_findings_write(report, comparison))
    carried = reply_findings_write(report, run, comparison, counts)
    report.summary = report_summary(source, run, counts, now)
    # Unexpected receipts and open decisions are named in the summary, not only counted (issue 15).
    report.summary["needs_a_person"] = attention_summary(report, carried)
    report.save(update_fields=["summary"])
    logger.info("reconcile report source=%s run=%s report=%s report_ms=%s %s", source.name, run.pk, report.pk,
                _elapsed_ms(timer), " ".join(f"{k}={v}" for k, v in counts.items() if v is not None))
    return report


# -- what the repairs did -----------------------------------------------------------

def replay_counts(report: ReconcileReport) -> tuple[dict[str, int], dict[str, int]]:
    """What the replay of the report's missing events did, from their findings' outcomes: the
    counts of REPLAY_COUNTS, and the repair codes of those not applied with how many carry each."""
    counts = dict.fromkeys(REPLAY_COUNTS.values(), 0)
    codes: dict[str, int] = {}
    rows = (Finding.objects.filter(report=report, kind=FindingKind.MISSING_LOCAL).order_by()
            .values("repair_outcome", "repair_code").annotate(n=Count("id")))
    for row in rows:
        name = REPLAY_COUNTS.get(row["repair_outcome"])
        if name is None:  # still planned: not replayed yet, so in no count
            continue
        counts[name] += row["n"]
        if row["repair_code"]:
            codes[row["repair_code"]] = codes.get(row["repair_code"], 0) + row["n"]
    return counts, dict(sorted(codes.items()))


def replay_counts_record(report: ReconcileReport) -> dict[str, int]:
    """Write what the replay did into the report's summary, in the publishing transaction: its
    counts beside the others and `missing_replay_codes`. The report itself was written before
    any repair; only these keys are filled in after. Returns the counts."""
    counts, codes = replay_counts(report)
    fresh = ReconcileReport.objects.select_for_update(no_key=True).get(pk=report.pk)
    fresh.summary["counts"] = {**fresh.summary.get("counts", {}), **counts}
    fresh.summary["missing_replay_codes"] = codes
    fresh.save(update_fields=["summary"])
    report.summary = fresh.summary
    return counts


# -- checkpoint and publish -------------------------------------------------------

def checkpoint_advance(state: ScanState, run: ReconcileRun, now: datetime) -> None:
    """A complete generation moves the checkpoint (unsaved); a window is kept apart from it."""
    if not run.complete_scan:
        return
    state.last_run = run
    # Monotonic: an older generation never moves the checkpoint back.
    if state.checkpoint_until is None or run.until > state.checkpoint_until:
        state.checkpoint_until, state.checkpoint_scan_id = run.until, run.scan_id
    state.last_completed_at = now


def _run_publish_commit(source: Source, token: str, run: ReconcileRun, report: ReconcileReport,
                        now: datetime) -> ReconcileRun:
    """One transaction: the run PUBLISHED, what its replay did counted on its report, its staging
    dropped, the checkpoint and schedule moved."""
    with transaction.atomic():
        state = lease_check(source.pk, token)
        run = ReconcileRun.objects.select_for_update().get(pk=run.pk)
        moved = transition(
            table=RUN_TABLE, model=ReconcileRun, history=ReconcileRunTransition, owner_field="run", pk=run.pk,
            to=RunState.PUBLISHED, actor=RECONCILE_ACTOR, reason_code="repairs_done", expected=RunState.REPAIRING,
            extra={"finished_at": now, "cursor": ""},
        )
        if not moved.applied:
            raise LeaseLost(f"run {run.pk} was no longer REPAIRING")
        replay_counts_record(report)
        staging_drop(run)
        state.active_run = None
        checkpoint_advance(state, run, now)
        schedule_after_publication(state, run, now)
        state.save()
    return run


def run_publish(source: Source, token: str, run: ReconcileRun, *,
                report: ReconcileReport | None = None) -> tuple[ReconcileRun, ReconcileReport]:
    """Apply the report's planned repairs, then publish: staging, checkpoint and run state at once.

    Each repair step is its own transaction that re-checks (and extends) the
    lease and records its outcome on its findings, so a failed repair leaves
    the report, its findings and every other repair committed. Every step is
    idempotent (it acts only on findings still `planned`), so a run found
    REPAIRING after a crash is finished by the next page call.
    """
    report = report or ReconcileReport.objects.get(run=run)
    timer = time.monotonic()
    repairs_apply(source, token, run, report)
    repair_ms = _elapsed_ms(timer)
    run = _run_publish_commit(source, token, run, report, clock.now())
    counts = report.summary["counts"]
    logger.info("reconcile published source=%s run=%s report=%s repair_ms=%s complete=%s %s",
                source.name, run.pk, report.pk, repair_ms, run.complete_scan,
                " ".join(f"{name}={counts[name]}" for name in REPLAY_COUNTS.values()))
    return run, report
