"""The scheduled poll: a bounded number of page calls over the due sources, fair by a durable cursor."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import DatabaseError, transaction

from ingress.models import Source
from reconcile import clock
from reconcile.lease import LeaseBusy, scan_state_for
from reconcile.models import ScanState, SchedulerCursor
from reconcile.scan import PageOutcome, reconcile_page, unauthored_failure
from reconcile.schedule import error_record, schedule_after_failure

logger = logging.getLogger("conduit.reconcile")


@dataclass(frozen=True)
class PollResult:
    page_calls: int
    outcomes: list[PageOutcome]
    skipped_busy: list[str]


def reconcile_due(*, limit: int) -> PollResult:
    """At most `limit` page calls, each source at most once, fair by a durable round-robin cursor.

    Canary sources are left out: `manage.py canary` reconciles them against
    its own fixture source, which exists only while it runs.
    """
    if not 1 <= limit <= 200:
        raise ValueError("a poll makes 1 to 200 page calls")
    for source in Source.objects.filter(scan__isnull=True, canary=False):
        _scan_state_created(source)
    cursor, _ = SchedulerCursor.objects.get_or_create(name="reconcile")
    now = clock.now()
    due = list(
        ScanState.objects.filter(next_due_at__lte=now, source__canary=False)
        .select_related("source")
        .order_by("source__name")
    )
    after = [s for s in due if s.source.name > cursor.last_source_name]
    rotated = after + [s for s in due if s.source.name <= cursor.last_source_name]
    calls, outcomes, busy = 0, [], []
    for state in rotated:
        if calls >= limit:
            break
        try:
            outcome = reconcile_page(source=state.source)
        except LeaseBusy:
            busy.append(state.source.name)
            continue
        except Exception as exc:
            # docs/concepts/reconciliation.md#scheduling: a failing source "cannot starve the others".
            # Whatever
            # escaped the page call is this source's recorded failure; the poll goes on.
            outcome = _source_failed(state.source, exc)
        # run 0: the lease was lost before any call; a resumed publication calls no one
        calls += 1 if outcome.run_id and outcome.called else 0
        outcomes.append(outcome)
        SchedulerCursor.objects.filter(pk=cursor.pk).update(last_source_name=state.source.name)
    return PollResult(calls, outcomes, busy)


def _scan_state_created(source: Source) -> None:
    """A new source's scan state; one that cannot be created (an interval the database refuses,
    which the start-up check conduit.checks reports) is logged and left out, never the poll's end."""
    try:
        with transaction.atomic():
            scan_state_for(source)
    except DatabaseError as exc:
        logger.warning(
            "reconcile poll source=%s scan state not created type=%s: not scanned",
            source.name,
            type(exc).__name__,
        )


def _source_failed(source: Source, exc: Exception) -> PageOutcome:
    """Record an error raised outside a page's own failure handling (taking the lease, opening
    the run) on the source's scan state: class, code, backoff, visible in doctor."""
    failure = unauthored_failure(exc, "the page call")
    logger.warning(
        "reconcile poll source=%s failed class=%s code=%s type=%s",
        source.name,
        failure.error_class,
        failure.code,
        type(exc).__name__,
    )
    with transaction.atomic():
        state = ScanState.objects.select_for_update(no_key=True).get(source_id=source.pk)
        error_record(state, failure)
        schedule_after_failure(state, failure)
    return PageOutcome(source.name, 0, "failed", error=failure, called=False)
