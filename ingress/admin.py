"""Ingress in the admin: sources (editable), event, delivery and quarantine ledgers (read-only)."""

from typing import Any, Callable
from urllib.parse import urlencode

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from conduit.admin import HistoryInline, LedgerAdmin, confirmed_action
from conduit.providers.registry import ADAPTERS, get_adapter
from ingress import services
from ingress.admin_connect import SourceConnectViews
from ingress.admin_connection import SourceConnectionActions
from ingress.admin_events import InboundEventAdmin  # noqa: F401  (registers the event ledger)
from ingress.models import (
    DeletionRequest,
    Delivery,
    IgnoredUpdate,
    MessageStatus,
    QuarantineReceipt,
    QuarantineState,
    QuarantineTransition,
    SelfAuthoredItem,
    Source,
    UndeliveredMessage,
)
from ingress.selectors import access_token_words, source_identity_holder


class CommaList(forms.CharField):
    def prepare_value(self, value: Any) -> Any:
        return ", ".join(value) if isinstance(value, list) else value

    def to_python(self, value: Any) -> list[str]:
        return [part.strip() for part in (value or "").split(",") if part.strip()]


class SourceForm(forms.ModelForm):
    adapter = forms.ChoiceField(choices=[(name, name) for name in sorted(ADAPTERS)])
    event_types = CommaList(help_text="Comma-separated allowlist, e.g. comment.created")
    purposes = CommaList(required=False, help_text="Comma-separated, e.g. public_ack, private_delivery")
    source_url = forms.URLField(
        required=False,
        assume_scheme="http",
        help_text="Base URL reconciliation reads the source's pages from.",
    )

    class Meta:
        model = Source
        fields = ["name", *services.REGISTERED_FIELDS]

    def clean(self) -> dict:
        data = super().clean()
        # The same refusals registration and source_update give, shown on their fields.
        named = Source(
            **{
                f: data.get(f, getattr(self.instance, f))
                for f in ("adapter", "source_url", *services.CREDENTIAL_FIELDS)
            }
        )
        for field, refusal in services.source_door_refusals(named).items():
            if field in self.fields and field not in self._errors:
                self.add_error(field, refusal)
        return data

    def validate_unique(self) -> None:
        # source_system is derived from the adapter, so check the identity here.
        super().validate_unique()
        adapter = self.cleaned_data.get("adapter", "")
        account = self.cleaned_data.get("account_ref")
        if adapter in ADAPTERS and account:
            clash = source_identity_holder(adapter=adapter, account_ref=account, other_than=self.instance.pk)
            if clash:
                self.add_error("account_ref", f"This account is already registered as {clash.name}.")


# Apps built on ingress add rows to a source's page here: each hook takes the source and gives
# (label, words) rows (reconcile adds docs/concepts/reconciliation.md#inspection); ingress imports
# none of them.
SOURCE_INSPECTIONS: list[Callable[[Source], list[tuple[str, str]]]] = []


class AttentionFilter(admin.SimpleListFilter):
    """Sources a person must look at: Meta no longer delivers their notifications, or their stored
    access token expires within 7 days."""

    title = "needs attention"
    parameter_name = "attention"

    def lookups(self, request, model_admin):
        return [("yes", "subscription problem"), ("token", "access token expiring")]

    def queryset(self, request, queryset):
        from ingress.services.credentials import credentials_expiring

        if self.value() == "token":
            return queryset.filter(pk__in=credentials_expiring().values("source_id"))
        return queryset.exclude(subscription_problem="") if self.value() == "yes" else queryset


