"""A scan's pages: the page protocol, the limits (docs/concepts/reconciliation.md#limits), and the
staging a generation builds.

Each page is checked against the protocol (one scan id per generation, no
repeated or cycling cursor, no completion with a cursor) and the per-page
limits before anything of it is staged; staging that would pass a per-scan
limit raises ScanLimit and the caller discards the whole generation.
"""

from __future__ import annotations

import dataclasses
import hashlib
import operator
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from psycopg.errors import UniqueViolation

from conduit.checks import SETTING_RANGES
from conduit.planner import planner_settings
from conduit.providers.base import Observation, PageFailure, SourcePage
from conduit.sql import fast_paths, insert_rows
from conduit.statemachine import transition
from ingress.models import Source
from reconcile import clock
from reconcile.models import (
    RUN_TABLE,
    ReconcileRun,
    ReconcileRunTransition,
    RunState,
    ScanState,
    SeenCursor,
    StagedEvent,
    StagedReceipt,
)
from replies.models import ReplyAction

MAX_KEPT_REJECTIONS = 1000
STAGE_STATEMENT_ROWS = 500
# The default limits (docs/concepts/reconciliation.md#limits). A page over a per-page limit fails
# (nothing of it is staged); a generation that would pass a per-scan limit is discarded, the last
# complete checkpoint stays, and the source backs off like any failure.
MAX_PAGE_ITEMS = 1000  # raised to CONDUIT_RECONCILE_PAGE_SIZE when that asks for more
MAX_PAGE_BYTES = 8 * 1024 * 1024
MAX_STAGED_ITEMS = 10_000
MAX_STAGED_BYTES = 32 * 1024 * 1024
MAX_PAGES = 1000
MAX_TOKEN_BYTES = 4096

# The event field list, once: what a staged event keeps of an observation is every
# contract field the page carried. The rest is the source's trusted configuration
# (and the index, a position in one batch), so replay takes it from the source.
# Derived from the contract's dataclass: a field added there is staged and replayed alike.
FROM_SOURCE = ("index", "source_system", "source_account_ref", "contract_version", "canary")
OBSERVED_FIELDS = tuple(f.name for f in dataclasses.fields(Observation) if f.name not in FROM_SOURCE)
STAGED_EVENT_COLUMNS = ("run", "event_key", *OBSERVED_FIELDS)
STAGED_RECEIPT_COLUMNS = ("run", "reply_key", "provider_reply_id", "event_key")

# docs/concepts/reconciliation.md#limits: "Options permit explicit bounded adjustments." A setting
# replaces a per-scan default, within these bounds (a bulk backfill or the benchmark's million events).
# The bounds are conduit/checks.py's table (its system check refuses them at start).
LIMIT_SETTINGS = {
    name: (setting, SETTING_RANGES[setting].low, SETTING_RANGES[setting].high)
    for name, setting in (
        ("pages", "CONDUIT_RECONCILE_MAX_PAGES"),
        ("items", "CONDUIT_RECONCILE_MAX_STAGED_ITEMS"),
        ("bytes", "CONDUIT_RECONCILE_MAX_STAGED_BYTES"),
    )
}


def scan_limit(name: str) -> int:
    """The per-scan limit in force: the setting when one is given (bounded), else the default of
    docs/concepts/reconciliation.md#limits."""
    default = {"pages": MAX_PAGES, "items": MAX_STAGED_ITEMS, "bytes": MAX_STAGED_BYTES}[name]
    setting, low, high = LIMIT_SETTINGS[name]
    value = getattr(settings, setting, None)
    if value is None:
        return default
    if not isinstance(value, int) or not low <= value <= high:
        raise ImproperlyConfigured(f"{setting} must be an integer from {low} to {high}")
    return value


def _limit_message(code: str) -> str:
    if code == "scan_too_many_pages":
        return f"the scan needs more than {scan_limit('pages')} pages"
    if code == "scan_too_many_items":
        return f"the scan stages more than {scan_limit('items')} items"
    return f"the scan stages more than {scan_limit('bytes') // (1024 * 1024)} MiB"


