"""The quarantine ledger: receipts, coalesced proof failures, its transition function and review."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from conduit.providers.base import ProofError
from conduit.sql import insert_rows, update_rows
from conduit.statemachine import Outcome, record_created, transition
from ingress.contract import QUARANTINE_CODES, QUARANTINE_TABLE
from ingress.models import (
    ProofFailureWindow,
    QuarantineReceipt,
    QuarantineState,
    QuarantineTransition,
    Source,
)
from ingress.services.results import INGEST_ACTOR
from ingress.signals import quarantine_corrected, quarantine_reviewed

logger = logging.getLogger("conduit.ingress")


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
    logger.info("quarantined source=%s reason=%s receipt=%s", source.name, reason_code, receipt.receipt_id)
    return receipt


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
                source=source,
                reason_code=error.code,
                detail=error.detail,
                authenticated=False,
                body_sha256=body_hash,
                body_bytes=body_bytes,
                at=at,
            )
            update_rows(ProofFailureWindow, where={"pk": opened}, assign={"first_receipt": receipt.pk})
            return str(receipt.receipt_id), False
        update_rows(ProofFailureWindow, where=window, assign={"failures": F("failures") + 1})
        first = (
            ProofFailureWindow.objects.filter(**{**window, "source": source})
            .values_list("first_receipt__receipt_id", flat=True)
            .first()
        )
    return str(first or ""), True


def quarantine_transition(
    *, receipt_id: int, to: str, actor: str, reason_code: str, extra: dict | None = None
) -> Outcome:
    """The quarantine ledger's one transition function."""
    return transition(
        table=QUARANTINE_TABLE,
        model=QuarantineReceipt,
        history=QuarantineTransition,
        owner_field="receipt",
        pk=receipt_id,
        to=to,
        actor=actor,
        reason_code=reason_code,
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
            receipt_id=receipt_id,
            to=outcome,
            actor=actor,
            reason_code="reviewed_dismissed"
            if outcome == QuarantineState.DISMISSED
            else "reviewed_corrected",
            extra={"reviewed_by": actor, "reviewed_at": now, "review_note": note.strip()},
        )
        if not result.applied:
            return result
        source_id, authenticated, public_id = (
            QuarantineReceipt.objects.filter(pk=receipt_id)
            .values_list("source_id", "authenticated", "receipt_id")
            .get()
        )
        # In this transaction: a reconciliation finding this receipt explains records the review.
        quarantine_reviewed.send(
            sender=QuarantineReceipt,
            receipt_id=str(public_id),
            source_id=source_id,
            outcome=outcome,
            actor=actor,
            note=note.strip(),
            at=now,
        )
        if outcome == QuarantineState.CORRECTED and authenticated:
            transaction.on_commit(
                lambda: quarantine_corrected.send(sender=QuarantineReceipt, source_id=source_id, actor=actor)
            )
        return result
