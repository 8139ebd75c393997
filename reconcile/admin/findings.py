"""Findings in the admin: retry candidates and unexpected receipts, each decided by a person."""

from django.contrib import admin
from django.urls import reverse
from django.utils.formats import localize
from django.utils.html import format_html
from django.utils.timezone import localtime

from conduit.admin import LedgerAdmin, confirmed_action, short_key
from conduit.search import PersonSearchMixin, keyed_matching
from ingress.models import InboundEvent
from reconcile import services
from reconcile.admin.words import delivery_words, kind_words, label, repair_words
from reconcile.models import Decision, Finding, FindingKind, RetryCandidateQueue
from reconcile.receipts import unexpected_receipt_acknowledge
from reconcile.selectors import (
    PERSON_KINDS,
    RECEIPT_KINDS,
    UNEXPECTED_RECEIPTS_QUEUE,
    open_retry_candidates,
    open_unexpected_receipts,
)


class FindingWords:
    """A finding's columns and fields in words; its keys shortened, in full under Details."""

    # Its page is titled in words ("Retry candidate 91f64a208ee3…"), breadcrumbs too.
    change_form_template = "admin/reconcile/finding_change_form.html"

    def change_view(self, request, object_id, form_url="", extra_context=None):
        finding = self.get_object(request, object_id)
        context = dict(extra_context or {})
        if finding is not None:
            context["subtitle"] = f"{label(FindingKind, finding.kind)} {self.key(finding)}"
        return super().change_view(request, object_id, form_url, context)

    @admin.display(description="finding", ordering="kind")
    def what(self, obj: Finding) -> str:
        return kind_words(obj.kind)

    @admin.display(description="reply key")
    def key(self, obj: Finding) -> str:
        return short_key(obj.reply_key) if obj.reply_key else "-"

    @admin.display(description="reply")
    def reply_action(self, obj: Finding) -> str:
        if not obj.action_id:
            return short_key(obj.reply_key) if obj.reply_key else "-"
        url = reverse("admin:replies_replyaction_change", args=[obj.action_id])
        return format_html('<a href="{}">{}</a>', url, short_key(obj.reply_key) or f"action {obj.action_id}")

    @admin.display(description="reply now")
    def reply_now(self, obj: Finding) -> str:
        return delivery_words(obj.action.delivery_state) if obj.action else "-"

    @admin.display(description="reply when found")
    def reply_then(self, obj: Finding) -> str:
        return delivery_words(obj.action_state) if obj.action_state else "-"

    @admin.display(description="repair")
    def repair_done(self, obj: Finding) -> str:
        return repair_words(obj.repair, obj.repair_outcome, obj.repair_code)

    @admin.display(description="decision", ordering="decision")
    def decided(self, obj: Finding) -> str:
        if obj.decision:
            return label(Decision, obj.decision)
        return "waiting for a person" if obj.kind in PERSON_KINDS else "none needed"

    @admin.display(description="found", ordering="report__created_at")
    def found_at(self, obj: Finding):
        return obj.report.created_at

    @admin.display(description="found in")
    def found_in(self, obj: Finding) -> str:
        url = reverse("admin:reconcile_reconcilereport_change", args=[obj.report_id])
        return format_html(
            '<a href="{}">report {}</a> of {}', url, obj.report_id, localize(localtime(obj.report.created_at))
        )


