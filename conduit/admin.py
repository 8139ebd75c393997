"""Admin building blocks shared by every ledger: read-only ledgers and confirmed actions."""

from typing import Any, Callable

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse


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
) -> HttpResponse | None:
    """Show a confirmation page; on confirm, apply to each row and report each outcome.

    `apply(obj, note)` returns (ok, message). Refusals become admin messages,
    never a server error. `single` asks for exactly one selected row. The page
    asks for a note only when `note_label` names what the note is for.
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
        "action": action,
        "note_required": note_required,
        "note_label": note_label or "Note",
        "ask_note": bool(note_label) or note_required,
        "note_missing": request.POST.get("confirm") == "yes" and note_required and not note,
        "opts": modeladmin.model._meta,
        "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
    }
    return TemplateResponse(request, "admin/conduit/confirm_action.html", context)