class ScanLimit(Exception):
    """Staging this page would pass a per-scan limit: the generation is discarded."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code

    def failure(self) -> PageFailure:
        return PageFailure("protocol", self.code, _limit_message(self.code))


def _token_bytes(token: str) -> int:
    return len(token.encode("utf-8", "surrogatepass"))


def _cursor_digest(cursor: str) -> str:
    return hashlib.sha256(cursor.encode("utf-8", "surrogatepass")).hexdigest()


def page_check(run: ReconcileRun, page: SourcePage) -> None:
    """docs/concepts/reconciliation.md#page-protocol: one nonempty scan id per generation, no
    repeated cursor (nor a cycle back to any cursor of this generation), no completion with a cursor, and the per-page limits.
    A token over 4 KiB is refused, never truncated. Records the page's next cursor as handed
    (SeenCursor): run it inside the page's transaction."""
    if not page.scan_id:
        raise PageFailure("protocol", "page_scan_id_missing", "the page carries no scan id")
    if _token_bytes(page.scan_id) > MAX_TOKEN_BYTES:
        raise PageFailure("protocol", "page_scan_id_too_long", "the page scan id exceeds 4 KiB")
    if run.scan_id and page.scan_id != run.scan_id:
        raise PageFailure("protocol", "page_scan_changed", "the page belongs to another scan generation")
    if page.complete and page.next_cursor:
        raise PageFailure(
            "protocol", "page_complete_with_cursor", "the page claims completion and a next cursor"
        )
    if page.next_cursor and _token_bytes(page.next_cursor) > MAX_TOKEN_BYTES:
        raise PageFailure("protocol", "page_cursor_too_long", "the page cursor exceeds 4 KiB")
    if page.next_cursor and page.next_cursor == run.cursor:
        raise PageFailure("protocol", "page_repeated_cursor", "the page repeats the cursor it was read from")
    # The cursor is recorded here, in the page's transaction (a failed page takes it back); the
    # unique key on (run, digest) says whether this generation was handed it before.
    if page.next_cursor and not _insert_new(
        SeenCursor, ("run", "digest"), [(run.pk, _cursor_digest(page.next_cursor))]
    ):
        raise PageFailure(
            "protocol", "page_cursor_cycle", "the page leads back to a cursor this scan was already given"
        )
    items = len(page.observations) + len(page.rejections)
    if items > max(MAX_PAGE_ITEMS, settings.CONDUIT_RECONCILE_PAGE_SIZE):
        raise PageFailure("protocol", "page_too_many_items", f"the page carries {items} items")
    if page.size_bytes > MAX_PAGE_BYTES:
        raise PageFailure("protocol", "page_too_large", "the page exceeds 8 MiB")


_observed = operator.attrgetter(*OBSERVED_FIELDS)  # one call for every field: a page has thousands of rows


def staged_row(run_id: int, observation: Observation) -> tuple:
    """One StagedEvent row (STAGED_EVENT_COLUMNS) for an observation."""
    return (run_id, observation.event_key, *_observed(observation))


def staged_observations(source: Source, run: ReconcileRun, event_keys: list[str]) -> list[Observation]:
    """The observations the run staged under `event_keys`, by key, rebuilt as the page carried them."""
    trusted = {
        "source_system": source.source_system,
        "source_account_ref": source.account_ref,
        "contract_version": source.contract_version,
        "canary": source.canary,
    }
    rows = StagedEvent.objects.filter(run=run, event_key__in=event_keys).order_by("event_key")
    return [
        Observation(index=index, **trusted, **row) for index, row in enumerate(rows.values(*OBSERVED_FIELDS))
    ]


def fast_sql() -> bool:
    """Whether the PostgreSQL set-based paths run (COPY, arrays, data-modifying CTEs).

    Elsewhere (SQLite, the demo's default) the portable paths do the same work
    row by row; the tests run both (tests/reconcile/test_bulk_paths.py)."""
    return fast_paths(connection)


def bulk_session() -> None:
    """PostgreSQL: settings for this transaction's whole-generation statements (no-op elsewhere).

    work_mem: room for their hash joins in memory (the default 4 MB spills them to
    disk). jit off: the planner's estimates for these anti-joins run to millions,
    past jit_above_cost, so each statement would spend 100-200 ms compiling
    expressions for a scan that takes less than that."""
    if not fast_sql():
        return
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL work_mem = '64MB'")
        cursor.execute("SET LOCAL jit = off")


# A generation of at least 1/HASHED_SHARE of the reply ledger's rows has its reply findings hashed.
HASHED_SHARE = 4


def hashed_joins(run: ReconcileRun) -> AbstractContextManager:
    """PostgreSQL, for a generation of a quarter of the reply ledger or more: the block's joins
    hashed, neither a nested loop nor a merge. Otherwise, and elsewhere, the planner's own choice.

    A reply finding's set joins the generation's staged rows with the reply ledger. For the
    receipts without an action the planner priced a probe of the ledger's key index per receipt,
    or a walk of the staged receipts in key order, below hashing the ledger's keys; past the
    memory's cache each probe or step is a miss: at a million receipts the join took 3.5 s and
    3.1 s where the hash anti join takes about one (docs/benchmarks.md#bounds). A smaller
    generation (one source of many, a window) reads less by probing than by hashing the ledger."""
    if not fast_sql():
        return nullcontext()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT reltuples FROM pg_class WHERE oid = %s::regclass", [ReplyAction._meta.db_table]
        )
        (ledger,) = cursor.fetchone()  # the planner's own estimate; -1 before the first ANALYZE
    if max(run.staged_events, run.staged_receipts) * HASHED_SHARE < ledger:
        return nullcontext()
    return planner_settings(connection, enable_nestloop="off", enable_mergejoin="off")


