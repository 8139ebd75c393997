"""Scan state in the admin, failing scans filterable."""

from django.contrib import admin, messages
from django.http import HttpRequest

from reconcile import services
from reconcile.models import ScanState


class FailingScanFilter(admin.SimpleListFilter):
    """Sources whose last page read failed (the front page's "failed scans")."""

    title = "last page"
    parameter_name = "failing"

    def lookups(self, request, model_admin):
        return [("yes", "failed"), ("credentials", "failed: token to re-authorise")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.exclude(last_error_code="")
        if self.value() == "credentials":
            return queryset.exclude(last_error_code="").filter(last_error_class="credentials")
        return queryset


@admin.register(ScanState)
class ScanStateAdmin(admin.ModelAdmin):
    """Each source's scan: checkpoint, active scan, schedule, last error. Operators ask for a scan here."""

    list_display = (
        "source",
        "checkpoint_until",
        "last_completed_at",
        "active_run",
        "next_due_at",
        "error",
        "failures",
        "interval_seconds",
    )
    list_select_related = ("source", "active_run")
    list_filter = (FailingScanFilter,)
    fields = (
        "source",
        "interval_seconds",
        "checkpoint_until",
        "checkpoint_scan_id",
        "last_completed_at",
        "last_run",
        "active_run",
        "next_due_at",
        "requested_at",
        "requested_by",
        "lease_expires_at",
        "failures",
        "last_error_class",
        "last_error_code",
        "last_error_message",
        "last_error_at",
    )
    readonly_fields = tuple(f for f in fields if f != "interval_seconds")
    actions = ["reconcile_now"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    @admin.display(description="last error")
    def error(self, obj: ScanState) -> str:
        return f"{obj.last_error_class}/{obj.last_error_code}" if obj.last_error_code else "-"

    @admin.action(description="Reconcile now", permissions=["change"])
    def reconcile_now(self, request, queryset):
        for state in queryset.select_related("source"):
            services.reconcile_request(source=state.source, actor=request.user.get_username())
        self.message_user(
            request,
            "Requested: each source stays due until a scan that starts now completes.",
            messages.SUCCESS,
        )
