"""Reconciliation writes: leased page scans, compare-report-repair, the bounded poll, decisions.

A scan reads a source's events page by page (seed 004). Each page call holds
a durable lease with an unpredictable token; its commit re-checks the token
against a fresh clock, so a holder that lost its lease publishes nothing.
Pages are staged; the final page's transaction compares the staged generation
with both ledgers, writes the report and its findings and moves the run to
REPAIRING (seed 000: "write a report before any repair"). Repairs then run in
their own transactions, each recording its outcome on its finding; a last
transaction drops the staging, advances the checkpoint and publishes the run.
A crash in between leaves the run REPAIRING: the next page call for the source
finishes its planned repairs (each idempotent) before anything else.
"""

from __future__ import annotations

import hashlib
import inspect
import logging
import secrets
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import Count, Exists, F, OuterRef, Q, Subquery, Sum
from django.utils import timezone

from conduit.canonical import payload_hash
from conduit.providers.base import Observation, PageFailure, Parsed, SourcePage
from conduit.providers.registry import get_adapter
from conduit.sql import insert_rows
from conduit.statemachine import record_created, transition
from ingress.models import (
    InboundEvent,
    QuarantineReceipt,
    QuarantineState,
    ReconcileStatus,
    Source,
)
from ingress.services import events_reconcile_mark, observations_accept, source_config
from reconcile.models import (
    RUN_TABLE,
    Decision,
    Finding,
    FindingKind,
    ReconcileReport,
    ReconcileRun,
    ReconcileRunTransition,
    Repair,
    RepairOutcome,
    RunState,
    ScanState,
    SchedulerCursor,
    StagedEvent,
    StagedReceipt,
)
from replies.models import DeliveryState as S
from replies.models import ReplyAction
from replies.sender import (
    Result,
    reply_close,
    unknown_authorize_retry,
    unknown_confirm_sent,
)
from replies.services import reply_action_transition

logger = logging.getLogger("conduit.reconcile")

RECONCILE_ACTOR = "system:reconcile"
BACKOFF_BASE_SECONDS = 5
MAX_KEPT_REJECTIONS = 1000
REPLAY_BATCH = 500
CHUNK = 2000
STAGE_STATEMENT_ROWS = 500
# Seed 004's default limits. A page over a per-page limit fails (nothing of it is
# staged); a generation that would pass a per-scan limit is discarded, the last
# complete checkpoint stays, and the source backs off like any failure.
MAX_PAGE_ITEMS = 1000  # raised to CONDUIT_RECONCILE_PAGE_SIZE when that asks for more
MAX_PAGE_BYTES = 8 * 1024 * 1024
MAX_STAGED_ITEMS = 10_000
MAX_STAGED_BYTES = 32 * 1024 * 1024
MAX_PAGES = 1000
MAX_TOKEN_BYTES = 4096
# A report's counts, in the order pages and printouts show them (JSON storage may reorder keys).
REPORT_COUNTS = (
    "events_compared", "events_local", "events_matched", "missing_recovered", "identity_conflicts",
    "source_unverified", "duplicates_converged", "actions_compared", "replies_confirmed", "receipts_attached",
    "sent_without_receipt", "retry_candidates", "unknown_sends", "sending_in_flight", "suppressed_actions",
    "unexpected_receipts", "unknown_receipts", "invalid_source_items", "quarantined_inputs", "page_calls",
    "external_calls",
)


def clock() -> datetime:
    """The trusted clock; tests replace it to hold time still."""
    return timezone.now()


class LeaseBusy(Exception):
    """Another worker holds this source's live scan lease: skip it."""


class LeaseLost(Exception):
    """This worker's lease expired or was taken over before it could commit."""


class ScanConflict(Exception):
    """A scan with another window is active; restart it explicitly to change the window."""


class RestartRefused(Exception):
    """`--restart` named another generation than the active one, or one already reporting."""


class _ScanLimit(Exception):
    """Staging this page would pass a per-scan limit: the generation is discarded."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


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


# -- scan state and lease ---------------------------------------------------

def scan_state_for(source: Source) -> ScanState:
    state, _ = ScanState.objects.get_or_create(
        source=source,
        defaults={"next_due_at": clock(), "interval_seconds": settings.CONDUIT_RECONCILE_INTERVAL_SECONDS},
    )
    return state


def _lease_acquire(source: Source) -> str:
    """Take the source's scan lease (its scan state is created on first use)."""
    token = secrets.token_hex(32)
    for attempt in range(2):
        now = clock()
        taken = ScanState.objects.filter(
            Q(lease_token="") | Q(lease_expires_at__lte=now), source_id=source.pk
        ).update(lease_token=token,
                 lease_expires_at=now + timedelta(seconds=settings.CONDUIT_RECONCILE_LEASE_SECONDS))
        if taken:
            return token
        if attempt or ScanState.objects.filter(source_id=source.pk).exists():
            break
        scan_state_for(source)  # a source never scanned: one state row, then try again
    raise LeaseBusy(f"source {source.name}: another worker holds the scan lease")


def _lease_check(source_id: int, token: str) -> ScanState:
    """Inside the commit's transaction: lock the state row, re-check the token on a fresh clock."""
    state = ScanState.objects.select_for_update(no_key=True).get(source_id=source_id)
    if state.lease_token != token or state.lease_expires_at is None or state.lease_expires_at <= clock():
        raise LeaseLost(f"source {source_id}: the scan lease expired or was taken over")
    return state


def _lease_renew(state: ScanState) -> None:
    """Extend a lease just checked (its row is locked): repairs may outlast one page's lease."""
    state.lease_expires_at = clock() + timedelta(seconds=settings.CONDUIT_RECONCILE_LEASE_SECONDS)
    ScanState.objects.filter(pk=state.pk).update(lease_expires_at=state.lease_expires_at)


