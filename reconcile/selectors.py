"""Reconciliation's reads: replay-decision requests from the reply ledger, source health, reports."""

from __future__ import annotations

from typing import Any, Iterable

from django.db.models import Prefetch, QuerySet

from conduit.canonical import payload_hash
from conduit.providers.registry import transport_class
from conduit.timefmt import iso_z
from replies.models import ReplyAction, ReplyRoute, SendAttempt
from replies.selectors import action_route
from replies.transports import transport_for

MAX_REQUEST_ATTEMPTS = 50

# Findings a person closes: one open row per reply and kind (reconcile migration 0006).
RECEIPT_KINDS = ("UNEXPECTED_RECEIPT", "UNKNOWN_RECEIPT")
PERSON_KINDS = ("RETRY_CANDIDATE", *RECEIPT_KINDS)
UNEXPECTED_RECEIPTS_QUEUE = "unexpected_receipts"


def open_retry_candidates() -> QuerySet:
    """Undecided RETRY_CANDIDATE findings whose action still waits in SEND_STATUS_UNKNOWN:
    the retry-candidate queue, doctor and the report's summary count the same rows."""
    from reconcile.models import Finding

    return Finding.objects.filter(kind="RETRY_CANDIDATE", decision="", action__delivery_state="SEND_STATUS_UNKNOWN")


def open_unexpected_receipts() -> QuerySet:
    """Unacknowledged receipts the provider shows for a reply Conduit closed, has not sent, or
    never planned (UNEXPECTED_RECEIPT, UNKNOWN_RECEIPT): the admin queue and doctor read these."""
    from reconcile.models import Finding

    return Finding.objects.filter(kind__in=RECEIPT_KINDS, decision="")


def reply_digest(action: ReplyAction) -> str:
    """SHA-256 of the planned reply: copy version, channel and target."""
    event = action.event
    return payload_hash({
        "copy_version": action.copy_version, "channel": action.channel,
        "target": {"conversation_ref": event.conversation_ref, "message_ref": event.message_ref},
    })


def _decision_request(action: ReplyAction, route: ReplyRoute | None, *, dedupe: str,
                      attempts: Iterable[SendAttempt]) -> dict[str, Any]:
    """Seed 003's `deliver` request from the action, its route's transport, its newest attempts
    (oldest first) and `dedupe`."""
    rows = []
    for attempt in attempts:
        row: dict[str, Any] = {"transport": attempt.transport, "at": iso_z(attempt.at)}
        if attempt.http_status is not None:
            row["http_status"] = attempt.http_status
        if attempt.evidence:
            row["evidence"] = attempt.evidence[:4000]
        rows.append(row)
    return {
        "decision": "replay",
        "proposal": {"operation": "deliver", "key": action.reply_key, "digest": reply_digest(action)},
        "destination": {"name": (route.transport_name if route is not None else "unrouted")[:200],
                        "mode": "event", "dedupe": dedupe},
        "attempts": rows,
    }


def reply_decision_request(action: ReplyAction) -> dict[str, Any]:
    """The decision request for one reply action's own ledger (seed 003 `deliver`).

    `dedupe` is `verified` only when the transport honours idempotency keys; a
    transport that cannot be built (live sending off, provider unreachable) is
    taken as not deduplicating, the conservative reading. Building the
    transport may ask the provider (the sandbox discovers its capabilities over
    HTTP): for one action's page or the API, never a changelist.
    """
    route = action_route(action)
    try:
        dedupe = "verified" if transport_for(route).capabilities.idempotency_key else "none"
    except Exception:  # no route, live sending off, provider unreachable
        dedupe = "none"
    newest = SendAttempt.objects.filter(action=action).order_by("-attempt_number")[:MAX_REQUEST_ATTEMPTS]
    return _decision_request(action, route, dedupe=dedupe, attempts=list(newest)[::-1])


