"""Kept reconcile reports and canary reports in the admin: counters in words, pages of findings."""

from django.contrib import admin
from django.http import JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import dateformat
from django.utils.timezone import localtime

from conduit.admin import LedgerAdmin, short_key
from reconcile.admin.findings import unexpected_receipts_url
from reconcile.admin.words import (
    REPAIR_CODE_WORDS,
    TRIGGER_WORDS,
    delivery_words,
    kind_words,
    label,
    repair_words,
)
from reconcile.models import CanaryReport, Decision, FindingKind, ReconcileReport
from reconcile.publication import REPORT_COUNTS
from reconcile.selectors import report_decisions, report_json_chunks, report_later_decisions

# -- reconciliation: scan state, reports, retry candidates ------------------

REPORT_PAGE_FINDINGS = 500

# The report's counters for people: group, label and a one-line meaning (the JSON keeps the names).
COUNTER_WORDS = {
    "events_compared": ("events", "Events read from the source", "comments and messages the scan read"),
    "events_local": ("events", "Events Conduit holds", "in the same window, in Conduit's ledger"),
    "events_matched": ("events", "Matched", "held by both, with the same content hash"),
    "missing_found": (
        "events",
        "Missed webhooks found",
        "on the source, not in Conduit: each replayed through ingest",
    ),
    "missing_recovered": ("events", "Missed webhooks recovered", "replayed and accepted: in Conduit now"),
    "missing_replay_refused": (
        "events",
        "Replays refused",
        "ingest refused the replayed batch, so none of its "
        "events was written: its quarantine receipt says why; the next scan finds them again",
    ),
    "missing_replay_failed": (
        "events",
        "Replays failed",
        "the replay raised an error: nothing of its batch was written; the next scan finds them again",
    ),
    "identity_conflicts": ("events", "Identity conflicts", "same key, different content: sent to quarantine"),
    "source_unverified": ("events", "Not seen on the source", "held by Conduit, not in what the scan read"),
    "duplicates_converged": (
        "events",
        "Duplicate deliveries absorbed",
        "repeat webhooks counted on one event",
    ),
    "invalid_source_items": ("events", "Unreadable source items", "items the scan could not parse"),
    "quarantined_inputs": ("events", "Quarantined inputs", "refused webhook bodies still waiting for review"),
    "actions_compared": ("replies", "Replies compared", "Conduit's reply actions on the events read"),
    "replies_confirmed": ("replies", "Replies confirmed", "the platform shows the reply Conduit sent"),
    "sending_in_flight": ("replies", "Sending right now", "claimed by a worker, not finished"),
    "suppressed_actions": ("replies", "Suppressed test replies", "canary replies kept from the platform"),
    "unknown_sends": ("replies", "Unknown sends", "sent or attempted with no receipt on the platform"),
    "retry_candidates": ("replies", "Retry candidates", "unknown sends the platform shows no receipt for"),
    "receipts_attached": ("receipts", "Receipts attached", "an unknown send the platform holds: marked sent"),
    "sent_without_receipt": (
        "receipts",
        "Sent, receipt missing",
        "marked sent, but the platform shows nothing",
    ),
    "unexpected_receipts": (
        "receipts",
        "Unexpected receipts",
        "the platform holds a reply Conduit closed or has not sent",
    ),
    "unknown_receipts": ("receipts", "Unknown receipts", "the platform holds a reply Conduit never planned"),
    "receipts_not_compared": (
        "receipts",
        "Replies not compared",
        "sent through a route whose replies the "
        "platform's read cannot always show (a private reply): left as they are",
    ),
    "page_calls": ("health", "Pages read", "calls the scan made to the source"),
    "external_calls": ("health", "Calls off this host", "page reads that left this machine"),
}
COUNTER_GROUPS = (
    ("events", "Events"),
    ("replies", "Replies"),
    ("receipts", "Receipts"),
    ("health", "Health"),
)


# A report written before the replays were counted has no `missing_found`: its `missing_recovered`
# counted the events found missing, whatever their replay did (its findings' outcomes say).
FOUND_BEFORE_REPLAYS_COUNTED = (
    "events",
    "Missed webhooks found",
    "on the source, not in Conduit: a report "
    "from before replays were counted, so refused replays are in it too; each "
    "finding's outcome says what its replay did",
)


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


def decision_words(row: dict) -> dict:
    """A decision row of a report (reconcile.selectors.reports) with its time, decision and kind in words."""
    kind = row.get("kind", "")
    return {
        **row,
        "decided_at": when(row.get("decided_at")),
        "decision_words": label(Decision, row.get("decision", "")),
        "kind_words": "Quarantine receipt" if kind == "QUARANTINE_RECEIPT" else label(FindingKind, kind),
    }


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