def _lease_release(source_id: int, token: str) -> None:
    ScanState.objects.filter(source_id=source_id, lease_token=token).update(
        lease_token="", lease_expires_at=None
    )


def _run_for_page(source: Source, token: str, *, trigger: str, actor: str,
                  since: datetime | None, until: datetime | None) -> ReconcileRun:
    """The active scan generation, or a new one over the requested (or scheduled) window.

    A run left REPAIRING (its report committed) is returned whatever the
    window: it must publish before any new generation starts.
    """
    with transaction.atomic():
        state = _lease_check(source.pk, token)
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
            source=source, trigger=trigger, requested_by=actor, since=since, until=until or clock(),
            created_at=clock(), complete_scan=since is None and until is None,
        )
        record_created(table=RUN_TABLE, history=ReconcileRunTransition, owner_field="run", owner_ids=[run.pk],
                       path=[RunState.SCANNING], actor=actor, reason_codes=["scan_started"], at=run.created_at)
        state.active_run = run
        state.save(update_fields=["active_run"])
        return run


# -- one page -------------------------------------------------------------

def reconcile_page(
    *, source: Source, trigger: str = "schedule", actor: str = RECONCILE_ACTOR,
    since: datetime | None = None, until: datetime | None = None, base_url: str | None = None,
) -> PageOutcome:
    """Make exactly one source page call for `source` and commit what it returned.

    Raises LeaseBusy when another worker holds the lease (nothing was called).
    A stale holder gets state `lease_lost` and commits nothing. `base_url`
    reads another copy of the source (the canary's own fixture source).
    """
    token = _lease_acquire(source)
    try:
        try:
            run = _run_for_page(source, token, trigger=trigger, actor=actor, since=since, until=until)
        except LeaseLost:
            return PageOutcome(source.name, 0, "lease_lost")
        if run.state == RunState.REPAIRING:
            # A crash left the report committed and its repairs pending: finish them, no page call.
            return _guarded(source, token, run, lambda: _finish(source, token, run, called=False))
        adapter = get_adapter(source.adapter)
        kwargs = dict(
            config=source_config(source), base_url=base_url or source.transport_url, since=run.since,
            until=run.until, cursor=run.cursor or None, limit=settings.CONDUIT_RECONCILE_PAGE_SIZE,
            timeout=settings.CONDUIT_RECONCILE_PAGE_TIMEOUT_SECONDS,
        )
        if not run.cursor and run.pages == 0 and _accepts(adapter, "checkpoint"):
            # Seed 004: a new generation receives the last complete checkpoint.
            kwargs["checkpoint"] = ScanState.objects.values_list("checkpoint_until", flat=True).get(
                source_id=source.pk)
        if _accepts(adapter, "max_bytes"):
            kwargs["max_bytes"] = MAX_PAGE_BYTES
        # "Reconcile now" compares requests with the time this call began, not its commit.
        began = clock()
        try:
            page = adapter.read_page(**kwargs)
        except PageFailure as failure:
            return _page_failed(source, token, run, failure)
        except Exception as exc:  # an error no one authored: its text is never kept
            logger.warning("reconcile page source=%s unauthored error type=%s", source.name, type(exc).__name__)
            return _page_failed(
                source, token, run,
                PageFailure("unauthored", "unexpected_error", f"reading the page raised {type(exc).__name__}"),
            )
        return _guarded(source, token, run, lambda: _commit_page(source, token, run, page, began))
    finally:
        _lease_release(source.pk, token)


def _accepts(adapter, keyword: str) -> bool:
    """Whether the adapter's read_page takes `keyword` (an adapter written before it existed does not)."""
    parameters = inspect.signature(adapter.read_page).parameters
    return keyword in parameters or any(p.kind is p.VAR_KEYWORD for p in parameters.values())


def _guarded(source: Source, token: str, run: ReconcileRun, step) -> PageOutcome:
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
        return _page_failed(source, token, run, _unauthored(exc, "committing the page"))


def _unauthored(exc: BaseException, doing: str) -> PageFailure:
    code = "database_error" if isinstance(exc, DatabaseError) else "unexpected_error"
    return PageFailure("unauthored", code, f"{doing} raised {type(exc).__name__}")


def _commit_page(source: Source, token: str, run: ReconcileRun, page: SourcePage, began: datetime) -> PageOutcome:
    """The page's one transaction: lease re-check, protocol and limits, staging, and on the
    final page the report and its findings. Repairs follow in their own transactions."""
    with transaction.atomic():
        state = _lease_check(source.pk, token)
        run = ReconcileRun.objects.select_for_update().get(pk=run.pk)
        _page_check(run, page)
        try:
            with transaction.atomic():  # a savepoint: a limit takes this page's staging back
                _stage(run, page, began)
        except _ScanLimit as limit:
            failure = PageFailure("protocol", limit.code, _LIMIT_MESSAGES[limit.code])
            _discard(state, run, limit.code, RECONCILE_ACTOR)
            _record_error(state, failure)
            _schedule_after_failure(state)
            logger.warning("reconcile scan source=%s run=%s discarded code=%s", source.name, run.pk, limit.code)
            return PageOutcome(source.name, run.pk, "discarded", run.pages, run.staged_events, error=failure)
        if page.complete:
            report = _report(source, run)
            transition(table=RUN_TABLE, model=ReconcileRun, history=ReconcileRunTransition, owner_field="run",
                       pk=run.pk, to=RunState.REPAIRING, actor=RECONCILE_ACTOR, reason_code="report_written",
                       expected=RunState.SCANNING).raise_if_refused()
            run.state = RunState.REPAIRING
        elif page.next_cursor is None:
            _discard(state, run, "exhausted_without_completion", RECONCILE_ACTOR)
            _schedule_after_failure(state)
            outcome = PageOutcome(source.name, run.pk, "discarded", run.pages, run.staged_events)
        else:
            state.next_due_at = clock()  # the scan continues on the next poll
            state.failures = 0
            _clear_error(state)
            state.save()
            outcome = PageOutcome(source.name, run.pk, "staged", run.pages, run.staged_events)
    if run.state == RunState.REPAIRING:
        return _finish(source, token, run, report=report)
    logger.info("reconcile page source=%s run=%s state=%s pages=%s staged=%s",
                source.name, run.pk, outcome.state, outcome.pages, outcome.staged_events)
    return outcome


