"""Reconciliation in the admin: scan state, kept reports, retry candidates, replay decisions."""

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from conduit.admin import LedgerAdmin, confirmed_action, short_key, site_configure
from reconcile.dashboard import WorkRow, work_counts
from reconcile import services
from reconcile.receipts import unexpected_receipt_acknowledge
from reconcile.decisions.service import InvalidRequest, decision_make
from reconcile.models import CanaryReport, Decision, Finding, ReconcileReport, RetryCandidateQueue, ScanState
from reconcile.publication import REPORT_COUNTS
from reconcile.selectors import (
    RECEIPT_KINDS,
    UNEXPECTED_RECEIPTS_QUEUE,
    open_retry_candidates,
    open_unexpected_receipts,
    reply_decision_request,
    reply_decision_request_declared,
    report_decisions,
    report_json_chunks,
    with_decision_inputs,
)
from replies.admin import UnknownSendQueueAdmin, confirmed_each
from replies.models import ReplyAction, UnknownSendQueue


CONFIRM_SENT_HELP = (
    "The platform's id for the reply you found in the conversation (in the reply's link or details on the "
    "platform). Don't have one? Cancel and use \"Look up the receipt, then authorize a retry\": where the "
    "platform can be asked, Conduit finds the receipt itself and marks the reply sent without resending."
)


