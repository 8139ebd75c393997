"""Ingest: verify, parse and accept a webhook body, all or nothing; a refused batch's one receipt."""

from __future__ import annotations

import logging
from contextlib import nullcontext
from datetime import datetime
from typing import Mapping

from django.db import DataError, transaction
from django.utils import timezone

from conduit.canonical import sha256_hex
from conduit.providers.base import Observation, Parsed, ProofError, SecretUnavailable
from conduit.providers.registry import get_adapter
from conduit.sql import fast_paths
from ingress.models import Delivery, InboundEvent, QuarantineReceipt, Source
from ingress.selectors import source_config
from ingress.services.body import _body, _events_write, _events_write_at_once, _Refusal
from ingress.services.quarantine import _proof_failure_record, _quarantine
from ingress.services.results import INGEST_ACTOR, EventResult, IngestResult, ProofRefused
from ingress.services.sources import source_secret
from ingress.writes import SourceChanged

logger = logging.getLogger("conduit.ingress")


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
    accept = dict(
        source=source,
        parsed=parsed,
        delivery_id=proof.delivery_id,
        body_hash=body_hash,
        body_bytes=len(body),
        now=now,
    )
    try:
        if fast_paths(transaction.get_connection()):
            result = observations_accept(**accept)  # one statement, its own transaction
        else:
            try:
                with transaction.atomic(durable=True):
                    result = observations_accept(**accept, savepoint=False)
            except _Refusal as refusal:
                # The transaction that wrote part of the body is rolled back; its refusal is recorded apart.
                with transaction.atomic(durable=True):
                    result = _batch_refused(
                        source=source,
                        parsed=refusal.parsed,
                        invalid=refusal.invalid,
                        quarantine=refusal.quarantine,
                    )
    except DataError as exc:
        if cached:
            raise SourceChanged from None
        # The adapter's boundary should have refused this value; say so loudly,
        # but answer the provider as a refusal it need not retry.
        logger.error(
            "store refused a value source=%s delivery=%s error=%s",
            source.name,
            proof.delivery_id,
            type(exc).__name__,
        )
        with transaction.atomic(durable=True):
            receipt = _quarantine(
                source=source,
                reason_code="unstorable_value",
                authenticated=True,
                body_sha256=body_hash,
                body_bytes=len(body),
                at=now,
                delivery_id=proof.delivery_id,
                detail="the event store refused a value of this body; nothing of it was accepted",
            )
        result = IngestResult(
            delivery_id=proof.delivery_id,
            refused=True,
            results=[
                EventResult(
                    None, "quarantined", receipt_id=str(receipt.receipt_id), reason_code="unstorable_value"
                )
            ],
        )
    if logger.isEnabledFor(logging.INFO):
        logger.info(
            "ingested source=%s delivery=%s results=%s",
            source.name,
            proof.delivery_id,
            ",".join(f"{r.result}:{r.reason_code or 'ok'}" for r in result.results),
        )
    return result


def _stored_conflicts(
    *,
    source: Source,
    first_of: dict[str, Observation],
    delivery_id: str,
    body_hash: str,
) -> list[tuple[int | None, str, str]]:
    """What the ledgers would refuse in a body already refused for other reasons (reads only)."""
    conflicts: list[tuple[int | None, str, str]] = []
    if Delivery.objects.filter(source=source, delivery_id=delivery_id).exclude(body_hash=body_hash).exists():
        conflicts.append(
            (None, "delivery_conflict", "this delivery id was first accepted with a different body")
        )
    stored = dict(
        InboundEvent.objects.filter(event_key__in=list(first_of)).values_list("event_key", "payload_hash")
    )
    conflicts += [
        (o.index, "identity_conflict", "this event key was first accepted with a different payload")
        for key, o in first_of.items()
        if key in stored and stored[key] != o.payload_hash
    ]
    return conflicts