@admin.register(Source)
class SourceAdmin(SourceConnectViews, SourceConnectionActions, admin.ModelAdmin):
    form = SourceForm
    # What a person decides from, in 1366 px; the rules version and the rest are on its page.
    list_display = ("name", "adapter", "account_ref", "attention", "canary", "updated_at")
    list_filter = (AttentionFilter, "adapter", "canary")

    @admin.display(description="needs attention")
    def attention(self, obj: Source) -> str:
        problems = []
        if obj.needs_reauth:
            problems.append("its access token must be re-authorised")
        if obj.subscription_problem:
            problems.append(f"notifications: {obj.subscription_problem}")
        return "; ".join(problems) or "-"

    search_fields = ("name", "account_ref")
    readonly_fields = (
        "source_system",
        "trigger_rule_version",
        "connected_at",
        "needs_reauth",
        "connection_authorized_by",
        "connection_authorized_at",
        "created_at",
        "updated_at",
        "access_token",
        "declared_families",
        "inspection",
    )
    actions = ["reauthorized", "connection_authorize", "subscription_verify", "account_disconnect"]

    @admin.display(description="Access token")
    def access_token(self, obj: Source) -> str:
        """The stored token's last four characters, scopes and expiry; never the token."""
        return access_token_words(obj) if obj is not None and obj.pk else "-"

    @admin.display(description="Declared event families")
    def declared_families(self, obj: Source) -> str:
        """Each allowlisted family's recovery by read-back and its loss limitation, and whose
        receipts reconciliation compares: the platform's own declaration, read, never edited."""
        if obj is None or not obj.pk or obj.adapter not in ADAPTERS:
            return "-"
        adapter = get_adapter(obj.adapter)
        rows = [
            format_html(
                "<li><code>{}</code>: recovery <b>{}</b>, {}{}</li>",
                f["event_type"],
                f["recovery"],
                "plans no reply" if f["answers"] == "nothing" else f"a reply answers the {f['answers']}",
                f": {f['limitation']}" if f["limitation"] else "",
            )
            for f in (adapter.family(t).as_dict() for t in obj.event_types)
        ]
        transports = adapter.receipt_transports
        compared = "every transport" if transports is None else ", ".join(sorted(transports))
        return format_html(
            "<ul>{}</ul><p>Receipts compared for: {} (other routes' sends are not compared, "
            "never reported missing).</p>",
            format_html_join("", "{}", ((r,) for r in rows)),
            compared,
        )

    @admin.display(description="Inspection")
    def inspection(self, obj: Source) -> str:
        """What the apps built on ingress report of the source (reconciliation's checkpoint, active
        generation and cursor, last failure with its message, limited recovery, review queue):
        read from the database, never the provider."""
        if obj is None or not obj.pk:
            return "-"
        rows = [row for hook in SOURCE_INSPECTIONS for row in hook(obj)]
        if not rows:
            return "-"
        return format_html("<table>{}</table>", format_html_join("", "<tr><th>{}</th><td>{}</td></tr>", rows))

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple:
        fields = self.readonly_fields
        if obj is not None:
            # Fixed at registration (docs/platforms/sources.md#immutable); source_update refuses them too.
            fields = (*fields, *services.IMMUTABLE_FIELDS)
        return fields

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a source with history is renamed, never deleted

    def save_model(self, request: HttpRequest, obj: Source, form: forms.ModelForm, change: bool) -> None:
        values = {f: form.cleaned_data[f] for f in SourceForm.Meta.fields if f in form.cleaned_data}
        if change:
            updated = services.source_update(source_id=obj.pk, changes=values)
        else:
            updated, _ = services.source_register(**values)
        obj.pk = updated.pk
        obj.refresh_from_db()


@admin.register(Delivery)
class DeliveryAdmin(LedgerAdmin):
    list_display = ("delivery_id", "source", "seen_count", "first_received_at", "last_received_at")
    list_filter = ("source",)
    search_fields = ("=delivery_id",)


@admin.register(SelfAuthoredItem)
class SelfAuthoredItemAdmin(LedgerAdmin):
    """The account's own comments and message echoes: receipt evidence, never events."""

    list_display = ("provider_id", "source", "kind", "parent_ref", "occurred_at", "seen_count")
    list_filter = ("source", "kind")
    search_fields = ("=provider_id", "=parent_ref", "=correlation")


@admin.register(IgnoredUpdate)
class IgnoredUpdateAdmin(LedgerAdmin):
    """Updates outside a source's allowlist, counted by name."""

    list_display = ("name", "source", "count", "last_seen_at")
    list_filter = ("source",)