# Registered here, once: replies defines the queue's admin but registers it nowhere, since
# its changelist shows reconciliation's replay decision.
@admin.register(UnknownSendQueue)
class UnknownSendDecisionAdmin(UnknownSendQueueAdmin):
    """The unknown-send queue, showing the replay decision before a person decides.

    The changelist only reads: each row's verdict comes from the transport class's declared
    capabilities and the attempts and routes prefetched for the page (a query each, whatever
    the page size), never a transport built or a provider asked. An action's own page shows
    the decision with the capabilities the provider reports.
    """

    fields = readonly_fields = ("in_plain_words", *UnknownSendQueueAdmin.fields, "replay_decision")
    list_display = (*UnknownSendQueueAdmin.list_display, "verdict")
    change_form_template = "admin/replies/unknownsendqueue/change_form.html"

    def change_view(self, request, object_id, form_url="", extra_context=None):
        action = ReplyAction.objects.filter(pk=object_id).only("delivery_state").first()
        context = {
            "decide_buttons": action is not None and action.delivery_state == self.state
            and self.has_resolve_permission(request),
            "changelist_url": reverse("admin:replies_unknownsendqueue_changelist"),
            **(extra_context or {}),
        }
        return super().change_view(request, object_id, form_url, context)

    @admin.display(description="in plain words")
    def in_plain_words(self, obj: ReplyAction):
        """What is known, what the platform can prove, and what each button does: no seed terms."""
        from replies.selectors import action_route
        from replies.transports import transport_for

        route = action_route(obj)
        try:
            caps = transport_for(route).capabilities
            can_look_up, dedupes = caps.receipt_lookup, caps.idempotency_key
        except Exception:  # no route, live sending off, platform unreachable: claim nothing
            can_look_up = dedupes = False
        platform = route.transport_name if route else "the platform"
        tries = "once" if obj.attempt_count == 1 else f"{obj.attempt_count} times"
        known = (f"Conduit tried {tries} to send this reply through {platform} and never got a clear answer "
                 f"(last: {obj.last_error_code or 'no answer'}). The reply may have reached the customer, or not. "
                 "Nothing is sent again until a person decides.")
        if can_look_up:
            proof = (f"{platform} can be asked whether it holds this reply (by its reply key). "
                     + ("It also ignores a second send under the same key, so a retry cannot post twice."
                        if dedupes else "It does not ignore a second send, so look before any retry."))
        else:
            proof = (f"{platform} cannot be asked whether it holds this reply. Open the conversation on the "
                     "platform and look for the reply yourself before you decide.")
        confirm = ("You have seen the reply on the platform. Paste the platform's id for that reply (open it "
                   "on the platform: its id is in its link or details"
                   + ("; or use the lookup button, which finds it for you" if can_look_up else "")
                   + "). Conduit records it and marks the reply sent. Nothing is sent.")
        retry = ("Conduit first asks the platform for the reply: if it is there, the reply is marked sent and "
                 "nothing goes out; if it is not, the same reply is sent again under the same key."
                 if can_look_up else
                 "The platform cannot be asked, so this is refused: check by hand, then Confirm sent or Close.")
        close = ("Nothing is sent and the reply is closed." + (
            " Conduit asks the platform first and refuses to close a reply the platform already holds."
            if can_look_up else " Only do this after checking the conversation by hand."))
        rows = [("What is known", known), ("What the platform can prove", proof),
                ("Confirm sent", confirm), ("Look up, then retry", retry), ("Close without reply", close)]
        return format_html('<dl class="conduit-explain">{}</dl>',
                           format_html_join("", "<dt>{}</dt><dd>{}</dd>", rows))

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return with_decision_inputs(super().get_queryset(request))

    # The queue's actions, overridden so each decision also lands on the action's open
    # RETRY_CANDIDATE findings in the same transaction (seed 000: the report records
    # every human decision).
    def _resolve(self, request, queryset, *, how: str, title: str, **options):
        def apply(action: ReplyAction, note: str) -> tuple[bool, str]:
            result = services.unknown_send_decide(action_id=action.pk, how=how, note=note,
                                                  actor=request.user.get_username(),
                                                  close_reason=self.close_reason)
            return result.ok, result.message

        # The lookup before a retry can end two ways: each row says which, and nothing else is said.
        confirm = confirmed_each if how == "authorize_retry" else confirmed_action
        return confirm(self, request, queryset, title=title, action=how, apply=apply, **options)

    @admin.action(permissions=["resolve"], description="Confirm sent (with the provider's receipt id)")
    def confirm_sent(self, request, queryset):
        return self._resolve(request, queryset, how="confirm_sent", title="Confirm sent", note_required=True,
                             note_label="Provider receipt id", single=True, note_help=CONFIRM_SENT_HELP)

    @admin.action(permissions=["resolve"], description="Look up the receipt, then authorize a retry")
    def authorize_retry(self, request, queryset):
        return self._resolve(request, queryset, how="authorize_retry",
                             title="Authorize a retry under the same reply key")

    @admin.action(permissions=["resolve"], description="Close selected without reply")
    def close(self, request, queryset):
        return self._resolve(request, queryset, how="close", title="Close without reply")

    @staticmethod
    def _decision(request: dict) -> dict | None:
        try:
            return decision_make(request=request)
        except InvalidRequest:
            return None

    @admin.display(description="decision (declared capabilities)")
    def verdict(self, obj: ReplyAction) -> str:
        decision = self._decision(reply_decision_request_declared(obj))
        return f"{decision['verdict']}: {decision['next']['action']}" if decision else "-"

    @admin.display(description="replay decision")
    def replay_decision(self, obj: ReplyAction):
        decision = self._decision(reply_decision_request(obj))
        if decision is None:
            return "no decision: the ledger gave an invalid request"
        questions = format_html_join(
            "", "<li>{} {}: {} {}</li>",
            (
                (q["ask"], q["question"], q["status"],
                 f"{q['answer']} ({q['rule']})" if "answer" in q else "")
                for q in decision["questions"]
            ),
        )
        nxt = decision["next"]
        return format_html(
            "<div><strong>{}</strong>: {} <em>({}, for {})</em></div><ul>{}</ul>",
            decision["verdict"], nxt["text"], nxt["action"], nxt["role"], questions,
        )


# -- reconciliation: scan state, reports, retry candidates ------------------

REPORT_PAGE_FINDINGS = 500

