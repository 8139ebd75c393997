"""Scan state in the admin, failing scans filterable."""

from django.contrib import admin, messages
from django.http import HttpRequest
from django.utils.formats import localize
from django.utils.timezone import localtime

from reconcile import services
from reconcile.admin.words import label
from reconcile.models import RunState, ScanState


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

    # The columns a person decides from; the checkpoint, counts and codes are on each source's page.
    list_display = ("source", "last_completed_at", "scanning_now", "next_due_at", "error")
    list_select_related = ("source", "active_run")
    list_filter = (FailingScanFilter,)
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "source",
                    "next_scan",
                    "last_completed_at",
                    "scanning_now",
                    "next_due_at",
                    "interval_seconds",
                    "requested_at",
                    "requested_by",
                    "error",
                )
            },
        ),
        (
            "Details",
            {
                "classes": ("collapse",),
                "fields": (
                    "checkpoint_until",
                    "checkpoint_scan_id",
                    "last_run",
                    "active_run",
                    "lease_expires_at",
                    "failures",
                    "last_error_class",
                    "last_error_code",
                    "last_error_at",
                ),
            },
        ),
    )
    readonly_fields = tuple(
        f for _, options in fieldsets for f in options["fields"] if f != "interval_seconds"
    )
    actions = ["reconcile_now"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    @admin.display(description="last page")
    def error(self, obj: ScanState) -> str:
        if not obj.last_error_code:
            return "read fine" if obj.last_completed_at or obj.active_run_id else "-"
        times = "" if obj.failures <= 1 else f" ({obj.failures} times in a row)"
        return f"failed{times}: {obj.last_error_message or obj.last_error_code}"

    @admin.display(description="scanning now")
    def scanning_now(self, obj: ScanState) -> str:
        run = obj.active_run
        if run is None:
            return "no"
        return f"scan {run.pk}: {label(RunState, run.state).lower()}, {run.pages} page(s) read"

    @admin.display(description="next scan of this source")
    def next_scan(self, obj: ScanState) -> str:
        if obj.checkpoint_until is None:
            return "Reads everything the source holds: no complete scan has finished yet."
        return (
            f"Is told that everything up to {localize(localtime(obj.checkpoint_until))} was read "
            "by the last complete scan."
        )

    @admin.action(description="Reconcile now", permissions=["change"])
    def reconcile_now(self, request, queryset):
        for state in queryset.select_related("source"):
            services.reconcile_request(source=state.source, actor=request.user.get_username())
        self.message_user(
            request,
            "Requested: each source stays due until a scan that starts now completes.",
            messages.SUCCESS,
        )