@admin.register(DeletionRequest)
class DeletionRequestAdmin(LedgerAdmin):
    """The data deletion requests a platform relayed: codes, times and counts (no person's id)."""

    list_display = (
        "confirmation_code",
        "app_id",
        "status",
        "events_blanked",
        "sources_disconnected",
        "received_at",
    )
    list_filter = ("app_id", "status")
    search_fields = ("=confirmation_code",)


class QuarantineTransitionInline(HistoryInline):
    model = QuarantineTransition
    states = dict(QuarantineState.choices)


@admin.register(QuarantineReceipt)
class QuarantineReceiptAdmin(LedgerAdmin):
    list_display = (
        "receipt_id",
        "source",
        "reason_code",
        "authenticated",
        "state",
        "received_at",
        "reviewed_by",
    )
    list_filter = ("source", "state", "reason_code", "authenticated")
    search_fields = ("=receipt_id", "=event_key", "=delivery_id")
    inlines = [QuarantineTransitionInline]
    actions = ["dismiss", "mark_corrected"]

    def has_review_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("ingress.review_quarantinereceipt")

    def _review(self, request: HttpRequest, queryset: QuerySet, outcome: str, title: str, action: str):
        def apply(receipt: QuarantineReceipt, note: str) -> tuple[bool, str]:
            outcome_ = services.quarantine_review(
                receipt_id=receipt.pk, outcome=outcome, actor=request.user.get_username(), note=note
            )
            return outcome_.applied, outcome_.message

        return confirmed_action(
            self,
            request,
            queryset,
            title=title,
            action=action,
            apply=apply,
            note_required=outcome == QuarantineState.CORRECTED,
            note_label="Review note",
        )

    @admin.action(permissions=["review"], description="Dismiss selected receipts")
    def dismiss(self, request: HttpRequest, queryset: QuerySet):
        return self._review(request, queryset, QuarantineState.DISMISSED, "Dismiss receipts", "dismiss")

    @admin.action(permissions=["review"], description="Mark selected receipts corrected")
    def mark_corrected(self, request: HttpRequest, queryset: QuerySet):
        return self._review(
            request, queryset, QuarantineState.CORRECTED, "Mark receipts corrected", "mark_corrected"
        )


@admin.register(MessageStatus)
class MessageStatusAdmin(LedgerAdmin):
    """What the platform reported of each message the account sent: receipt evidence."""

    list_display = ("provider_id", "source", "status", "error_code", "occurred_at", "seen_count")
    list_filter = ("source", "status")
    search_fields = ("=provider_id", "=correlation")


@admin.register(UndeliveredMessage)
class UndeliveredMessageAdmin(LedgerAdmin):
    """Messages the platform accepted and then could not deliver: the reply stays sent, and a
    person decides what to do (write to the buyer another way, or leave it)."""

    list_display = ("provider_id", "source", "failure", "occurred_at", "reply")
    list_filter = ("source",)
    search_fields = ("=provider_id", "=correlation")
    actions = ["mark_reviewed"]

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).filter(status="failed", reviewed_at__isnull=True)

    @admin.display(description="what the platform said")
    def failure(self, obj: MessageStatus) -> str:
        return get_adapter(obj.source.adapter).delivery_failure(obj.error_code)

    @admin.display(description="reply")
    def reply(self, obj: MessageStatus):
        if not obj.correlation:
            return "not sent by Conduit"
        url = reverse("admin:replies_replyaction_changelist") + "?" + urlencode({"q": obj.correlation[:64]})
        return format_html('<a href="{}">{}</a>', url, obj.correlation[:12])

    def has_review_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("ingress.review_undeliveredmessage")

    @admin.action(description="Mark reviewed", permissions=["review"])
    def mark_reviewed(self, request: HttpRequest, queryset: QuerySet):
        def apply(obj: MessageStatus, note: str) -> tuple[bool, str]:
            done = services.message_status_review(status_id=obj.pk, actor=request.user.get_username())
            return done, f"{obj.provider_id}: " + ("reviewed" if done else "already reviewed")

        return confirmed_action(
            self, request, queryset, title="Mark reviewed", action="mark_reviewed", apply=apply
        )
