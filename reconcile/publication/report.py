"""The report: its counters, summary and attention lines, replay counts, and its write."""

from __future__ import annotations

import logging
import time
from datetime import datetime

from django.db.models import Count, F, Q, Sum

from conduit.providers.registry import reads_off_host
from conduit.timefmt import iso_z
from ingress.models import QuarantineReceipt, QuarantineState, Source
from reconcile import clock
from reconcile.models import Finding, FindingKind, ReconcileReport, ReconcileRun, RepairOutcome
from reconcile.publication.compare import UNCONFIRMED, Comparison, _actions_by_state, generation_compare
from reconcile.publication.findings import EVENT_FINDINGS, event_findings_write, reply_findings_write
from reconcile.selectors import PERSON_KINDS, open_retry_candidates, open_unexpected_receipts
from reconcile.staging import bulk_session, hashed_joins
from replies.models import DeliveryState as S

logger = logging.getLogger("conduit.reconcile")

# A report's counts, in the order pages and printouts show them (JSON storage may reorder keys).
REPORT_COUNTS = (
    "events_compared",
    "events_local",
    "events_matched",
    "missing_found",
    "missing_recovered",
    "missing_replay_refused",
    "missing_replay_failed",
    "identity_conflicts",
    "source_unverified",
    "duplicates_converged",
    "actions_compared",
    "replies_confirmed",
    "receipts_attached",
    "sent_without_receipt",
    "retry_candidates",
    "unknown_sends",
    "sending_in_flight",
    "suppressed_actions",
    "unexpected_receipts",
    "unknown_receipts",
    "receipts_not_compared",
    "invalid_source_items",
    "quarantined_inputs",
    "page_calls",
    "external_calls",
)
# The counts of what the replay of the missing events did, by the outcome on their MISSING_LOCAL
# findings. The report is written before any repair (docs/concepts/reconciliation.md#steps), so
# these are null in it until the repairs have run; the publishing transaction writes them.
# `missing_recovered` is the "missing records recovered" of
# docs/concepts/reconciliation.md#missing-counts: replays ingest applied, never one it refused.
REPLAY_COUNTS = {
    RepairOutcome.APPLIED: "missing_recovered",
    RepairOutcome.REFUSED: "missing_replay_refused",
    RepairOutcome.FAILED: "missing_replay_failed",
}


def _elapsed_ms(since: float) -> int:
    return round((time.monotonic() - since) * 1000)


def report_counts(
    source: Source, run: ReconcileRun, comparison: Comparison, found: dict[str, int] | None = None
) -> dict[str, int]:
    """The report's counts, in the order of REPORT_COUNTS.

    `found` holds the counts of EVENT_FINDINGS as their inserts wrote them; without it
    those sets are counted here."""
    if found is None:
        found = {count: getattr(comparison, rows).count() for _, rows, count, _, _ in EVENT_FINDINGS}
    by_state = _actions_by_state(comparison)

    def n(*states: str, receipt: bool | None = None, compared: bool | None = None) -> int:
        return sum(
            v
            for (state, has, seen), v in by_state.items()
            if state in states
            and (receipt is None or has == receipt)
            and (compared is None or seen == compared)
        )

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
        "unexpected_receipts": sum(
            v for (state, has, _), v in by_state.items() if has and state not in (*UNCONFIRMED, S.SENT)
        ),
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
        "source_cursor": {
            "scan_id": run.scan_id,
            "pages": run.pages,
            "complete_scan": run.complete_scan,
            "checkpoint_until": iso_z(run.until) if run.complete_scan else None,
        },
        "started_at": iso_z(run.first_page_at),
        "published_at": iso_z(now),
        "counts": counts,
    }


def attention_summary(report: ReconcileReport, carried: dict[str, int]) -> dict:
    """What of this report waits for a person: per kind a person closes, the findings this report
    added, those it found again while already open, and all still open for the source."""
    mine = Q(report__source_id=report.source_id)
    open_now = dict(
        open_unexpected_receipts()
        .filter(mine)
        .order_by()
        .values("kind")
        .annotate(n=Count("id"))
        .values_list("kind", "n")
    )
    open_now["RETRY_CANDIDATE"] = open_retry_candidates().filter(mine).count()
    added = dict(
        report.findings.filter(kind__in=PERSON_KINDS)
        .order_by()
        .values("kind")
        .annotate(n=Count("id"))
        .values_list("kind", "n")
    )
    return {
        kind: {"new": added.get(kind, 0), "already_open": carried.get(kind, 0), "open": open_now.get(kind, 0)}
        for kind in PERSON_KINDS
    }


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
    with hashed_joins(run):
        carried = reply_findings_write(report, run, comparison, counts)
    report.summary = report_summary(source, run, counts, now)
    # Unexpected receipts and open decisions are named in the summary, not only counted.
    report.summary["needs_a_person"] = attention_summary(report, carried)
    report.save(update_fields=["summary"])
    logger.info(
        "reconcile report source=%s run=%s report=%s report_ms=%s %s",
        source.name,
        run.pk,
        report.pk,
        _elapsed_ms(timer),
        " ".join(f"{k}={v}" for k, v in counts.items() if v is not None),
    )
    return report


# -- what the repairs did -----------------------------------------------------------


def replay_counts(report: ReconcileReport) -> tuple[dict[str, int], dict[str, int]]:
    """What the replay of the report's missing events did, from their findings' outcomes: the
    counts of REPLAY_COUNTS, and the repair codes of those not applied with how many carry each."""
    counts = dict.fromkeys(REPLAY_COUNTS.values(), 0)
    codes: dict[str, int] = {}
    rows = (
        Finding.objects.filter(report=report, kind=FindingKind.MISSING_LOCAL)
        .order_by()
        .values("repair_outcome", "repair_code")
        .annotate(n=Count("id"))
    )
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