_LIMIT_MESSAGES = {
    "scan_too_many_pages": f"the scan needs more than {MAX_PAGES} pages",
    "scan_too_many_items": f"the scan stages more than {MAX_STAGED_ITEMS} items",
    "scan_too_large": f"the scan stages more than {MAX_STAGED_BYTES // (1024 * 1024)} MiB",
}


def _token_bytes(token: str) -> int:
    return len(token.encode("utf-8", "surrogatepass"))


def _cursor_digest(cursor: str) -> str:
    return hashlib.sha256(cursor.encode("utf-8", "surrogatepass")).hexdigest()


def _page_check(run: ReconcileRun, page: SourcePage) -> None:
    """Seed 004: one nonempty scan id per generation, no repeated cursor (nor a cycle back to
    any cursor of this generation), no completion with a cursor, and the per-page limits.
    A token over 4 KiB is refused, never truncated."""
    if not page.scan_id:
        raise PageFailure("protocol", "page_scan_id_missing", "the page carries no scan id")
    if _token_bytes(page.scan_id) > MAX_TOKEN_BYTES:
        raise PageFailure("protocol", "page_scan_id_too_long", "the page scan id exceeds 4 KiB")
    if run.scan_id and page.scan_id != run.scan_id:
        raise PageFailure("protocol", "page_scan_changed", "the page belongs to another scan generation")
    if page.complete and page.next_cursor:
        raise PageFailure("protocol", "page_complete_with_cursor", "the page claims completion and a next cursor")
    if page.next_cursor and _token_bytes(page.next_cursor) > MAX_TOKEN_BYTES:
        raise PageFailure("protocol", "page_cursor_too_long", "the page cursor exceeds 4 KiB")
    if page.next_cursor and page.next_cursor == run.cursor:
        raise PageFailure("protocol", "page_repeated_cursor", "the page repeats the cursor it was read from")
    if page.next_cursor and _cursor_digest(page.next_cursor) in run.cursors_seen:
        raise PageFailure("protocol", "page_cursor_cycle",
                          "the page leads back to a cursor this scan was already given")
    items = len(page.observations) + len(page.rejections)
    if items > max(MAX_PAGE_ITEMS, settings.CONDUIT_RECONCILE_PAGE_SIZE):
        raise PageFailure("protocol", "page_too_many_items", f"the page carries {items} items")
    if page.size_bytes > MAX_PAGE_BYTES:
        raise PageFailure("protocol", "page_too_large", "the page exceeds 8 MiB")


STAGED_EVENT_COLUMNS = (
    "run", "event_key", "payload_hash", "source_event_id", "event_type", "conversation_ref",
    "message_ref", "sender_ref", "occurred_at", "occurred_at_original", "text",
)


def _insert_new(model: type, columns: tuple[str, ...], rows: list[tuple]) -> int:
    """INSERT ... ON CONFLICT DO NOTHING in bounded statements; how many rows were new."""
    return sum(
        len(insert_rows(model, columns, rows[i:i + STAGE_STATEMENT_ROWS], ignore_conflicts=True))
        for i in range(0, len(rows), STAGE_STATEMENT_ROWS)
    )


def _stage(run: ReconcileRun, page: SourcePage, began: datetime) -> None:
    """Stage the page's events and receipts and advance the cursor, in the caller's transaction.

    An event already staged by an earlier page with the same payload is one
    event; with another payload the page fails (and stages nothing). Raises
    _ScanLimit when the generation would pass a per-scan limit.
    """
    if run.pages + 1 > MAX_PAGES:
        raise _ScanLimit("scan_too_many_pages")
    if run.staged_bytes + page.size_bytes > MAX_STAGED_BYTES:
        raise _ScanLimit("scan_too_large")
    new_events = _insert_new(StagedEvent, STAGED_EVENT_COLUMNS, [
        (run.pk, o.event_key, o.payload_hash, o.source_event_id, o.event_type, o.conversation_ref,
         o.message_ref, o.sender_ref, o.occurred_at, o.occurred_at_original, o.text)
        for o in page.observations
    ])
    if new_events < len(page.observations):
        # Some were staged already (by this page or an earlier one): same payload or
        # the page fails, and its transaction takes these inserts back with it.
        _refuse_conflicting_duplicates(run, page.observations)
    new_receipts = _insert_new(
        StagedReceipt, ("run", "reply_key", "provider_reply_id", "event_key"),
        [(run.pk, r.reply_key, r.provider_reply_id, r.event_key) for r in page.receipts],
    )
    kept = run.rejections
    for rejection in page.rejections:
        if len(kept) < MAX_KEPT_REJECTIONS:
            kept.append({"page": run.pages + 1, "index": rejection.index, "code": rejection.reason_code})
    if run.staged_events + new_events + run.staged_receipts + new_receipts > MAX_STAGED_ITEMS:
        raise _ScanLimit("scan_too_many_items")
    seen = run.cursors_seen + ([_cursor_digest(page.next_cursor)] if page.next_cursor else [])
    ReconcileRun.objects.filter(pk=run.pk).update(
        scan_id=page.scan_id, cursor=page.next_cursor or "", pages=F("pages") + 1,
        page_calls=F("page_calls") + 1, staged_events=F("staged_events") + new_events,
        staged_receipts=F("staged_receipts") + new_receipts, rejections=kept,
        rejection_count=F("rejection_count") + len(page.rejections),
        first_page_at=run.first_page_at or began, cursors_seen=seen,
        staged_bytes=F("staged_bytes") + page.size_bytes,
    )
    run.refresh_from_db()