# The report's counters for people: group, label and a one-line meaning (the JSON keeps the names).
COUNTER_WORDS = {
    "events_compared": ("events", "Events read from the source", "comments and messages the scan read"),
    "events_local": ("events", "Events Conduit holds", "in the same window, in Conduit's ledger"),
    "events_matched": ("events", "Matched", "held by both, with the same content hash"),
    "missing_found": ("events", "Missed webhooks found", "on the source, not in Conduit: each replayed through ingest"),
    "missing_recovered": ("events", "Missed webhooks recovered", "replayed and accepted: in Conduit now"),
    "missing_replay_refused": ("events", "Replays refused", "ingest refused the replayed batch, so none of its "
                               "events was written: its quarantine receipt says why; the next scan finds them again"),
    "missing_replay_failed": ("events", "Replays failed", "the replay raised an error: nothing of its batch was "
                              "written; the next scan finds them again"),
    "identity_conflicts": ("events", "Identity conflicts", "same key, different content: sent to quarantine"),
    "source_unverified": ("events", "Not seen on the source", "held by Conduit, not in what the scan read"),
    "duplicates_converged": ("events", "Duplicate deliveries absorbed", "repeat webhooks counted on one event"),
    "invalid_source_items": ("events", "Unreadable source items", "items the scan could not parse"),
    "quarantined_inputs": ("events", "Quarantined inputs", "refused webhook bodies still waiting for review"),
    "actions_compared": ("replies", "Replies compared", "Conduit's reply actions on the events read"),
    "replies_confirmed": ("replies", "Replies confirmed", "the platform shows the reply Conduit sent"),
    "sending_in_flight": ("replies", "Sending right now", "claimed by a worker, not finished"),
    "suppressed_actions": ("replies", "Suppressed test replies", "canary replies kept from the platform"),
    "unknown_sends": ("replies", "Unknown sends", "sent or attempted with no receipt on the platform"),
    "retry_candidates": ("replies", "Retry candidates", "unknown sends the platform shows no receipt for"),
    "receipts_attached": ("receipts", "Receipts attached", "an unknown send the platform holds: marked sent"),
    "sent_without_receipt": ("receipts", "Sent, receipt missing", "marked sent, but the platform shows nothing"),
    "unexpected_receipts": ("receipts", "Unexpected receipts", "the platform holds a reply Conduit closed or "
                            "has not sent"),
    "unknown_receipts": ("receipts", "Unknown receipts", "the platform holds a reply Conduit never planned"),
    "receipts_not_compared": ("receipts", "Replies not compared", "sent through a route whose replies the "
                              "platform's read cannot always show (a private reply): left as they are"),
    "page_calls": ("health", "Pages read", "calls the scan made to the source"),
    "external_calls": ("health", "Calls off this host", "page reads that left this machine"),
}
COUNTER_GROUPS = (("events", "Events"), ("replies", "Replies"), ("receipts", "Receipts"), ("health", "Health"))


# A report written before the replays were counted has no `missing_found`: its `missing_recovered`
# counted the events found missing, whatever their replay did (its findings' outcomes say).
FOUND_BEFORE_REPLAYS_COUNTED = ("events", "Missed webhooks found", "on the source, not in Conduit: a report "
                                "from before replays were counted, so refused replays are in it too; each "
                                "finding's outcome says what its replay did")


def counter_groups(counts: dict) -> list[tuple[str, list[tuple[str, str, str, object]]]]:
    """The report's counters grouped for people, each (JSON name, label, meaning, value); a counter
    this page does not know goes under health."""
    grouped: dict[str, list] = {key: [] for key, _ in COUNTER_GROUPS}
    words = COUNTER_WORDS
    if "missing_recovered" in counts and "missing_found" not in counts:
        words = {**COUNTER_WORDS, "missing_recovered": FOUND_BEFORE_REPLAYS_COUNTED}
    for name in (*REPORT_COUNTS, *(n for n in counts if n not in REPORT_COUNTS)):
        group, label, meaning = words.get(name, ("health", name.replace("_", " "), ""))
        grouped[group].append((name, label, meaning, counts.get(name)))
    return [(title, grouped[key]) for key, title in COUNTER_GROUPS if grouped[key]]


def when(value):
    """An ISO timestamp from a report's JSON as a datetime, so the page shows it in the operator's zone."""
    from django.utils.dateparse import parse_datetime

    if not isinstance(value, str):
        return value
    try:
        return parse_datetime(value) or value
    except ValueError:
        return value


