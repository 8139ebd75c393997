"""Ingress writes: webhook acceptance, quarantine and its review, source registration."""

from __future__ import annotations

import logging
from contextlib import nullcontext
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from typing import Any, Callable, Mapping, Sequence

from django.db import DataError, transaction
from django.db.models import F
from django.utils import timezone

from conduit.canonical import sha256_hex
from conduit.logging import register_secret
from conduit.loopback import credential_url_refusal
from conduit.process_secrets import credential_name_refusal, secret_read
from conduit.providers.base import (
    APPROXIMATE,
    Observation,
    Parsed,
    ProofError,
    SecretUnavailable,
)
from conduit.providers.registry import ADAPTERS, get_adapter
from conduit.sql import insert_rows, update_rows, upsert_counting
from conduit.statemachine import (
    Outcome,
    creation_rows,
    history_columns,
    record_created,
    transition,
    transition_many,
)
from ingress.contract import (
    EVENT_TABLE,
    QUARANTINE_CODES,
    QUARANTINE_TABLE,
    RECONCILE_TABLE,
    trigger_matches,
)
from ingress.models import (
    ENV_NAME,
    Delivery,
    EventState,
    EventTransition,
    InboundEvent,
    ProofFailureWindow,
    QuarantineReceipt,
    QuarantineState,
    QuarantineTransition,
    Source,
)
from ingress.selectors import source_config, source_identity_holder
from ingress.signals import quarantine_corrected
from ingress.writes import DELIVERY_COLUMNS, DELIVERY_UPSERT, EVENT_UPSERT, Refused, SourceChanged, body_write
from replies.services import (
    PLANNED,
    purposes_answering,
    reply_action_rows,
    reply_actions_plan,
    reply_deadline_reads_queue,
)

logger = logging.getLogger("conduit.ingress")

INGEST_ACTOR = "system:ingest"


@dataclass(frozen=True)
class EventResult:
    index: int | None
    result: str  # accepted | duplicate | quarantined | rolled_back (a refused batch's valid member)
    event_key: str = ""
    receipt_id: str = ""
    reason_code: str = ""


@dataclass
class IngestResult:
    delivery_id: str
    results: list[EventResult] = field(default_factory=list)
    # True when nothing of the body was accepted (a refused batch or body).
    refused: bool = False

    @property
    def receipt_ids(self) -> list[str]:
        return list(dict.fromkeys(r.receipt_id for r in self.results if r.receipt_id))

    @property
    def quarantined(self) -> bool:
        return bool(self.receipt_ids)


class ProofRefused(Exception):
    """Proof failed; a quarantine receipt was committed before this was raised."""

    def __init__(self, error: ProofError, receipt_id: str, coalesced: bool = False) -> None:
        super().__init__(error.detail)
        self.code = error.code
        self.detail = error.detail
        self.receipt_id = receipt_id
        # True when this failure was counted against the minute's first receipt of its kind.
        self.coalesced = coalesced


def source_secret(source: Source) -> str:
    """The signing secret, read from the environment variable the source names (or held by this
    process for a run, as the canary holds its own: conduit.process_secrets)."""
    value = secret_read(source.secret_env)
    if not value:
        raise SecretUnavailable(f"environment variable {source.secret_env} is not set")
    register_secret(value)  # the log boundary withholds any record that carries it
    return value


def _insert_ignoring_conflict(model: type, values: dict[str, Any]) -> int | None:
    """INSERT ... ON CONFLICT DO NOTHING: the new primary key, or None if already held."""
    (pk,) = insert_rows(model, list(values), [list(values.values())], ignore_conflicts=True) or [None]
    return pk


def _quarantine(
    *,
    source: Source,
    reason_code: str,
    detail: str,
    authenticated: bool,
    body_sha256: str,
    body_bytes: int,
    at: datetime,
    delivery_id: str = "",
    event_index: int | None = None,
    event_key: str = "",
    invalid_members: list[dict] | None = None,
) -> QuarantineReceipt:
    if reason_code not in QUARANTINE_CODES:  # codes are a contract: no ad hoc ones
        raise ValueError(f"undeclared quarantine reason code {reason_code!r}")
    receipt = QuarantineReceipt.objects.create(
        source=source,
        reason_code=reason_code,
        detail=detail[:256],
        authenticated=authenticated,
        received_at=at,
        delivery_id=delivery_id,
        event_index=event_index,
        event_key=event_key,
        body_sha256=body_sha256,
        body_bytes=body_bytes,
        invalid_members=invalid_members or [],
    )
    record_created(
        table=QUARANTINE_TABLE,
        history=QuarantineTransition,
        owner_field="receipt",
        owner_ids=[receipt.pk],
        path=[QuarantineState.QUARANTINED],
        actor=INGEST_ACTOR,
        reason_codes=[reason_code],
        at=at,
    )
    logger.info(
        "quarantined source=%s reason=%s receipt=%s", source.name, reason_code, receipt.receipt_id
    )
    return receipt


