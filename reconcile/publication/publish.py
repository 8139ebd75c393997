"""Publication: compare, report, repair and advance the checkpoint, under the scan's lease."""

from __future__ import annotations

import logging
import time
from datetime import datetime

from django.db import transaction

from conduit.statemachine import transition
from ingress.models import Source
from reconcile import clock
from reconcile.lease import LeaseLost, lease_check
from reconcile.models import (
    RUN_TABLE,
    ReconcileReport,
    ReconcileRun,
    ReconcileRunTransition,
    RunState,
    ScanState,
)
from reconcile.publication.report import REPLAY_COUNTS, _elapsed_ms, replay_counts_record
from reconcile.repairs import RECONCILE_ACTOR, repairs_apply
from reconcile.schedule import schedule_after_publication
from reconcile.staging import staging_drop

logger = logging.getLogger("conduit.reconcile")


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


def _run_publish_commit(
    source: Source, token: str, run: ReconcileRun, report: ReconcileReport, now: datetime
) -> ReconcileRun:
    """One transaction: the run PUBLISHED, what its replay did counted on its report, its staging
    dropped, the checkpoint and schedule moved."""
    with transaction.atomic():
        state = lease_check(source.pk, token)
        run = ReconcileRun.objects.select_for_update().get(pk=run.pk)
        moved = transition(
            table=RUN_TABLE,
            model=ReconcileRun,
            history=ReconcileRunTransition,
            owner_field="run",
            pk=run.pk,
            to=RunState.PUBLISHED,
            actor=RECONCILE_ACTOR,
            reason_code="repairs_done",
            expected=RunState.REPAIRING,
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


def run_publish(
    source: Source, token: str, run: ReconcileRun, *, report: ReconcileReport | None = None
) -> tuple[ReconcileRun, ReconcileReport]:
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
    logger.info(
        "reconcile published source=%s run=%s report=%s repair_ms=%s complete=%s %s",
        source.name,
        run.pk,
        report.pk,
        repair_ms,
        run.complete_scan,
        " ".join(f"{name}={counts[name]}" for name in REPLAY_COUNTS.values()),
    )
    return run, report