def _batch_refused(
    *,
    source: Source,
    parsed: Parsed,
    invalid: list[tuple[int | None, str, str]],
    quarantine: dict,
) -> IngestResult:
    """docs/concepts/event-contract.md#batches: any invalid member refuses the whole body, with one
    receipt naming each member.

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
    earlier = (
        QuarantineReceipt.objects.filter(
            source=quarantine["source"],
            delivery_id=quarantine["delivery_id"],
            authenticated=True,
            body_sha256=quarantine["body_sha256"],
            reason_code=first_code,
        )
        .values_list("receipt_id", flat=True)
        .first()
    )
    if earlier is not None:
        receipt_id = str(earlier)
    else:
        receipt = _quarantine(
            reason_code=first_code,
            detail=detail,
            event_index=first_index,
            invalid_members=members,
            event_key=keys.get(first_index, "")[:512],
            **quarantine,
        )
        receipt_id = str(receipt.receipt_id)
    reasons = {i: c for i, c, _ in invalid}
    result = IngestResult(delivery_id=quarantine["delivery_id"], refused=True)
    if None in reasons:
        result.results.append(
            EventResult(None, "quarantined", receipt_id=receipt_id, reason_code=reasons[None])
        )
    for index in sorted(set(keys) | {i for i in reasons if i is not None}):
        if index in reasons:
            result.results.append(
                EventResult(index, "quarantined", keys.get(index, ""), receipt_id, reasons[index])
            )
        else:
            result.results.append(EventResult(index, "rolled_back", keys[index], receipt_id))
    return result


def observations_accept(
    *,
    source: Source,
    parsed: Parsed,
    delivery_id: str,
    body_hash: str,
    body_bytes: int,
    now: datetime,
    actor: str = INGEST_ACTOR,
    savepoint: bool = True,
) -> IngestResult:
    """Accept one delivery's normalized observations, all or nothing: the one ingest path.

    The webhook calls it after the proof passed; reconciliation calls it to
    replay source events missing locally. It runs inside the caller's
    transaction, so a delivery and everything it plans commit together; on
    PostgreSQL it may also run outside one (the webhook), where the body's
    writes are one statement and so their own transaction.
    Delivery dedup, the event upsert by event_key and reply planning happen
    here. docs/concepts/event-contract.md#batches: "Any invalid member rolls back the
    entire batch, including canonical identity ownership": a rejection, a conflicting repeat inside the
    body or an identity conflict refuses the whole body with one receipt.
    """
    database = transaction.get_connection()
    at_once = fast_paths(database)
    outside = not database.in_atomic_block
    if outside and not at_once:
        raise RuntimeError("observations_accept must run inside a transaction")
    quarantine = dict(
        source=source,
        authenticated=True,
        body_sha256=body_hash,
        body_bytes=body_bytes,
        at=now,
        delivery_id=delivery_id,
    )
    invalid = [(r.index, r.reason_code, r.detail) for r in parsed.rejections]
    # One receipt is one sighting: an event listed twice in a body counts once.
    first_of: dict[str, Observation] = {}
    repeats: list[Observation] = []
    for observation in parsed.observations:
        held = first_of.setdefault(observation.event_key, observation)
        if held is not observation:
            repeats.append(observation)
            if held.payload_hash != observation.payload_hash:
                invalid.append(
                    (
                        observation.index,
                        "identity_conflict",
                        "the body holds this event twice with different payloads",
                    )
                )
    if invalid:
        if getattr(source, "from_cache", False):  # a refusal is recorded against the source read afresh
            raise SourceChanged
        # Already refused: still name every member the ledgers would refuse, so the one
        # receipt is complete (a reviewer's correction must not meet a second surprise).
        with transaction.atomic(savepoint=False):  # the caller's transaction, or its own
            invalid += _stored_conflicts(
                source=source, first_of=first_of, delivery_id=delivery_id, body_hash=body_hash
            )
            return _batch_refused(source=source, parsed=parsed, invalid=invalid, quarantine=quarantine)

    body = _body(
        source=source, first_of=first_of, delivery_id=delivery_id, body_hash=body_hash, at=now, actor=actor
    )
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
        if (
            not savepoint and not outside
        ):  # the caller rolls back, then records the refusal with this receipt's fields
            raise _Refusal(refusal.parsed, refusal.invalid, quarantine) from None
        with transaction.atomic(savepoint=False):
            return _batch_refused(
                source=source, parsed=refusal.parsed, invalid=refusal.invalid, quarantine=quarantine
            )
    for observation in repeats:
        outcomes[observation.index] = EventResult(observation.index, "duplicate", observation.event_key)
    return IngestResult(delivery_id=delivery_id, results=[outcomes[i] for i in sorted(outcomes)])
