"""Reply routes and their shared send budgets in the admin."""

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from conduit.providers.registry import TRANSPORTS
from replies import services
from replies.models import ReplyRoute, SendBudget
from replies.transports import live_enable_refusals, route_url_refusal


class ReplyRouteForm(forms.ModelForm):
    transport_name = forms.ChoiceField(choices=[(name, name) for name in sorted(TRANSPORTS)])
    target_url = forms.URLField(
        required=False, assume_scheme="http", help_text=ReplyRoute._meta.get_field("target_url").help_text
    )

    class Meta:
        model = ReplyRoute
        fields = ["source", "purpose", "transport_name", "target_url", "live_send_enabled"]


@admin.register(SendBudget)
class SendBudgetAdmin(admin.ModelAdmin):
    """Each account's send budget per purpose; the pause is the sender's to set."""

    list_display = ("source", "purpose", "limit", "window_seconds", "paused_until", "pause_reason")
    list_filter = ("source", "purpose")
    list_select_related = ("source",)
    fields = ("source", "purpose", "limit", "window_seconds", "paused_until", "pause_reason")
    readonly_fields = ("paused_until", "pause_reason")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple:
        # Which account and purpose a budget is for is fixed once made.
        return (*self.readonly_fields, *(("source", "purpose") if obj is not None else ()))


@admin.register(ReplyRoute)
class ReplyRouteAdmin(admin.ModelAdmin):
    """Where each source's replies of each purpose go; the live flag is the owners' alone."""

    form = ReplyRouteForm
    list_display = ("source", "purpose", "transport_name", "target_url", "live_send_enabled", "updated_at")
    list_filter = ("source", "transport_name", "live_send_enabled")
    list_select_related = ("source",)
    readonly_fields = ("live_requirements", "created_at", "updated_at")

    @admin.display(description="Live sending requires")
    def live_requirements(self, obj: ReplyRoute | None) -> str:
        """What turning live sending on needs now, and which of it is missing: a passing acceptance
        run on this code version, and a person's authorisation of the account connection."""
        if obj is None or not obj.pk:
            return "an acceptance pass on this code version and an authorised account connection"
        refusals = live_enable_refusals(obj)
        if not refusals:
            return "met: acceptance passed on this code version and the account connection is authorised"
        return "missing: " + "; ".join(refusals)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple:
        fields = self.readonly_fields
        if obj is not None:
            fields = (*fields, "source", "purpose")  # a route is its (source, purpose)
        # Only owners may enable live sending for a route.
        if not request.user.has_perm("replies.enable_live_send"):
            fields = (*fields, "live_send_enabled")
        return fields

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # change a route instead: pending replies of its purpose go where it says

    def save_model(self, request: HttpRequest, obj: ReplyRoute, form: forms.ModelForm, change: bool) -> None:
        editable = {"transport_name", "target_url", "live_send_enabled"}
        values = {f: v for f, v in form.cleaned_data.items() if f in editable}
        try:
            if change:
                route = services.reply_route_update(route_id=obj.pk, changes=values)
            else:
                live = values.pop("live_send_enabled", False)
                route, _ = services.reply_route_declare(
                    source_id=obj.source_id, purpose=obj.purpose, **values
                )
                if live:
                    route = services.reply_route_update(
                        route_id=route.pk, changes={"live_send_enabled": True}
                    )
        except (ValueError, services.RouteConflict) as exc:
            raise forms.ValidationError(str(exc)) from None
        obj.pk = route.pk
        obj.refresh_from_db()

    def get_form(self, request: HttpRequest, obj: Any = None, **kwargs):
        form = super().get_form(request, obj, **kwargs)

        def clean(form_self) -> dict:
            data = forms.ModelForm.clean(form_self)
            source = data.get("source") or getattr(form_self.instance, "source", None)
            purpose = data.get("purpose") or form_self.instance.purpose
            if source and purpose not in source.purposes:
                raise forms.ValidationError(f"{purpose!r} is not a declared purpose of {source.name}")
            transport = data.get("transport_name") or form_self.instance.transport_name
            if transport in TRANSPORTS and "target_url" in form_self.fields:
                refusal = route_url_refusal(transport, data.get("target_url", ""))
                if refusal:
                    form_self.add_error("target_url", refusal)
            if source and "live_send_enabled" in form_self.fields and data.get("live_send_enabled"):
                self._live_checked(form_self, data, source)
            return data

        form.clean = clean
        return form

    @staticmethod
    def _live_checked(form: forms.ModelForm, data: dict, source: Any) -> None:
        """The refusal reply_route_update gives, on the form: which of the acceptance pass and the
        account connection's authorisation is missing (docs/concepts/acceptance.md#live)."""
        stored = form.instance  # its stored values still: the form's values go in after clean()
        route = ReplyRoute(
            source=source,
            purpose=data.get("purpose") or form.instance.purpose,
            transport_name=data.get("transport_name") or form.instance.transport_name,
            target_url=data.get("target_url", form.instance.target_url),
            live_send_enabled=True,
        )
        unchanged = (
            stored.pk is not None
            and stored.live_send_enabled
            and (stored.transport_name, stored.target_url) == (route.transport_name, route.target_url)
        )
        if unchanged:  # already live where it says: the service leaves it as it is
            return
        refusals = live_enable_refusals(route)
        if refusals:
            form.add_error("live_send_enabled", "Live sending stays off: " + "; ".join(refusals))
