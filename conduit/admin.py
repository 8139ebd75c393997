"""Admin building blocks shared by every ledger: the site's name, read-only ledgers, confirmed actions."""

import json
from typing import Any, Callable

from django.contrib import admin, messages
from django.core.paginator import Paginator
from django.db import connections
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.functional import cached_property

from conduit.content import guard_admin
from conduit.labels import reason_label
from conduit.sql import fast_paths

# Installed apps whose admin pages are plumbing (django-q2's task tables, DRF's API tokens,
# django-axes' lockouts, django-otp's devices): superusers only, and absent from everyone
# else's index and sidebar.
SUPERUSER_ONLY_APPS = ("django_q", "authtoken", "axes", "otp_totp")


def site_configure(site: admin.AdminSite) -> None:
    """Conduit's name on every page, no "View site" (Conduit has no public site), internals for
    superusers, and buyer content closed to every filter, search and ordering of every admin
    for users without its permission (conduit.content)."""
    site.site_header = "Conduit back office"
    site.site_title = "Conduit"
    site.index_title = "What needs a person"
    site.site_url = None
    for model, model_admin in list(site._registry.items()):
        if model._meta.app_label in SUPERUSER_ONLY_APPS:
            _superusers_only(model_admin)
        guard_admin(model_admin)


def _superusers_only(model_admin: admin.ModelAdmin) -> None:
    for name in (
        "has_module_permission",
        "has_view_permission",
        "has_add_permission",
        "has_change_permission",
        "has_delete_permission",
    ):
        allowed = getattr(model_admin, name)

        def check(request: HttpRequest, *args: Any, _allowed: Callable = allowed, **kwargs: Any) -> bool:
            return request.user.is_superuser and _allowed(request, *args, **kwargs)

        setattr(model_admin, name, check)


def short_key(key: str, keep: int = 12) -> str:
    """A key shortened from the right (`abcd1234…`): keys are compared and searched by their start."""
    return key if len(key) <= keep + 1 else f"{key[:keep]}…"


# A changelist counts its rows exactly up to this many; past it, PostgreSQL's estimate.
EXACT_COUNT_LIMIT = 10_000


class EstimatedCountPaginator(Paginator):
    """A paginator that never counts a whole ledger: exact up to EXACT_COUNT_LIMIT rows, then estimated.

    A ledger holds millions of rows and COUNT(*) reads every one of them on each page view
    (a second on a million events). The count is exact while it is small, where a person
    reads it; past the limit it is the planner's estimate for the same query (EXPLAIN, from
    pg_class.reltuples and the column statistics), never below what was counted, and
    `estimated` is set so the page says "about". SQLite (the demo) always counts exactly.
    """

    estimated = False

    @cached_property
    def count(self) -> int:
        rows = self.object_list
        if not isinstance(rows, QuerySet) or not fast_paths(connections[rows.db]):
            return super().count
        # The ids only: annotations and joins the page shows are not needed to count.
        ids = rows.order_by().values("pk")
        bounded = ids[: EXACT_COUNT_LIMIT + 1].count()
        if bounded <= EXACT_COUNT_LIMIT:
            return bounded
        self.estimated = True
        return max(_planner_rows(ids), bounded)


def _planner_rows(rows: QuerySet) -> int:
    """The planner's row estimate for `rows`, without running it."""
    sql, params = rows.query.sql_with_params()
    with connections[rows.db].cursor() as cursor:
        cursor.execute("EXPLAIN (FORMAT JSON) " + sql, params)
        plan = cursor.fetchone()[0]
    if isinstance(plan, str):
        plan = json.loads(plan)
    return int(plan[0]["Plan"]["Plan Rows"])


class LedgerAdmin(admin.ModelAdmin):
    """A ledger is read in the admin and written only by services.

    Ledgers grow without bound: no count of the whole table on each page (Django's
    "N total" beside a filter), and the page's own count bounded (EstimatedCountPaginator).
    """

    show_full_result_count = False
    paginator = EstimatedCountPaginator

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class LedgerInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class HistoryInline(LedgerInline):
    """A ledger row's transitions in words, folded away: internals a person opens when they ask.

    `states` maps a stored state to its label (the owning model's choices)."""

    classes = ("collapse",)
    verbose_name_plural = "history (every move, who made it and why)"
    states: dict[str, str] = {}
    fields = readonly_fields = ("at", "moved_from", "moved_to", "actor", "why", "refused_mark")

    @admin.display(description="from")
    def moved_from(self, obj: Any) -> str:
        return self.states.get(obj.prior_state, obj.prior_state) if obj.prior_state else "(created)"

    @admin.display(description="to")
    def moved_to(self, obj: Any) -> str:
        return self.states.get(obj.next_state, obj.next_state)

    @admin.display(description="why")
    def why(self, obj: Any) -> str:
        return reason_label(obj.reason_code)

    @admin.display(description="refused")
    def refused_mark(self, obj: Any) -> str:
        return "refused: the move was not made" if obj.refused else ""


def confirmed_action(
    modeladmin: admin.ModelAdmin,
    request: HttpRequest,
    queryset: QuerySet,
    *,
    title: str,
    action: str,
    apply: Callable[[Any, str], tuple[bool, str]],
    note_required: bool = False,
    note_label: str = "",
    single: bool = False,
    describe: Callable[[Any], Any] | None = None,
    note_help: str = "",
    pin: Callable[[Any], str] | None = None,
    note_choices: tuple[tuple[str, str], ...] = (),
) -> HttpResponse | None:
    """Show a confirmation page; on confirm, apply to each row and report each outcome.

    `apply(obj, note)` returns (ok, message). Refusals become admin messages,
    never a server error. `single` asks for exactly one selected row. The page
    asks for a note only when `note_label` names what the note is for. `describe(obj)` says
    on the confirmation page what confirming does to that row (e.g. the exact text that goes out).
    `pin(obj)` names the version of what the page showed (the copy whose text `describe` gave):
    the page carries it, and confirming calls `apply(obj, note, pinned)` with the value the
    page carried ("" if none), so the service can refuse when what it would apply changed since.
    `note_choices` ((value, label), ...) makes the note a choice among them: any other value is none.
    """
    if single and queryset.count() != 1:
        modeladmin.message_user(request, f"{title}: select exactly one row.", messages.WARNING)
        return None
    note = request.POST.get("note", "").strip()
    if note_choices and note not in dict(note_choices):
        note = ""
    if request.POST.get("confirm") == "yes" and (note or not note_required):
        done = 0
        for obj in queryset:
            if pin is not None:
                ok, message = apply(obj, note, request.POST.get(f"pin_{obj.pk}", ""))
            else:
                ok, message = apply(obj, note)
            if ok:
                done += 1
            else:
                modeladmin.message_user(request, f"{obj}: {message}", messages.ERROR)
        if done:
            modeladmin.message_user(request, f"{title}: {done} done.", messages.SUCCESS)
        return None
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": title,
        "objects": queryset,
        "rows": [(obj, describe(obj) if describe else "") for obj in queryset],
        "pins": [(obj.pk, pin(obj)) for obj in queryset] if pin is not None else [],
        "action": action,
        "note_required": note_required,
        "note_label": note_label or "Note",
        "note_help": note_help,
        "note_choices": note_choices,
        "ask_note": bool(note_label) or note_required,
        "note_missing": request.POST.get("confirm") == "yes" and note_required and not note,
        "opts": modeladmin.model._meta,
        "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
    }
    return TemplateResponse(request, "admin/conduit/confirm_action.html", context)
