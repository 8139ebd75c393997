"""When a source is due next: backoff after a failure, at once while a scan continues, and the
interval (or an operator's request) after a publication. Also the failure a source shows."""

from __future__ import annotations

from datetime import datetime, timedelta

from conduit.backoff import backoff_delay
from conduit.metrics import page_failure_counted
from conduit.providers.base import PageFailure
from reconcile import clock
from reconcile.models import ReconcileRun, ScanState


def error_record(state: ScanState, failure: PageFailure) -> None:
    """Keep the failure's safe class, code and Conduit's own line on the scan state (unsaved)."""
    state.last_error_class, state.last_error_code = failure.error_class, failure.code
    state.last_error_message, state.last_error_at = failure.message, clock.now()


def error_clear(state: ScanState) -> None:
    state.last_error_class = state.last_error_code = state.last_error_message = ""
    state.last_error_at = None


def schedule_after_failure(state: ScanState, failure: PageFailure | None = None) -> None:
    """Deterministic exponential backoff from 5 s, capped by the source's interval; saved.

    A provider that said how long to wait (a throttling answer's
    `retry_after`) is not called again before then, nor later than the interval.
    """
    state.failures += 1
    page_failure_counted(source=state.source.name, error_class=failure.error_class if failure else "unknown")
    delay = backoff_delay(
        failures=state.failures,
        cap=state.interval_seconds,
        retry_after=failure.retry_after if failure is not None else None,
    )
    state.next_due_at = clock.now() + timedelta(seconds=delay)
    state.save()


def schedule_next_page(state: ScanState) -> None:
    """A page was staged and the scan goes on: due on the next poll, the failure streak over; saved."""
    state.next_due_at = clock.now()
    state.failures = 0
    error_clear(state)
    state.save()


def schedule_after_publication(state: ScanState, run: ReconcileRun, now: datetime) -> None:
    """After `run` published (unsaved): the interval from now, unless a request it cannot answer waits.

    A complete scan answers a request made before its first page; a request made
    after that keeps the source due. A window answers no request: the schedule
    resumes from the last complete scan.
    """
    state.failures = 0
    error_clear(state)
    if run.complete_scan:
        if (
            state.requested_at is not None
            and run.first_page_at is not None
            and state.requested_at > run.first_page_at
        ):
            state.next_due_at = now  # asked for after this scan began: it does not answer the request
        else:
            state.requested_at, state.requested_by = None, ""
            state.next_due_at = now + timedelta(seconds=state.interval_seconds)
    elif state.requested_at is None and state.last_completed_at is not None:
        state.next_due_at = state.last_completed_at + timedelta(seconds=state.interval_seconds)
