"""Replies in the admin: the review and stranded-send queues, approved copy, reply routes, the ledgers.

The unknown-send queue's admin class lives here too, unregistered: reconcile
registers its subclass (with the replay verdict column), once, in its own app.
"""

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import F, OuterRef, Q, QuerySet, Subquery
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.timesince import timesince

from conduit.admin import LedgerAdmin, LedgerInline, confirmed_action, short_key
from conduit.providers.registry import TRANSPORTS
from ingress.admin import EVENT_INLINES
from replies import selectors, services
from replies.models import (
    ApprovalState,
    CanarySinkRecord,
    DeliveryState,
    ReplyAction,
    ReplyCopy,
    ReplyRoute,
    ReplyTransition,
    ReviewQueue,
    SendAttempt,
    SendBudget,
    StrandedSendQueue,
)


def confirmed_each(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet, *, title: str,
                   action: str, apply, note_required: bool = False, **options) -> HttpResponse | None:
    """`confirmed_action`, except that on confirm each row's outcome is its own message and
    nothing else is said.

    For an action whose rows can end differently (the lookup before a retry marks one SENT and
    authorizes another), a count of "<title>: N done" beside each outcome claims what did not
    happen (issue 15: "marked SENT, nothing resent" beside "Authorize a retry ...: 1 done").
    The confirmation page is confirmed_action's own.
    """
    note = request.POST.get("note", "").strip()
    if request.POST.get("confirm") == "yes" and (note or not note_required):
        for obj in queryset:
            ok, message = apply(obj, note)
            modeladmin.message_user(request, f"{obj}: {message}", messages.SUCCESS if ok else messages.ERROR)
        return None
    return confirmed_action(modeladmin, request, queryset, title=title, action=action, apply=apply,
                            note_required=note_required, **options)


class EventReplyActionInline(LedgerInline):
    """An event's reply actions, on the event's page in the ingress admin."""

    model = ReplyAction
    fields = readonly_fields = ("reply_key", "purpose", "approval_state", "delivery_state", "attempt_count")


EVENT_INLINES.append(EventReplyActionInline)


class ReplyTransitionInline(LedgerInline):
    model = ReplyTransition
    fields = readonly_fields = ("at", "prior_state", "next_state", "actor", "reason_code", "refused")


class SendAttemptInline(LedgerInline):
    model = SendAttempt
    fields = readonly_fields = ("attempt_number", "at", "transport", "http_status", "evidence", "transport_name")


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
        self.lookup_choices = sorted({purpose for purposes in Source.objects.values_list("purposes", flat=True)
                                      for purpose in purposes or ()})


