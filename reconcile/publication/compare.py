"""The comparison: what the source showed against the local ledgers, in one generation's window."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import BooleanField, Case, Count, Exists, OuterRef, Q, QuerySet, Subquery, Value, When
from django.utils import timezone

from conduit.providers.base import COMPLETE
from conduit.providers.registry import TRANSPORTS, get_adapter
from ingress.models import InboundEvent, MessageStatus, Source
from reconcile.models import ReconcileRun, StagedEvent, StagedReceipt
from replies.models import DeliveryState as S
from replies.models import ReplyAction, ReplyRoute, ReplyTransition

UNCONFIRMED = (S.SENDING, S.SEND_STATUS_UNKNOWN)
_NEVER = Q(Value(False, output_field=BooleanField()))


# -- compare ------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    """The staged generation against both ledgers, as querysets not yet read."""

    local: QuerySet  # the source's events in the run's window
    missing: QuerySet  # staged, no local event under the key
    conflicting: QuerySet  # staged, a local event under the key with another payload
    matched: QuerySet  # local, staged with the same payload
    unverified: QuerySet  # local, not staged
    actions: QuerySet  # reply actions on staged events, annotated with the staged receipt
    attach: QuerySet  # a receipt for an action not yet confirmed
    lost: QuerySet  # SENT locally, no receipt
    candidates: QuerySet  # SEND_STATUS_UNKNOWN, no receipt
    unexpected: QuerySet  # a receipt for an action that was never sent
    unknown_receipts: QuerySet  # a receipt under a key Conduit never planned
    receipt: QuerySet  # the staged receipt of an outer action (for Exists/Subquery)
    compared_purposes: list[str] | None  # purposes whose receipts the read shows whenever they exist
    silent: QuerySet | None  # SENT through a transport that reports statuses, none reported in time


def _local_in_window(source: Source, run: ReconcileRun) -> QuerySet:
    events = InboundEvent.objects.filter(source=source)
    if run.since is not None:
        events = events.filter(occurred_at__gte=run.since)
    if run.until is not None:
        events = events.filter(occurred_at__lt=run.until)
    return events


def recoverable(source: Source, events: QuerySet) -> QuerySet:
    """The events of families a complete read shows whole (docs/concepts/reconciliation.md#families):
    only their absence from the source says anything. A limited or unrecoverable family is never unverified."""
    adapter = get_adapter(source.adapter)
    declared = {family.event_type: family.recovery == COMPLETE for family in adapter.families}
    if adapter.undeclared_family("").recovery == COMPLETE:
        return events.exclude(event_type__in=sorted(t for t, whole in declared.items() if not whole))
    whole = sorted(t for t, whole in declared.items() if whole)
    # An empty IN cannot be compiled into the findings' INSERT ... SELECT: a plain false instead
    # (a platform none of whose families a read shows whole: WhatsApp).
    return events.filter(event_type__in=whole) if whole else events.filter(_NEVER)


def compared_purposes(source: Source) -> list[str] | None:
    """The purposes whose receipts the source's read shows whenever they exist (the reader's
    `receipt_transports`): only for their actions is "no receipt" a finding. None: every purpose."""
    transports = get_adapter(source.adapter).receipt_transports
    if transports is None:
        return None
    routes = ReplyRoute.objects.filter(source=source, transport_name__in=sorted(transports))
    return sorted(routes.values_list("purpose", flat=True))


def silent_sends(source: Source, now: datetime) -> QuerySet | None:
    """The source's replies SENT through a transport whose platform reports a status of every
    message (`status_expected_within`) that it has reported none of in that time: a finding for a
    person, never a resend. None when no route of the source goes through such a transport (no
    set to write or count)."""
    silent = None
    for purpose, name in ReplyRoute.objects.filter(source=source).values_list("purpose", "transport_name"):
        within = TRANSPORTS[name].status_expected_within if name in TRANSPORTS else None
        if within is None:
            continue
        sent_before = ReplyTransition.objects.filter(
            action=OuterRef("pk"), next_state=S.SENT, at__lt=now - within
        )
        reported = MessageStatus.objects.filter(source=source, provider_id=OuterRef("provider_reply_id"))
        route = Q(Exists(sent_before), ~Exists(reported), purpose=purpose)
        silent = route if silent is None else silent | route
    if silent is None:
        return None
    return ReplyAction.objects.filter(silent, event__source=source, delivery_state=S.SENT)


def generation_compare(source: Source, run: ReconcileRun) -> Comparison:
    staged = StagedEvent.objects.filter(run=run)
    local = _local_in_window(source, run)
    same_key = InboundEvent.objects.filter(event_key=OuterRef("event_key"))
    in_source = staged.filter(event_key=OuterRef("event_key"))
    receipt = StagedReceipt.objects.filter(run=run, reply_key=OuterRef("reply_key"))
    actions = ReplyAction.objects.filter(Exists(staged.filter(event_key=OuterRef("event_id")))).annotate(
        receipt_id=Subquery(receipt.values("provider_reply_id")[:1])
    )
    # EXISTS, not the annotated subquery's value: the database joins the staged receipts
    # once (a hash semi/anti-join) instead of probing them again for every action.
    with_receipt = Q(Exists(receipt))
    without_receipt = ~with_receipt
    purposes = compared_purposes(source)
    # An empty IN cannot be compiled into the findings' INSERT ... SELECT: a plain false instead.
    compared = (
        actions
        if purposes is None
        else actions.filter(purpose__in=purposes)
        if purposes
        else actions.filter(Value(False, output_field=BooleanField()))
    )
    return Comparison(
        local=local,
        missing=staged.filter(~Exists(same_key)),
        conflicting=staged.filter(Exists(same_key.exclude(payload_hash=OuterRef("payload_hash")))),
        matched=local.filter(Exists(in_source.filter(payload_hash=OuterRef("payload_hash")))),
        unverified=recoverable(source, local).filter(~Exists(in_source)),
        actions=actions,
        attach=actions.filter(with_receipt, delivery_state__in=UNCONFIRMED),
        lost=compared.filter(without_receipt, delivery_state=S.SENT),
        candidates=compared.filter(without_receipt, delivery_state=S.SEND_STATUS_UNKNOWN),
        compared_purposes=purposes,
        unexpected=actions.filter(with_receipt).exclude(delivery_state__in=(*UNCONFIRMED, S.SENT)),
        unknown_receipts=StagedReceipt.objects.filter(run=run).filter(
            ~Exists(ReplyAction.objects.filter(reply_key=OuterRef("reply_key")))
        ),
        receipt=receipt,
        silent=silent_sends(source, timezone.now()),
    )


def _actions_by_state(comparison: Comparison) -> dict[tuple[str, bool, bool], int]:
    """Every action count from one grouped read: (state, has a receipt, compared) -> actions."""
    purposes = comparison.compared_purposes
    compared = (
        Value(True)
        if purposes is None
        else Case(
            When(purpose__in=purposes, then=Value(True)), default=Value(False), output_field=BooleanField()
        )
        if purposes
        else Value(False)
    )
    grouped = comparison.actions.annotate(
        has_receipt=Exists(comparison.receipt), is_compared=compared
    ).values("delivery_state", "has_receipt", "is_compared")
    return {
        (row["delivery_state"], row["has_receipt"], row["is_compared"]): row["n"]
        for row in grouped.annotate(n=Count("pk")).order_by()
    }
