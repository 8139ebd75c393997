"""The report's planned repairs, each in its own transactions, each recording its outcome.

Every repair acts only on findings still `planned`, so a run found REPAIRING
after a crash is finished by running them again. Each transaction re-checks
(and extends) the scan lease; an error becomes the finding's `failed` outcome
with a stable code, never the exception's text.
"""

from __future__ import annotations

import logging
from itertools import islice

from django.db import DatabaseError, connection, transaction
from django.db.models import Exists, F, OuterRef, QuerySet
from django.utils import timezone

from conduit.canonical import payload_hash
from conduit.providers.base import Parsed
from ingress import services as ingress_services
from ingress.contract import RECONCILE_TABLE
from ingress.models import EventTransition, InboundEvent, ReconcileStatus, Source
from ingress.services import observations_accept
from reconcile import clock
from reconcile.lease import LeaseLost, lease_renew
from reconcile.models import (
    Finding,
    FindingKind,
    ReconcileReport,
    ReconcileRun,
    RepairOutcome,
    StagedEvent,
    StagedReceipt,
)
from reconcile.staging import bulk_session, fast_sql, rows_copy, staged_observations
from replies.contract import REPLY_TABLE
from replies.ledger import reply_action_transition
from replies.models import DeliveryState as S
from replies.models import ReplyAction, ReplyTransition

logger = logging.getLogger("conduit.reconcile")

RECONCILE_ACTOR = "system:reconcile"
# Missing events replayed per ingest batch (one transaction each): larger batches mean fewer
# statements per event; each batch's observations are held in memory, so it stays bounded.
REPLAY_BATCH = 2000
CHUNK = 5000
# A chunk of reply-ledger repairs this large moves in one statement (PostgreSQL); a smaller one
# goes row by row through the ledger's transition function, where a set statement saves little.
BATCH_MIN_ROWS = 100
# Events the evidence mark takes in one statement (_staged_key_ranges).
EVIDENCE_CHUNK = 100_000


def repair_code(exc: BaseException) -> str:
    """A stable code for a repair that raised; the exception's text is never kept."""
    return "database_error" if isinstance(exc, DatabaseError) else "unexpected_error"


def missing_replay(source: Source, token: str, run: ReconcileRun, report: ReconcileReport) -> None:
    """Each missing source event goes through the webhook's own ingest function, a batch a
    transaction; the batch's delivery id is its content digest, so a resumed replay of the
    same batch is the same delivery (ingest dedups it)."""
    planned = Finding.objects.filter(
        report=report, kind=FindingKind.MISSING_LOCAL, repair_outcome=RepairOutcome.PLANNED
    )
    # One read of the planned findings, streamed (a server-side cursor on PostgreSQL): asking
    # again for the first batch still planned would sort what is left once a batch.
    rows = planned.order_by("event_key").values_list("id", "event_key").iterator(chunk_size=REPLAY_BATCH)
    while batch_rows := list(islice(rows, REPLAY_BATCH)):
        ids, keys = [row[0] for row in batch_rows], [row[1] for row in batch_rows]
        try:
            with transaction.atomic():
                lease_renew(source.pk, token)
                bulk_session()
                batch = staged_observations(source, run, keys)
                digest = payload_hash(sorted([o.event_key, o.payload_hash] for o in batch))
                accepted = observations_accept(
                    source=source,
                    parsed=Parsed(batch, []),
                    delivery_id=f"reconcile:{run.pk}:{digest[:32]}",
                    body_hash=digest,
                    body_bytes=0,
                    now=clock.now(),
                    actor=RECONCILE_ACTOR,
                )
                # A refused batch (docs/concepts/event-contract.md#batches: one invalid member refuses
                # them all) wrote no event:
                # its quarantine receipt names why, and the next complete scan finds them again.
                if accepted.refused:
                    # A refused body has one receipt, naming each member (ingress.services.ingest);
                    # its review is these findings' decision (reconcile.services).
                    (receipt,) = accepted.receipt_ids
                    _findings_outcome(ids, RepairOutcome.REFUSED, code="replay_refused", receipt=receipt)
                    logger.warning(
                        "reconcile repair replay source=%s run=%s refused events=%s receipt=%s",
                        source.name,
                        run.pk,
                        len(ids),
                        receipt,
                    )
                else:
                    _findings_outcome(ids, RepairOutcome.APPLIED)
        except LeaseLost:
            raise
        except Exception as exc:
            logger.warning(
                "reconcile repair replay source=%s run=%s failed type=%s",
                source.name,
                run.pk,
                type(exc).__name__,
            )
            planned.filter(event_key__in=keys).update(
                repair_outcome=RepairOutcome.FAILED, repair_code=repair_code(exc)
            )


