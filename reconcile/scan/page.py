"""The page step: exactly one source page call under the source's lease, and what became of it.

`reconcile_page` takes the lease, finds or starts the scan generation, makes the one page call and
hands what it returned to the page's commit (reconcile.scan.commit). Whatever fails on the way is
recorded as this source's page failure, never raised into the poll.
"""

from __future__ import annotations

import inspect
import logging
from datetime import datetime
from typing import Callable

from django.conf import settings
from django.db import transaction
from django.db.models import F

from conduit.credentials import CredentialUndecryptable
from conduit.providers.base import PageFailure, SourcePage
from conduit.providers.registry import get_adapter
from conduit.statemachine import record_created
from ingress.models import Source
from ingress.selectors import source_config
from reconcile import clock
from reconcile.lease import LeaseLost, lease_acquire, lease_check, lease_release
from reconcile.models import RUN_TABLE, ReconcileRun, ReconcileRunTransition, RunState, ScanState
from reconcile.repairs import RECONCILE_ACTOR
from reconcile.scan.commit import commit_page, publish
from reconcile.scan.outcome import PageOutcome, ScanConflict, unauthored_failure
from reconcile.schedule import error_record, schedule_after_failure
from reconcile.staging import MAX_PAGE_BYTES

logger = logging.getLogger("conduit.reconcile")


def _run_for_page(
    source: Source, token: str, *, trigger: str, actor: str, since: datetime | None, until: datetime | None
) -> ReconcileRun:
    """The active scan generation, or a new one over the requested (or scheduled) window.

    A run left REPAIRING (its report committed) is returned whatever the
    window: it must publish before any new generation starts.
    """
    with transaction.atomic():
        state = lease_check(source.pk, token)
        run = state.active_run
        if run is not None and run.state == RunState.REPAIRING:
            return run
        if run is not None and run.state == RunState.SCANNING:
            if (since is not None and since != run.since) or (until is not None and until != run.until):
                raise ScanConflict(
                    f"scan {run.pk} of {source.name} is active over another window; "
                    "let it finish or restart it"
                )
            return run
        # Without a window, a scan is a complete generation: everything the source holds up to now,
        # so absence can be judged. Only a generation over everything the source holds moves the
        # complete checkpoint; a --since/--until window is kept apart from it
        # (docs/concepts/reconciliation.md#generations).
        run = ReconcileRun.objects.create(
            source=source,
            trigger=trigger,
            requested_by=actor,
            since=since,
            until=until or clock.now(),
            created_at=clock.now(),
            complete_scan=since is None and until is None,
        )
        record_created(
            table=RUN_TABLE,
            history=ReconcileRunTransition,
            owner_field="run",
            owner_ids=[run.pk],
            path=[RunState.SCANNING],
            actor=actor,
            reason_codes=["scan_started"],
            at=run.created_at,
        )
        state.active_run = run
        state.save(update_fields=["active_run"])
        return run


def _accepts(adapter, keyword: str) -> bool:
    """Whether the adapter's read_page takes `keyword` (an adapter written before it existed does not)."""
    parameters = inspect.signature(adapter.read_page).parameters
    return keyword in parameters or any(p.kind is p.VAR_KEYWORD for p in parameters.values())


def _page_read(source: Source, run: ReconcileRun, base_url: str | None) -> SourcePage:
    """The one external call: the next page of the run's window. Raises PageFailure."""
    adapter = get_adapter(source.adapter)
    try:
        config = source_config(source, with_token=True)
    except CredentialUndecryptable as exc:
        raise PageFailure("credentials", "credential_undecryptable", str(exc)) from None
    kwargs = dict(
        config=config,
        base_url=base_url or source.source_url,
        since=run.since,
        until=run.until,
        cursor=run.cursor or None,
        limit=settings.CONDUIT_RECONCILE_PAGE_SIZE,
        timeout=settings.CONDUIT_RECONCILE_PAGE_TIMEOUT_SECONDS,
    )
    if not run.cursor and run.pages == 0 and _accepts(adapter, "checkpoint"):
        # A new generation is handed the last complete checkpoint
        # (docs/concepts/reconciliation.md#generations).
        kwargs["checkpoint"] = ScanState.objects.values_list("checkpoint_until", flat=True).get(
            source_id=source.pk
        )
    if _accepts(adapter, "max_bytes"):
        kwargs["max_bytes"] = MAX_PAGE_BYTES
    return adapter.read_page(**kwargs)


