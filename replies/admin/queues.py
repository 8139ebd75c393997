"""The queues a person works: review, unknown sends and stranded sends, each action confirmed."""

from django.contrib import admin, messages
from django.db.models import F, Prefetch, QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.timesince import timesince

from conduit.admin import confirmed_action
from conduit.content import MESSAGE_CONTENT
from conduit.providers.transport import TEMPLATE
from replies import selectors, services
from replies.admin.inbox import CLOSE_REASONS, InboxViews
from replies.admin.ledgers import ActionAdmin, DeclaredPurposeFilter
from replies.models import DeliveryState, ReplyAction, ReplyCopy, ReviewQueue, StrandedSendQueue

CONFIRM_SENT_HELP = (
    "The platform's id for the reply you found in the conversation (in the reply's link or details on the "
    'platform). Don\'t have one? Cancel and use "Look up the receipt, then authorize a retry": where the '
    "platform can be asked, Conduit finds the receipt itself and marks the reply sent without resending."
)


def confirmed_each(
    modeladmin: admin.ModelAdmin,
    request: HttpRequest,
    queryset: QuerySet,
    *,
    title: str,
    action: str,
    apply,
    note_required: bool = False,
    **options,
) -> HttpResponse | None:
    """`confirmed_action`, except that on confirm each row's outcome is its own message and
    nothing else is said.

    For an action whose rows can end differently (the lookup before a retry marks one SENT and
    authorizes another), a count of "<title>: N done" beside each outcome claims what did not
    happen ("marked SENT, nothing resent" beside "Authorize a retry ...: 1 done").
    The confirmation page is confirmed_action's own.
    """
    note = request.POST.get("note", "").strip()
    if request.POST.get("confirm") == "yes" and (note or not note_required):
        for obj in queryset:
            ok, message = apply(obj, note)
            modeladmin.message_user(request, f"{obj}: {message}", messages.SUCCESS if ok else messages.ERROR)
        return None
    return confirmed_action(
        modeladmin,
        request,
        queryset,
        title=title,
        action=action,
        apply=apply,
        note_required=note_required,
        **options,
    )


class QueueAdmin(ActionAdmin):
    state = ""
    close_reason = ""
    change_list_template = "admin/conduit/queue_change_list.html"
    empty_text = "Nothing is waiting here."

    def changelist_view(self, request: HttpRequest, extra_context=None):
        return super().changelist_view(request, {"empty_text": self.empty_text, **(extra_context or {})})

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).filter(delivery_state=self.state)

    def _close(self, request: HttpRequest, queryset: QuerySet):
        def apply(action: ReplyAction, note: str) -> tuple[bool, str]:
            result = services.reply_close(
                action_id=action.pk,
                actor=request.user.get_username(),
                reason_code=self.close_reason,
                expected=self.state,
            )
            return result.ok, result.message

        return confirmed_action(
            self, request, queryset, title="Close without reply", action="close", apply=apply
        )


# A Meta private reply must go out within 7 days of the comment (Instagram and Messenger both).


