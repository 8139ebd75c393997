"""The admin site: django-otp's OTPAdminSite rules while CONDUIT_ADMIN_2FA=required, Django's otherwise."""

from __future__ import annotations

from typing import Callable

from django.conf import settings
from django.contrib.admin import AdminSite
from django.http import HttpRequest
from django_otp.admin import OTPAdminAuthenticationForm, OTPAdminSite

# Apps whose pages are accounts and tools rather than Conduit's work: one group, last.
ADMINISTRATION_APPS = ("auth", "axes", "otp_totp", "django_q", "authtoken")


def second_factor_required() -> bool:
    return settings.CONDUIT_ADMIN_2FA == "required"


class DoorAdminSite(OTPAdminSite):
    """Django's admin site, which becomes django-otp's OTPAdminSite while a second factor is required.

    Read at each request rather than fixed at start, so one process (and one test run) can
    serve both; the decision itself is OTPAdminSite's: staff must be verified by a TOTP device.
    """

    # The front page shows what waits for a person above the ledgers.
    index_template = "admin/conduit/index.html"

    def __init__(self, name: str = "admin") -> None:
        # Named "admin" (OTPAdminSite's own default is "otpadmin"): every admin URL keeps its name.
        super().__init__(name)
        # What the front page shows beyond the ledgers: each part gives context for the request,
        # registered by the app that reads it (the console's work rows).
        self.front_page_parts: dict[str, Callable[[HttpRequest, AdminSite], object]] = {}

    def front_page_register(self, key: str, part: Callable[[HttpRequest, AdminSite], object]) -> None:
        """The front page's `key` in its context is `part(request, site)`, read at each visit."""
        self.front_page_parts[key] = part

    def get_app_list(self, request: HttpRequest, app_label: str | None = None) -> list[dict]:
        """Conduit's apps as they are, then one "Administration" group holding accounts and the
        installed tools' pages (sign-in lockouts, second factors, the task queue, API tokens)."""
        apps = super().get_app_list(request, app_label)
        if app_label is not None:
            return apps
        tools = [app for app in apps if app["app_label"] in ADMINISTRATION_APPS]
        if not tools:
            return apps
        group = {
            "name": "Administration",
            "app_label": "administration",
            "app_url": tools[0]["app_url"],
            "has_module_perms": True,
            "models": [model for app in tools for model in app["models"]],
        }
        return [app for app in apps if app["app_label"] not in ADMINISTRATION_APPS] + [group]

    def index(self, request: HttpRequest, extra_context: dict | None = None):
        parts = {key: part(request, self) for key, part in self.front_page_parts.items()}
        return super().index(request, {**parts, **(extra_context or {})})

    @property
    def login_form(self) -> type | None:  # type: ignore[override]
        return OTPAdminAuthenticationForm if second_factor_required() else None

    @property
    def login_template(self) -> str | None:  # type: ignore[override]
        return OTPAdminSite.login_template if second_factor_required() else None

    def has_permission(self, request: HttpRequest) -> bool:
        if second_factor_required():
            return super().has_permission(request)
        return AdminSite.has_permission(self, request)