class _Refusal(Exception):
    """A member the ledgers refuse, found while writing: everything the body wrote is taken back."""

    def __init__(self, parsed: Parsed, invalid: list[tuple[int | None, str, str]],
                 quarantine: dict | None = None) -> None:
        super().__init__(invalid[0][1])
        self.parsed, self.invalid, self.quarantine = parsed, invalid, quarantine


DELIVERY_CONFLICT = (None, "delivery_conflict", "this delivery id was first accepted with a different body")
EVENT_COLUMNS = [
    "event_key", "source", *(f.name for f in fields(Observation) if f.name not in ("index", "text")),
    "trigger_rule_version", "trigger_match", "event_state", "reconcile_status", "first_received_at",
    "last_received_at", "seen_count", "message_text",
]


@dataclass
class _Body:
    """What a body writes, decided in Python before either writer runs."""

    delivery: tuple
    ordered: list[tuple[str, Observation]]  # sorted by key: concurrent bodies lock shared keys in one order
    events: list[list]  # EVENT_COLUMNS order
    history: list[tuple]  # the new events' history rows, the event's key as owner
    ready: list[Observation]  # planned if new: RECORD_READY
    purposes_of: Callable[[Observation], Sequence[str]]  # the purposes planned for each of them


def _body(*, source: Source, first_of: dict[str, Observation], delivery_id: str, body_hash: str, at: datetime,
          actor: str) -> _Body:
    # What occurred before the account was connected is history: recorded, never planned.
    # Platform times are whole seconds: the second of connection counts as after it.
    connected = source.connected_at.replace(microsecond=0) if source.connected_at is not None else None
    ordered = sorted(first_of.items())
    events, records, ready = [], [], []
    purposes_for = purposes_answering(source=source)
    adapter = get_adapter(source.adapter)
    for key, observation in ordered:
        history = connected is not None and observation.occurred_at < connected
        trigger = trigger_matches(observation.text, source.trigger_keywords)
        # A family no reply answers (an edit, a removal) or no route can answer plans nothing.
        answerable = bool(purposes_for(observation.event_type)) or (
            not source.purposes and bool(adapter.family(observation.event_type).answers))
        final_state = EventState.RECORD_READY if trigger and not history and answerable \
            else EventState.CLOSED_NO_REPLY
        # The event contract's fields, as the dataclass declares them (one list for ingest,
        # staging and replay); the text is kept apart, as retained content.
        events.append([key, source.pk, *observation.contract_values().values(),
                       source.trigger_rule_version, trigger, final_state, "UNRECONCILED", at, at, 1,
                       observation.text])
        # Each record is written once, already in the state its plan puts it in; its
        # history walks the declared moves: created -> RECEIVED -> final state.
        if final_state == EventState.RECORD_READY:
            ready.append(observation)
            reason = "reply_plan_created"
        elif history:
            reason = "before_connection"
        else:
            reason = "trigger_not_matched" if not trigger else "no_reply_answers"
        records.append((key, [EventState.RECEIVED, final_state], ["source_proof_passed", reason]))
    return _Body(
        delivery=(source.pk, delivery_id, body_hash, sorted(first_of), at, at, 1),
        ordered=ordered, events=events, ready=ready, purposes_of=lambda o: purposes_for(o.event_type),
        history=creation_rows(table=EVENT_TABLE, records=records, actor=actor, at=at),
    )


def _conflicts(parsed: Parsed, indexes: list[int | None]) -> _Refusal:
    return _Refusal(parsed, [(index, "identity_conflict", "this event key was first accepted with a different payload")
                             for index in indexes])


def _events_write(*, source: Source, body: _Body, actor: str, at: datetime, parsed: Parsed) -> dict[int, EventResult]:
    """The body's writes, set-based, one statement per table: the delivery, the events, their
    history, their reply actions and those actions' history, whatever the number of events
    (SQLite, and a body a JSON parameter cannot carry; PostgreSQL writes it in one: ingress.writes).

    Each row is inserted or, held already under its unique key with the same
    content, counted as seen again (`upsert_counting`). Raises _Refusal when
    the delivery id or an event key is held with different content: the caller
    takes back everything written here.
    """
    if not upsert_counting(Delivery, DELIVERY_COLUMNS, [body.delivery], **DELIVERY_UPSERT):
        raise _Refusal(Parsed([], []), [DELIVERY_CONFLICT])
    # Same key: converge only when the payload is the one first accepted.
    held = upsert_counting(InboundEvent, EVENT_COLUMNS, body.events, **EVENT_UPSERT)
    conflicts = [o.index for key, o in body.ordered if (key,) not in held]
    if conflicts:
        raise _conflicts(parsed, conflicts)
    new = {key for key, _ in body.ordered if held[(key,)][1] == 1}
    ids = {key: held[(key,)][0] for key in new}
    insert_rows(EventTransition, history_columns("event"),
                [(ids[row[0]], *row[1:]) for row in body.history if row[0] in new])
    ready = [o for o in body.ready if o.event_key in new]
    if ready:
        reply_actions_plan(observations=ready, adapter=source.adapter, purposes=list(source.purposes),
                           actor=actor, at=at, purposes_of=body.purposes_of)
    return {o.index: EventResult(o.index, "accepted" if key in new else "duplicate", key) for key, o in body.ordered}