def _refuse_conflicting_duplicates(run: ReconcileRun, observations: list[Observation]) -> None:
    """An event staged twice must carry one payload; a conflict fails the page, not the scan."""
    hashes: dict[str, str] = {}
    for o in observations:
        if hashes.setdefault(o.event_key, o.payload_hash) != o.payload_hash:
            raise PageFailure("protocol", "page_conflicting_duplicate",
                              "one event appears twice in the page with different payloads")
    clash = StagedEvent.objects.filter(run=run, event_key__in=list(hashes)).exclude(
        payload_hash__in=set(hashes.values())
    ).values_list("event_key", "payload_hash")
    for key, staged_hash in clash.iterator():
        if hashes[key] != staged_hash:
            raise PageFailure("protocol", "page_conflicting_duplicate",
                              "an event staged by an earlier page reappears with a different payload")


def _record_error(state: ScanState, failure: PageFailure) -> None:
    state.last_error_class, state.last_error_code = failure.error_class, failure.code
    state.last_error_message, state.last_error_at = failure.message, clock()


def _clear_error(state: ScanState) -> None:
    state.last_error_class = state.last_error_code = state.last_error_message = ""
    state.last_error_at = None


def _schedule_after_failure(state: ScanState) -> None:
    """Deterministic exponential backoff from 5 s, capped by the source's interval."""
    state.failures += 1
    delay = min(state.interval_seconds, BACKOFF_BASE_SECONDS * 2 ** min(state.failures - 1, 30))
    state.next_due_at = clock() + timedelta(seconds=delay)
    state.save()


def _page_failed(source: Source, token: str, run: ReconcileRun, failure: PageFailure) -> PageOutcome:
    """Keep the safe class, code and Conduit's own line; staged pages and the checkpoint stay."""
    with transaction.atomic():
        try:
            state = _lease_check(source.pk, token)
        except LeaseLost:
            return PageOutcome(source.name, run.pk, "lease_lost", error=failure)
        ReconcileRun.objects.filter(pk=run.pk).update(page_calls=F("page_calls") + 1)
        _record_error(state, failure)
        _schedule_after_failure(state)
    logger.warning("reconcile page source=%s run=%s failed class=%s code=%s",
                   source.name, run.pk, failure.error_class, failure.code)
    return PageOutcome(source.name, run.pk, "failed", run.pages, run.staged_events, error=failure)


def _discard(state: ScanState, run: ReconcileRun, reason: str, actor: str) -> bool:
    """Drop the scan's staging; the last complete checkpoint stays authoritative.

    Through the run's declared table: a run that already wrote its report
    (REPAIRING) is not discarded, and the refused move is recorded.
    """
    outcome = transition(
        table=RUN_TABLE, model=ReconcileRun, history=ReconcileRunTransition, owner_field="run", pk=run.pk,
        to=RunState.DISCARDED, actor=actor, reason_code=reason[:64],
        extra={"discard_reason": reason[:64], "finished_at": clock(), "cursor": ""},
    )
    if not outcome.applied:
        return False
    StagedEvent.objects.filter(run=run).delete()
    StagedReceipt.objects.filter(run=run).delete()
    state.active_run = None
    return True


def scan_restart(*, source: Source, actor: str, expected_run: int | None = None) -> int | None:
    """Discard the active scan's staging (never history or the checkpoint); due at once.

    Refused (LeaseBusy) while another worker's page call holds the lease;
    refused (RestartRefused) when `expected_run` is given and the active run
    is another one or none (seed 004: RestartScan "rejects a stale expected
    generation"), and when the active run has already written its report.
    Returns the discarded run's id, or None when no scan was active.
    """
    token = _lease_acquire(source)
    refusal = ""
    try:
        with transaction.atomic():
            state = _lease_check(source.pk, token)
            run = state.active_run
            if expected_run is not None and (run is None or run.pk != expected_run):
                refusal = (f"the active scan of {source.name} is {f'run {run.pk}' if run else 'none'}, "
                           f"not run {expected_run}: nothing discarded")
            elif run is not None and not _discard(state, run, "restarted_by_operator", actor):
                refusal = (f"run {run.pk} has written its report and is applying its repairs; "
                           "it publishes on the next page call and cannot be discarded")
            else:
                state.next_due_at = clock()
                state.save()
        if refusal:
            raise RestartRefused(refusal)
        logger.info("reconcile restart source=%s run=%s actor=%s", source.name, run and run.pk, actor)
        return run.pk if run else None
    finally:
        _lease_release(source.pk, token)


def reconcile_request(*, source: Source, actor: str) -> None:
    """An operator asks for a scan: the source stays due until one that starts after this completes."""
    scan_state_for(source)
    now = clock()
    ScanState.objects.filter(source=source).update(requested_at=now, requested_by=actor, next_due_at=now)
    logger.info("reconcile requested source=%s actor=%s", source.name, actor)


# -- compare, report, repair ------------------------------------------------

def _local_in_window(source: Source, run: ReconcileRun):
    events = InboundEvent.objects.filter(source=source)
    if run.since is not None:
        events = events.filter(occurred_at__gte=run.since)
    if run.until is not None:
        events = events.filter(occurred_at__lt=run.until)
    return events