class ActionAdmin(LedgerAdmin):
    """Shared by the ledger and both queues: context, history and attempts of each action."""

    list_display = ("key", "event_short", "source", "purpose", "delivery_state", "attempt_count", "created_at")
    list_filter = ("event__source", ("purpose", DeclaredPurposeFilter), "delivery_state")
    # Exact matches on indexed keys; "=key" would be iexact, UPPER() on both sides, a full scan.
    search_fields = ("reply_key__exact", "event__event_key__exact")
    list_select_related = ("event__source",)
    ordering = ("-id",)
    inlines = [ReplyTransitionInline, SendAttemptInline]
    fields = readonly_fields = (
        "reply_key", "event", "source", "purpose", "delivery_state", "approval_state", "approved_by",
        "approved_at", "channel", "copy_version", "approved_copy", "missing", "provider_reply_id",
        "attempt_count", "last_error_code", "canary", "event_context", "message_content",
    )

    @admin.display(ordering="event__source__name")
    def source(self, obj: ReplyAction) -> str:
        return obj.event.source.name

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
            else selectors.copy_current(source_id=source_id, purpose=obj.purpose)
        )
        return f"{copy.copy_version} ({copy.channel}): {copy.text}" if copy else "-"

    @admin.display(description="event")
    def event_context(self, obj: ReplyAction):
        event = obj.event
        rows = [
            ("state", event.event_state), ("seen", event.seen_count),
            ("conversation", event.conversation_ref), ("message", event.message_ref),
            ("sender", event.sender_ref), ("occurred", event.occurred_at),
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
            return queryset.filter(Q(approval_state=ApprovalState.APPROVED)
                                   | Q(delivery_state=DeliveryState.CLOSED_NO_REPLY))
        return queryset


@admin.register(ReplyAction)
class ReplyActionAdmin(ActionAdmin):
    """Every reply action, any state; `?decided=yes` is the review queue's "recently decided"."""

    list_display = ("key", "event_short", "source", "purpose", "delivery_state", "decided", "attempt_count",
                    "created_at")
    list_filter = (DecidedFilter, "event__source", ("purpose", DeclaredPurposeFilter), "delivery_state")

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # Who closed it, from its history: one subquery per page, not a query per row.
        closed = ReplyTransition.objects.filter(action=OuterRef("pk"), next_state=DeliveryState.CLOSED_NO_REPLY,
                                                refused=False).order_by("-id")
        return super().get_queryset(request).annotate(
            closed_by=Subquery(closed.values("actor")[:1]), closed_at=Subquery(closed.values("at")[:1]))

    @admin.display(description="decided")
    def decided(self, obj: ReplyAction) -> str:
        if getattr(obj, "closed_by", None):
            return f"closed by {obj.closed_by}, {timesince(obj.closed_at, depth=1)} ago"
        if obj.approved_by:
            return f"approved by {obj.approved_by}, {timesince(obj.approved_at, depth=1)} ago"
        return "-"


class QueueAdmin(ActionAdmin):
    state = ""
    close_reason = ""

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).filter(delivery_state=self.state)

    def _close(self, request: HttpRequest, queryset: QuerySet):
        def apply(action: ReplyAction, note: str) -> tuple[bool, str]:
            result = services.reply_close(action_id=action.pk, actor=request.user.get_username(),
                                        reason_code=self.close_reason, expected=self.state)
            return result.ok, result.message

        return confirmed_action(self, request, queryset, title="Close without reply", action="close", apply=apply)


# A Meta private reply must go out within 7 days of the comment (Instagram and Messenger both).


