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

    list_display = (
        "__str__",
        "finished_at",
        "ran_by",
        "passed",
        "failed_check",
        "code_version",
        "current_code",
    )
    list_filter = ("passed",)
    fields = readonly_fields = (
        "started_at",
        "finished_at",
        "ran_by",
        "passed",
        "failed_check",
        "code_version",
        "current_code",
    )

    @admin.display(boolean=True, description="this code version")
    def current_code(self, run: AcceptanceRun) -> bool:
        """Whether the run was on the code running now (computed once per process, no query)."""
        return run.code_version == code_version()
