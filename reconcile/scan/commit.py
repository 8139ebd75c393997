"""A page's commit: the one transaction that stages it, and on the final page writes the report.

The lease is re-checked inside it; the page is checked against the protocol and the limits, then
staged (reconcile.staging). The final page compares the generation and writes the report; its
repairs and the publication follow in their own transactions (reconcile.publication).
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction

from conduit.providers.base import SourcePage
from conduit.statemachine import transition
from ingress.models import Source
from ingress.services import events_occurred_at_correct
from ingress.services.evidence import self_authored_record
from reconcile.lease import lease_check
from reconcile.models import (
    RUN_TABLE,
    ReconcileReport,
    ReconcileRun,
    ReconcileRunTransition,
    RunState,
    StagedEvent,
)
from reconcile.publication import report_write, run_publish
from reconcile.repairs import RECONCILE_ACTOR
from reconcile.scan.evidence import page_evidence
from reconcile.scan.outcome import PageOutcome
from reconcile.schedule import error_record, schedule_after_failure, schedule_next_page
from reconcile.staging import (
    ScanLimit,
    bulk_session,
    generation_analyze,
    generation_discard,
    page_check,
    page_stage,
)

logger = logging.getLogger("conduit.reconcile")


def publish(
    source: Source,
    token: str,
    run: ReconcileRun,
    *,
    report: ReconcileReport | None = None,
    called: bool = True,
) -> PageOutcome:
    run, report = run_publish(source, token, run, report=report)
    return PageOutcome(
        source.name, run.pk, "published", run.pages, run.staged_events, report.pk, called=called
    )


def commit_page(
    source: Source, token: str, run: ReconcileRun, page: SourcePage, began: datetime
) -> PageOutcome:
    """The page's one transaction: lease re-check, protocol and limits, staging, and on the
    final page the report and its findings. Repairs follow in their own transactions."""
    with transaction.atomic():
        state = lease_check(source.pk, token)
        run = ReconcileRun.objects.select_for_update().get(pk=run.pk)
        page_check(run, page)
        try:
            with transaction.atomic():  # a savepoint: a limit takes this page's staging back
                page = page_evidence(source, page)
                page_stage(run, page, began)
                # The account's own comments the read showed: receipt evidence, as from a webhook.
                self_authored_record(source, page.own, began)
        except ScanLimit as limit:
            failure = limit.failure()
            generation_discard(state, run, limit.code, RECONCILE_ACTOR)
            error_record(state, failure)
            schedule_after_failure(state, failure)
            logger.warning(
                "reconcile scan source=%s run=%s discarded code=%s", source.name, run.pk, limit.code
            )
            return PageOutcome(source.name, run.pk, "discarded", run.pages, run.staged_events, error=failure)
        if page.complete:
            bulk_session()  # the statements below each read the whole generation
            generation_analyze()
            # Stand-in times (a notification without the item's own) take the time the read showed.
            events_occurred_at_correct(
                source=source, observed=StagedEvent.objects.filter(run=run), actor=RECONCILE_ACTOR
            )
            report = report_write(source, run)
            transition(
                table=RUN_TABLE,
                model=ReconcileRun,
                history=ReconcileRunTransition,
                owner_field="run",
                pk=run.pk,
                to=RunState.REPAIRING,
                actor=RECONCILE_ACTOR,
                reason_code="report_written",
                expected=RunState.SCANNING,
            ).raise_if_refused()
            run.state = RunState.REPAIRING
        elif page.next_cursor is None:
            generation_discard(state, run, "exhausted_without_completion", RECONCILE_ACTOR)
            schedule_after_failure(state)
            outcome = PageOutcome(source.name, run.pk, "discarded", run.pages, run.staged_events)
        else:
            schedule_next_page(state)  # the scan continues on the next poll
            outcome = PageOutcome(source.name, run.pk, "staged", run.pages, run.staged_events)
    if run.state == RunState.REPAIRING:
        return publish(source, token, run, report=report)
    logger.info(
        "reconcile page source=%s run=%s state=%s pages=%s staged=%s",
        source.name,
        run.pk,
        outcome.state,
        outcome.pages,
        outcome.staged_events,
    )
    return outcome