@admin.register(ReviewQueue)
class ReviewQueueAdmin(QueueAdmin):
    """What a reviewer decides: the comment, the copy that would go out, and Approve or Close."""

    state = DeliveryState.REVIEW_PENDING
    close_reason = "closed_by_reviewer"
    list_display = ("key", "comment", "copy_to_send", "source", "purpose", "age", "missing")
    list_display_links = ("key",)
    list_filter = ("event__source", ("purpose", DeclaredPurposeFilter))
    # What expires soonest first (a Meta private reply's 7-day window), then the oldest.
    ordering = (F("reply_deadline").asc(nulls_last=True), "id")
    actions = ["approve", "close"]
    change_form_template = "admin/replies/reviewqueue/change_form.html"
    change_list_template = "admin/replies/reviewqueue/change_list.html"

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # The copy approval would take now (the newest version): one subquery per page.
        # The event joined inside the subquery: see selectors.with_approval_needs.
        newest = ReplyCopy.objects.filter(source__events__event_key=OuterRef("event_id"),
                                          purpose=OuterRef("purpose")).order_by("-id")
        return super().get_queryset(request).annotate(
            copy_text_now=Subquery(newest.values("text")[:1]),
            copy_channel_now=Subquery(newest.values("channel")[:1]))

    def get_list_display(self, request: HttpRequest):
        # Retained buyer content only for staff with the permission.
        if request.user.has_perm("ingress.view_message_content"):
            return self.list_display
        return [f for f in self.list_display if f != "comment"]

    @admin.display(description="comment")
    def comment(self, obj: ReplyAction):
        text = obj.event.message_text
        if not text:
            return format_html('<span class="quiet">purged by the retention rule</span>')
        return format_html('<div class="conduit-comment">{}</div>', text if len(text) <= 280 else text[:279] + "…")

    @admin.display(description="copy that would be sent")
    def copy_to_send(self, obj: ReplyAction):
        text = getattr(obj, "copy_text_now", None)
        if text is None:
            return "-"
        return format_html('<div class="conduit-copy">{}</div><span class="quiet">{}</span>', text,
                           obj.copy_channel_now)

    @admin.display(description="age", ordering="created_at")
    def age(self, obj: ReplyAction):
        age = timesince(obj.created_at, depth=1)
        if obj.event.source.needs_reauth:
            age = format_html("{}<br><strong>waiting: the source needs re-authorisation</strong>", age)
        left = selectors.time_left(obj)
        if left == "expired":
            return format_html("{}<br><strong>private reply window closed</strong>", age)
        if left:
            return format_html("{}<br>{} left to reply privately", age, left)
        return age

    def has_approve_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("replies.approve_replyaction")

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "", extra_context=None):
        action = ReplyAction.objects.filter(pk=object_id).only("delivery_state").first()
        context = {
            "decide_buttons": action is not None and action.delivery_state == self.state
            and self.has_approve_permission(request),
            "changelist_url": reverse("admin:replies_reviewqueue_changelist"),
            **(extra_context or {}),
        }
        return super().change_view(request, object_id, form_url, context)

    @admin.action(permissions=["approve"], description="Approve selected replies")
    def approve(self, request: HttpRequest, queryset: QuerySet):
        # Each row's copy is read once: the text the page shows and the version it pins are one
        # copy's, whatever an owner saves meanwhile.
        copies: dict[int, ReplyCopy | None] = {}

        def shown(action: ReplyAction) -> ReplyCopy | None:
            if action.pk not in copies:
                copies[action.pk] = selectors.copy_current(source_id=action.event.source_id, purpose=action.purpose)
            return copies[action.pk]

        def outgoing(action: ReplyAction) -> str:
            """The exact text approval sends (the newest copy version), or why it cannot be approved."""
            copy = shown(action)
            if copy is None:
                return f"Cannot be approved: {selectors.no_copy_reason(action)}"
            return f"Will send as {copy.channel} (copy {copy.copy_version}):\n{copy.text}"

        def pin(action: ReplyAction) -> str:
            """The copy version the page shows: approval is refused if a newer one appears."""
            copy = shown(action)
            return copy.copy_version if copy is not None else ""

        def apply(action: ReplyAction, note: str, shown_version: str) -> tuple[bool, str]:
            result = services.reply_approve(action_id=action.pk, actor=request.user.get_username(),
                                            shown_copy_version=shown_version)
            return result.ok, result.message

        return confirmed_action(self, request, queryset, title="Approve replies", action="approve", apply=apply,
                                describe=outgoing, pin=pin)

    @admin.action(permissions=["approve"], description="Close selected without reply")
    def close(self, request: HttpRequest, queryset: QuerySet):
        return self._close(request, queryset)


class UnknownSendQueueAdmin(QueueAdmin):
    """Not registered here: reconcile registers its subclass with the replay verdict column."""

    state = DeliveryState.SEND_STATUS_UNKNOWN
    close_reason = "closed_by_operator"
    list_display = ("key", "event_short", "source", "purpose", "last_error_code", "attempt_count", "created_at")
    actions = ["confirm_sent", "authorize_retry", "close"]

    def has_resolve_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("replies.resolve_unknown_send")

    @admin.action(permissions=["resolve"], description="Confirm sent (with the provider's receipt id)")
    def confirm_sent(self, request: HttpRequest, queryset: QuerySet):
        def apply(action: ReplyAction, receipt: str) -> tuple[bool, str]:
            result = services.unknown_confirm_sent(
                action_id=action.pk, actor=request.user.get_username(), provider_reply_id=receipt
            )
            return result.ok, result.message

        return confirmed_action(
            self, request, queryset, title="Confirm sent", action="confirm_sent", apply=apply,
            note_required=True, note_label="Provider receipt id", single=True,
        )

    @admin.action(permissions=["resolve"], description="Look up the receipt, then authorize a retry")
    def authorize_retry(self, request: HttpRequest, queryset: QuerySet):
        def apply(action: ReplyAction, note: str) -> tuple[bool, str]:
            result = services.unknown_authorize_retry(action_id=action.pk, actor=request.user.get_username())
            return result.ok, result.message

        # Each row says what the lookup led to (marked SENT, or retry authorized), and only that.
        return confirmed_each(
            self, request, queryset, title="Authorize a retry under the same reply key",
            action="authorize_retry", apply=apply,
        )

    @admin.action(permissions=["resolve"], description="Close selected without reply")
    def close(self, request: HttpRequest, queryset: QuerySet):
        return self._close(request, queryset)


