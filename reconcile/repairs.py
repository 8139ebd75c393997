"""The report's planned repairs, each in its own transactions, each recording its outcome.

Every repair acts only on findings still `planned`, so a run found REPAIRING
after a crash is finished by running them again. Each transaction re-checks
(and extends) the scan lease; an error becomes the finding's `failed` outcome
with a stable code, never the exception's text.
"""

from __future__ import annotations

import logging

from django.db import DatabaseError, transaction
from django.db.models import Exists, OuterRef

from conduit.canonical import payload_hash
from conduit.providers.base import Parsed
from ingress.models import InboundEvent, ReconcileStatus, Source
from ingress.services import events_reconcile_mark, observations_accept
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
from reconcile.staging import staged_observations
from replies.ledger import reply_action_transition
from replies.models import DeliveryState as S

logger = logging.getLogger("conduit.reconcile")

RECONCILE_ACTOR = "system:reconcile"
REPLAY_BATCH = 500
CHUNK = 2000


def repair_code(exc: BaseException) -> str:
    """A stable code for a repair that raised; the exception's text is never kept."""
    return "database_error" if isinstance(exc, DatabaseError) else "unexpected_error"


def missing_replay(source: Source, token: str, run: ReconcileRun, report: ReconcileReport) -> None:
    """Each missing source event goes through the webhook's own ingest function, a batch a
    transaction; the batch's delivery id is its content digest, so a resumed replay of the
    same batch is the same delivery (ingest dedups it)."""
    planned = Finding.objects.filter(report=report, kind=FindingKind.MISSING_LOCAL,
                                     repair_outcome=RepairOutcome.PLANNED)
    while keys := list(planned.order_by("event_key").values_list("event_key", flat=True)[:REPLAY_BATCH]):
        try:
            with transaction.atomic():
                lease_renew(source.pk, token)
                batch = staged_observations(source, run, keys)
                digest = payload_hash(sorted([o.event_key, o.payload_hash] for o in batch))
                observations_accept(
                    source=source, parsed=Parsed(batch, []), delivery_id=f"reconcile:{run.pk}:{digest[:32]}",
                    body_hash=digest, body_bytes=0, now=clock.now(), actor=RECONCILE_ACTOR,
                )
                planned.filter(event_key__in=keys).update(repair_outcome=RepairOutcome.APPLIED)
        except LeaseLost:
            raise
        except Exception as exc:
            logger.warning("reconcile repair replay source=%s run=%s failed type=%s",
                           source.name, run.pk, type(exc).__name__)
            planned.filter(event_key__in=keys).update(repair_outcome=RepairOutcome.FAILED,
                                                      repair_code=repair_code(exc))


def evidence_mark(source: Source, token: str, run: ReconcileRun, report: ReconcileReport) -> None:
    """MATCHED for events the source shows with the same payload; SOURCE_UNVERIFIED for the
    local events the report found without source evidence."""
    unverified = Finding.objects.filter(report=report, kind=FindingKind.SOURCE_UNVERIFIED,
                                        repair_outcome=RepairOutcome.PLANNED)
    try:
        with transaction.atomic():
            lease_renew(source.pk, token)
            now = clock.now()
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
        unverified.update(repair_outcome=RepairOutcome.FAILED, repair_code=repair_code(exc))


def actions_repair(source: Source, token: str, run: ReconcileRun, report: ReconcileReport, *,
                   kind: str, to: str, reason: str) -> None:
    """One reply-ledger transition per action, compare-and-set on the state the report saw;
    each with its finding's outcome in one savepoint, a chunk a transaction."""
    planned = Finding.objects.filter(report=report, kind=kind, repair_outcome=RepairOutcome.PLANNED)
    planned.filter(action__isnull=True).update(repair_outcome=RepairOutcome.REFUSED, repair_code="action_gone")
    while chunk := list(planned.order_by("id").values_list("id", "action_id", "action_state", "reply_key")[:CHUNK]):
        with transaction.atomic():
            lease_renew(source.pk, token)
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
                        repair_outcome=RepairOutcome.FAILED, repair_code=repair_code(exc))


def repairs_apply(source: Source, token: str, run: ReconcileRun, report: ReconcileReport) -> None:
    """Every planned repair of the report, in seed 000's order: replay, evidence, then the reply ledger."""
    missing_replay(source, token, run, report)
    evidence_mark(source, token, run, report)
    actions_repair(source, token, run, report, kind=FindingKind.RECEIPT_ATTACHED, to=S.SENT,
                   reason="receipt_found_at_reconcile")
    actions_repair(source, token, run, report, kind=FindingKind.RECEIPT_MISSING, to=S.SEND_STATUS_UNKNOWN,
                   reason="receipt_missing_at_reconcile")