@admin.register(ReviewQueue)
class ReviewQueueAdmin(InboxViews, QueueAdmin):
    """What a reviewer decides: the comment, the copy that would go out, and Approve or Close."""

    state = DeliveryState.REVIEW_PENDING
    close_reason = "closed_by_reviewer"
    empty_text = "Nothing is waiting for review: every reply has been decided."
    list_display = ("key", "comment", "copy_to_send", "source", "purpose", "age", "missing")
    list_display_links = ("key",)
    list_filter = ("event__source", ("purpose", DeclaredPurposeFilter))
    # What expires soonest first (a Meta private reply's 7-day window), then the oldest.
    ordering = (F("reply_deadline").asc(nulls_last=True), "id")
    actions = ["approve", "close"]
    change_form_template = "admin/replies/reviewqueue/change_form.html"
    change_list_template = "admin/replies/reviewqueue/change_list.html"

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # Every copy of the page's campaigns, in one query for the page: each row's current set and
        # its variant are picked from them (selectors.variant_now, as copy_for picks).
        return (
            super()
            .get_queryset(request)
            .prefetch_related(
                Prefetch(
                    "campaign__copies",
                    queryset=ReplyCopy.objects.order_by("purpose", "copy_set", "variant"),
                    to_attr="copies_all",
                )
            )
        )

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
        return format_html(
            '<div class="conduit-comment">{}</div>', text if len(text) <= 280 else text[:279] + "…"
        )

    @admin.display(description="copy that would be sent")
    def copy_to_send(self, obj: ReplyAction):
        copy = selectors.variant_now(obj, obj.campaign.copies_all)
        if copy is None:
            return "-"
        return format_html(
            '<div class="conduit-copy">{}</div><span class="quiet">{} · {} · {}</span>',
            copy.text,
            copy.channel,
            copy.copy_version,
            obj.campaign.name,
        )

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
        action = self.get_object(request, object_id)  # None for an id that is no row's
        context = {
            "decide_buttons": action is not None
            and action.delivery_state == self.state
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
                copies[action.pk] = selectors.copy_for(action)
            return copies[action.pk]

        def outgoing(action: ReplyAction):
            """The comment and the exact text approval sends (the newest copy version), side by
            side, or why it cannot be approved."""
            copy = shown(action)
            if copy is None:
                return beside(request, action, f"Cannot be approved: {selectors.no_copy_reason(action)}")
            form, until = selectors.outgoing_form(action, copy)
            if not form:
                return beside(
                    request,
                    action,
                    f"Cannot be approved: the free-form window closed at {until:%Y-%m-%d %H:%M} UTC "
                    f"and copy {copy.copy_version} has no template",
                )
            if form == TEMPLATE:
                return beside(
                    request,
                    action,
                    format_html(
                        "<strong>Will send as template {} ({}) (copy {}):</strong>"
                        "<div>the free-form window closed at {} UTC; the text is not sent</div>"
                        '<span class="quiet">campaign {}</span>',
                        copy.template["name"],
                        copy.template["language"],
                        copy.copy_version,
                        f"{until:%Y-%m-%d %H:%M}",
                        action.campaign.name,
                    ),
                )
            window = f"; free-form text until {until:%Y-%m-%d %H:%M} UTC" if until is not None else ""
            return beside(
                request,
                action,
                format_html(
                    '<strong>Will send as {} (copy {}):</strong><div>{}</div><span class="quiet">campaign {}{}</span>',
                    copy.channel,
                    copy.copy_version,
                    copy.text,
                    action.campaign.name,
                    window,
                ),
            )

        def pin(action: ReplyAction) -> str:
            """The copy version the page shows: approval is refused if a newer one appears."""
            copy = shown(action)
            return copy.copy_version if copy is not None else ""

        def apply(action: ReplyAction, note: str, shown_version: str) -> tuple[bool, str]:
            result = services.reply_approve(
                action_id=action.pk, actor=request.user.get_username(), shown_copy_version=shown_version
            )
            return result.ok, result.message

        return confirmed_action(
            self,
            request,
            queryset,
            title="Approve replies",
            action="approve",
            apply=apply,
            describe=outgoing,
            pin=pin,
        )

    @admin.action(permissions=["approve"], description="Close selected without reply")
    def close(self, request: HttpRequest, queryset: QuerySet):
        return self.close_with_reason(request, queryset)

    def close_with_reason(self, request: HttpRequest, queryset: QuerySet):
        """Close without reply, the reviewer choosing why (kept as the history's reason code)."""

        def apply(action: ReplyAction, reason: str) -> tuple[bool, str]:
            result = services.reply_close(
                action_id=action.pk,
                actor=request.user.get_username(),
                reason_code=reason,
                expected=self.state,
            )
            return result.ok, result.message

        return confirmed_action(
            self,
            request,
            queryset,
            title="Close without reply",
            action="close",
            apply=apply,
            describe=lambda action: beside(request, action, "Nothing will be sent."),
            note_required=True,
            note_label="Why it is closed",
            note_choices=CLOSE_REASONS,
        )


def beside(request: HttpRequest, action: ReplyAction, outgoing):
    """What the buyer wrote (with the content permission) beside what will go out."""
    event = action.event
    if not request.user.has_perm(MESSAGE_CONTENT):
        said = format_html(
            '<span class="quiet">{}</span>', "(the comment is shown only with the content permission)"
        )
    elif not event.message_text:
        said = format_html('<span class="quiet">{}</span>', "(purged by the retention rule)")
    else:
        said = format_html(
            "<strong>{} wrote:</strong><div>{}</div>", event.sender_handle or "The buyer", event.message_text
        )
    return format_html(
        '<div class="conduit-beside"><div class="conduit-they">{}</div><div class="conduit-we">{}</div></div>',
        said,
        outgoing,
    )


class UnknownSendQueueAdmin(QueueAdmin):
    """Not registered here: reconcile registers its subclass with the replay verdict column."""

    state = DeliveryState.SEND_STATUS_UNKNOWN
    close_reason = "closed_by_operator"
    empty_text = "No send is in doubt: every attempted reply is known sent or not sent."
    list_display = (
        "key",
        "event_short",
        "source",
        "purpose",
        "last_error_code",
        "attempt_count",
        "created_at",
    )
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
            self,
            request,
            queryset,
            title="Confirm sent",
            action="confirm_sent",
            apply=apply,
            note_required=True,
            note_label="Provider receipt id",
            single=True,
            note_help=CONFIRM_SENT_HELP,
        )

    @admin.action(permissions=["resolve"], description="Look up the receipt, then authorize a retry")
    def authorize_retry(self, request: HttpRequest, queryset: QuerySet):
        def apply(action: ReplyAction, note: str) -> tuple[bool, str]:
            result = services.unknown_authorize_retry(action_id=action.pk, actor=request.user.get_username())
            return result.ok, result.message

        # Each row says what the lookup led to (marked SENT, or retry authorized), and only that.
        return confirmed_each(
            self,
            request,
            queryset,
            title="Authorize a retry under the same reply key",
            action="authorize_retry",
            apply=apply,
        )

    @admin.action(permissions=["resolve"], description="Close selected without reply")
    def close(self, request: HttpRequest, queryset: QuerySet):
        return self._close(request, queryset)


@admin.register(StrandedSendQueue)
class StrandedSendQueueAdmin(QueueAdmin):
    """FAILED_BEFORE_SEND that is exhausted (still retried at the capped interval) or stopped."""

    state = DeliveryState.FAILED_BEFORE_SEND
    close_reason = "closed_stranded_by_operator"
    empty_text = "No reply is stuck before sending."
    list_display = (
        "key",
        "event_short",
        "source",
        "purpose",
        "last_error_code",
        "attempt_count",
        "stranded",
        "last_attempt",
        "created_at",
    )
    list_filter = ("event__source", ("purpose", DeclaredPurposeFilter), "last_error_code")
    lead_fields = ("stranded", "last_attempt", *ActionAdmin.lead_fields)
    detail_fields = (*ActionAdmin.detail_fields, "next_attempt_at")
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
            self,
            request,
            queryset,
            title="Retry now under the same reply key",
            action="retry_now",
            apply=apply,
        )

    @admin.action(permissions=["resolve"], description="Close selected without reply")
    def close(self, request: HttpRequest, queryset: QuerySet):
        return self._close(request, queryset)