def reconcile_page(
    *,
    source: Source,
    trigger: str = "schedule",
    actor: str = RECONCILE_ACTOR,
    since: datetime | None = None,
    until: datetime | None = None,
    base_url: str | None = None,
) -> PageOutcome:
    """Make exactly one source page call for `source` and commit what it returned.

    Raises LeaseBusy when another worker holds the lease (nothing was called).
    A stale holder gets state `lease_lost` and commits nothing. `base_url`
    reads another copy of the source (the canary's own fixture source).
    """
    token = lease_acquire(source)
    try:
        try:
            run = _run_for_page(source, token, trigger=trigger, actor=actor, since=since, until=until)
        except LeaseLost:
            return PageOutcome(source.name, 0, "lease_lost")
        if run.state == RunState.REPAIRING:
            # A crash left the report committed and its repairs pending: finish them, no page call.
            return _guarded(source, token, run, lambda: publish(source, token, run, called=False))
        # "Reconcile now" compares requests with the time this call began, not its commit.
        began = clock.now()
        try:
            page = _page_read(source, run, base_url)
        except PageFailure as failure:
            return _page_failed(source, token, run, failure)
        except Exception as exc:  # an error no one authored: its text is never kept
            logger.warning(
                "reconcile page source=%s unauthored error type=%s", source.name, type(exc).__name__
            )
            return _page_failed(
                source,
                token,
                run,
                PageFailure(
                    "unauthored", "unexpected_error", f"reading the page raised {type(exc).__name__}"
                ),
            )
        except CANCELLATIONS as exc:
            _page_cancelled(source, token, run, exc, "reading the page")
            raise
        try:
            return _guarded(source, token, run, lambda: commit_page(source, token, run, page, began))
        except CANCELLATIONS as exc:  # the commit's transaction rolled back: nothing of the page is kept
            _page_cancelled(source, token, run, exc, "committing the page")
            raise
    finally:
        lease_release(source.pk, token)


# What cuts a page call short: django-q2's task deadline (its TimeoutException is a SystemExit
# raised inside the task), a worker's shutdown (SystemExit) and Ctrl-C (KeyboardInterrupt).
CANCELLATIONS = (SystemExit, KeyboardInterrupt)


def _page_cancelled(source: Source, token: str, run: ReconcileRun, exc: BaseException, doing: str) -> None:
    """Record a cancelled page call (class `cancelled`, docs/concepts/reconciliation.md#page-failures)
    before the cancellation goes on up: the source shows why it stopped and backs off. Recording is
    best effort while stopping."""
    failure = PageFailure(
        "cancelled",
        "page_cancelled",
        f"{doing} was cancelled ({type(exc).__name__}): the task's deadline or a shutdown",
    )
    try:
        _page_failed(source, token, run, failure)
    except Exception as record_exc:  # the database may be going away with the process
        logger.warning(
            "reconcile page source=%s run=%s cancelled, not recorded type=%s",
            source.name,
            run.pk,
            type(record_exc).__name__,
        )


def _guarded(source: Source, token: str, run: ReconcileRun, step: Callable[[], PageOutcome]) -> PageOutcome:
    """Run one commit step; whatever it raises becomes this source's recorded page failure.

    One failing source cannot starve the others (docs/concepts/reconciliation.md#scheduling,
    #page-failures), so no error of one source's commit may escape into the poll unrecorded.
    """
    try:
        return step()
    except LeaseLost:
        logger.warning("reconcile page source=%s run=%s lease_lost", source.name, run.pk)
        return PageOutcome(source.name, run.pk, "lease_lost")
    except PageFailure as failure:  # the page broke the protocol: nothing of it was staged
        return _page_failed(source, token, run, failure)
    except Exception as exc:
        logger.warning(
            "reconcile commit source=%s run=%s error type=%s", source.name, run.pk, type(exc).__name__
        )
        return _page_failed(source, token, run, unauthored_failure(exc, "committing the page"))


def _page_failed(source: Source, token: str, run: ReconcileRun, failure: PageFailure) -> PageOutcome:
    """Keep the safe class, code and Conduit's own line; staged pages and the checkpoint stay."""
    with transaction.atomic():
        try:
            state = lease_check(source.pk, token)
        except LeaseLost:
            return PageOutcome(source.name, run.pk, "lease_lost", error=failure)
        ReconcileRun.objects.filter(pk=run.pk).update(page_calls=F("page_calls") + 1)
        error_record(state, failure)
        schedule_after_failure(state, failure)
    logger.warning(
        "reconcile page source=%s run=%s failed class=%s code=%s",
        source.name,
        run.pk,
        failure.error_class,
        failure.code,
    )
    return PageOutcome(source.name, run.pk, "failed", run.pages, run.staged_events, error=failure)