def _events_write_at_once(
    *, source: Source, body: _Body, actor: str, at: datetime, parsed: Parsed,
) -> dict[int, EventResult] | None:
    """`_events_write` as one statement on PostgreSQL (ingress.writes); None where it cannot carry the body."""
    actions, fill_later = reply_action_rows(observations=body.ready, adapter=source.adapter,
                                            purposes=list(source.purposes), at=at, purposes_of=body.purposes_of)
    try:
        written = body_write(source=source, delivery=body.delivery, events=body.events, event_columns=EVENT_COLUMNS,
                             event_history=body.history, actions=actions, plan=PLANNED,
                             action_history=PLANNED.history_row(actor=actor, at=at))
    except Refused as refused:
        if refused.delivery:
            raise _Refusal(Parsed([], []), [DELIVERY_CONFLICT]) from None
        raise _conflicts(parsed, [body.ordered[n][1].index for n in refused.members]) from None
    if written is None:
        return None
    held, planned = written
    # Only the actions of events this body inserted were planned.
    reply_deadline_reads_queue(action_ids=[planned[actions[position][0]] for position in fill_later
                                           if actions[position][0] in planned])
    return {o.index: EventResult(o.index, "accepted" if held[key][1] == 1 else "duplicate", key)
            for key, o in body.ordered}


def _proof_failure_record(
    *, source: Source, error: ProofError, body_hash: str, body_bytes: int, at: datetime
) -> tuple[str, bool]:
    """Record an unauthenticated failure: (receipt_id, coalesced).

    The first failure of a source and code in a minute gets a full receipt;
    later ones in that minute only raise the window's count, so forged
    traffic writes a bounded number of ledger rows.
    """
    window_start = at.replace(second=0, microsecond=0)
    window = {"source": source.pk, "reason_code": error.code, "window_start": window_start}
    with transaction.atomic(durable=True):
        opened = _insert_ignoring_conflict(ProofFailureWindow, {**window, "failures": 1})
        if opened is not None:
            receipt = _quarantine(
                source=source, reason_code=error.code, detail=error.detail, authenticated=False,
                body_sha256=body_hash, body_bytes=body_bytes, at=at,
            )
            update_rows(ProofFailureWindow, where={"pk": opened}, assign={"first_receipt": receipt.pk})
            return str(receipt.receipt_id), False
        update_rows(ProofFailureWindow, where=window, assign={"failures": F("failures") + 1})
        first = (ProofFailureWindow.objects.filter(**{**window, "source": source})
                 .values_list("first_receipt__receipt_id", flat=True).first())
    return str(first or ""), True


def webhook_receive(
    *, source: Source, body: bytes, headers: Mapping[str, str], now: datetime | None = None
) -> IngestResult:
    """Verify, parse and accept one webhook body in one transaction.

    Raises ProofRefused (after committing a quarantine receipt, or counting
    the failure against the minute's first one) when the proof fails, and
    SecretUnavailable when the source's secret is not configured. Database
    errors propagate so the caller can answer 503: the transaction guarantees
    nothing was half-written. A value the database refuses (DataError) is a
    refusal of this input, not an outage: the body is quarantined. Raises
    SourceChanged, having written nothing, when `source` came from this
    process's cache (ingress.selectors.source_by_name) and anything but the
    one statement that checks the source's row would decide the answer: the
    caller reads the source afresh and calls again.
    """
    now = now or timezone.now()
    adapter = get_adapter(source.adapter)
    body_hash = sha256_hex(body)
    # A source from this process's cache is acted on only by the one statement that checks its
    # row is unchanged; any other outcome is decided again on the source read afresh.
    cached = getattr(source, "from_cache", False)
    try:
        proof = adapter.verify(body=body, headers=headers, secret=source_secret(source), now=now)
    except (ProofError, SecretUnavailable) as error:
        if cached:
            raise SourceChanged from None
        if isinstance(error, SecretUnavailable):
            raise
        receipt_id, coalesced = _proof_failure_record(
            source=source, error=error, body_hash=body_hash, body_bytes=len(body), at=now
        )
        raise ProofRefused(error, receipt_id, coalesced) from None

    parsed = adapter.parse_delivery(body=body, config=source_config(source))
    accept = dict(source=source, parsed=parsed, delivery_id=proof.delivery_id, body_hash=body_hash,
                  body_bytes=len(body), now=now)
    try:
        if transaction.get_connection().vendor == "postgresql":
            result = observations_accept(**accept)  # one statement, its own transaction
        else:
            try:
                with transaction.atomic(durable=True):
                    result = observations_accept(**accept, savepoint=False)
            except _Refusal as refusal:
                # The transaction that wrote part of the body is rolled back; its refusal is recorded apart.
                with transaction.atomic(durable=True):
                    result = _batch_refused(source=source, parsed=refusal.parsed, invalid=refusal.invalid,
                                            quarantine=refusal.quarantine)
    except DataError as exc:
        if cached:
            raise SourceChanged from None
        # The adapter's boundary should have refused this value; say so loudly,
        # but answer the provider as a refusal it need not retry.
        logger.error("store refused a value source=%s delivery=%s error=%s",
                     source.name, proof.delivery_id, type(exc).__name__)
        with transaction.atomic(durable=True):
            receipt = _quarantine(
                source=source, reason_code="unstorable_value", authenticated=True, body_sha256=body_hash,
                body_bytes=len(body), at=now, delivery_id=proof.delivery_id,
                detail="the event store refused a value of this body; nothing of it was accepted",
            )
        result = IngestResult(delivery_id=proof.delivery_id, refused=True, results=[
            EventResult(None, "quarantined", receipt_id=str(receipt.receipt_id), reason_code="unstorable_value")
        ])
    if logger.isEnabledFor(logging.INFO):
        logger.info(
            "ingested source=%s delivery=%s results=%s", source.name, proof.delivery_id,
            ",".join(f"{r.result}:{r.reason_code or 'ok'}" for r in result.results),
        )
    return result


