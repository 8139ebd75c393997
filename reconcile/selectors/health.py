"""Source health read from the sources, their scan state and the work waiting for a person."""

from __future__ import annotations

from typing import Any, Iterable

from reconcile.selectors.findings import open_retry_candidates, open_unexpected_receipts
from replies.models import ReplyAction


def source_health(*, source_ids: Iterable[int] | None = None) -> list[dict[str, Any]]:
    """Per source, sorted by name: its inspection (docs/concepts/reconciliation.md#inspection:
    checkpoint, active generation and cursor,
    due time, the last failure's class, code and Conduit's message, declared families, loss
    limitations and limited recovery) and the work waiting for a person, the review queue included.

    Keys, states, codes, counts and Conduit-authored lines only: no bodies, secrets or provider
    text. `source_ids` limits the rows (one source's admin page); every count is one query.
    """
    from django.db.models import Count, Max, Min

    from ingress.models import QuarantineReceipt, QuarantineState, Source
    from ingress.selectors import access_token_words
    from reconcile import clock
    from reconcile.models import Finding, ReconcileReport, RepairOutcome, ScanState
    from replies.models import DeliveryState
    from replies.selectors import sends_stranded

    only = None if source_ids is None else list(source_ids)

    def per_source(rows, field: str, counted: str = "id") -> dict[int, int]:
        if only is not None:
            rows = rows.filter(**{f"{field}__in": only})
        grouped = rows.order_by().values(field).annotate(n=Count(counted, distinct=True))
        return dict(grouped.values_list(field, "n"))

    unknown = per_source(
        ReplyAction.objects.filter(delivery_state=DeliveryState.SEND_STATUS_UNKNOWN), "event__source"
    )
    quarantine = per_source(QuarantineReceipt.objects.filter(state=QuarantineState.QUARANTINED), "source")
    candidates = per_source(open_retry_candidates(), "report__source", counted="action")
    unexpected = per_source(open_unexpected_receipts(), "report__source")
    stranded = per_source(sends_stranded(), "event__source")
    latest = ReconcileReport.objects.order_by().values("source").annotate(last=Max("id")).values("last")
    repairs_failed = per_source(
        Finding.objects.filter(report__in=latest, repair_outcome=RepairOutcome.FAILED), "report__source"
    )
    # The review queue: replies waiting for a person's approval, how many and since when.
    pending = ReplyAction.objects.filter(delivery_state=DeliveryState.REVIEW_PENDING)
    if only is not None:
        pending = pending.filter(event__source__in=only)
    reviews = {
        row["event__source"]: (row["n"], row["oldest"])
        for row in pending.order_by()
        .values("event__source")
        .annotate(n=Count("id"), oldest=Min("created_at"))
    }
    from reconcile.selectors.acceptance import acceptance_refusal

    sources = Source.objects.order_by("name").prefetch_related("reply_routes")
    # The deployment's acceptance record, read once: what each live route still stands on.
    acceptance = acceptance_refusal()
    states = ScanState.objects.select_related("active_run")
    if only is not None:
        sources, states = sources.filter(pk__in=only), states.filter(source__in=only)
    states = {s.source_id: s for s in states}
    now = clock.now()
    rows = []
    for source in sources:
        state = states.get(source.pk)
        run = state.active_run if state else None
        waiting, oldest = reviews.get(source.pk, (0, None))
        rows.append(
            {
                "source": source.name,
                "source_system": source.source_system,
                "account_ref": source.account_ref,
                "checkpoint": state.checkpoint_until.isoformat()
                if state and state.checkpoint_until
                else None,
                "checkpoint_scan_id": state.checkpoint_scan_id if state else "",
                "last_completed_at": state.last_completed_at.isoformat()
                if state and state.last_completed_at
                else None,
                # The active generation: its scan id and the cursor its next page is read from ("":
                # the generation's first page, handed the checkpoint). Opaque, bounded to 4 KiB.
                "active_scan": {
                    "run": run.pk,
                    "state": run.state,
                    "pages": run.pages,
                    "staged_events": run.staged_events,
                    "complete_scan": run.complete_scan,
                    "scan_id": run.scan_id,
                    "cursor": run.cursor,
                }
                if run
                else None,
                "due_at": state.next_due_at.isoformat() if state else None,
                "requested": bool(state and state.requested_at),
                "last_error_class": state.last_error_class if state else "",
                "last_error_code": state.last_error_code if state else "",
                # The line Conduit wrote for the last failure (at most 256 bytes, never provider text).
                "last_error_message": state.last_error_message if state else "",
                "last_error_at": state.last_error_at.isoformat() if state and state.last_error_at else None,
                "failures": state.failures if state else 0,
                "reviews_waiting": waiting,
                "oldest_review_at": oldest.isoformat() if oldest else None,
                "oldest_review_age_seconds": max(0, int((now - oldest).total_seconds())) if oldest else None,
                "unknown_sends": unknown.get(source.pk, 0),
                "quarantine_waiting": quarantine.get(source.pk, 0),
                "retry_candidates": candidates.get(source.pk, 0),
                "stranded_sends": stranded.get(source.pk, 0),
                "repairs_failed": repairs_failed.get(source.pk, 0),
                "unexpected_receipts": unexpected.get(source.pk, 0),
                # Meta sources: what the last read of subscribed_apps found wrong ("" when nothing).
                "subscription_problem": source.subscription_problem,
                "needs_reauth": source.needs_reauth,
                # The stored token's last four, scopes and expiry, or the variable named; never the token.
                "access_token": access_token_words(source),
                # What the source names that the deployment refuses (a row from before the rule):
                # a credential variable not declared for credentials, a URL off its platform's hosts.
                "refused_settings": refused_settings(source),
                # Each live route, and what its enabling needs that is missing now (an upgrade since
                # the acceptance pass, an authorisation cleared by a credential change).
                "live_routes": live_routes(source, acceptance),
                **source_declarations(source),
            }
        )
    return rows


