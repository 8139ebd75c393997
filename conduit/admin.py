"""Admin building blocks shared by every ledger: the site's name, read-only ledgers, confirmed actions."""

from typing import Any, Callable

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse


# Installed apps whose admin pages are plumbing (django-q2's task tables, DRF's API tokens):
# superusers only, and absent from everyone else's index and sidebar.
SUPERUSER_ONLY_APPS = ("django_q", "authtoken")


def site_configure(site: admin.AdminSite) -> None:
    """Conduit's name on every page, no "View site" (Conduit has no public site), internals for superusers."""
    site.site_header = "Conduit back office"
    site.site_title = "Conduit"
    site.index_title = "What needs a person"
    site.site_url = None
    for model, model_admin in list(site._registry.items()):
        if model._meta.app_label in SUPERUSER_ONLY_APPS:
            _superusers_only(model_admin)


def _superusers_only(model_admin: admin.ModelAdmin) -> None:
    for name in ("has_module_permission", "has_view_permission", "has_add_permission",
                 "has_change_permission", "has_delete_permission"):
        allowed = getattr(model_admin, name)

        def check(request: HttpRequest, *args: Any, _allowed: Callable = allowed, **kwargs: Any) -> bool:
            return request.user.is_superuser and _allowed(request, *args, **kwargs)

        setattr(model_admin, name, check)


def short_key(key: str, keep: int = 12) -> str:
    """A key shortened from the right (`abcd1234…`): keys are compared and searched by their start."""
    return key if len(key) <= keep + 1 else f"{key[:keep]}…"


class LedgerAdmin(admin.ModelAdmin):
    """A ledger is read in the admin and written only by services."""

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
) -> HttpResponse | None:
    """Show a confirmation page; on confirm, apply to each row and report each outcome.

    `apply(obj, note)` returns (ok, message). Refusals become admin messages,
    never a server error. `single` asks for exactly one selected row. The page
    asks for a note only when `note_label` names what the note is for. `describe(obj)` says
    on the confirmation page what confirming does to that row (e.g. the exact text that goes out).
    """
    if single and queryset.count() != 1:
        modeladmin.message_user(request, f"{title}: select exactly one row.", messages.WARNING)
        return None
    note = request.POST.get("note", "").strip()
    if request.POST.get("confirm") == "yes" and (note or not note_required):
        done = 0
        for obj in queryset:
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
        "action": action,
        "note_required": note_required,
        "note_label": note_label or "Note",
        "note_help": note_help,
        "ask_note": bool(note_label) or note_required,
        "note_missing": request.POST.get("confirm") == "yes" and note_required and not note,
        "opts": modeladmin.model._meta,
        "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
    }
    return TemplateResponse(request, "admin/conduit/confirm_action.html", context)