def _stored_conflicts(
    *, source: Source, first_of: dict[str, Observation], delivery_id: str, body_hash: str,
) -> list[tuple[int | None, str, str]]:
    """What the ledgers would refuse in a body already refused for other reasons (reads only)."""
    conflicts: list[tuple[int | None, str, str]] = []
    if Delivery.objects.filter(source=source, delivery_id=delivery_id).exclude(body_hash=body_hash).exists():
        conflicts.append((None, "delivery_conflict", "this delivery id was first accepted with a different body"))
    stored = dict(InboundEvent.objects.filter(event_key__in=list(first_of)).values_list("event_key", "payload_hash"))
    conflicts += [
        (o.index, "identity_conflict", "this event key was first accepted with a different payload")
        for key, o in first_of.items() if key in stored and stored[key] != o.payload_hash
    ]
    return conflicts


def _batch_refused(
    *, source: Source, parsed: Parsed, invalid: list[tuple[int | None, str, str]], quarantine: dict,
) -> IngestResult:
    """Seed 004: any invalid member refuses the whole body, with one receipt naming each member.

    `invalid` holds (index, reason code, detail); index None is the whole body.
    Nothing of the body is accepted and no identity is claimed; the valid
    members come back through reconciliation as events the webhook never delivered.
    """
    invalid = sorted(invalid, key=lambda r: -1 if r[0] is None else r[0])
    first_index, first_code, first_detail = invalid[0]
    members = [{"index": i, "reason_code": c} for i, c, _ in invalid if i is not None]
    detail = first_detail if len(invalid) == 1 else f"{len(invalid)} invalid members; first: {first_detail}"
    keys = {o.index: o.event_key for o in parsed.observations}
    # A refused body claims no delivery id, so its redeliveries (a provider's retry, or a
    # captured request replayed inside its signature window) meet its first receipt here
    # instead of writing another.
    earlier = QuarantineReceipt.objects.filter(
        source=quarantine["source"], delivery_id=quarantine["delivery_id"], authenticated=True,
        body_sha256=quarantine["body_sha256"], reason_code=first_code,
    ).values_list("receipt_id", flat=True).first()
    if earlier is not None:
        receipt_id = str(earlier)
    else:
        receipt = _quarantine(
            reason_code=first_code, detail=detail, event_index=first_index, invalid_members=members,
            event_key=keys.get(first_index, "")[:512], **quarantine,
        )
        receipt_id = str(receipt.receipt_id)
    reasons = {i: c for i, c, _ in invalid}
    result = IngestResult(delivery_id=quarantine["delivery_id"], refused=True)
    if None in reasons:
        result.results.append(EventResult(None, "quarantined", receipt_id=receipt_id, reason_code=reasons[None]))
    for index in sorted(set(keys) | {i for i in reasons if i is not None}):
        if index in reasons:
            result.results.append(EventResult(index, "quarantined", keys.get(index, ""), receipt_id,
                                              reasons[index]))
        else:
            result.results.append(EventResult(index, "rolled_back", keys[index], receipt_id))
    return result