def generation_analyze() -> None:
    """PostgreSQL: fresh statistics on the staged tables before the final page's statements.

    They grew by a whole generation since autovacuum last looked. With the stale
    ones (an empty table) the planner drives the stand-in time correction from all
    the staged rows, one index probe each, instead of the few events that need it.
    The joins need row counts and whether keys repeat, which a sample of 3,000 rows
    shows as well as the default's 30,000, in a tenth of the time (this transaction only)."""
    if not fast_sql():
        return
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL default_statistics_target = 10")
        cursor.execute(f"ANALYZE {StagedEvent._meta.db_table}, {StagedReceipt._meta.db_table}")


def rows_copy(model: type, columns: tuple[str, ...] | list[str], rows: list[tuple]) -> None:
    """COPY rows (values in `columns` order, field names) into the model's table: PostgreSQL only.

    One statement whatever the count: psycopg streams the rows, so nothing is
    rendered into SQL text and no placeholder is parsed per value. The driver's errors
    come out as Django's (IntegrityError and the rest), as from any other statement."""
    if not rows:
        return
    opts = model._meta
    qn = connection.ops.quote_name
    names = ", ".join(qn(opts.get_field(c).column) for c in columns)
    with (
        connection.wrap_database_errors,
        connection.cursor() as cursor,
        cursor.cursor.copy(f"COPY {qn(opts.db_table)} ({names}) FROM STDIN") as copy,
    ):
        for row in rows:
            copy.write_row(row)


def _insert_new(model: type, columns: tuple[str, ...], rows: list[tuple]) -> int:
    """INSERT ... ON CONFLICT DO NOTHING in bounded statements; how many rows were new."""
    return sum(
        len(insert_rows(model, columns, rows[i : i + STAGE_STATEMENT_ROWS], ignore_conflicts=True))
        for i in range(0, len(rows), STAGE_STATEMENT_ROWS)
    )


def _copy_new(model: type, columns: tuple[str, ...], rows: list[tuple]) -> int:
    """PostgreSQL: COPY rows into a page-sized temporary table, then one INSERT ... SELECT ...
    ON CONFLICT DO NOTHING into the model's table; how many rows were new.

    The unique constraint, not a prior lookup, decides what was staged already
    (each row one probe of its index); the temporary table is the session's own
    and is emptied when the transaction ends."""
    if not rows:
        return 0
    opts = model._meta
    qn = connection.ops.quote_name
    names = ", ".join(qn(opts.get_field(c).column) for c in columns)
    page_table = qn(f"page_{opts.db_table}")
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TEMPORARY TABLE IF NOT EXISTS {page_table} ON COMMIT DELETE ROWS AS "
            f"SELECT {names} FROM {qn(opts.db_table)} WITH NO DATA"
        )
        cursor.execute(f"DELETE FROM {page_table}")  # a savepoint rolled back may have left a page
        with cursor.cursor.copy(f"COPY {page_table} ({names}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        cursor.execute(
            f"INSERT INTO {qn(opts.db_table)} ({names}) SELECT {names} FROM {page_table} "
            f"ON CONFLICT DO NOTHING"
        )
        return cursor.rowcount


def _stage_copy(run: ReconcileRun, page: SourcePage) -> tuple[int, int]:
    """PostgreSQL: the page's events and receipts staged by COPY; (new events, new receipts).

    As the portable path: an event already staged (by this page or an earlier
    one) is one event when its payload is the same, and fails the page (its
    transaction takes the staging back) when not; a receipt staged already stays.

    A page that repeats nothing (the usual case) is COPYed straight into the staged
    tables, in a savepoint: the unique constraints refuse any repeat, and then the
    savepoint takes that COPY back and the page takes the careful path below."""
    events = [staged_row(run.pk, o) for o in page.observations]
    receipts = [(run.pk, r.reply_key, r.provider_reply_id, r.event_key) for r in page.receipts]
    try:
        with transaction.atomic():
            rows_copy(StagedEvent, STAGED_EVENT_COLUMNS, events)
            rows_copy(StagedReceipt, STAGED_RECEIPT_COLUMNS, receipts)
        return len(events), len(receipts)
    except (IntegrityError, UniqueViolation):
        pass  # something was staged already: the unique constraints decide, row by row, below
    new_events = _copy_new(StagedEvent, STAGED_EVENT_COLUMNS, events)
    if new_events < len(events):
        _refuse_conflicting_duplicates(run, page.observations)
    return new_events, _copy_new(StagedReceipt, STAGED_RECEIPT_COLUMNS, receipts)


