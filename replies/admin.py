"""The reply-action ledger in the admin (read-only; the review queue comes with the sender)."""

from django.contrib import admin

from conduit.admin import LedgerAdmin, LedgerInline
from replies.models import ReplyAction, ReplyTransition


class ReplyTransitionInline(LedgerInline):
    model = ReplyTransition
    fields = readonly_fields = ("at", "prior_state", "next_state", "actor", "reason_code", "refused")


@admin.register(ReplyAction)
class ReplyActionAdmin(LedgerAdmin):
    list_display = ("reply_key", "event", "purpose", "approval_state", "delivery_state", "created_at")
    list_filter = ("event__source", "purpose", "delivery_state", "canary")
    search_fields = ("=reply_key", "=event__event_key")
    inlines = [ReplyTransitionInline]