def plain(value) -> str:
    """A canary value in words: lists joined, keys shortened, nothing for None; never a Python repr."""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        if not value:
            return "none"
        if len(value) > 1 and all(v == value[0] for v in value):
            return f"{len(value)} × {plain(value[0])}"
        return ", ".join(plain(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}: {plain(v)}" for k, v in value.items())
    text = str(value)
    return short_key(text) if len(text) == 64 and all(c in "0123456789abcdef" for c in text) else text


class FailingScanFilter(admin.SimpleListFilter):
    """Sources whose last page read failed (the front page's "failed scans")."""

    title = "last page"
    parameter_name = "failing"

    def lookups(self, request, model_admin):
        return [("yes", "failed"), ("credentials", "failed: token to re-authorise")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.exclude(last_error_code="")
        if self.value() == "credentials":
            return queryset.exclude(last_error_code="").filter(last_error_class="credentials")
        return queryset


@admin.register(ScanState)
class ScanStateAdmin(admin.ModelAdmin):
    """Each source's scan: checkpoint, active scan, schedule, last error. Operators ask for a scan here."""

    list_display = ("source", "checkpoint_until", "last_completed_at", "active_run", "next_due_at",
                    "error", "failures", "interval_seconds")
    list_select_related = ("source", "active_run")
    list_filter = (FailingScanFilter,)
    fields = ("source", "interval_seconds", "checkpoint_until", "checkpoint_scan_id", "last_completed_at",
              "last_run", "active_run", "next_due_at", "requested_at", "requested_by", "lease_expires_at",
              "failures", "last_error_class", "last_error_code", "last_error_message", "last_error_at")
    readonly_fields = tuple(f for f in fields if f != "interval_seconds")
    actions = ["reconcile_now"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    @admin.display(description="last error")
    def error(self, obj: ScanState) -> str:
        return f"{obj.last_error_class}/{obj.last_error_code}" if obj.last_error_code else "-"

    @admin.action(description="Reconcile now", permissions=["change"])
    def reconcile_now(self, request, queryset):
        for state in queryset.select_related("source"):
            services.reconcile_request(source=state.source, actor=request.user.get_username())
        self.message_user(request, "Requested: each source stays due until a scan that starts now completes.",
                          messages.SUCCESS)


class ReportPageAdmin(LedgerAdmin):
    """A kept report: its change page is a readable page (`template`), plus a JSON export.

    Subclasses give `template`, `page_context(report)`, `export_body(report)` and the
    download's `filename`.
    """

    template = ""
    filename = ""

    def get_urls(self):
        meta = self.model._meta
        return [
            path("<int:report_id>/export/", self.admin_site.admin_view(self.export_view),
                 name=f"{meta.app_label}_{meta.model_name}_export"),
            *super().get_urls(),
        ]

    def _report_or_none(self, request, report_id):
        report = get_object_or_404(self.model, pk=report_id)
        return report if self.has_view_permission(request, report) else None

    def export_url(self, report) -> str:
        meta = self.model._meta
        return reverse(f"admin:{meta.app_label}_{meta.model_name}_export", args=[report.pk])

    def change_view(self, request, object_id, form_url="", extra_context=None):
        report = self._report_or_none(request, object_id)
        if report is None:
            return self._get_obj_does_not_exist_redirect(request, self.opts, str(object_id))
        context = {**self.admin_site.each_context(request), "opts": self.opts, "title": str(report),
                   "export_url": self.export_url(report), **self.page_context(report)}
        return TemplateResponse(request, self.template, context)

    def export_view(self, request, report_id: int):
        report = self._report_or_none(request, report_id)
        if report is None:
            return self._get_obj_does_not_exist_redirect(request, self.opts, str(report_id))
        response = self.export_body(report)
        response["Content-Disposition"] = f'attachment; filename="{self.filename}-{report.pk}.json"'
        return response

    def page_context(self, report) -> dict:
        raise NotImplementedError(".page_context() must be overridden.")

    def export_body(self, report):
        raise NotImplementedError(".export_body() must be overridden.")


@admin.register(ReconcileReport)
class ReconcileReportAdmin(ReportPageAdmin):
    """Kept reports, each a readable page and a JSON export."""

    list_display = ("__str__", "source", "created_at", "compared", "recovered", "replays_refused", "unknown_sends",
                    "findings_count")
    list_filter = ("source",)
    list_select_related = ("source",)

    def _count(self, obj: ReconcileReport, name: str) -> int | None:
        # None (shown as "-"): not counted yet (repairs still running) or not by this report's version.
        return obj.summary.get("counts", {}).get(name)

    @admin.display(description="events compared")
    def compared(self, obj):
        return self._count(obj, "events_compared")

    @admin.display(description="missing recovered")
    def recovered(self, obj):
        if "missing_found" not in obj.summary.get("counts", {}):
            return None  # an older report counted what was found missing here, not what was recovered
        return self._count(obj, "missing_recovered")

    @admin.display(description="replays refused")
    def replays_refused(self, obj):
        return self._count(obj, "missing_replay_refused")

    @admin.display(description="unknown sends")
    def unknown_sends(self, obj):
        return self._count(obj, "unknown_sends")

    @admin.display(description="findings")
    def findings_count(self, obj):
        return obj.findings.count()

    template = "admin/reconcile/report.html"
    filename = "reconcile-report"

    def page_context(self, report: ReconcileReport) -> dict:
        summary = report.summary
        findings = report.findings.order_by("id")
        decisions = [{**d, "decided_at": when(d.get("decided_at"))} for d in report_decisions(report)]
        return {
            "title": f"{report} — {summary['source']}",
            "summary": summary,
            "times": {k: when(summary.get(k)) for k in ("published_at", "started_at")},
            "window": {k: when((summary.get("window") or {}).get(k)) for k in ("since", "until")},
            "counter_groups": counter_groups(summary.get("counts", {})),
            # The replays not applied, by their findings' repair code (replay_refused, database_error, ...).
            "replay_codes": summary.get("missing_replay_codes", {}),
            "decisions": decisions,
            "findings": findings.select_related("action")[:REPORT_PAGE_FINDINGS],
            "event_search_url": reverse("admin:ingress_inboundevent_changelist"),
            "finding_count": findings.count(),
            "open_candidates": findings.filter(kind="RETRY_CANDIDATE", decision="").count(),
            "queue_url": reverse("admin:reconcile_retrycandidatequeue_changelist"),
            # What waits for a person after this report (new, found again, open for the source).
            "needs_a_person": summary.get("needs_a_person", {}),
            "unexpected_url": unexpected_receipts_url(),
        }

    def export_body(self, report: ReconcileReport):
        return StreamingHttpResponse(report_json_chunks(report), content_type="application/json")


@admin.register(RetryCandidateQueue)
class RetryCandidateQueueAdmin(LedgerAdmin):
    """RETRY_CANDIDATE findings still waiting for a person: retry under the same key, or close."""

    list_display = ("key", "event_key", "report", "detail")
    list_select_related = ("report", "action")
    fields = readonly_fields = ("kind", "report", "event_key", "reply_key", "action", "detail")
    actions = ["authorize_retry", "close_without_reply"]

    def get_queryset(self, request):
        # The same rows doctor counts.
        return super().get_queryset(request).filter(pk__in=open_retry_candidates().values("pk"))

    @admin.display(description="reply key")
    def key(self, obj) -> str:
        return short_key(obj.reply_key)

    def has_decide_permission(self, request) -> bool:
        return request.user.has_perm("reconcile.decide_finding")

    def _decide(self, request, queryset, decision: str, title: str, action: str):
        def apply(finding, note: str) -> tuple[bool, str]:
            result = services.finding_decide(finding_id=finding.pk, decision=decision,
                                             actor=request.user.get_username(), reason=note)
            return result.ok, result.message

        return confirmed_action(self, request, queryset, title=title, action=action, apply=apply,
                                note_required=True, note_label="Reason (kept in the report)")

    @admin.action(description="Authorize a retry under the same reply key", permissions=["decide"])
    def authorize_retry(self, request, queryset):
        return self._decide(request, queryset, Decision.RETRY_AUTHORIZED,
                            "Authorize a retry under the same reply key", "authorize_retry")

    @admin.action(description="Close without reply", permissions=["decide"])
    def close_without_reply(self, request, queryset):
        return self._decide(request, queryset, Decision.CLOSED, "Close without reply", "close_without_reply")


def unexpected_receipts_url() -> str:
    return f"{reverse('admin:reconcile_finding_changelist')}?queue={UNEXPECTED_RECEIPTS_QUEUE}"


class QueueFilter(admin.SimpleListFilter):
    """The findings that wait for a person, one queue at a time."""

    title = "queue"
    parameter_name = "queue"

    def lookups(self, request, model_admin):
        return [(UNEXPECTED_RECEIPTS_QUEUE, "unexpected receipts (open)"),
                ("retry_candidates", "retry candidates (open)")]

    def queryset(self, request, queryset):
        if self.value() == UNEXPECTED_RECEIPTS_QUEUE:
            return queryset.filter(pk__in=open_unexpected_receipts().values("pk"))
        if self.value() == "retry_candidates":
            return queryset.filter(pk__in=open_retry_candidates().values("pk"))
        return queryset


@admin.register(Finding)
class FindingAdmin(LedgerAdmin):
    """Every finding of every report, read-only, filterable by kind, source and queue.

    `?queue=unexpected_receipts` is the unexpected-receipt queue (issue 15): receipts the provider
    shows for a reply Conduit closed, has not sent or never planned, not yet acknowledged. The
    same rows make `doctor` exit 1.
    """

    list_display = ("id", "kind", "source", "key", "action_state", "current_state", "report", "decision",
                    "detail")
    list_filter = (QueueFilter, "kind", "report__source", "decision")
    list_select_related = ("report__source", "action")
    search_fields = ("=reply_key", "=event_key")
    ordering = ("-id",)
    fields = readonly_fields = ("kind", "report", "event_key", "reply_key", "action", "action_state", "repair",
                                "repair_outcome", "repair_code", "detail", "decision", "decided_by",
                                "decided_at", "decision_reason", "decision_result")
    actions = ["acknowledge"]

    @admin.display(description="source", ordering="report__source__name")
    def source(self, obj: Finding) -> str:
        return obj.report.source.name

    @admin.display(description="reply key")
    def key(self, obj: Finding) -> str:
        return short_key(obj.reply_key) if obj.reply_key else "-"

    @admin.display(description="action now")
    def current_state(self, obj: Finding) -> str:
        return obj.action.delivery_state if obj.action else "-"

    def has_decide_permission(self, request) -> bool:
        return request.user.has_perm("reconcile.decide_finding")

    @admin.action(description="Acknowledge unexpected receipts (the provider holds the reply)",
                  permissions=["decide"])
    def acknowledge(self, request, queryset):
        def apply(finding, note: str) -> tuple[bool, str]:
            result = unexpected_receipt_acknowledge(finding_id=finding.pk, actor=request.user.get_username(),
                                                    reason=note)
            return result.ok, result.message

        return confirmed_action(self, request, queryset.filter(kind__in=RECEIPT_KINDS),
                                title="Acknowledge unexpected receipts", action="acknowledge", apply=apply,
                                note_required=True, note_label="Reason (kept in the report)")


@admin.register(CanaryReport)
class CanaryReportAdmin(ReportPageAdmin):
    """Kept canary reports: each expectation with what was found, as a page and as JSON."""

    list_display = ("__str__", "created_at", "actor", "ok", "failed")
    list_filter = ("ok",)
    template = "admin/reconcile/canary_report.html"
    filename = "canary-report"

    def page_context(self, report: CanaryReport) -> dict:
        reconcile_id = report.summary.get("reconcile_report")
        expectations = [
            {**e, "expected_words": plain(e.get("expected")), "found_words": plain(e.get("found"))}
            for e in report.expectations
        ]
        return {
            "report": report,
            "expectations": expectations,
            "reconcile_url": reverse("admin:reconcile_reconcilereport_change", args=[reconcile_id])
            if reconcile_id else "",
        }

    def export_body(self, report: CanaryReport):
        return JsonResponse({
            "report": report.pk, "created_at": report.created_at.isoformat(), "actor": report.actor,
            "ok": report.ok, "failed": report.failed, "summary": report.summary,
            "expectations": report.expectations,
        })


# -- the front page: what waits for a person, then the ledgers ---------------


# Each front-page row: the model whose admin it opens, and the filter it opens with.
WORK_LINKS = {
    "review_pending": ("replies.ReviewQueue", ""),
    "unknown_sends": ("replies.UnknownSendQueue", ""),
    "quarantine": ("ingress.QuarantineReceipt", "?state__exact=QUARANTINED"),
    "retry_candidates": ("reconcile.RetryCandidateQueue", ""),
    "unexpected_receipts": ("reconcile.Finding", f"?queue={UNEXPECTED_RECEIPTS_QUEUE}"),
    "stranded_sends": ("replies.StrandedSendQueue", ""),
    "failed_scans": ("reconcile.ScanState", "?failing=yes"),
    "sources_attention": ("ingress.Source", "?attention=yes"),
}


def work_rows(request: HttpRequest, site: admin.AdminSite = admin.site) -> list[WorkRow]:
    """The front page's rows: counts for every staff member, a link where the viewer may open the queue."""
    from django.apps import apps

    rows = []
    for row in work_counts():
        label, query = WORK_LINKS[row["key"]]
        model = apps.get_model(label)
        model_admin = site._registry.get(model)
        url = ""
        if model_admin is not None and model_admin.has_view_or_change_permission(request):
            meta = model._meta
            url = reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist") + query
        rows.append(WorkRow(url=url, **row))
    return rows


def _front_page(site: admin.AdminSite):
    ledgers_index = site.index

    def index(request: HttpRequest, extra_context: dict | None = None):
        return ledgers_index(request, {"work": work_rows(request, site), **(extra_context or {})})

    return index


site_configure(admin.site)
admin.site.index_template = "admin/conduit/index.html"
# The last app's admin module: every queue above is registered by now. An instance attribute,
# read when conduit.urls builds the admin's URLs.
admin.site.index = _front_page(admin.site)