class ReportPageAdmin(LedgerAdmin):
    """A kept report: its change page is a readable page (`template`), plus a JSON export.

    Subclasses give `template`, `page_context(report)`, `export_body(report)` and the
    download's `filename`.
    """

    template = ""
    filename = ""

    def get_urls(self):
        opts = self.model._meta
        return [
            path(
                "<int:report_id>/export/",
                self.admin_site.admin_view(self.export_view),
                name=f"{opts.app_label}_{opts.model_name}_export",
            ),
            *super().get_urls(),
        ]

    def _report_or_none(self, request, report_id):
        report = get_object_or_404(self.model, pk=report_id)
        return report if self.has_view_permission(request, report) else None

    def export_url(self, report) -> str:
        opts = self.model._meta
        return reverse(f"admin:{opts.app_label}_{opts.model_name}_export", args=[report.pk])

    def change_view(self, request, object_id, form_url="", extra_context=None):
        report = self._report_or_none(request, object_id)
        if report is None:
            return self._get_obj_does_not_exist_redirect(request, self.opts, str(object_id))
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": str(report),
            "export_url": self.export_url(report),
            **self.page_context(report),
        }
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

    # The columns a person decides from (fitting 1366 px beside the filter); every counter and the
    # findings are on the report's page.
    list_display = ("__str__", "source", "published", "recovered", "replays_refused", "unknown_sends")
    list_filter = ("source",)
    list_select_related = ("source",)

    def _count(self, obj: ReconcileReport, name: str) -> int | None:
        # None (shown as "-"): not counted yet (repairs still running) or not by this report's version.
        return obj.summary.get("counts", {}).get(name)

    @admin.display(description="published", ordering="created_at")
    def published(self, obj: ReconcileReport) -> str:
        return dateformat.format(localtime(obj.created_at), "Y-m-d H:i")

    @admin.display(description="webhooks recovered")
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

    template = "admin/reconcile/report.html"
    filename = "reconcile-report"

    def page_context(self, report: ReconcileReport) -> dict:
        summary = report.summary
        findings = report.findings.order_by("id")
        scan = {"pages": 0, "complete_scan": True, "scan_id": "", **(summary.get("source_cursor") or {})}
        shown = list(findings.select_related("action")[:REPORT_PAGE_FINDINGS])
        for f in shown:
            f.kind_words = kind_words(f.kind)
            f.state_words = delivery_words(f.action.delivery_state) if f.action else ""
            f.repair_words = repair_words(f.repair, f.repair_outcome, f.repair_code)
        return {
            "title": f"{report} — {summary['source']}",
            "summary": summary,
            "scan": scan,
            "scan_id_short": short_key(scan["scan_id"]),
            "trigger_words": TRIGGER_WORDS.get(summary.get("trigger"), summary.get("trigger")),
            "times": {k: when(summary.get(k)) for k in ("published_at", "started_at")},
            "window": {k: when((summary.get("window") or {}).get(k)) for k in ("since", "until")},
            "counter_groups": counter_groups(summary.get("counts", {})),
            # The replays not applied, by their findings' repair code (replay_refused, database_error, ...).
            "replay_codes": [
                (code, REPAIR_CODE_WORDS.get(code, code), n)
                for code, n in summary.get("missing_replay_codes", {}).items()
            ],
            "decisions": [decision_words(d) for d in report_decisions(report)],
            "later_decisions": [decision_words(d) for d in report_later_decisions(report)],
            "findings": shown,
            "event_search_url": reverse("admin:ingress_inboundevent_changelist"),
            "finding_count": findings.count(),
            "open_candidates": findings.filter(kind="RETRY_CANDIDATE", decision="").count(),
            "queue_url": reverse("admin:reconcile_retrycandidatequeue_changelist"),
            # What waits for a person after this report (new, found again, open for the source).
            "needs_a_person": [(kind_words(k), n) for k, n in summary.get("needs_a_person", {}).items()],
            "unexpected_url": unexpected_receipts_url(),
        }

    def export_body(self, report: ReconcileReport):
        return StreamingHttpResponse(report_json_chunks(report), content_type="application/json")


@admin.register(CanaryReport)
class CanaryReportAdmin(ReportPageAdmin):
    """Kept canary reports: each expectation with what was found, as a page and as JSON."""

    list_display = ("__str__", "created_at", "actor", "passed", "first_failure")
    list_filter = ("ok",)
    template = "admin/reconcile/canary_report.html"
    filename = "canary-report"

    @admin.display(boolean=True, description="passed", ordering="ok")
    def passed(self, obj: CanaryReport) -> bool:
        return obj.ok

    @admin.display(description="first failed expectation")
    def first_failure(self, obj: CanaryReport) -> str:
        return obj.failed or "-"

    def page_context(self, report: CanaryReport) -> dict:
        reconcile_id = report.summary.get("reconcile_report")
        expectations = [
            {**e, "expected_words": plain(e.get("expected")), "found_words": plain(e.get("found"))}
            for e in report.expectations
        ]
        actions = [
            {
                **a,
                "state_words": delivery_words(a.get("delivery_state", "")),
                "key": short_key(a.get("reply_key", "")),
            }
            for a in report.summary.get("actions", [])
        ]
        return {
            "report": report,
            "expectations": expectations,
            "actions": actions,
            "reconcile_url": reverse("admin:reconcile_reconcilereport_change", args=[reconcile_id])
            if reconcile_id
            else "",
        }

    def export_body(self, report: CanaryReport):
        return JsonResponse(
            {
                "report": report.pk,
                "created_at": report.created_at.isoformat(),
                "actor": report.actor,
                "ok": report.ok,
                "failed": report.failed,
                "summary": report.summary,
                "expectations": report.expectations,
            }
        )