def _report(source: Source, run: ReconcileRun) -> ReconcileReport:
    """Compare the complete staged generation with both ledgers; write the report and its findings.

    Runs in the final page's transaction; no repair touches a ledger here.
    """
    now = clock()
    timer = time.monotonic()
    if connection.vendor == "postgresql":
        # The staged tables grew by a whole generation since autovacuum last looked:
        # fresh statistics keep the comparison's joins on the right plans.
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {StagedEvent._meta.db_table}, {StagedReceipt._meta.db_table}")
    staged = StagedEvent.objects.filter(run=run)
    local = _local_in_window(source, run)
    same_key = InboundEvent.objects.filter(event_key=OuterRef("event_key"))
    in_source = staged.filter(event_key=OuterRef("event_key"))
    missing = staged.filter(~Exists(same_key))
    conflicting = staged.filter(Exists(same_key.exclude(payload_hash=OuterRef("payload_hash"))))
    same_payload = Exists(in_source.filter(payload_hash=OuterRef("payload_hash")))
    matched = local.filter(same_payload)
    unverified = local.filter(~Exists(in_source))

    receipt = StagedReceipt.objects.filter(run=run, reply_key=OuterRef("reply_key"))
    actions = ReplyAction.objects.filter(
        Exists(staged.filter(event_key=OuterRef("event_id")))
    ).annotate(receipt_id=Subquery(receipt.values("provider_reply_id")[:1]))
    with_receipt, without_receipt = Q(receipt_id__isnull=False), Q(receipt_id__isnull=True)
    unconfirmed = (S.SENDING, S.SEND_STATUS_UNKNOWN)
    attach = actions.filter(with_receipt, delivery_state__in=unconfirmed)
    lost = actions.filter(without_receipt, delivery_state=S.SENT)
    candidates = actions.filter(without_receipt, delivery_state=S.SEND_STATUS_UNKNOWN)
    unexpected = actions.filter(with_receipt).exclude(delivery_state__in=(*unconfirmed, S.SENT))
    unknown_receipts = StagedReceipt.objects.filter(run=run).filter(
        ~Exists(ReplyAction.objects.filter(reply_key=OuterRef("reply_key")))
    )
    adapter = get_adapter(source.adapter)
    quarantined = QuarantineReceipt.objects.filter(source=source, state=QuarantineState.QUARANTINED)
    if run.since is not None:
        quarantined = quarantined.filter(received_at__gte=run.since)
    # Every action count from one grouped read: (state, has a receipt) -> actions.
    by_state: dict[tuple[str, bool], int] = {}
    grouped = actions.annotate(has_receipt=Exists(receipt)).values("delivery_state", "has_receipt")
    for row in grouped.annotate(n=Count("pk")).order_by():
        by_state[(row["delivery_state"], row["has_receipt"])] = row["n"]

    def n(*states: str, receipt: bool | None = None) -> int:
        return sum(v for (state, has), v in by_state.items()
                   if state in states and (receipt is None or has == receipt))

    attached = n(*unconfirmed, receipt=True)
    lost_count, candidate_count = n(S.SENT, receipt=False), n(S.SEND_STATUS_UNKNOWN, receipt=False)
    counts = {  # the order of REPORT_COUNTS
        "events_compared": run.staged_events,
        "events_local": local.count(),
        "events_matched": matched.count(),
        "missing_recovered": missing.count(),
        "identity_conflicts": conflicting.count(),
        "source_unverified": unverified.count(),
        "duplicates_converged": matched.aggregate(n=Sum(F("seen_count") - 1))["n"] or 0,
        "actions_compared": sum(by_state.values()),
        "replies_confirmed": n(S.SENT, receipt=True) + attached,
        "receipts_attached": attached,
        "sent_without_receipt": lost_count,
        "retry_candidates": candidate_count,
        "unknown_sends": lost_count + candidate_count,
        "sending_in_flight": n(S.SENDING, receipt=False),
        "suppressed_actions": n(S.SUPPRESSED_TEST),
        "unexpected_receipts": sum(v for (state, has), v in by_state.items()
                                   if has and state not in (*unconfirmed, S.SENT)),
        "unknown_receipts": unknown_receipts.count(),
        "invalid_source_items": run.rejection_count,
        "quarantined_inputs": quarantined.count(),
        "page_calls": run.page_calls,
        "external_calls": run.page_calls if adapter.live else 0,
    }
    summary = {
        "source": source.name,
        "source_system": source.source_system,
        "account_ref": source.account_ref,
        "run": run.pk,
        "trigger": run.trigger,
        "requested_by": run.requested_by,
        "contract_version": source.contract_version,
        "window": {"since": _iso(run.since), "until": _iso(run.until)},
        "source_cursor": {"scan_id": run.scan_id, "pages": run.pages, "complete_scan": run.complete_scan,
                          "checkpoint_until": _iso(run.until) if run.complete_scan else None},
        "started_at": _iso(run.first_page_at),
        "published_at": _iso(now),
        "counts": counts,
    }
    # The report and its findings are written before any repair touches a ledger.
    report = ReconcileReport.objects.create(run=run, source=source, created_at=now, summary=summary)

    def findings(kind: str, rows, repair: str = Repair.NONE, detail: str = "", *,
                 actions: bool = False, receipts: bool = False) -> None:
        """Write one finding per row, streamed in chunks (no table is held in memory)."""
        if actions:
            rows = rows.values_list("event_id", "reply_key", "id", "delivery_state")
        elif receipts:
            rows = rows.values_list("event_key", "reply_key")
        else:
            rows = rows.values_list("event_key")
        batch = []
        for row in rows.order_by().iterator(chunk_size=CHUNK):
            event_key, reply_key, action_id, action_state = (*row, "", None, "")[:4]
            batch.append(Finding(report=report, kind=kind, event_key=event_key, reply_key=reply_key,
                                 action_id=action_id, action_state=action_state, repair=repair, detail=detail,
                                 repair_outcome=RepairOutcome.PLANNED if repair != Repair.NONE else ""))
            if len(batch) >= CHUNK:
                Finding.objects.bulk_create(batch)
                batch = []
        Finding.objects.bulk_create(batch)

    findings(FindingKind.MISSING_LOCAL, missing, Repair.REPLAYED,
             "the source has it and Conduit did not: replayed through ingest, replies held for review")
    findings(FindingKind.IDENTITY_CONFLICT, conflicting, Repair.NONE,
             "the source's payload differs from the one first accepted: the first stays")
    findings(FindingKind.SOURCE_UNVERIFIED, unverified, Repair.MARKED_UNVERIFIED,
             "no source evidence in this window: kept, marked SOURCE_UNVERIFIED")
    for kind, rows, repair, detail in (
        (FindingKind.RECEIPT_ATTACHED, attach, Repair.RECEIPT_ATTACHED,
         "the provider shows this reply applied: receipt attached, SENT"),
        (FindingKind.RECEIPT_MISSING, lost, Repair.MARKED_UNKNOWN,
         "SENT locally, but the provider shows no such reply: SEND_STATUS_UNKNOWN, nothing resent"),
        (FindingKind.RETRY_CANDIDATE, candidates, Repair.NONE,
         "no receipt on the provider's thread: a person decides whether the same key may run again"),
        (FindingKind.UNEXPECTED_RECEIPT, unexpected, Repair.NONE,
         "the provider shows a reply for an action Conduit did not send"),
    ):
        findings(kind, rows, repair, detail, actions=True)
    findings(FindingKind.UNKNOWN_RECEIPT, unknown_receipts, Repair.NONE,
             "the provider shows a reply under a key Conduit never planned", receipts=True)
    Finding.objects.bulk_create([
        Finding(report=report, kind=FindingKind.INVALID_SOURCE_ITEM, detail=f"page {r['page']} item {r['index']}: {r['code']}")
        for r in run.rejections
    ])
    logger.info("reconcile report source=%s run=%s report=%s report_ms=%s %s", source.name, run.pk, report.pk,
                _elapsed_ms(timer), " ".join(f"{k}={v}" for k, v in counts.items()))
    return report


