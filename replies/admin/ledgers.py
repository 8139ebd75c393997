"""The reply ledgers in the admin: actions with their history and attempts, read-only."""

from typing import Any

from django.contrib import admin
from django.db.models import OuterRef, Q, QuerySet, Subquery
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join
from django.utils.timesince import timesince

from conduit.admin import LedgerAdmin, LedgerInline, short_key
from replies import selectors
from replies.models import (
    ApprovalState,
    CanarySinkRecord,
    DeliveryState,
    ReplyAction,
    ReplyTransition,
    SendAttempt,
)


class EventReplyActionInline(LedgerInline):
    """An event's reply actions, on the event's page in the ingress admin."""

    model = ReplyAction
    fields = readonly_fields = ("reply_key", "purpose", "approval_state", "delivery_state", "attempt_count")


class ReplyTransitionInline(LedgerInline):
    model = ReplyTransition
    fields = readonly_fields = ("at", "prior_state", "next_state", "actor", "reason_code", "refused")


class SendAttemptInline(LedgerInline):
    model = SendAttempt
    fields = readonly_fields = (
        "attempt_number",
        "at",
        "transport",
        "http_status",
        "evidence",
        "transport_name",
    )


class DeclaredPurposeFilter(admin.AllValuesFieldListFilter):
    """Filter by purpose, offering the purposes sources declare.

    Django's all-values filter lists SELECT DISTINCT purpose over the queue on every page
    view: a scan of every reply action (a third of a second at two million). The purposes
    an action can have are its source's declared ones, a handful of rows to read.
    """

    def __init__(self, field, request, params, model, model_admin, field_path):
        super().__init__(field, request, params, model, model_admin, field_path)
        from ingress.models import Source

        # Replaces the parent's lazy DISTINCT query before anything evaluates it.
        self.lookup_choices = sorted(
            {
                purpose
                for purposes in Source.objects.values_list("purposes", flat=True)
                for purpose in purposes or ()
            }
        )


class ActionAdmin(LedgerAdmin):
    """Shared by the ledger and both queues: context, history and attempts of each action."""

    list_display = (
        "key",
        "event_short",
        "source",
        "purpose",
        "delivery_state",
        "attempt_count",
        "created_at",
    )
    list_filter = ("event__source", ("purpose", DeclaredPurposeFilter), "delivery_state")
    # Exact matches on indexed keys; "=key" would be iexact, UPPER() on both sides, a full scan.
    search_fields = ("reply_key__exact", "event__event_key__exact")
    list_select_related = ("event__source", "campaign")
    ordering = ("-id",)
    inlines = [ReplyTransitionInline, SendAttemptInline]
    fields = readonly_fields = (
        "reply_key",
        "event",
        "source",
        "purpose",
        "campaign_matched",
        "delivery_state",
        "approval_state",
        "approved_by",
        "approved_at",
        "channel",
        "copy_version",
        "approved_copy",
        "missing",
        "provider_reply_id",
        "attempt_count",
        "last_error_code",
        "canary",
        "event_context",
        "message_content",
    )

    @admin.display(ordering="event__source__name")
    def source(self, obj: ReplyAction) -> str:
        return obj.event.source.name

    @admin.display(description="campaign")
    def campaign_matched(self, obj: ReplyAction) -> str:
        return f"{obj.campaign.name} (version {obj.campaign_version})"

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # "what is missing" reads these annotations: no query per row.
        return selectors.with_approval_needs(super().get_queryset(request))

    @admin.display(description="reply key", ordering="reply_key")
    def key(self, obj: ReplyAction) -> str:
        return short_key(obj.reply_key)  # the full key is on the action's page and is searchable

    @admin.display(description="event", ordering="event_id")
    def event_short(self, obj: ReplyAction):
        return format_html('<span title="{}">{}</span>', obj.event_id, short_key(obj.event_id, 32))

    @admin.display(description="age", ordering="created_at")
    def age(self, obj: ReplyAction) -> str:
        return timesince(obj.created_at, depth=1)

    @admin.display(description="what is missing")
    def missing(self, obj: ReplyAction) -> str:
        if obj.delivery_state != DeliveryState.REVIEW_PENDING:
            return ""
        return selectors.approval_missing(obj) or "nothing: ready to approve"

    @admin.display(description="copy to be sent")
    def approved_copy(self, obj: ReplyAction) -> str:
        source_id = obj.event.source_id
        copy = (
            selectors.approved_copy(source_id=source_id, purpose=obj.purpose, copy_version=obj.copy_version)
            if obj.copy_version
            else selectors.copy_for(obj)
        )
        return f"{copy.copy_version} ({copy.channel}): {copy.text}" if copy else "-"

    @admin.display(description="event")
    def event_context(self, obj: ReplyAction):
        event = obj.event
        rows = [
            ("state", event.event_state),
            ("seen", event.seen_count),
            ("conversation", event.conversation_ref),
            ("message", event.message_ref),
            ("sender", event.sender_ref),
            ("occurred", event.occurred_at),
        ]
        return format_html_join("", "<div>{}: {}</div>", rows)

    @admin.display(description="message (retained content)")
    def message_content(self, obj: ReplyAction) -> str:
        return obj.event.message_text or "purged by the retention rule"

    def get_fields(self, request: HttpRequest, obj: Any = None):
        # Retained buyer content only for staff with the permission.
        fields = super().get_fields(request, obj)
        if request.user.has_perm("ingress.view_message_content"):
            return fields
        return [f for f in fields if f != "message_content"]


class DecidedFilter(admin.SimpleListFilter):
    """Replies a person approved or closed, newest first: the review queue's "recently decided"."""

    title = "decided by a person"
    parameter_name = "decided"

    def lookups(self, request, model_admin):
        return [("yes", "approved or closed")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(
                Q(approval_state=ApprovalState.APPROVED) | Q(delivery_state=DeliveryState.CLOSED_NO_REPLY)
            )
        return queryset


@admin.register(ReplyAction)
class ReplyActionAdmin(ActionAdmin):
    """Every reply action, any state; `?decided=yes` is the review queue's "recently decided"."""

    list_display = (
        "key",
        "event_short",
        "source",
        "purpose",
        "delivery_state",
        "decided",
        "attempt_count",
        "created_at",
    )
    list_filter = (DecidedFilter, "event__source", ("purpose", DeclaredPurposeFilter), "delivery_state")

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # Who closed it, from its history: one subquery per page, not a query per row.
        closed = ReplyTransition.objects.filter(
            action=OuterRef("pk"), next_state=DeliveryState.CLOSED_NO_REPLY, refused=False
        ).order_by("-id")
        return (
            super()
            .get_queryset(request)
            .annotate(
                closed_by=Subquery(closed.values("actor")[:1]), closed_at=Subquery(closed.values("at")[:1])
            )
        )

    @admin.display(description="decided")
    def decided(self, obj: ReplyAction) -> str:
        if getattr(obj, "closed_by", None):
            return f"closed by {obj.closed_by}, {timesince(obj.closed_at, depth=1)} ago"
        if obj.approved_by:
            return f"approved by {obj.approved_by}, {timesince(obj.approved_at, depth=1)} ago"
        return "-"


@admin.register(SendAttempt)
class SendAttemptAdmin(LedgerAdmin):
    list_display = ("action", "attempt_number", "at", "transport", "http_status", "evidence")
    list_filter = ("transport",)


@admin.register(CanarySinkRecord)
class CanarySinkAdmin(LedgerAdmin):
    list_display = ("reply_key", "purpose", "channel", "copy_version", "transport_name", "at")