def observations_accept(
    *, source: Source, parsed: Parsed, delivery_id: str, body_hash: str, body_bytes: int,
    now: datetime, actor: str = INGEST_ACTOR, savepoint: bool = True,
) -> IngestResult:
    """Accept one delivery's normalized observations, all or nothing: the one ingest path.

    The webhook calls it after the proof passed; reconciliation calls it to
    replay source events missing locally. It runs inside the caller's
    transaction, so a delivery and everything it plans commit together; on
    PostgreSQL it may also run outside one (the webhook), where the body's
    writes are one statement and so their own transaction.
    Delivery dedup, the event upsert by event_key and reply planning happen
    here. Seed 004: "Any invalid member rolls back the entire batch, including
    canonical identity ownership": a rejection, a conflicting repeat inside the
    body or an identity conflict refuses the whole body with one receipt.
    """
    database = transaction.get_connection()
    at_once = database.vendor == "postgresql"
    outside = not database.in_atomic_block
    if outside and not at_once:
        raise RuntimeError("observations_accept must run inside a transaction")
    quarantine = dict(source=source, authenticated=True, body_sha256=body_hash, body_bytes=body_bytes,
                      at=now, delivery_id=delivery_id)
    invalid = [(r.index, r.reason_code, r.detail) for r in parsed.rejections]
    # One receipt is one sighting: an event listed twice in a body counts once.
    first_of: dict[str, Observation] = {}
    repeats: list[Observation] = []
    for observation in parsed.observations:
        held = first_of.setdefault(observation.event_key, observation)
        if held is not observation:
            repeats.append(observation)
            if held.payload_hash != observation.payload_hash:
                invalid.append((observation.index, "identity_conflict",
                                "the body holds this event twice with different payloads"))
    if invalid:
        if getattr(source, "from_cache", False):  # a refusal is recorded against the source read afresh
            raise SourceChanged
        # Already refused: still name every member the ledgers would refuse, so the one
        # receipt is complete (a reviewer's correction must not meet a second surprise).
        with transaction.atomic(savepoint=False):  # the caller's transaction, or its own
            invalid += _stored_conflicts(source=source, first_of=first_of, delivery_id=delivery_id,
                                         body_hash=body_hash)
            return _batch_refused(source=source, parsed=parsed, invalid=invalid, quarantine=quarantine)

    body = _body(source=source, first_of=first_of, delivery_id=delivery_id, body_hash=body_hash, at=now, actor=actor)
    write = dict(source=source, body=body, actor=actor, at=now, parsed=parsed)
    # Everything below is taken back as one if any member turns out to conflict. On
    # PostgreSQL the body is one statement: outside a transaction its own, inside one under
    # a savepoint. Otherwise, and for a body one statement cannot carry, statement by
    # statement under a savepoint, or (savepoint=False, for a caller whose transaction
    # holds nothing else) taken back by the caller's rollback.
    try:
        outcomes = None
        if at_once:
            with nullcontext() if outside else transaction.atomic(savepoint=savepoint):
                outcomes = _events_write_at_once(**write)
        if outcomes is None:
            if getattr(source, "from_cache", False):  # only the one statement checks a cached source
                raise SourceChanged
            with transaction.atomic(savepoint=savepoint):
                outcomes = _events_write(**write)
    except _Refusal as refusal:
        if not savepoint and not outside:  # the caller rolls back, then records the refusal with this receipt's fields
            raise _Refusal(refusal.parsed, refusal.invalid, quarantine) from None
        with transaction.atomic(savepoint=False):
            return _batch_refused(source=source, parsed=refusal.parsed, invalid=refusal.invalid,
                                  quarantine=quarantine)
    for observation in repeats:
        outcomes[observation.index] = EventResult(observation.index, "duplicate", observation.event_key)
    return IngestResult(delivery_id=delivery_id, results=[outcomes[i] for i in sorted(outcomes)])


def event_transition(
    *, event_id: int, to: str, actor: str, reason_code: str, expected: str | None = None,
    at: datetime | None = None,
) -> Outcome:
    """The canonical event ledger's one transition function."""
    return transition(
        table=EVENT_TABLE, model=InboundEvent, history=EventTransition, owner_field="event",
        pk=event_id, to=to, actor=actor, reason_code=reason_code, state_field="event_state",
        expected=expected, at=at,
    )


MARK_CHUNK = 2000


def events_occurred_at_correct(*, source: Source, observed, actor: str) -> int:
    """Replace stand-in times (conduit.providers.base.APPROXIMATE) with the item's own time a
    read of the source showed: a correction of metadata, never an identity conflict.

    `observed` is a queryset of rows with event_key, payload_hash, occurred_at and
    occurred_at_original (a scan's staging); only rows with the same key and
    payload hash correct an event. Returns how many events were corrected.
    """
    from django.db.models import Exists, OuterRef, Subquery

    shown = observed.filter(event_key=OuterRef("event_key"), payload_hash=OuterRef("payload_hash")) \
        .exclude(occurred_at_original__startswith=APPROXIMATE)
    corrected = InboundEvent.objects.filter(
        source=source, occurred_at_original__startswith=APPROXIMATE).filter(Exists(shown)).update(
        occurred_at=Subquery(shown.values("occurred_at")[:1]),
        occurred_at_original=Subquery(shown.values("occurred_at_original")[:1]),
    )
    if corrected:
        logger.info("occurred_at corrected source=%s events=%s actor=%s", source.name, corrected, actor)
    return corrected