def _finish(source: Source, token: str, run: ReconcileRun, *, report: ReconcileReport | None = None,
            called: bool = True) -> PageOutcome:
    """Apply the report's planned repairs, then publish: staging, checkpoint and run state at once.

    Each repair step is its own transaction that re-checks (and extends) the
    lease and records its outcome on its findings, so a failed repair leaves
    the report, its findings and every other repair committed. Every step is
    idempotent (it acts only on findings still `planned`), so a run found
    REPAIRING after a crash is finished by the next page call.
    """
    report = report or ReconcileReport.objects.get(run=run)
    timer = time.monotonic()
    _replay_missing(source, token, run, report)
    _mark_evidence(source, token, run, report)
    _repair_actions(source, token, run, report, kind=FindingKind.RECEIPT_ATTACHED, to=S.SENT,
                    reason="receipt_found_at_reconcile")
    _repair_actions(source, token, run, report, kind=FindingKind.RECEIPT_MISSING, to=S.SEND_STATUS_UNKNOWN,
                    reason="receipt_missing_at_reconcile")
    repair_ms = _elapsed_ms(timer)
    now = clock()
    with transaction.atomic():
        state = _lease_check(source.pk, token)
        run = ReconcileRun.objects.select_for_update().get(pk=run.pk)
        moved = transition(
            table=RUN_TABLE, model=ReconcileRun, history=ReconcileRunTransition, owner_field="run", pk=run.pk,
            to=RunState.PUBLISHED, actor=RECONCILE_ACTOR, reason_code="repairs_done", expected=RunState.REPAIRING,
            extra={"finished_at": now, "cursor": ""},
        )
        if not moved.applied:
            raise LeaseLost(f"run {run.pk} was no longer REPAIRING")
        StagedEvent.objects.filter(run=run).delete()
        StagedReceipt.objects.filter(run=run).delete()
        state.active_run = None
        state.failures = 0
        _clear_error(state)
        if run.complete_scan:
            state.last_run = run
            # Monotonic: an older generation never moves the checkpoint back.
            if state.checkpoint_until is None or run.until > state.checkpoint_until:
                state.checkpoint_until, state.checkpoint_scan_id = run.until, run.scan_id
            state.last_completed_at = now
            if (state.requested_at is not None and run.first_page_at is not None
                    and state.requested_at > run.first_page_at):
                state.next_due_at = now  # asked for after this scan began: it does not answer the request
            else:
                state.requested_at, state.requested_by = None, ""
                state.next_due_at = now + timedelta(seconds=state.interval_seconds)
        elif state.requested_at is None and state.last_completed_at is not None:
            # A window answers no request and is no complete scan: the schedule resumes.
            state.next_due_at = state.last_completed_at + timedelta(seconds=state.interval_seconds)
        state.save()
    logger.info("reconcile published source=%s run=%s report=%s repair_ms=%s complete=%s",
                source.name, run.pk, report.pk, repair_ms, run.complete_scan)
    return PageOutcome(source.name, run.pk, "published", run.pages, run.staged_events, report.pk, called=called)


def _repair_code(exc: BaseException) -> str:
    """A stable code for a repair that raised; the exception's text is never kept."""
    return "database_error" if isinstance(exc, DatabaseError) else "unexpected_error"


def _repair_lease(source: Source, token: str) -> None:
    _lease_renew(_lease_check(source.pk, token))