@admin.register(RetryCandidateQueue)
class RetryCandidateQueueAdmin(FindingWords, LedgerAdmin):
    """RETRY_CANDIDATE findings still waiting for a person: retry under the same key, or close."""

    list_display = ("key", "what", "reply_now", "found_at")
    list_select_related = ("report", "action")
    fieldsets = (
        (None, {"fields": ("what", "reply_action", "reply_now", "found_in", "detail")}),
        ("Details", {"classes": ("collapse",), "fields": ("event_key", "reply_key", "id")}),
    )
    readonly_fields = (
        "what",
        "reply_action",
        "reply_now",
        "found_in",
        "detail",
        "event_key",
        "reply_key",
        "id",
    )
    actions = ["authorize_retry", "close_without_reply"]

    def get_queryset(self, request):
        # The same rows doctor counts.
        return super().get_queryset(request).filter(pk__in=open_retry_candidates().values("pk"))

    def has_decide_permission(self, request) -> bool:
        return request.user.has_perm("reconcile.decide_finding")

    def _decide(self, request, queryset, decision: str, title: str, action: str):
        def apply(finding, note: str) -> tuple[bool, str]:
            result = services.finding_decide(
                finding_id=finding.pk, decision=decision, actor=request.user.get_username(), reason=note
            )
            return result.ok, result.message

        return confirmed_action(
            self,
            request,
            queryset,
            title=title,
            action=action,
            apply=apply,
            note_required=True,
            note_label="Reason (kept in the report)",
        )

    @admin.action(description="Authorize a retry under the same reply key", permissions=["decide"])
    def authorize_retry(self, request, queryset):
        return self._decide(
            request,
            queryset,
            Decision.RETRY_AUTHORIZED,
            "Authorize a retry under the same reply key",
            "authorize_retry",
        )

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
        return [
            (UNEXPECTED_RECEIPTS_QUEUE, "unexpected receipts (open)"),
            ("retry_candidates", "retry candidates (open)"),
        ]

    def queryset(self, request, queryset):
        if self.value() == UNEXPECTED_RECEIPTS_QUEUE:
            return queryset.filter(pk__in=open_unexpected_receipts().values("pk"))
        if self.value() == "retry_candidates":
            return queryset.filter(pk__in=open_retry_candidates().values("pk"))
        return queryset


@admin.register(Finding)
class FindingAdmin(PersonSearchMixin, FindingWords, LedgerAdmin):
    """Every finding of every report, read-only, filterable by kind, source and queue.

    `?queue=unexpected_receipts` is the unexpected-receipt queue: receipts the provider
    shows for a reply Conduit closed, has not sent or never planned, not yet acknowledged. The
    same rows make `doctor` exit 1.
    """

    # The columns a person decides from; the rest is on each finding's page.
    list_display = ("what", "source", "reply_action", "reply_now", "decided")
    list_display_links = ("what",)
    list_filter = (QueueFilter, "kind", "report__source", "decision")
    list_select_related = ("report__source", "action")
    search_help_text = "A reply key's start, or the event's id, comment, post or part of its key."

    def search_rows(self, queryset, term: str, *, words: bool):
        events = InboundEvent.objects.all()
        return keyed_matching(queryset, term, words=words, events=events, event_field="event_key")

    ordering = ("-id",)
    fieldsets = (
        (None, {"fields": ("what", "source", "found_in", "reply_action", "reply_then", "reply_now")}),
        ("Repair", {"fields": ("repair_done", "detail")}),
        (
            "Decision",
            {"fields": ("decided", "decided_by", "decided_at", "decision_reason", "decision_result")},
        ),
        (
            "Details",
            {
                "classes": ("collapse",),
                "fields": (
                    "id",
                    "event_key",
                    "reply_key",
                    "action_state",
                    "repair_code",
                    "quarantine_receipt",
                ),
            },
        ),
    )
    readonly_fields = tuple(f for _, options in fieldsets for f in options["fields"])
    actions = ["acknowledge"]

    @admin.display(description="source", ordering="report__source__name")
    def source(self, obj: Finding) -> str:
        return obj.report.source.name

    def has_decide_permission(self, request) -> bool:
        return request.user.has_perm("reconcile.decide_finding")

    @admin.action(
        description="Acknowledge unexpected receipts (the provider holds the reply)", permissions=["decide"]
    )
    def acknowledge(self, request, queryset):
        def apply(finding, note: str) -> tuple[bool, str]:
            result = unexpected_receipt_acknowledge(
                finding_id=finding.pk, actor=request.user.get_username(), reason=note
            )
            return result.ok, result.message

        return confirmed_action(
            self,
            request,
            queryset.filter(kind__in=RECEIPT_KINDS),
            title="Acknowledge unexpected receipts",
            action="acknowledge",
            apply=apply,
            note_required=True,
            note_label="Reason (kept in the report)",
        )