def _findings_outcome(ids: list[int], outcome: str, *, code: str = "", receipt: str | None = None) -> None:
    """Set the outcome (code, and the quarantine receipt that refused it) of the findings with
    these ids still planned: on PostgreSQL one array parameter (`= ANY(%s)`, a primary-key probe
    each) instead of a placeholder per id."""
    if not fast_sql():
        Finding.objects.filter(pk__in=ids, repair_outcome=RepairOutcome.PLANNED).update(
            repair_outcome=outcome, repair_code=code, quarantine_receipt=receipt
        )
        return
    table = connection.ops.quote_name(Finding._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET repair_outcome = %s, repair_code = %s, quarantine_receipt = %s::uuid "
            f"WHERE id = ANY(%s) AND repair_outcome = %s",
            [outcome, code, receipt, ids, RepairOutcome.PLANNED],
        )


def events_mark_set(*, events: QuerySet, to: str, actor: str, reason_code: str, at) -> int:
    """PostgreSQL: ingress's `events_reconcile_mark` as one statement over the whole set.

    The same effect, row for row: the events are locked in primary-key order;
    those already in `to` get `reconciled_at` only; the rest move when
    RECONCILE_TABLE declares their prior (with `reconciled_at`) and stay
    otherwise, and each gets one history row, refused when undeclared.
    Returns how many moved.
    """
    allowed = sorted(prior for prior, nxt in RECONCILE_TABLE.moves if nxt == to and prior is not None)
    target = events.values(i=F("id"), s=F("reconcile_status")).order_by("id")
    select, params = target.query.get_compiler(connection=connection).as_sql()
    qn = connection.ops.quote_name
    table, history = qn(InboundEvent._meta.db_table), qn(EventTransition._meta.db_table)
    sql = f"""
        WITH target AS ({select} FOR NO KEY UPDATE),
        same AS (UPDATE {table} e SET reconciled_at = %s FROM target t WHERE e.id = t.i AND t.s = %s),
        moved AS (UPDATE {table} e SET reconcile_status = %s, reconciled_at = %s FROM target t
                  WHERE e.id = t.i AND t.s = ANY(%s) RETURNING e.id),
        recorded AS (INSERT INTO {history} (event_id, ledger, prior_state, next_state, at, actor, reason_code, refused)
                     SELECT t.i, %s, t.s, %s, %s, %s, %s, NOT (t.s = ANY(%s))
                     FROM target t WHERE t.s <> %s ORDER BY t.i)
        SELECT count(*) FROM moved"""
    with connection.cursor() as cursor:
        bulk_session()  # the set's joins in memory, no JIT: this transaction only
        cursor.execute(
            sql,
            [
                *params,
                at,
                to,
                to,
                at,
                allowed,
                RECONCILE_TABLE.ledger,
                to,
                at,
                actor,
                reason_code,
                allowed,
                to,
            ],
        )
        return cursor.fetchone()[0]


def events_reconcile_mark(*, events: QuerySet, to: str, actor: str, reason_code: str, at) -> int:
    """The reconcile-status move the evidence repair makes (and the seam tests plant faults in):
    one set-based statement on PostgreSQL, ingress's own transition function elsewhere."""
    if fast_sql():
        return events_mark_set(events=events, to=to, actor=actor, reason_code=reason_code, at=at)
    return ingress_services.events_reconcile_mark(
        events=events, to=to, actor=actor, reason_code=reason_code, at=at
    )


