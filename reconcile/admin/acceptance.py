"""The acceptance record in the admin: every `manage.py acceptance` run, read-only."""

from __future__ import annotations

from django.contrib import admin

from conduit.admin import LedgerAdmin
from conduit.code_version import code_version
from reconcile.models import AcceptanceRun


@admin.register(AcceptanceRun)
class AcceptanceRunAdmin(LedgerAdmin):
    """Who ran acceptance on this deployment, when, on which code, and how it ended. A live route
    may be enabled only while the latest run passed on the code version running now."""

    # The columns a person decides from; the code version itself is on the run's page.
    list_display = ("__str__", "finished_at", "ran_by", "failed_check", "on_this_code")
    list_filter = ("passed",)
    fieldsets = (
        (None, {"fields": ("started_at", "finished_at", "ran_by", "passed", "failed_check", "on_this_code")}),
        ("Details", {"classes": ("collapse",), "fields": ("code_version",)}),
    )
    readonly_fields = tuple(f for _, options in fieldsets for f in options["fields"])

    @admin.display(description="code it ran")
    def on_this_code(self, run: AcceptanceRun) -> str:
        """Whether the run was on the code running now (computed once per process, no query): in
        words, since another version is no error of the run's."""
        return "the code running now" if run.code_version == code_version() else "another version"
