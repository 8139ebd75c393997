"""Findings in the admin: retry candidates and unexpected receipts, each decided by a person."""

from django.contrib import admin
from django.urls import reverse

from conduit.admin import LedgerAdmin, confirmed_action, short_key
from reconcile import services
from reconcile.models import Decision, Finding, RetryCandidateQueue
from reconcile.receipts import unexpected_receipt_acknowledge
from reconcile.selectors import (
    RECEIPT_KINDS,
    UNEXPECTED_RECEIPTS_QUEUE,
    open_retry_candidates,
    open_unexpected_receipts,
)


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
class FindingAdmin(LedgerAdmin):
    """Every finding of every report, read-only, filterable by kind, source and queue.

    `?queue=unexpected_receipts` is the unexpected-receipt queue: receipts the provider
    shows for a reply Conduit closed, has not sent or never planned, not yet acknowledged. The
    same rows make `doctor` exit 1.
    """

    list_display = (
        "id",
        "kind",
        "source",
        "key",
        "action_state",
        "current_state",
        "report",
        "decision",
        "detail",
    )
    list_filter = (QueueFilter, "kind", "report__source", "decision")
    list_select_related = ("report__source", "action")
    search_fields = ("=reply_key", "=event_key")
    ordering = ("-id",)
    fields = readonly_fields = (
        "kind",
        "report",
        "event_key",
        "reply_key",
        "action",
        "action_state",
        "repair",
        "repair_outcome",
        "repair_code",
        "detail",
        "decision",
        "decided_by",
        "decided_at",
        "decision_reason",
        "decision_result",
    )
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
