"""The reply ledgers in the admin: actions with their history and attempts, read-only."""

from typing import Any

from django.contrib import admin
from django.db.models import OuterRef, Q, QuerySet, Subquery
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join
from django.utils.timesince import timesince

from conduit.admin import HistoryInline, LedgerAdmin, LedgerInline, short_key
from conduit.content import MESSAGE_CONTENT
from conduit.labels import state_html
from conduit.search import PersonSearchMixin
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


class ReplyTransitionInline(HistoryInline):
    model = ReplyTransition
    states = dict(DeliveryState.choices)


class SendAttemptInline(LedgerInline):
    model = SendAttempt
    classes = ("collapse",)
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


class ActionAdmin(PersonSearchMixin, LedgerAdmin):
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
    list_select_related = ("event__source", "campaign")
    ordering = ("-id",)
    inlines = [ReplyTransitionInline, SendAttemptInline]
    # What a person decides from first; the internals folded under "Details".
    lead_fields: tuple[str, ...] = (
        "message_content",
        "on_post",
        "approved_copy",
        "status",
        "missing",
        "window",
        "delivery_statuses",
        "campaign_matched",
    )
    detail_fields: tuple[str, ...] = (
        "reply_key",
        "event",
        "source",
        "purpose",
        "approval_state",
        "approved_by",
        "approved_at",
        "channel",
        "copy_version",
        "provider_reply_id",
        "attempt_count",
        "last_error_code",
        "canary",
        "event_context",
    )

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None):
        return (*self.lead_fields, *self.detail_fields)

    def get_fieldsets(self, request: HttpRequest, obj: Any = None):
        # Retained buyer content only for staff with the permission.
        lead = [f for f in self.lead_fields if f != "message_content" or may_read_content(request)]
        return [
            (None, {"fields": lead}),
            ("Details", {"fields": self.detail_fields, "classes": ("collapse",)}),
        ]

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "", extra_context=None):
        action = self.get_object(request, object_id)  # None for an id that is no row's
        title = action_title(action, content=may_read_content(request)) if action is not None else ""
        context = {"title": title, "subtitle": None} if action is not None else {}
        return super().change_view(request, object_id, form_url, {**context, **(extra_context or {})})

    def search_rows(self, queryset: QuerySet, term: str, *, words: bool) -> QuerySet:
        return selectors.actions_matching(queryset, term, words=words)

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

    # Not `state`: a queue's class names the state it shows by that attribute.
    @admin.display(description="state")
    def status(self, obj: ReplyAction):
        return state_html(obj.get_delivery_state_display(), obj.delivery_state)

    @admin.display(description="on post")
    def on_post(self, obj: ReplyAction) -> str:
        return obj.event.conversation_ref

    @admin.display(description="time left to reply")
    def window(self, obj: ReplyAction) -> str:
        left = selectors.time_left(obj)
        if left == "expired":
            return "the platform's reply window has closed"
        if left:
            return f"{left} left in the platform's reply window"
        until = selectors.free_form_until(obj.event)
        if until is not None:  # WhatsApp: free-form text for 24 hours, a template after
            return f"free-form text until {until:%Y-%m-%d %H:%M} UTC, then only the copy's template"
        return "no window: the platform sets none"

    @admin.display(description="delivery statuses")
    def delivery_statuses(self, obj: ReplyAction):
        """What the platform reported of the message, in the order it happened (WhatsApp's statuses)."""
        if not obj.provider_reply_id:
            return "none: nothing was sent yet"
        rows = selectors.delivery_statuses(obj)
        if not rows:
            return "none reported"
        return format_html_join(
            "",
            "<div>{} at {}{}</div>",
            (
                (row.status, row.occurred_at, f" (seen {row.seen_count} times)" if row.seen_count > 1 else "")
                for row in rows
            ),
        )

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

    @admin.display(description="they wrote")
    def message_content(self, obj: ReplyAction):
        event = obj.event
        if not event.message_text:
            return "purged by the retention rule"
        who = event.sender_handle or "the buyer"
        return format_html('<strong>{}</strong><div class="conduit-said">{}</div>', who, event.message_text)


CHANNEL_WORDS = {"public_reply": "Public reply", "private_reply": "Private reply", "dm": "Direct message"}


def action_title(action: ReplyAction, *, content: bool = False) -> str:
    """What the reply is, for a page's title: "Public reply to a comment on post 1789…"; the
    buyer's handle (content) only with `content`."""
    channel = action.channel
    if not channel:
        copy = selectors.copy_for(action)
        channel = copy.channel if copy is not None else ""
    kind = CHANNEL_WORDS.get(channel) or (
        "Private reply" if "private" in action.purpose or "dm" in action.purpose.split("_") else "Reply"
    )
    event = action.event
    if event.event_type.startswith("comment"):
        return f"{kind} to a comment on post {event.conversation_ref} ({action.purpose})"
    who = event.sender_handle if content and event.sender_handle else "a buyer"
    return f"{kind} to a message from {who} ({action.purpose})"


def may_read_content(request: HttpRequest) -> bool:
    return request.user.has_perm(MESSAGE_CONTENT)


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
