"""The source's account-connection actions in the admin, for owners: resume sending with a new
token, authorise the connection, subscribe the app and verify it, disconnect. Each asks first
(a confirmation page) and calls one ingress service."""

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from conduit.admin import confirmed_action
from ingress import services
from ingress.models import Source


class SourceConnectionActions:
    """Mixed into the source's ModelAdmin; `actions` there lists these."""

    @admin.action(
        permissions=["change"], description="Token replaced: resume sending (clear needs re-authorisation)"
    )
    def reauthorized(self, request: HttpRequest, queryset: QuerySet):
        """Resuming sends is consequential: a confirmation page first, as every queue's action."""

        def apply(source: Source, note: str) -> tuple[bool, str]:
            if not source.needs_reauth:
                return False, "does not need re-authorisation"
            try:
                services.source_reauthorized(source_id=source.pk, actor=request.user.get_username())
            except ValueError as exc:
                return False, str(exc)
            return True, "sending resumes with the new token"

        def describe(source: Source) -> str:
            if not source.needs_reauth:
                return "Does not need re-authorisation: nothing changes."
            return (
                "Its waiting sends go out with the token now stored for it (or in "
                f"{source.token_env or '(no variable named)'}); store the new token first. "
                "A Graph call with it is made first: sending resumes only if it succeeds."
            )

        return confirmed_action(
            self,
            request,
            queryset,
            title="Resume sending",
            action="reauthorized",
            apply=apply,
            describe=describe,
        )

    def has_authorize_connection_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("ingress.authorize_connection")

    @admin.action(permissions=["authorize_connection"], description="Authorize account connection")
    def connection_authorize(self, request: HttpRequest, queryset: QuerySet):
        """Owners only: a person vouches for the account the source acts as (seed 000: account
        connection is a human-only step); its reply routes may then go live once acceptance passed."""

        def apply(source: Source, note: str) -> tuple[bool, str]:
            try:
                services.source_connection_authorize(source_id=source.pk, actor=request.user.get_username())
            except ValueError as exc:
                return False, str(exc)
            return True, "account connection authorised"

        def describe(source: Source) -> str:
            if source.connection_authorized_at is not None:
                return (
                    f"Already authorised by {source.connection_authorized_by} at "
                    f"{source.connection_authorized_at:%Y-%m-%d %H:%M %Z}: nothing changes."
                )
            return (
                f"You vouch that {source.adapter} account {source.account_ref} is the one this source "
                f"should act as{f' (token in {source.token_env})' if source.token_env else ''}; "
                "your name and the time are recorded. Live sending still needs a passing acceptance run."
            )

        return confirmed_action(
            self,
            request,
            queryset,
            title="Authorize account connection",
            action="connection_authorize",
            apply=apply,
            describe=describe,
        )

    @admin.action(permissions=["authorize_connection"], description="Subscribe the app and verify")
    def subscription_verify(self, request: HttpRequest, queryset: QuerySet):
        """Owners only: ask the platform to deliver the source's fields to the app, then read the
        subscription back; a failure is shown with its reason, never reported as subscribed."""
        from ingress.services.subscriptions import source_subscribe

        def apply(source: Source, note: str) -> tuple[bool, str]:
            try:
                problem = source_subscribe(source_id=source.pk)
            except ValueError as exc:
                return False, str(exc)
            return (
                (False, f"not subscribed: {problem}")
                if problem
                else (True, "subscribed, read back and verified")
            )

        def describe(source: Source) -> str:
            return (
                f"Asks Meta to deliver {', '.join(source.event_types) or 'nothing'} for {source.account_ref} "
                "to the app (POST subscribed_apps), then reads the subscription back."
            )

        return confirmed_action(
            self,
            request,
            queryset,
            title="Subscribe the app and verify",
            action="subscription_verify",
            apply=apply,
            describe=describe,
        )

    def has_disconnect_account_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("ingress.disconnect_account")

    @admin.action(permissions=["disconnect_account"], description="Disconnect account")
    def account_disconnect(self, request: HttpRequest, queryset: QuerySet):
        """Owners only: the app is unsubscribed from the account with its token, then the token is
        wiped and its sends stop; the source and its history stay. The platform's refusal is shown
        and nothing changes."""

        def apply(source: Source, note: str) -> tuple[bool, str]:
            try:
                return services.source_disconnect(source_id=source.pk, actor=request.user.get_username())
            except ValueError as exc:
                return False, str(exc)

        def describe(source: Source) -> str:
            return (
                f"The app is unsubscribed from {source.adapter} account {source.account_ref} (so its "
                "webhooks stop), then its stored token is deleted and its sends stop. Events, replies "
                "and history stay. Connecting it again needs a new token and an owner's authorisation."
            )

        return confirmed_action(
            self,
            request,
            queryset,
            title="Disconnect account",
            action="account_disconnect",
            apply=apply,
            describe=describe,
        )