def page_stage(run: ReconcileRun, page: SourcePage, began: datetime) -> None:
    """Stage the page's events and receipts and advance the cursor, in the caller's transaction.

    An event already staged by an earlier page with the same payload is one
    event; with another payload the page fails (and stages nothing). Raises
    ScanLimit when the generation would pass a per-scan limit.
    """
    if run.pages + 1 > scan_limit("pages"):
        raise ScanLimit("scan_too_many_pages")
    if run.staged_bytes + page.size_bytes > scan_limit("bytes"):
        raise ScanLimit("scan_too_large")
    if fast_sql():
        new_events, new_receipts = _stage_copy(run, page)
    else:
        new_events = _insert_new(
            StagedEvent, STAGED_EVENT_COLUMNS, [staged_row(run.pk, o) for o in page.observations]
        )
        if new_events < len(page.observations):
            # Some were staged already (by this page or an earlier one): same payload or
            # the page fails, and its transaction takes these inserts back with it.
            _refuse_conflicting_duplicates(run, page.observations)
        new_receipts = _insert_new(
            StagedReceipt,
            STAGED_RECEIPT_COLUMNS,
            [(run.pk, r.reply_key, r.provider_reply_id, r.event_key) for r in page.receipts],
        )
    kept = run.rejections
    for rejection in page.rejections:
        if len(kept) < MAX_KEPT_REJECTIONS:
            kept.append({"page": run.pages + 1, "index": rejection.index, "code": rejection.reason_code})
    if run.staged_events + new_events + run.staged_receipts + new_receipts > scan_limit("items"):
        raise ScanLimit("scan_too_many_items")
    ReconcileRun.objects.filter(pk=run.pk).update(
        scan_id=page.scan_id,
        cursor=page.next_cursor or "",
        pages=F("pages") + 1,
        page_calls=F("page_calls") + 1,
        staged_events=F("staged_events") + new_events,
        staged_receipts=F("staged_receipts") + new_receipts,
        rejections=kept,
        rejection_count=F("rejection_count") + len(page.rejections),
        first_page_at=run.first_page_at or began,
        staged_bytes=F("staged_bytes") + page.size_bytes,
    )
    run.refresh_from_db()


def _refuse_conflicting_duplicates(run: ReconcileRun, observations: list[Observation]) -> None:
    """An event staged twice must carry one payload; a conflict fails the page, not the scan."""
    hashes: dict[str, str] = {}
    for o in observations:
        if hashes.setdefault(o.event_key, o.payload_hash) != o.payload_hash:
            raise PageFailure(
                "protocol",
                "page_conflicting_duplicate",
                "one event appears twice in the page with different payloads",
            )
    clash = (
        StagedEvent.objects.filter(run=run, event_key__in=list(hashes))
        .exclude(payload_hash__in=set(hashes.values()))
        .values_list("event_key", "payload_hash")
    )
    for key, staged_hash in clash.iterator():
        if hashes[key] != staged_hash:
            raise PageFailure(
                "protocol",
                "page_conflicting_duplicate",
                "an event staged by an earlier page reappears with a different payload",
            )


def staging_drop(run: ReconcileRun) -> None:
    """Delete the run's staged events and receipts and the cursors it was handed (at discard and
    at publication)."""
    StagedEvent.objects.filter(run=run).delete()
    StagedReceipt.objects.filter(run=run).delete()
    SeenCursor.objects.filter(run=run).delete()


def generation_discard(state: ScanState, run: ReconcileRun, reason: str, actor: str) -> bool:
    """Drop the scan's staging; the last complete checkpoint stays authoritative.

    Through the run's declared table: a run that already wrote its report
    (REPAIRING) is not discarded, and the refused move is recorded.
    """
    outcome = transition(
        table=RUN_TABLE,
        model=ReconcileRun,
        history=ReconcileRunTransition,
        owner_field="run",
        pk=run.pk,
        to=RunState.DISCARDED,
        actor=actor,
        reason_code=reason[:64],
        extra={"discard_reason": reason[:64], "finished_at": clock.now(), "cursor": ""},
    )
    if not outcome.applied:
        return False
    staging_drop(run)
    state.active_run = None
    return True
