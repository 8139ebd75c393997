"""The scan: one source page call at a time under the lease, committed in one transaction.

`reconcile_page` makes exactly one page call and commits what it returned
(reconcile.staging checks and stages it); the final page writes the report and
publishes (reconcile.publication). `scan_until_done` repeats page calls until the
scan leaves `staged`: the one loop the command, the canary and the tests use.
"""

from __future__ import annotations

import inspect
import logging
import time
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Callable

from django.conf import settings
from django.db import DatabaseError, transaction
from django.db.models import F

from conduit.providers.base import PageFailure, SourcePage
from conduit.providers.registry import get_adapter
from conduit.statemachine import record_created, transition
from ingress.meta import self_authored_record
from ingress.models import InboundEvent, Source
from ingress.selectors import source_config
from ingress.services import events_occurred_at_correct
from reconcile import clock
from reconcile.lease import (
    LeaseBusy,
    LeaseLost,
    lease_acquire,
    lease_check,
    lease_release,
)
from reconcile.models import (
    RUN_TABLE,
    ReconcileReport,
    ReconcileRun,
    ReconcileRunTransition,
    RunState,
    ScanState,
    StagedEvent,
)
from reconcile.publication import report_write, run_publish
from reconcile.repairs import RECONCILE_ACTOR
from reconcile.schedule import error_record, schedule_after_failure, schedule_next_page
from reconcile.staging import (
    MAX_PAGE_BYTES,
    ScanLimit,
    bulk_session,
    generation_analyze,
    generation_discard,
    page_check,
    page_stage,
    scan_limit,
)
from replies.evidence import own_item_receipts

logger = logging.getLogger("conduit.reconcile")


class ScanConflict(Exception):
    """A scan with another window is active; restart it explicitly to change the window."""


class RestartRefused(Exception):
    """`--restart` named another generation than the active one, or one already reporting."""


@dataclass(frozen=True)
class PageOutcome:
    source: str
    run_id: int
    state: str  # staged | published | discarded | failed | lease_lost
    pages: int = 0
    staged_events: int = 0
    report_id: int | None = None
    error: PageFailure | None = None
    # Whether an external page call was made (a resumed publication makes none).
    called: bool = True


def unauthored_failure(exc: BaseException, doing: str) -> PageFailure:
    """An error no one authored, as a page failure: a stable code, never the exception's text."""
    code = "database_error" if isinstance(exc, DatabaseError) else "unexpected_error"
    return PageFailure("unauthored", code, f"{doing} raised {type(exc).__name__}")


def _run_for_page(source: Source, token: str, *, trigger: str, actor: str,
                  since: datetime | None, until: datetime | None) -> ReconcileRun:
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
        # Without a window, a scan is a complete generation: everything the
        # source holds up to now (seed 004), so absence can be judged.
        # Only a generation over everything the source holds moves the complete
        # checkpoint; a --since/--until window is kept apart from it.
        run = ReconcileRun.objects.create(
            source=source, trigger=trigger, requested_by=actor, since=since, until=until or clock.now(),
            created_at=clock.now(), complete_scan=since is None and until is None,
        )
        record_created(table=RUN_TABLE, history=ReconcileRunTransition, owner_field="run", owner_ids=[run.pk],
                       path=[RunState.SCANNING], actor=actor, reason_codes=["scan_started"], at=run.created_at)
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
    kwargs = dict(
        config=source_config(source, with_token=True), base_url=base_url or source.source_url, since=run.since,
        until=run.until, cursor=run.cursor or None, limit=settings.CONDUIT_RECONCILE_PAGE_SIZE,
        timeout=settings.CONDUIT_RECONCILE_PAGE_TIMEOUT_SECONDS,
    )
    if not run.cursor and run.pages == 0 and _accepts(adapter, "checkpoint"):
        # Seed 004: a new generation receives the last complete checkpoint.
        kwargs["checkpoint"] = ScanState.objects.values_list("checkpoint_until", flat=True).get(
            source_id=source.pk)
    if _accepts(adapter, "max_bytes"):
        kwargs["max_bytes"] = MAX_PAGE_BYTES
    return adapter.read_page(**kwargs)