def refused_settings(source) -> dict[str, str]:
    """By field (a route's as `route <purpose> target_url`): what the source or its reply routes
    name that registration would refuse today. Such a source reads no credential there."""
    from ingress.services import source_door_refusals
    from replies.transports import route_url_refusal

    refused = source_door_refusals(source)
    for route in source.reply_routes.all():
        try:
            refusal = route_url_refusal(route.transport_name, route.target_url)
        except KeyError:  # an unknown transport: the sender refuses it as misconfigured
            continue
        if refusal:
            refused[f"route {route.purpose} target_url"] = refusal
    return refused


def live_routes(source, acceptance: str) -> list[dict[str, Any]]:
    """The source's routes with live sending on: purpose, transport, and each requirement of
    enabling it that is missing now (docs/concepts/acceptance.md#live); `acceptance` is the
    deployment's acceptance refusal ("" when the latest run passed on this code version)."""
    from replies.transports import connection_refusal

    rows = []
    for route in source.reply_routes.all():
        if not route.live_send_enabled:
            continue
        route.source = source  # the row in hand, not a query per route
        missing = [f"acceptance: {acceptance}"] if acceptance else []
        connection = connection_refusal(route)
        if connection:
            missing.append(f"connection: {connection}")
        rows.append({"purpose": route.purpose, "transport": route.transport_name, "missing": missing})
    return rows


def source_declarations(source) -> dict[str, Any]:
    """One source's declarations for its inspection (docs/concepts/reconciliation.md#inspection):
    each allowlisted event family's recovery and loss limitation, and the reply transports whose
    receipts a complete read compares."""
    from conduit.providers.base import COMPLETE
    from conduit.providers.registry import get_adapter

    adapter = get_adapter(source.adapter)
    transports = adapter.receipt_transports
    families = [adapter.family(event_type).as_dict() for event_type in source.event_types]
    return {
        "families": families,
        "receipts_compared_for": "every transport" if transports is None else sorted(transports),
        # Limited recovery (docs/concepts/reconciliation.md#families): a complete scan cannot
        # recover everything the source delivers (a family whose recovery is limited or none; its
        # limitation says what is lost).
        "limited_recovery": any(f["recovery"] != COMPLETE for f in families),
    }