def _elapsed_ms(since: float) -> int:
    return round((time.monotonic() - since) * 1000)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def _replay_missing(source: Source, token: str, run: ReconcileRun, report: ReconcileReport) -> None:
    """Each missing source event goes through the webhook's own ingest function, a batch a
    transaction; the batch's delivery id is its content digest, so a resumed replay of the
    same batch is the same delivery (ingest dedups it)."""
    planned = Finding.objects.filter(report=report, kind=FindingKind.MISSING_LOCAL,
                                     repair_outcome=RepairOutcome.PLANNED)
    while keys := list(planned.order_by("event_key").values_list("event_key", flat=True)[:REPLAY_BATCH]):
        try:
            with transaction.atomic():
                _repair_lease(source, token)
                rows = StagedEvent.objects.filter(run=run, event_key__in=keys).order_by("event_key")
                batch = [Observation(
                    index=index, source_system=source.source_system, source_account_ref=source.account_ref,
                    source_event_id=row.source_event_id, event_type=row.event_type,
                    conversation_ref=row.conversation_ref, message_ref=row.message_ref,
                    sender_ref=row.sender_ref, occurred_at=row.occurred_at,
                    occurred_at_original=row.occurred_at_original, payload_hash=row.payload_hash,
                    contract_version=source.contract_version, canary=source.canary, text=row.text,
                ) for index, row in enumerate(rows)]
                digest = payload_hash(sorted([o.event_key, o.payload_hash] for o in batch))
                observations_accept(
                    source=source, parsed=Parsed(batch, []), delivery_id=f"reconcile:{run.pk}:{digest[:32]}",
                    body_hash=digest, body_bytes=0, now=clock(), actor=RECONCILE_ACTOR,
                )
                planned.filter(event_key__in=keys).update(repair_outcome=RepairOutcome.APPLIED)
        except LeaseLost:
            raise
        except Exception as exc:
            logger.warning("reconcile repair replay source=%s run=%s failed type=%s",
                           source.name, run.pk, type(exc).__name__)
            planned.filter(event_key__in=keys).update(repair_outcome=RepairOutcome.FAILED,
                                                      repair_code=_repair_code(exc))


def _mark_evidence(source: Source, token: str, run: ReconcileRun, report: ReconcileReport) -> None:
    """MATCHED for events the source shows with the same payload; SOURCE_UNVERIFIED for the
    local events the report found without source evidence."""
    unverified = Finding.objects.filter(report=report, kind=FindingKind.SOURCE_UNVERIFIED,
                                        repair_outcome=RepairOutcome.PLANNED)
    try:
        with transaction.atomic():
            _repair_lease(source, token)
            now = clock()
            in_source = StagedEvent.objects.filter(run=run, event_key=OuterRef("event_key"))
            events_reconcile_mark(
                events=InboundEvent.objects.filter(
                    Exists(in_source.filter(payload_hash=OuterRef("payload_hash"))), source=source),
                to=ReconcileStatus.MATCHED, actor=RECONCILE_ACTOR, reason_code="source_shows_same_payload",
                at=now,
            )
            events_reconcile_mark(
                events=InboundEvent.objects.filter(source=source, event_key__in=unverified.values("event_key")),
                to=ReconcileStatus.SOURCE_UNVERIFIED, actor=RECONCILE_ACTOR,
                reason_code="no_source_evidence", at=now,
            )
            unverified.update(repair_outcome=RepairOutcome.APPLIED)
    except LeaseLost:
        raise
    except Exception as exc:
        logger.warning("reconcile repair evidence source=%s run=%s failed type=%s",
                       source.name, run.pk, type(exc).__name__)
        unverified.update(repair_outcome=RepairOutcome.FAILED, repair_code=_repair_code(exc))


def _repair_actions(source: Source, token: str, run: ReconcileRun, report: ReconcileReport, *,
                    kind: str, to: str, reason: str) -> None:
    """One reply-ledger transition per action, compare-and-set on the state the report saw;
    each with its finding's outcome in one savepoint, a chunk a transaction."""
    planned = Finding.objects.filter(report=report, kind=kind, repair_outcome=RepairOutcome.PLANNED)
    planned.filter(action__isnull=True).update(repair_outcome=RepairOutcome.REFUSED, repair_code="action_gone")
    while chunk := list(planned.order_by("id").values_list("id", "action_id", "action_state", "reply_key")[:CHUNK]):
        with transaction.atomic():
            _repair_lease(source, token)
            receipts = dict(StagedReceipt.objects.filter(
                run=run, reply_key__in=[row[3] for row in chunk]).values_list("reply_key", "provider_reply_id"))
            for finding_id, action_id, prior, reply_key in chunk:
                extra = ({"provider_reply_id": receipts.get(reply_key, ""), "last_error_code": "",
                          "sending_since": None} if to == S.SENT else {"last_error_code": reason})
                try:
                    with transaction.atomic():
                        outcome = reply_action_transition(
                            action_id=action_id, to=to, actor=RECONCILE_ACTOR, reason_code=reason,
                            expected=prior, extra=extra,
                        )
                        Finding.objects.filter(pk=finding_id).update(
                            repair_outcome=RepairOutcome.APPLIED if outcome.applied else RepairOutcome.REFUSED,
                            repair_code="" if outcome.applied else "state_moved",
                        )
                except Exception as exc:
                    logger.warning("reconcile repair action=%s failed type=%s", action_id, type(exc).__name__)
                    Finding.objects.filter(pk=finding_id).update(
                        repair_outcome=RepairOutcome.FAILED, repair_code=_repair_code(exc))