def reconcile_page(
    *, source: Source, trigger: str = "schedule", actor: str = RECONCILE_ACTOR,
    since: datetime | None = None, until: datetime | None = None, base_url: str | None = None,
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
            return _guarded(source, token, run, lambda: _publish(source, token, run, called=False))
        # "Reconcile now" compares requests with the time this call began, not its commit.
        began = clock.now()
        try:
            page = _page_read(source, run, base_url)
        except PageFailure as failure:
            return _page_failed(source, token, run, failure)
        except Exception as exc:  # an error no one authored: its text is never kept
            logger.warning("reconcile page source=%s unauthored error type=%s", source.name, type(exc).__name__)
            return _page_failed(
                source, token, run,
                PageFailure("unauthored", "unexpected_error", f"reading the page raised {type(exc).__name__}"),
            )
        except CANCELLATIONS as exc:
            _page_cancelled(source, token, run, exc, "reading the page")
            raise
        try:
            return _guarded(source, token, run, lambda: _commit_page(source, token, run, page, began))
        except CANCELLATIONS as exc:  # the commit's transaction rolled back: nothing of the page is kept
            _page_cancelled(source, token, run, exc, "committing the page")
            raise
    finally:
        lease_release(source.pk, token)


# What cuts a page call short: django-q2's task deadline (its TimeoutException is a SystemExit
# raised inside the task), a worker's shutdown (SystemExit) and Ctrl-C (KeyboardInterrupt).
CANCELLATIONS = (SystemExit, KeyboardInterrupt)


def _page_cancelled(source: Source, token: str, run: ReconcileRun, exc: BaseException, doing: str) -> None:
    """Record a cancelled page call (seed 004's `cancelled` class) before the cancellation goes on
    up: the source shows why it stopped and backs off. Recording is best effort while stopping."""
    failure = PageFailure("cancelled", "page_cancelled",
                          f"{doing} was cancelled ({type(exc).__name__}): the task's deadline or a shutdown")
    try:
        _page_failed(source, token, run, failure)
    except Exception as record_exc:  # the database may be going away with the process
        logger.warning("reconcile page source=%s run=%s cancelled, not recorded type=%s",
                       source.name, run.pk, type(record_exc).__name__)


def _guarded(source: Source, token: str, run: ReconcileRun, step: Callable[[], PageOutcome]) -> PageOutcome:
    """Run one commit step; whatever it raises becomes this source's recorded page failure.

    Seed 004: a failing source "cannot ... starve independent sources", so no
    error of one source's commit may escape into the poll unrecorded.
    """
    try:
        return step()
    except LeaseLost:
        logger.warning("reconcile page source=%s run=%s lease_lost", source.name, run.pk)
        return PageOutcome(source.name, run.pk, "lease_lost")
    except PageFailure as failure:  # the page broke the protocol: nothing of it was staged
        return _page_failed(source, token, run, failure)
    except Exception as exc:
        logger.warning("reconcile commit source=%s run=%s error type=%s", source.name, run.pk, type(exc).__name__)
        return _page_failed(source, token, run, unauthored_failure(exc, "committing the page"))


def _publish(source: Source, token: str, run: ReconcileRun, *, report: ReconcileReport | None = None,
             called: bool = True) -> PageOutcome:
    run, report = run_publish(source, token, run, report=report)
    return PageOutcome(source.name, run.pk, "published", run.pages, run.staged_events, report.pk, called=called)


def page_evidence(source: Source, page: SourcePage) -> SourcePage:
    """The page as it is compared: the account's own items it showed become the receipts of the
    actions they answer (replies.evidence's one rule), and a comment read back with the text of a
    later edit is staged as that edit event beside its creation (never an identity conflict)."""
    receipts = own_item_receipts(source_id=source.pk, items=page.own) if page.own else []
    observations = edits_seen(source, get_adapter(source.adapter), page.observations)
    if not receipts and observations is page.observations:
        return page
    return replace(page, observations=observations, receipts=[*page.receipts, *receipts])


def edits_seen(source: Source, adapter, observations: list) -> list:
    """Where the adapter maps a read comment onto its edit event (`edit_of`) and the ledger holds the
    comment under its key with another payload, the comment is staged with the payload first accepted
    (the source still shows it) and its current text as the edit event the webhook would have made."""
    edit_of = getattr(adapter, "edit_of", None)
    if edit_of is None:
        return observations
    allowed = set(source.event_types)
    editable = {o.event_key: o for o in observations if edit_of(o) is not None}
    if not editable:
        return observations
    held = {key: rest for key, *rest in InboundEvent.objects.filter(source=source, event_key__in=list(editable))
            .values_list("event_key", "payload_hash", "sender_ref", "conversation_ref", "message_text")}
    staged = []
    for observation in observations:
        first, sender, post, text = held.get(observation.event_key) or (None, None, None, None)
        # An edit changes the text only: another author or post is an identity conflict, and the
        # same text (where it is still kept) is no edit either.
        edited = (first is not None and first != observation.payload_hash and sender == observation.sender_ref
                  and post == observation.conversation_ref and (not text or text != observation.text))
        if observation.event_key in editable and edited:
            staged.append(replace(observation, payload_hash=first))
            edit = edit_of(observation)
            if edit.event_type in allowed:
                staged.append(edit)
        else:
            staged.append(observation)
    return staged


def _commit_page(source: Source, token: str, run: ReconcileRun, page: SourcePage, began: datetime) -> PageOutcome:
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
            logger.warning("reconcile scan source=%s run=%s discarded code=%s", source.name, run.pk, limit.code)
            return PageOutcome(source.name, run.pk, "discarded", run.pages, run.staged_events, error=failure)
        if page.complete:
            bulk_session()  # the statements below each read the whole generation
            generation_analyze()
            # Stand-in times (a notification without the item's own) take the time the read showed.
            events_occurred_at_correct(source=source, observed=StagedEvent.objects.filter(run=run),
                                       actor=RECONCILE_ACTOR)
            report = report_write(source, run)
            transition(table=RUN_TABLE, model=ReconcileRun, history=ReconcileRunTransition, owner_field="run",
                       pk=run.pk, to=RunState.REPAIRING, actor=RECONCILE_ACTOR, reason_code="report_written",
                       expected=RunState.SCANNING).raise_if_refused()
            run.state = RunState.REPAIRING
        elif page.next_cursor is None:
            generation_discard(state, run, "exhausted_without_completion", RECONCILE_ACTOR)
            schedule_after_failure(state)
            outcome = PageOutcome(source.name, run.pk, "discarded", run.pages, run.staged_events)
        else:
            schedule_next_page(state)  # the scan continues on the next poll
            outcome = PageOutcome(source.name, run.pk, "staged", run.pages, run.staged_events)
    if run.state == RunState.REPAIRING:
        return _publish(source, token, run, report=report)
    logger.info("reconcile page source=%s run=%s state=%s pages=%s staged=%s",
                source.name, run.pk, outcome.state, outcome.pages, outcome.staged_events)
    return outcome


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
    logger.warning("reconcile page source=%s run=%s failed class=%s code=%s",
                   source.name, run.pk, failure.error_class, failure.code)
    return PageOutcome(source.name, run.pk, "failed", run.pages, run.staged_events, error=failure)


def scan_until_done(
    *, source: Source, trigger: str = "command", actor: str = RECONCILE_ACTOR,
    since: datetime | None = None, until: datetime | None = None, base_url: str | None = None,
    wait_seconds: float = 0.0, retry_every: float = 0.5, max_pages: int | None = None,
    on_page: Callable[[PageOutcome], None] | None = None,
) -> PageOutcome:
    """Page calls in the foreground until the scan leaves `staged`: its last outcome.

    While another worker holds the lease the call is retried every
    `retry_every` seconds for up to `wait_seconds`, then LeaseBusy is raised.
    ScanConflict (another window is active) is raised at once. `on_page` sees
    each staged page. A scan passes MAX_PAGES only by being discarded, so
    `max_pages` page calls (default: the page limit plus one) without an end mean something
    is wrong: RuntimeError.
    """
    max_pages = scan_limit("pages") + 1 if max_pages is None else max_pages
    deadline = time.monotonic() + wait_seconds
    calls = 0
    while calls < max_pages:
        try:
            outcome = reconcile_page(source=source, trigger=trigger, actor=actor, since=since, until=until,
                                     base_url=base_url)
        except LeaseBusy:
            if time.monotonic() >= deadline:
                raise
            time.sleep(retry_every)
            continue
        calls += 1
        if outcome.state != "staged":
            return outcome
        if on_page is not None:
            on_page(outcome)
    raise RuntimeError(f"the scan of {source.name} did not finish in {max_pages} page calls")


def scan_restart(*, source: Source, actor: str, expected_run: int | None = None) -> int | None:
    """Discard the active scan's staging (never history or the checkpoint); due at once.

    Refused (LeaseBusy) while another worker's page call holds the lease;
    refused (RestartRefused) when `expected_run` is given and the active run
    is another one or none (seed 004: RestartScan "rejects a stale expected
    generation"), and when the active run has already written its report.
    Returns the discarded run's id, or None when no scan was active.
    """
    token = lease_acquire(source)
    refusal = ""
    try:
        with transaction.atomic():
            state = lease_check(source.pk, token)
            run = state.active_run
            if expected_run is not None and (run is None or run.pk != expected_run):
                refusal = (f"the active scan of {source.name} is {f'run {run.pk}' if run else 'none'}, "
                           f"not run {expected_run}: nothing discarded")
            elif run is not None and not generation_discard(state, run, "restarted_by_operator", actor):
                refusal = (f"run {run.pk} has written its report and is applying its repairs; "
                           "it publishes on the next page call and cannot be discarded")
            else:
                state.next_due_at = clock.now()
                state.save()
        if refusal:
            raise RestartRefused(refusal)
        logger.info("reconcile restart source=%s run=%s actor=%s", source.name, run and run.pk, actor)
        return run.pk if run else None
    finally:
        lease_release(source.pk, token)
