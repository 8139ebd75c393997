"""The Connect buttons: an owner logs in through the platform, picks the accounts the grant
reaches, and sees each connected and subscribed (ingress.services.connect does the work).

URLs, under the source admin (the callback is the one the platform app's settings list):
  connect/<login>/           POST: start (from a Connect or Reconnect button), redirect to the platform
  connect/<login>/callback/  GET: where the platform sends the owner back (code, state)
  connect/pick/              GET: the assets of the grant; POST: connect those picked
"""

from __future__ import annotations

import logging

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from conduit.providers.registry import LOGINS, adapter_login, get_login
from ingress.services.connect import (
    ConnectRefused,
    connect_begin,
    connect_callback,
    connect_finish,
    connect_missing,
    connect_pending,
)

logger = logging.getLogger("conduit.ingress")
PERMISSION = "ingress.connect_account"


class SourceConnectViews:
    """Mixed into the source's ModelAdmin: the connect pages and the buttons' context."""

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [
            path("connect/pick/", wrap(self.connect_pick_view), name="ingress_source_connect_pick"),
            path("connect/<str:login>/", wrap(self.connect_start_view), name="ingress_source_connect"),
            path(
                "connect/<str:login>/callback/",
                wrap(self.connect_callback_view),
                name="ingress_source_connect_callback",
            ),
            *super().get_urls(),
        ]

    # -- the buttons -------------------------------------------------------------------------
    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None):
        context = dict(extra_context or {})
        if request.user.has_perm(PERMISSION):
            context["connect_logins"] = [
                {"name": name, "label": cls.label, "missing": connect_missing(cls())}
                for name, cls in LOGINS.items()
            ]
        return super().changelist_view(request, extra_context=context)

    def change_view(self, request: HttpRequest, object_id, form_url: str = "", extra_context=None):
        context = dict(extra_context or {})
        source = self.get_object(request, object_id)
        login = adapter_login(source.adapter) if source is not None else None
        if login is not None and request.user.has_perm(PERMISSION):
            context["reconnect"] = {"name": login.name, "label": login.label, "waiting": source.needs_reauth}
        return super().change_view(request, object_id, form_url, extra_context=context)

    # -- the flow ----------------------------------------------------------------------------
    def _owner(self, request: HttpRequest, login: str) -> None:
        if not request.user.has_perm(PERMISSION):
            logger.warning(
                "connect refused login=%s reason=not_permitted actor=%s", login, request.user.get_username()
            )
            raise PermissionDenied("connecting an account is for owners")

    def _callback_uri(self, request: HttpRequest, login: str) -> str:
        return request.build_absolute_uri(reverse("admin:ingress_source_connect_callback", args=[login]))

    def _back(self, request: HttpRequest, refused: ConnectRefused) -> HttpResponse:
        messages.error(request, str(refused))
        return HttpResponseRedirect(reverse("admin:ingress_source_changelist"))

    @staticmethod
    def _reconnect_of(request: HttpRequest) -> int | None:
        value = request.POST.get("source", "")
        return int(value) if value.isdigit() else None

    # Owners first, then the method: anyone else is refused the same way whatever they send.
    def connect_start_view(self, request: HttpRequest, login: str) -> HttpResponse:
        self._owner(request, login)
        return require_POST(self._start)(request, login)

    def _start(self, request: HttpRequest, login: str) -> HttpResponse:
        try:
            url = connect_begin(
                session=request.session,
                login_name=login,
                user_id=request.user.pk,
                actor=request.user.get_username(),
                redirect_uri=self._callback_uri(request, login),
                source_id=self._reconnect_of(request),
            )
        except ConnectRefused as refused:
            return self._back(request, refused)
        return HttpResponseRedirect(url)

    def connect_callback_view(self, request: HttpRequest, login: str) -> HttpResponse:
        self._owner(request, login)
        return require_GET(self._callback)(request, login)

    def _callback(self, request: HttpRequest, login: str) -> HttpResponse:
        if login not in LOGINS:
            return self._back(request, ConnectRefused("unknown_login", f"there is no login {login!r}"))
        try:
            connect_callback(
                session=request.session,
                login_name=login,
                state=request.GET.get("state", ""),
                code=request.GET.get("code", ""),
                error=request.GET.get("error", ""),
                user_id=request.user.pk,
                actor=request.user.get_username(),
                redirect_uri=self._callback_uri(request, login),
            )
        except ConnectRefused as refused:
            return self._back(request, refused)
        return HttpResponseRedirect(reverse("admin:ingress_source_connect_pick"))

    def connect_pick_view(self, request: HttpRequest) -> HttpResponse:
        self._owner(request, "pick")
        return require_http_methods(["GET", "POST"])(self._pick)(request)

    def _pick(self, request: HttpRequest) -> HttpResponse:
        try:
            login, assets, reconnect = connect_pending(session=request.session, user_id=request.user.pk)
        except ConnectRefused as refused:
            return self._back(request, refused)
        if request.method == "POST":
            try:
                done = connect_finish(
                    session=request.session,
                    user_id=request.user.pk,
                    actor=request.user.get_username(),
                    accounts=request.POST.getlist("account"),
                )
            except ConnectRefused as refused:
                messages.error(request, str(refused))
                return HttpResponseRedirect(reverse("admin:ingress_source_connect_pick"))
            for result in done:
                self._report(request, result)
            return HttpResponseRedirect(reverse("admin:ingress_source_changelist"))
        expected = None
        if reconnect is not None:
            expected = self.model.objects.filter(pk=reconnect).values_list("account_ref", flat=True).first()
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"Connect {get_login(login.name).label}: pick the accounts",
            "assets": assets,
            "expected": expected,
        }
        return TemplateResponse(request, "admin/ingress/source/connect_pick.html", context)

    @staticmethod
    def _report(request: HttpRequest, result) -> None:
        if result.refused:
            messages.error(request, f"Account {result.source}: not connected: {result.refused}")
            return
        verb = "connected" if result.created else "reconnected"
        if result.subscription_problem:
            messages.error(
                request, f"Source {result.source}: {verb}, but not subscribed: {result.subscription_problem}"
            )
        else:
            messages.success(
                request, f"Source {result.source}: {verb} and subscribed (read back and verified)"
            )
        if result.resumed == "resumed":
            messages.success(request, f"Source {result.source}: sending resumes with the new token")
        elif result.resumed:
            messages.error(request, f"Source {result.source}: {result.resumed}")