def events_reconcile_mark(*, events, to: str, actor: str, reason_code: str, at: datetime) -> int:
    """Move the events of a queryset to reconcile status `to`: the status's transition function.

    Each move is checked against RECONCILE_TABLE and recorded in the event's
    history; every event in the set gets `reconciled_at`. Returns how many moved.
    """
    # Those already in `to` only get the time; the rest get it with their move (one write each).
    events.filter(reconcile_status=to).update(reconciled_at=at)
    moved = 0
    ids = list(events.exclude(reconcile_status=to).order_by("pk").values_list("pk", flat=True))
    for start in range(0, len(ids), MARK_CHUNK):
        moved += transition_many(
            table=RECONCILE_TABLE, model=InboundEvent, history=EventTransition, owner_field="event",
            pks=ids[start:start + MARK_CHUNK], to=to, actor=actor, reason_code=reason_code,
            state_field="reconcile_status", at=at, extra={"reconciled_at": at},
        )
    return moved


def quarantine_transition(
    *, receipt_id: int, to: str, actor: str, reason_code: str, extra: dict | None = None
) -> Outcome:
    """The quarantine ledger's one transition function."""
    return transition(
        table=QUARANTINE_TABLE, model=QuarantineReceipt, history=QuarantineTransition,
        owner_field="receipt", pk=receipt_id, to=to, actor=actor, reason_code=reason_code,
        extra=extra,
    )


def quarantine_review(*, receipt_id: int, outcome: str, actor: str, note: str) -> Outcome:
    """A person dismisses a receipt or marks it corrected; actor, time and note recorded.

    Marking an authenticated receipt corrected asks for a reconcile of its
    source (the `quarantine_corrected` signal, sent on commit): the members a
    refused batch held are recovered from the source, never from the body.
    """
    if outcome not in (QuarantineState.DISMISSED, QuarantineState.CORRECTED):
        raise ValueError(f"a review ends in DISMISSED or CORRECTED, not {outcome}")
    if outcome == QuarantineState.CORRECTED and not note.strip():
        raise ValueError("say what was corrected: a note is required")
    now = timezone.now()
    with transaction.atomic():
        result = quarantine_transition(
            receipt_id=receipt_id, to=outcome, actor=actor,
            reason_code="reviewed_dismissed" if outcome == QuarantineState.DISMISSED else "reviewed_corrected",
            extra={"reviewed_by": actor, "reviewed_at": now, "review_note": note.strip()},
        )
        if result.applied and outcome == QuarantineState.CORRECTED:
            source_id, authenticated = QuarantineReceipt.objects.filter(pk=receipt_id).values_list(
                "source_id", "authenticated").get()
            if authenticated:
                transaction.on_commit(lambda: quarantine_corrected.send(
                    sender=QuarantineReceipt, source_id=source_id, actor=actor))
        return result


class SourceConflict(Exception):
    """A registration or edit that would move a source's identity silently."""


# Seed 004: "Registrations are immutable for one runtime instance." What a source is
# (its platform, account, contract and whether it is a test source) never changes
# after registration; a different one is a new source.
IMMUTABLE_FIELDS = ("adapter", "account_ref", "contract_version", "canary")
MAX_NAME_LENGTH = 64  # event types, purposes and trigger keywords: their columns' width

REGISTERED_FIELDS = (
    "adapter", "account_ref", "event_types", "contract_version", "purposes",
    "trigger_keywords", "retention_days", "secret_env", "canary", "source_url",
    "meta_app_id", "secret_env_next", "verify_token_env", "token_env",
)
# Sources of one Meta app that take the same object are verified by one callback: they
# must name the same secret and verify-token variables.
APP_SHARED_FIELDS = ("secret_env", "secret_env_next", "verify_token_env")


# The source's fields that name a credential variable.
CREDENTIAL_FIELDS = ("secret_env", "secret_env_next", "verify_token_env", "token_env")


def source_door_refusals(source: Source) -> dict[str, str]:
    """What a source names that the deployment does not allow, by field: a credential variable
    not declared for credentials, or a read URL its token may not be sent to."""
    errors = {}
    for name in CREDENTIAL_FIELDS:
        value = getattr(source, name)
        # A value that is no variable name at all is the field's own error (ENV_NAME).
        refusal = credential_name_refusal(value) if value and ENV_NAME.regex.fullmatch(value) else ""
        if refusal:
            errors[name] = refusal
    hosts = get_adapter(source.adapter).credential_hosts if source.adapter in ADAPTERS else None
    if hosts is not None and source.source_url:
        refusal = credential_url_refusal(source.source_url, hosts)
        if refusal:
            errors["source_url"] = f"the access token would be sent there: {refusal}"
    return errors


def _dedupe(values: list[str]) -> list[str]:
    return list(dict.fromkeys(v.strip() for v in values if v.strip()))


