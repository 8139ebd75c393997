"""The event ledger in the admin: each event in words first, its contract's fields under Details."""

from typing import Any, Callable

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.timesince import timesince

from conduit.admin import HistoryInline, LedgerAdmin, short_key
from conduit.labels import state_html
from conduit.search import PersonSearchMixin, event_ids, may_search_words
from ingress.models import EventState, EventTransition, InboundEvent, ReconcileStatus


class EventTransitionInline(HistoryInline):
    model = EventTransition
    states = {**dict(EventState.choices), **dict(ReconcileStatus.choices)}


# The event's retained content: shown only as "they wrote", with its permission.
CONTENT_COLUMNS = ("message_text", "sender_handle")


def event_title(event: InboundEvent) -> str:
    """What the event is, for its page's title."""
    if event.event_type.startswith("comment"):
        return f"Comment on post {event.conversation_ref} ({event.event_type})"
    return f"Message ({event.event_type})"


# Apps built on ingress add their rows to an event's page here, in their AppConfig.ready
# (replies adds its actions); ingress imports none of them.
EVENT_INLINES: list[type[admin.options.InlineModelAdmin]] = []
# ... and name what an event's trigger_campaign refers to (replies names its campaign).
EVENT_CAMPAIGN_NAMES: list[Callable[[int], str]] = []


@admin.register(InboundEvent)
class InboundEventAdmin(PersonSearchMixin, LedgerAdmin):
    # The columns a person decides from, in 1366 px: the key shortened (in full on hover and
    # on the event's page, and searchable by any part).
    list_display = (
        "key",
        "source",
        "kind",
        "event_state",
        "matched",
        "checked_short",
        "seen_count",
        "received",
    )
    # By date through a filter, not date_hierarchy: the hierarchy reads MIN/MAX and the DISTINCT
    # days of the whole (filtered) ledger on every page view, a full scan at a million events.
    list_filter = (
        "source",
        "event_state",
        "canary",
        "trigger_match",
        "reconcile_status",
        ("first_received_at", admin.DateFieldListFilter),
    )
    # What a person reads first; the contract's fields and counters folded under "Details".
    lead_fields = ("they_wrote", "state", "on_post", "campaign_matched", "checked", "occurred_at")
    detail_fields = (
        "event_key",
        "source",
        "source_system",
        "source_account_ref",
        "source_event_id",
        "event_type",
        "conversation_ref",
        "message_ref",
        "sender_ref",
        "parent_ref",
        "occurred_at_original",
        "payload_hash",
        "contract_version",
        "canary",
        "trigger_match",
        "trigger_rule_version",
        "first_received_at",
        "last_received_at",
        "seen_count",
        "reconciled_at",
        "content_purged_at",
    )

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None):
        return (*self.lead_fields, *self.detail_fields)

    def get_fieldsets(self, request: HttpRequest, obj: Any = None):
        readable = set(
            self.get_fields(request, obj)
        )  # conduit.content's guard: no content without its permission
        lead = [f for f in self.lead_fields if f != "they_wrote" or may_search_words(request.user)]
        details = [f for f in self.detail_fields if f in readable]
        return [(None, {"fields": lead}), ("Details", {"fields": details, "classes": ("collapse",)})]

    def get_fields(self, request: HttpRequest, obj: Any = None):
        return [f for f in (*self.lead_fields, *self.detail_fields) if f not in CONTENT_COLUMNS]

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "", extra_context=None):
        event = self.get_object(request, object_id)  # None for an id that is no row's
        context = {"title": event_title(event), "subtitle": None} if event is not None else {}
        return super().change_view(request, object_id, form_url, {**context, **(extra_context or {})})

    @admin.display(description="event", ordering="event_key")
    def key(self, obj: InboundEvent):
        # The platform's own id where it sent one (what a person has in front of them), else the
        # key's start; the whole key on hover and on the event's page.
        return format_html(
            '<span title="{}">{}</span>', obj.event_key, obj.source_event_id or short_key(obj.event_key)
        )

    @admin.display(description="type", ordering="event_type")
    def kind(self, obj: InboundEvent) -> str:
        return obj.event_type

    @admin.display(description="matched", boolean=True, ordering="trigger_match")
    def matched(self, obj: InboundEvent) -> bool:
        return obj.trigger_match

    @admin.display(description="checked", ordering="reconcile_status")
    def checked_short(self, obj: InboundEvent) -> str:
        return obj.get_reconcile_status_display()

    @admin.display(description="received", ordering="last_received_at")
    def received(self, obj: InboundEvent):
        return format_html(
            '<span title="{}">{} ago</span>',
            obj.last_received_at.isoformat(timespec="seconds"),
            timesince(obj.last_received_at, depth=1),
        )

    @admin.display(description="they wrote")
    def they_wrote(self, obj: InboundEvent):
        if not obj.message_text:
            return "purged by the retention rule" if obj.content_purged_at else "(no text)"
        return format_html(
            '<strong>{}</strong><div class="conduit-said">{}</div>',
            obj.sender_handle or "The buyer",
            obj.message_text,
        )

    @admin.display(description="state")
    def state(self, obj: InboundEvent):
        return state_html(obj.get_event_state_display(), obj.event_state)

    @admin.display(description="checked against the platform")
    def checked(self, obj: InboundEvent):
        return state_html(obj.get_reconcile_status_display(), obj.reconcile_status)

    @admin.display(description="on post")
    def on_post(self, obj: InboundEvent) -> str:
        return obj.conversation_ref

    @admin.display(description="campaign matched")
    def campaign_matched(self, obj: InboundEvent) -> str:
        if obj.trigger_campaign is None:
            return "none (no active campaign matched it)"
        name = (
            EVENT_CAMPAIGN_NAMES[0](obj.trigger_campaign)
            if EVENT_CAMPAIGN_NAMES
            else f"#{obj.trigger_campaign}"
        )
        return f"{name} (version {obj.trigger_campaign_version}; rules version {obj.trigger_rule_version})"

    def get_inlines(self, request: HttpRequest, obj: Any) -> list:
        return [*EVENT_INLINES, EventTransitionInline]

    def search_rows(self, queryset: QuerySet, term: str, *, words: bool) -> QuerySet:
        return queryset.filter(pk__in=event_ids(InboundEvent.objects.all(), term, words=words))