def declared_dedupe(transport_name: str) -> str:
    """`verified` when the transport's class declares idempotency keys: no instance, no network.

    A transport that discovers its capabilities per instance (the sandbox)
    declares the conservative ones on its class, so it reads `none` here.
    """
    try:
        cls = transport_class(transport_name)
    except KeyError:
        return "none"
    return "verified" if cls.capabilities.idempotency_key else "none"


def reply_decision_request_declared(action: ReplyAction) -> dict[str, Any]:
    """The decision request from what is already loaded: the transport class's declared
    capabilities, and the action's `attempts` and its source's `reply_routes` as prefetched for a
    changelist page (see `with_decision_inputs`): no query per row, no call."""
    route = next((r for r in action.event.source.reply_routes.all() if r.purpose == action.purpose), None)
    attempts = sorted(action.attempts.all(), key=lambda a: a.attempt_number)[-MAX_REQUEST_ATTEMPTS:]
    dedupe = declared_dedupe(route.transport_name) if route is not None else "none"
    return _decision_request(action, route, dedupe=dedupe, attempts=attempts)


def with_decision_inputs(actions: QuerySet) -> QuerySet:
    """`actions` with what `reply_decision_request_declared` reads: two prefetch queries a page."""
    return actions.select_related("event__source").prefetch_related(
        Prefetch("attempts", queryset=SendAttempt.objects.order_by("attempt_number")),
        "event__source__reply_routes",
    )


def source_health(*, source_ids: Iterable[int] | None = None) -> list[dict[str, Any]]:
    """Per source, sorted by name: seed 004's Inspect (checkpoint, active generation and cursor,
    due time, the last failure's class, code and Conduit's message, declared families, loss
    limitations and limited recovery) and the work waiting for a person, the review queue included.

    Keys, states, codes, counts and Conduit-authored lines only: no bodies, secrets or provider
    text. `source_ids` limits the rows (one source's admin page); every count is one query.
    """
    from django.db.models import Count, Max, Min

    from ingress.models import QuarantineReceipt, QuarantineState, Source
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

    unknown = per_source(ReplyAction.objects.filter(
        delivery_state=DeliveryState.SEND_STATUS_UNKNOWN), "event__source")
    quarantine = per_source(QuarantineReceipt.objects.filter(state=QuarantineState.QUARANTINED), "source")
    candidates = per_source(open_retry_candidates(), "report__source", counted="action")
    unexpected = per_source(open_unexpected_receipts(), "report__source")
    stranded = per_source(sends_stranded(), "event__source")
    latest = ReconcileReport.objects.order_by().values("source").annotate(last=Max("id")).values("last")
    repairs_failed = per_source(Finding.objects.filter(
        report__in=latest, repair_outcome=RepairOutcome.FAILED), "report__source")
    # The review queue: replies waiting for a person's approval, how many and since when.
    pending = ReplyAction.objects.filter(delivery_state=DeliveryState.REVIEW_PENDING)
    if only is not None:
        pending = pending.filter(event__source__in=only)
    reviews = {row["event__source"]: (row["n"], row["oldest"]) for row in pending.order_by()
               .values("event__source").annotate(n=Count("id"), oldest=Min("created_at"))}
    sources = Source.objects.order_by("name")
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
        rows.append({
            "source": source.name,
            "source_system": source.source_system,
            "account_ref": source.account_ref,
            "checkpoint": state.checkpoint_until.isoformat() if state and state.checkpoint_until else None,
            "checkpoint_scan_id": state.checkpoint_scan_id if state else "",
            "last_completed_at": state.last_completed_at.isoformat() if state and state.last_completed_at else None,
            # The active generation: its scan id and the cursor its next page is read from ("":
            # the generation's first page, handed the checkpoint). Opaque, bounded to 4 KiB.
            "active_scan": {"run": run.pk, "state": run.state, "pages": run.pages,
                            "staged_events": run.staged_events,
                            "complete_scan": run.complete_scan,
                            "scan_id": run.scan_id, "cursor": run.cursor} if run else None,
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
            # What the source names that the deployment refuses (a row from before the rule):
            # a credential variable not declared for credentials, a URL off its platform's hosts.
            "refused_settings": refused_settings(source),
            **source_declarations(source),
        })
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