def _validated(source: Source) -> Source:
    from django.core.exceptions import ValidationError

    try:
        adapter = get_adapter(source.adapter)
    except KeyError as exc:
        raise ValidationError({"adapter": str(exc.args[0])}) from None
    source.source_system = adapter.source_system
    source.event_types = _dedupe(source.event_types)
    source.purposes = _dedupe(source.purposes)
    source.trigger_keywords = _dedupe(source.trigger_keywords)
    errors = {}
    if not source.event_types:
        errors["event_types"] = "allowlist at least one event type"
    for name in ("event_types", "purposes", "trigger_keywords"):
        bad = [v for v in getattr(source, name) if len(v) > MAX_NAME_LENGTH or not v.isprintable()]
        if bad:
            errors[name] = (f"each entry is printable and at most {MAX_NAME_LENGTH} characters; "
                            f"{len(bad)} entr{'y is' if len(bad) == 1 else 'ies are'} not")
    bad = [p for p in source.purposes if not p.replace("_", "").isalnum() or not p.islower()]
    if bad:
        errors["purposes"] = f"purposes are lower-case words with underscores: {', '.join(bad)}"
    if getattr(adapter, "object", ""):
        for name, flag in (("meta_app_id", "--meta-app-id"), ("verify_token_env", "--verify-token-env"),
                           ("token_env", "--token-env")):
            if not getattr(source, name):
                errors[name] = f"a Meta source needs {flag}"
    elif source.meta_app_id or source.verify_token_env:
        errors["meta_app_id"] = "only Meta sources have a Meta app id and verify token"
    if source.secret_env_next and source.secret_env_next == source.secret_env:
        errors["secret_env_next"] = "the second secret names another variable than the first"
    errors.update(source_door_refusals(source))
    if errors:
        raise ValidationError(errors)
    source.full_clean(validate_unique=False, validate_constraints=False)
    return source


def _app_conflict(source: Source) -> str:
    """Why `source` cannot join its Meta app's callback, or "" (the first differing source named)."""
    if not source.meta_app_id:
        return ""
    siblings = Source.objects.filter(meta_app_id=source.meta_app_id, adapter=source.adapter).exclude(pk=source.pk)
    for sibling in siblings.order_by("pk"):
        differing = [f for f in APP_SHARED_FIELDS if getattr(sibling, f) != getattr(source, f)]
        if differing:
            return (f"source {sibling.name!r} of Meta app {source.meta_app_id} takes the same object and names "
                    + "; ".join(f"{f} {getattr(sibling, f)!r} (given {getattr(source, f)!r})" for f in differing)
                    + ": one callback verifies them all, so they must name the same variables")
    return ""


def source_register(
    *,
    name: str,
    adapter: str,
    account_ref: str,
    event_types: list[str],
    purposes: list[str],
    trigger_keywords: list[str],
    secret_env: str,
    contract_version: str = "event-v1",
    retention_days: int = 30,
    canary: bool = False,
    source_url: str = "",
    meta_app_id: str = "",
    secret_env_next: str = "",
    verify_token_env: str = "",
    token_env: str = "",
) -> tuple[Source, bool]:
    """Create a source, confirm an identical one, or rename one. Returns (source, created).

    Seed 004: "Registering the same namespace and Scope under a new name is a
    renamed configuration entry: the stored source, checkpoint and history move
    to the new name and the old name is released." A new name for a registered
    identity (platform and account) whose other registered fields all match
    renames that source (`source_rename`): the row keeps its primary key, so its
    events, replies, scan state and reports stay with it, and the returned
    source carries `renamed_from`, the name released. Conflicting values are
    refused with SourceConflict naming each field; edits go through the admin
    (source_update), where they are deliberate.
    Where its replies go is replies' (reply routes, replies.services.reply_route_declare).
    """
    wanted = _validated(
        Source(
            name=name, adapter=adapter, account_ref=account_ref, event_types=event_types,
            purposes=purposes, trigger_keywords=trigger_keywords, secret_env=secret_env,
            contract_version=contract_version, retention_days=retention_days, canary=canary,
            source_url=source_url, meta_app_id=meta_app_id, secret_env_next=secret_env_next,
            verify_token_env=verify_token_env, token_env=token_env,
        )
    )
    with transaction.atomic():
        existing = Source.objects.select_for_update().filter(name=name).first()
        if existing is not None:
            differences = _registered_differences(existing, wanted)
            if differences:
                raise SourceConflict(
                    f"source {name!r} is already registered with other values; change it in the "
                    "admin if that is intended. " + "; ".join(differences)
                )
            return existing, False
        owner = source_identity_holder(adapter=wanted.adapter, account_ref=wanted.account_ref)
        if owner is not None:
            return source_rename(source_id=owner.pk, name=name, registered=wanted), False
        conflict = _app_conflict(wanted)
        if conflict:
            raise SourceConflict(conflict)
        if get_adapter(wanted.adapter).backfills:
            # What the account held before now is history a scan records, never new work.
            wanted.connected_at = timezone.now()
        wanted.save()
    logger.info("source registered name=%s adapter=%s", wanted.name, wanted.adapter)
    return wanted, True