def _staged_key_ranges(run: ReconcileRun) -> list[dict]:
    """The run's staged event keys cut into ranges of EVIDENCE_CHUNK keys, as lookups
    (`event_key__gte`, `event_key__lt`): on PostgreSQL a whole generation is marked a range at a
    time, so each statement's join and sort of the range stay in work_mem whatever the
    generation's size (one statement over a million events spilled them to disk). Elsewhere one
    range holds them all."""
    if not fast_sql():
        return [{}]
    table = connection.ops.quote_name(StagedEvent._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT event_key FROM (SELECT event_key, row_number() OVER (ORDER BY event_key) AS n "
            f"FROM {table} WHERE run_id = %s) k WHERE n %% %s = 1 ORDER BY event_key",
            [run.pk, EVIDENCE_CHUNK],
        )
        starts = [key for (key,) in cursor.fetchall()]
    if len(starts) <= 1:
        return [{}]
    ends = starts[1:] + [None]
    return [
        {"event_key__gte": start} if end is None else {"event_key__gte": start, "event_key__lt": end}
        for start, end in zip(starts, ends)
    ]


def evidence_mark(source: Source, token: str, run: ReconcileRun, report: ReconcileReport) -> None:
    """MATCHED for events the source shows with the same payload; SOURCE_UNVERIFIED for the
    local events the report found without source evidence."""
    unverified = Finding.objects.filter(
        report=report, kind=FindingKind.SOURCE_UNVERIFIED, repair_outcome=RepairOutcome.PLANNED
    )
    try:
        with transaction.atomic():
            lease_renew(source.pk, token)
            now = clock.now()
            for keys in _staged_key_ranges(run):
                in_source = StagedEvent.objects.filter(run=run, event_key=OuterRef("event_key"), **keys)
                events_reconcile_mark(
                    events=InboundEvent.objects.filter(
                        Exists(in_source.filter(payload_hash=OuterRef("payload_hash"))), source=source, **keys
                    ),
                    to=ReconcileStatus.MATCHED,
                    actor=RECONCILE_ACTOR,
                    reason_code="source_shows_same_payload",
                    at=now,
                )
            events_reconcile_mark(
                events=InboundEvent.objects.filter(
                    source=source, event_key__in=unverified.values("event_key")
                ),
                to=ReconcileStatus.SOURCE_UNVERIFIED,
                actor=RECONCILE_ACTOR,
                reason_code="no_source_evidence",
                at=now,
            )
            unverified.update(repair_outcome=RepairOutcome.APPLIED)
    except LeaseLost:
        raise
    except Exception as exc:
        logger.warning(
            "reconcile repair evidence source=%s run=%s failed type=%s",
            source.name,
            run.pk,
            type(exc).__name__,
        )
        unverified.update(repair_outcome=RepairOutcome.FAILED, repair_code=repair_code(exc))


def _actions_move_set(run: ReconcileRun, chunk: list[tuple], *, to: str, reason: str) -> list[tuple]:
    """PostgreSQL: the chunk's declared moves as one compare-and-set UPDATE over arrays.

    Each row moves only from the state its finding saw (what `reply_action_transition`
    with `expected` does one row at a time); a receipt comes from the run's staged
    receipts, looked up in the statement. The moved rows get their history rows
    (one COPY) and their findings `applied` (one UPDATE). Returns the rows left to
    the one-row path: an undeclared move, or a row that moved on since the report
    (that path records the refusal as it always did)."""
    batch = [row for row in chunk if REPLY_TABLE.allows(row[2], to)]
    if not batch:
        return chunk
    qn = connection.ops.quote_name
    table, staged = qn(ReplyAction._meta.db_table), qn(StagedReceipt._meta.db_table)
    if to == S.SENT:
        # The receipt: one probe of the staged receipts' (run, reply_key) index per action.
        assign = (
            f"delivery_state = %s, provider_reply_id = COALESCE((SELECT s.provider_reply_id FROM {staged} s "
            f"WHERE s.run_id = %s AND s.reply_key = v.rkey), ''), last_error_code = '', sending_since = NULL"
        )
        assign_params = [to, run.pk]
    else:
        assign = "delivery_state = %s, last_error_code = %s"
        assign_params = [to, reason]
    # One join, the chunk's rows to their actions by primary key: its cost stays linear in the
    # chunk whatever the planner guesses of unnest's row count (a generic plan guesses 10).
    sql = (
        f"UPDATE {table} a SET {assign} "
        f"FROM unnest(%s::bigint[], %s::text[], %s::text[]) AS v(id, prior, rkey) "
        f"WHERE a.id = v.id AND a.delivery_state = v.prior RETURNING a.id"
    )
    with connection.cursor() as cursor:
        cursor.execute(
            sql,
            [*assign_params, [row[1] for row in batch], [row[2] for row in batch], [row[3] for row in batch]],
        )
        moved = {row[0] for row in cursor.fetchall()}
        at = timezone.now()
        rows_copy(
            ReplyTransition,
            ("action", "ledger", "prior_state", "next_state", "at", "actor", "reason_code", "refused"),
            [
                (row[1], REPLY_TABLE.ledger, row[2], to, at, RECONCILE_ACTOR, reason, False)
                for row in batch
                if row[1] in moved
            ],
        )
        cursor.execute(
            f"UPDATE {qn(Finding._meta.db_table)} SET repair_outcome = %s, repair_code = '' "
            f"WHERE id = ANY(%s)",
            [RepairOutcome.APPLIED, [row[0] for row in batch if row[1] in moved]],
        )
    return [row for row in chunk if row[1] not in moved]


def _action_repair_one(
    finding_id: int,
    action_id: int,
    prior: str,
    reply_key: str,
    receipts: dict[str, str],
    *,
    to: str,
    reason: str,
) -> None:
    """One reply-ledger transition, compare-and-set on the state the report saw, with its
    finding's outcome in one savepoint."""
    extra = (
        {"provider_reply_id": receipts.get(reply_key, ""), "last_error_code": "", "sending_since": None}
        if to == S.SENT
        else {"last_error_code": reason}
    )
    try:
        with transaction.atomic():
            outcome = reply_action_transition(
                action_id=action_id,
                to=to,
                actor=RECONCILE_ACTOR,
                reason_code=reason,
                expected=prior,
                extra=extra,
            )
            Finding.objects.filter(pk=finding_id).update(
                repair_outcome=RepairOutcome.APPLIED if outcome.applied else RepairOutcome.REFUSED,
                repair_code="" if outcome.applied else "state_moved",
            )
    except Exception as exc:
        logger.warning("reconcile repair action=%s failed type=%s", action_id, type(exc).__name__)
        Finding.objects.filter(pk=finding_id).update(
            repair_outcome=RepairOutcome.FAILED, repair_code=repair_code(exc)
        )


def actions_repair(
    source: Source, token: str, run: ReconcileRun, report: ReconcileReport, *, kind: str, to: str, reason: str
) -> None:
    """The reply-ledger transitions the report planned, compare-and-set on the state the report
    saw, a chunk a transaction: on PostgreSQL a chunk of BATCH_MIN_ROWS or more moves in one
    statement (its history and outcomes with it); the rest (and a chunk whose statement failed)
    go one savepoint a row through `reply_action_transition`."""
    planned = Finding.objects.filter(report=report, kind=kind, repair_outcome=RepairOutcome.PLANNED)
    planned.filter(action__isnull=True).update(
        repair_outcome=RepairOutcome.REFUSED, repair_code="action_gone"
    )
    # In the reply ledger's order (its ids), whatever order the findings were written in: each
    # chunk's UPDATE walks the ledger's pages forward instead of touching one at random a row.
    rows = (
        planned.order_by("action_id", "id")
        .values_list("id", "action_id", "action_state", "reply_key")
        .iterator(chunk_size=CHUNK)
    )
    while chunk := list(islice(rows, CHUNK)):
        with transaction.atomic():
            lease_renew(source.pk, token)
            bulk_session()
            rest = chunk
            if fast_sql() and len(chunk) >= BATCH_MIN_ROWS:
                try:
                    with transaction.atomic():  # a savepoint: a failed statement takes the chunk's batch back
                        rest = _actions_move_set(run, chunk, to=to, reason=reason)
                except Exception as exc:
                    logger.warning(
                        "reconcile repair batch source=%s run=%s failed type=%s; row by row",
                        source.name,
                        run.pk,
                        type(exc).__name__,
                    )
                    rest = chunk
            # Only the rows left to the one-row path need their receipts in memory.
            receipts = (
                dict(
                    StagedReceipt.objects.filter(run=run, reply_key__in=[row[3] for row in rest]).values_list(
                        "reply_key", "provider_reply_id"
                    )
                )
                if rest and to == S.SENT
                else {}
            )
            for finding_id, action_id, prior, reply_key in rest:
                _action_repair_one(finding_id, action_id, prior, reply_key, receipts, to=to, reason=reason)


def repairs_apply(source: Source, token: str, run: ReconcileRun, report: ReconcileReport) -> None:
    """Every planned repair of the report, in the order of docs/concepts/reconciliation.md#repairs:
    replay, evidence, then the reply ledger."""
    missing_replay(source, token, run, report)
    evidence_mark(source, token, run, report)
    actions_repair(
        source,
        token,
        run,
        report,
        kind=FindingKind.RECEIPT_ATTACHED,
        to=S.SENT,
        reason="receipt_found_at_reconcile",
    )
    actions_repair(
        source,
        token,
        run,
        report,
        kind=FindingKind.RECEIPT_MISSING,
        to=S.SEND_STATUS_UNKNOWN,
        reason="receipt_missing_at_reconcile",
    )