def source_declarations(source) -> dict[str, Any]:
    """Seed 004's Inspect for one source: each allowlisted event family's recovery and loss
    limitation, and the reply transports whose receipts a complete read compares."""
    from conduit.providers.base import COMPLETE
    from conduit.providers.registry import get_adapter

    adapter = get_adapter(source.adapter)
    transports = adapter.receipt_transports
    families = [adapter.family(event_type).as_dict() for event_type in source.event_types]
    return {
        "families": families,
        "receipts_compared_for": "every transport" if transports is None else sorted(transports),
        # Seed 004's LimitedRecovery: a complete scan cannot recover everything the source
        # delivers (a family whose recovery is limited or none; its limitation says what is lost).
        "limited_recovery": any(f["recovery"] != COMPLETE for f in families),
    }


def age_words(seconds: int) -> str:
    """A wait for a person: "2 d 3 h", "3 h 5 min", "41 min", "20 s"."""
    days, rest = divmod(max(0, int(seconds)), 86400)
    hours, rest = divmod(rest, 3600)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {rest // 60} min"
    return f"{rest // 60} min" if rest >= 60 else f"{rest} s"


def cursor_words(cursor: str, *, shown: int = 200) -> str:
    """An opaque cursor for a person: whole when short, else its start and its size."""
    if not cursor:
        return "none: the generation's first page, read from the last complete checkpoint"
    size = len(cursor.encode("utf-8", "surrogatepass"))
    return cursor if len(cursor) <= shown else f"{cursor[:shown]}... ({size} bytes)"


def failure_words(row: dict[str, Any]) -> str:
    """The last page failure as doctor and the source's page show it: class/code, streak, message."""
    if not row["last_error_code"]:
        return "none"
    streak = f" ({row['failures']} in a row)" if row["failures"] > 1 else ""
    message = f": {row['last_error_message']}" if row.get("last_error_message") else ""
    return f"{row['last_error_class']}/{row['last_error_code']}{streak}{message}"


def source_inspection(source) -> list[tuple[str, str]]:
    """Seed 004's Inspect for one source's admin page, as (label, words) rows: what doctor prints
    for it, from the same health row (a handful of queries, no network call)."""
    from conduit.providers.registry import ADAPTERS

    if source.adapter not in ADAPTERS:  # no platform to declare its families: nothing to inspect
        return []
    rows = source_health(source_ids=[source.pk])
    if not rows:
        return []
    row = rows[0]
    scan = row["active_scan"]
    checkpoint = (f"{row['checkpoint']} (last complete scan {row['last_completed_at']})"
                  if row["checkpoint"] else "none: no complete scan yet")
    if scan:
        generation = (f"run {scan['run']} {scan['state']}{'' if scan['complete_scan'] else ' (window)'}, "
                      f"scan id {scan['scan_id'] or '(none yet)'}, {scan['pages']} page(s), "
                      f"{scan['staged_events']} staged")
    else:
        generation = "none"
    limited = [f"{f['event_type']} ({f['recovery']}: {f['limitation']})" for f in row["families"]
               if f["recovery"] != "complete"]
    reviews = (f"{row['reviews_waiting']} waiting, the oldest for {age_words(row['oldest_review_age_seconds'])} "
               f"(since {row['oldest_review_at']})" if row["reviews_waiting"] else "none waiting")
    reasons = needs_a_person(row)
    return [
        ("Checkpoint", checkpoint),
        ("Active generation", generation),
        ("Active cursor", cursor_words(scan["cursor"]) if scan else "none"),
        ("Due", f"{row['due_at'] or 'not scheduled yet'}{' (requested)' if row['requested'] else ''}"),
        ("Last page failure", failure_words(row) + (f" at {row['last_error_at']}" if row["last_error_at"] else "")),
        ("Limited recovery", "yes: " + "; ".join(limited) if limited
         else "no: a complete scan recovers every declared family"),
        ("Review queue", reviews),
        ("Needs a person", "; ".join(reasons) if reasons else "no"),
    ]


def needs_a_person(row: dict[str, Any]) -> list[str]:
    """Why a source's health row needs a person (empty when it does not)."""
    reasons = []
    if row["needs_reauth"]:
        reasons.append("needs re-authorisation: Meta refused its access token (190), so its sends wait; "
                       "replace the token in its variable, then clear the flag (Ingress > Sources)")
    if row["last_error_class"] == "credentials":
        reasons.append(f"its access token was refused ({row['last_error_code']}): a person must "
                       "re-authorise the source and set the new token in its variable")
    elif row["last_error_code"]:
        streak = f", {row['failures']} failure(s) in a row" if row["failures"] > 1 else ""
        reasons.append(f"last page failed ({row['last_error_class']}/{row['last_error_code']}{streak})")
    if row.get("subscription_problem"):
        reasons.append(f"Meta subscription: {row['subscription_problem']}")
    if row.get("reviews_waiting"):
        # Seed 000: "Every live reply waits for recorded human approval": a waiting reply is a
        # person's work, however healthy the scan.
        reasons.append(f"{row['reviews_waiting']} repl{'y' if row['reviews_waiting'] == 1 else 'ies'} waiting "
                       f"for review, the oldest for {age_words(row['oldest_review_age_seconds'] or 0)} "
                       "(Replies > Review queue)")
    for field, refusal in row.get("refused_settings", {}).items():
        reasons.append(f"{field} is refused ({refusal}): correct it in Ingress > Sources or Reply routes")
    for key, words in (("stranded_sends", "stranded send(s): failed before send, no longer retried "
                                          "automatically or exhausted"),
                       ("repairs_failed", "repair(s) failed in the last report"),
                       ("unknown_sends", "unknown send(s) waiting"),
                       ("quarantine_waiting", "quarantined input(s) waiting"),
                       ("retry_candidates", "retry candidate(s) undecided"),
                       ("unexpected_receipts", "unexpected receipt(s): the provider shows a reply Conduit "
                                               "closed, has not sent or never planned")):
        if row[key]:
            reasons.append(f"{row[key]} {words}")
    return reasons


DECISION_FIELDS = ("decision", "decided_by", "decided_at", "decision_reason", "decision_result")


def _finding_row(finding) -> dict[str, Any]:
    row = {
        "kind": finding.kind, "event_key": finding.event_key, "reply_key": finding.reply_key,
        "repair": finding.repair, "repair_outcome": finding.repair_outcome, "detail": finding.detail,
    }
    if finding.repair_code:
        row["repair_code"] = finding.repair_code
    if finding.decision:
        row.update({f: getattr(finding, f) for f in DECISION_FIELDS})
        row["decided_at"] = finding.decided_at.isoformat()
    return row


def report_decisions(report) -> list[dict[str, Any]]:
    """Every human decision taken on the report's findings, oldest first: the retry-candidate
    queue's and the unknown-send queue's alike (both record on the finding)."""
    decided = report.findings.exclude(decision="").order_by("decided_at", "id")
    return [_finding_row(f) for f in decided]


def repair_outcomes(report) -> dict[str, int]:
    """How the report's planned repairs ended: applied, refused, failed, still planned."""
    from django.db.models import Count

    rows = report.findings.exclude(repair_outcome="").order_by().values("repair_outcome").annotate(n=Count("id"))
    return {row["repair_outcome"]: row["n"] for row in rows}


def report_json_chunks(report):
    """The report as one JSON document, streamed: summary, decisions, then every finding."""
    import json

    head = {**report.summary, "report": report.pk, "created_at": report.created_at.isoformat(),
            "repair_outcomes": repair_outcomes(report), "decisions": report_decisions(report)}
    yield json.dumps(head)[:-1] + ', "findings": ['
    first = True
    for finding in report.findings.order_by("id").iterator(chunk_size=2000):
        yield ("" if first else ",") + json.dumps(_finding_row(finding))
        first = False
    yield "]}"