def _registered_differences(registered: Source, given: Source) -> list[str]:
    """Each registered field whose value differs between the stored source and a registration."""
    return [f"{f}: registered {getattr(registered, f)!r}, given {getattr(given, f)!r}"
            for f in REGISTERED_FIELDS if getattr(registered, f) != getattr(given, f)]


def source_rename(*, source_id: int, name: str, registered: Source) -> Source:
    """Seed 004's rename: the source registered again under `name` with the same values.

    Runs inside source_register's transaction, which holds `name` free. Every
    registered field but the name must match (`registered`, validated), else
    SourceConflict names each difference, as a registration under the source's
    own name would. The row keeps its primary key: events, replies, scan state
    and reports point at it, not at its name. Webhooks for the old name answer
    404 from then on and the name is free for a new registration (its
    /webhooks/<name>/ path moves with it; a Meta app's callback is per app id).
    Returns the source with `renamed_from` set to the name released.
    """
    # FOR UPDATE, not NO KEY: the name is a unique key, so the UPDATE below takes this lock
    # anyway; taken at once, it is never an upgrade (which could deadlock with a key-share holder).
    source = Source.objects.select_for_update(no_key=False).get(pk=source_id)
    differences = _registered_differences(source, registered)
    if differences:
        raise SourceConflict(
            f"account {source.account_ref!r} of {source.source_system} is already registered as source "
            f"{source.name!r} with other values: registering it as {name!r} renames it only when every "
            "other value matches (change them in the admin first if that is intended). "
            + "; ".join(differences)
        )
    old = source.name
    source.name = name
    source.save(update_fields=["name", "updated_at"])
    source.renamed_from = old
    transaction.on_commit(lambda: logger.info(
        "source renamed name=%s from=%s adapter=%s id=%s", name, old, source.adapter, source.pk))
    return source


def source_update(*, source_id: int, changes: Mapping[str, Any]) -> Source:
    """Apply an edit made by a person. Identity cannot move once events exist.

    Renaming keeps all history (events point at the source row, not its name).
    A change of trigger keywords is a new trigger rule version.
    """
    with transaction.atomic():
        source = Source.objects.select_for_update().get(pk=source_id)
        before = {f: getattr(source, f) for f in (*IMMUTABLE_FIELDS, "trigger_keywords")}
        for name, value in changes.items():
            setattr(source, name, value)
        _validated(source)
        moved = [f for f in IMMUTABLE_FIELDS if getattr(source, f) != before[f]]
        if moved:
            raise SourceConflict(
                f"the {', '.join(moved)} of source {source.name!r} cannot change after registration: "
                "a source's platform, account, contract version and canary flag are what its events "
                "and replies were accepted under (a canary flag switched on would suppress a live "
                "source's approved replies). Register a new source instead."
            )
        clash = source_identity_holder(adapter=source.adapter, account_ref=source.account_ref,
                                       other_than=source.pk)
        if clash is not None:
            raise SourceConflict(f"account {source.account_ref!r} is already source {clash.name!r}")
        conflict = _app_conflict(source)
        if conflict:
            raise SourceConflict(conflict)
        if source.trigger_keywords != before["trigger_keywords"]:
            source.trigger_rule_version = F("trigger_rule_version") + 1
        source.save()
        source.refresh_from_db()
    return source


def retention_purge(*, now: datetime | None = None, dry_run: bool = False) -> dict[str, int]:
    """Blank the retained message text of events older than their source's retention period.

    Keys, hashes, states and history stay; only the content goes, and the
    time it went is recorded. Returns {source name: events purged (or, with
    dry_run, that would be)}.
    """
    now = now or timezone.now()
    purged: dict[str, int] = {}
    for source in Source.objects.order_by("name"):
        due = InboundEvent.objects.filter(
            source=source, first_received_at__lt=now - timedelta(days=source.retention_days),
        ).exclude(message_text="")
        purged[source.name] = due.count() if dry_run else due.update(message_text="", content_purged_at=now)
    if not dry_run:
        logger.info("retention purge %s", " ".join(f"{name}={n}" for name, n in purged.items()) or "no sources")
    return purged


def source_reauthorized(*, source_id: int, actor: str) -> Source:
    """A person replaced a source's access token: clear `needs_reauth` so its waiting sends resume.

    Refused (ValueError) while the token variable the source names is empty: clearing the flag
    then would only send into the same refusal. The waiting actions keep their reply keys and
    states, so nothing is sent twice; the sender's schedule picks them up.
    """
    with transaction.atomic():
        source = Source.objects.select_for_update().get(pk=source_id)
        if not source_config(source, with_token=True).access_token:
            raise ValueError(f"source {source.name!r} has no access token in its variable "
                             f"{source.token_env or '(none named)'}: set the new token first")
        Source.objects.filter(pk=source_id).update(needs_reauth=False)
        source.needs_reauth = False
    logger.info("source=%s re-authorised by actor=%s", source.name, actor)
    return source