# -- the bounded poll -------------------------------------------------------

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
        scan_state_for(source)
    cursor, _ = SchedulerCursor.objects.get_or_create(name="reconcile")
    now = clock()
    due = list(
        ScanState.objects.filter(next_due_at__lte=now, source__canary=False).select_related("source")
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
            # Seed 004: a failing source "cannot ... starve independent sources". Whatever
            # escaped the page call is this source's recorded failure; the poll goes on.
            outcome = _source_failed(state.source, exc)
        # run 0: the lease was lost before any call; a resumed publication calls no one
        calls += 1 if outcome.run_id and outcome.called else 0
        outcomes.append(outcome)
        SchedulerCursor.objects.filter(pk=cursor.pk).update(last_source_name=state.source.name)
    return PollResult(calls, outcomes, busy)


def _source_failed(source: Source, exc: Exception) -> PageOutcome:
    """Record an error raised outside a page's own failure handling (taking the lease, opening
    the run) on the source's scan state: class, code, backoff, visible in doctor."""
    failure = _unauthored(exc, "the page call")
    logger.warning("reconcile poll source=%s failed class=%s code=%s type=%s",
                   source.name, failure.error_class, failure.code, type(exc).__name__)
    with transaction.atomic():
        state = ScanState.objects.select_for_update(no_key=True).get(source_id=source.pk)
        _record_error(state, failure)
        _schedule_after_failure(state)
    return PageOutcome(source.name, 0, "failed", error=failure, called=False)


# -- human decisions ----------------------------------------------------------

def finding_decide(*, finding_id: int, decision: str, actor: str, reason: str) -> Result:
    """A person decides a RETRY_CANDIDATE: retry under the same reply key, or close.

    Retry goes through the sender's own unknown-send path, which looks the
    receipt up again first; close goes through the reply ledger's close.
    Actor, time and reason are kept on the finding and appear in its report.
    The reply move and the finding's decision commit in one transaction (the
    sender's own atomic blocks nest as savepoints).
    """
    reason = reason.strip()
    if not reason:
        return Result(False, "give a reason: it is kept in the report")
    if decision not in (Decision.RETRY_AUTHORIZED, Decision.CLOSED):
        return Result(False, f"a decision is one of {Decision.RETRY_AUTHORIZED}, {Decision.CLOSED}")
    with transaction.atomic():
        finding = Finding.objects.select_for_update().get(pk=finding_id)
        if finding.kind != FindingKind.RETRY_CANDIDATE or finding.action_id is None:
            return Result(False, "only a retry candidate with its action can be decided")
        if finding.decision:
            return Result(False, f"already decided: {finding.decision} by {finding.decided_by}")
        # The reply ledger's compare-and-set decides a race between two people:
        # the second finds the action no longer in SEND_STATUS_UNKNOWN.
        if decision == Decision.RETRY_AUTHORIZED:
            result = unknown_authorize_retry(action_id=finding.action_id, actor=actor)
        else:
            result = reply_close(action_id=finding.action_id, actor=actor, reason_code="closed_after_reconcile")
        if result.ok:
            _candidates_decided(action_id=finding.action_id, decision=decision, actor=actor, reason=reason,
                                result=result)
    logger.info("finding decided finding=%s decision=%s ok=%s", finding_id, decision, result.ok)
    return result


def _candidates_decided(*, action_id: int, decision: str, actor: str, reason: str, result: Result) -> int:
    """Every undecided RETRY_CANDIDATE finding of the action records the decision (a candidate
    found by several scans is one decision), in the caller's transaction."""
    return Finding.objects.filter(kind=FindingKind.RETRY_CANDIDATE, action_id=action_id, decision="").update(
        decision=decision, decided_by=actor, decided_at=clock(), decision_reason=reason[:500],
        decision_result=result.message[:256],
    )


UNKNOWN_SEND_DECISIONS = {
    "confirm_sent": Decision.CONFIRMED_SENT,
    "authorize_retry": Decision.RETRY_AUTHORIZED,
    "close": Decision.CLOSED,
}


def unknown_send_decide(*, action_id: int, how: str, actor: str, note: str = "",
                        close_reason: str = "closed_by_operator") -> Result:
    """A person resolves an action in the unknown-send queue; its open RETRY_CANDIDATE findings
    record the decision in the same transaction as the reply move (seed 000: the report
    records every human decision). `note` is the receipt id for `confirm_sent`."""
    if how not in UNKNOWN_SEND_DECISIONS:
        raise ValueError(f"unknown decision {how!r}")
    with transaction.atomic():
        # Lock the open findings first, so a concurrent finding_decide waits and then sees them decided.
        list(Finding.objects.select_for_update().filter(
            kind=FindingKind.RETRY_CANDIDATE, action_id=action_id, decision="").values_list("pk", flat=True))
        if how == "confirm_sent":
            result = unknown_confirm_sent(action_id=action_id, actor=actor, provider_reply_id=note)
            reason = "confirmed sent in the unknown-send queue (receipt verified by the person)"
        elif how == "authorize_retry":
            result = unknown_authorize_retry(action_id=action_id, actor=actor)
            reason = note or "retry authorized in the unknown-send queue"
        else:
            result = reply_close(action_id=action_id, actor=actor, reason_code=close_reason)
            reason = note or "closed in the unknown-send queue"
        if result.ok:
            _candidates_decided(action_id=action_id, decision=UNKNOWN_SEND_DECISIONS[how], actor=actor,
                                reason=reason, result=result)
    logger.info("unknown send decided action=%s how=%s ok=%s", action_id, how, result.ok)
    return result


def staging_purge(*, now: datetime | None = None, dry_run: bool = False) -> int:
    """Staged source text of scans older than their source's retention period (a scan left
    SCANNING that long holds content nothing else keeps): blanked, the scan kept."""
    now = now or clock()
    total = 0
    for source in Source.objects.all():
        stale = StagedEvent.objects.filter(
            run__source=source, run__created_at__lt=now - timedelta(days=source.retention_days),
        ).exclude(text="")
        total += stale.count() if dry_run else stale.update(text="")
    return total