@admin.register(StrandedSendQueue)
class StrandedSendQueueAdmin(QueueAdmin):
    """FAILED_BEFORE_SEND that is exhausted (still retried at the capped interval) or stopped."""

    state = DeliveryState.FAILED_BEFORE_SEND
    close_reason = "closed_stranded_by_operator"
    list_display = ("key", "event_short", "source", "purpose", "last_error_code", "attempt_count",
                    "stranded", "last_attempt", "created_at")
    list_filter = ("event__source", ("purpose", DeclaredPurposeFilter), "last_error_code")
    fields = readonly_fields = ("stranded", "last_attempt", *ActionAdmin.fields, "next_attempt_at")
    actions = ["retry_now", "close"]

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # The "last evidence" column reads the prefetched latest attempt: no query per row.
        return selectors.with_last_attempt(super().get_queryset(request).filter(selectors.stranded_q()))

    def has_resolve_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("replies.resolve_stranded_send")

    @admin.display(description="why it waits for a person")
    def stranded(self, obj: ReplyAction) -> str:
        return selectors.stranded_why(obj)

    @admin.display(description="last evidence")
    def last_attempt(self, obj: ReplyAction) -> str:
        attempt = selectors.last_attempt(obj)
        if attempt is None:
            return "-"
        status = f" HTTP {attempt.http_status}" if attempt.http_status else ""
        return f"attempt {attempt.attempt_number} at {attempt.at:%Y-%m-%d %H:%M:%S}: {attempt.transport}{status}, {attempt.evidence}"

    @admin.action(permissions=["resolve"], description="Retry now under the same reply key")
    def retry_now(self, request: HttpRequest, queryset: QuerySet):
        def apply(action: ReplyAction, note: str) -> tuple[bool, str]:
            result = services.stranded_retry_now(action_id=action.pk, actor=request.user.get_username())
            return result.ok, result.message

        return confirmed_action(
            self, request, queryset, title="Retry now under the same reply key", action="retry_now", apply=apply,
        )

    @admin.action(permissions=["resolve"], description="Close selected without reply")
    def close(self, request: HttpRequest, queryset: QuerySet):
        return self._close(request, queryset)


class ReplyCopyForm(forms.ModelForm):
    class Meta:
        model = ReplyCopy
        fields = ["source", "purpose", "channel", "text"]


@admin.register(ReplyCopy)
class ReplyCopyAdmin(admin.ModelAdmin):
    """Approved copy: adding a text makes a new version; versions are never edited or deleted."""

    form = ReplyCopyForm
    list_display = ("source", "purpose", "copy_version", "channel", "created_by", "created_at")
    list_filter = ("source", "purpose")

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: ReplyCopy, form: forms.ModelForm, change: bool) -> None:
        try:
            copy, _ = services.reply_copy_create(
                source_id=obj.source_id, purpose=obj.purpose, channel=obj.channel, text=obj.text,
                actor=request.user.get_username(),
            )
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None
        obj.pk = copy.pk
        obj.copy_version = copy.copy_version

    def get_form(self, request: HttpRequest, obj: Any = None, **kwargs):
        form = super().get_form(request, obj, **kwargs)

        def clean(form_self) -> dict:
            data = forms.ModelForm.clean(form_self)
            source, purpose = data.get("source"), data.get("purpose", "")
            if source and purpose not in source.purposes:
                raise forms.ValidationError(f"{purpose!r} is not a declared purpose of {source.name}")
            return data

        form.clean = clean
        return form


class ReplyRouteForm(forms.ModelForm):
    transport_name = forms.ChoiceField(choices=[(name, name) for name in sorted(TRANSPORTS)])
    target_url = forms.URLField(required=False, assume_scheme="http", help_text=ReplyRoute._meta.get_field(
        "target_url").help_text)

    class Meta:
        model = ReplyRoute
        fields = ["source", "purpose", "transport_name", "target_url", "live_send_enabled"]


@admin.register(SendBudget)
class SendBudgetAdmin(admin.ModelAdmin):
    """Each account's send budget per purpose; the pause is the sender's to set."""

    list_display = ("source", "purpose", "limit", "window_seconds", "paused_until", "pause_reason")
    list_filter = ("source", "purpose")
    list_select_related = ("source",)
    fields = ("source", "purpose", "limit", "window_seconds", "paused_until", "pause_reason")
    readonly_fields = ("paused_until", "pause_reason")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple:
        # Which account and purpose a budget is for is fixed once made.
        return (*self.readonly_fields, *(("source", "purpose") if obj is not None else ()))


@admin.register(ReplyRoute)
class ReplyRouteAdmin(admin.ModelAdmin):
    """Where each source's replies of each purpose go; the live flag is the owners' alone."""

    form = ReplyRouteForm
    list_display = ("source", "purpose", "transport_name", "target_url", "live_send_enabled", "updated_at")
    list_filter = ("source", "transport_name", "live_send_enabled")
    list_select_related = ("source",)
    readonly_fields = ("created_at", "updated_at")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple:
        fields = self.readonly_fields
        if obj is not None:
            fields = (*fields, "source", "purpose")  # a route is its (source, purpose)
        # Only owners may enable live sending for a route.
        if not request.user.has_perm("replies.enable_live_send"):
            fields = (*fields, "live_send_enabled")
        return fields

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # change a route instead: pending replies of its purpose go where it says

    def save_model(self, request: HttpRequest, obj: ReplyRoute, form: forms.ModelForm, change: bool) -> None:
        editable = {"transport_name", "target_url", "live_send_enabled"}
        values = {f: v for f, v in form.cleaned_data.items() if f in editable}
        try:
            if change:
                route = services.reply_route_update(route_id=obj.pk, changes=values)
            else:
                live = values.pop("live_send_enabled", False)
                route, _ = services.reply_route_declare(source_id=obj.source_id, purpose=obj.purpose, **values)
                if live:
                    route = services.reply_route_update(route_id=route.pk, changes={"live_send_enabled": True})
        except (ValueError, services.RouteConflict) as exc:
            raise forms.ValidationError(str(exc)) from None
        obj.pk = route.pk
        obj.refresh_from_db()

    def get_form(self, request: HttpRequest, obj: Any = None, **kwargs):
        form = super().get_form(request, obj, **kwargs)

        def clean(form_self) -> dict:
            data = forms.ModelForm.clean(form_self)
            source = data.get("source") or getattr(form_self.instance, "source", None)
            purpose = data.get("purpose") or form_self.instance.purpose
            if source and purpose not in source.purposes:
                raise forms.ValidationError(f"{purpose!r} is not a declared purpose of {source.name}")
            transport = data.get("transport_name") or form_self.instance.transport_name
            if transport in TRANSPORTS and "target_url" in form_self.fields:
                refusal = services.route_url_refusal(transport, data.get("target_url", ""))
                if refusal:
                    form_self.add_error("target_url", refusal)
            return data

        form.clean = clean
        return form


@admin.register(SendAttempt)
class SendAttemptAdmin(LedgerAdmin):
    list_display = ("action", "attempt_number", "at", "transport", "http_status", "evidence")
    list_filter = ("transport",)


@admin.register(CanarySinkRecord)
class CanarySinkAdmin(LedgerAdmin):
    list_display = ("reply_key", "purpose", "channel", "copy_version", "transport_name", "at")
