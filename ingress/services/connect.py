"""Connecting an account from the back office: an owner's login flow through the platform, the
assets the grant reaches, and each one picked made a source (or an existing source reconnected).

The flow lives in the owner's session: `connect_begin` issues a `state` bound to it (used once,
10 minutes), `connect_callback` takes it back, exchanges the code server-side with the app secret
(conduit/providers/login.py) and keeps the grant sealed under the credential keys for the pick
(15 minutes), `connect_finish` stores each picked asset's token, authorises the connection in the
owner's name, subscribes the app and reads the subscription back. Every refusal is logged as a
receipt (the login, the reason, who) with no code, state or token in it, and changes no source.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import MutableMapping

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.text import slugify

from conduit.credentials import CredentialKeysMissing, CredentialUndecryptable, opened, sealed
from conduit.logging import register_secret
from conduit.process_secrets import secret_read
from conduit.providers.login import AccountLogin, GrantedAsset, LoginApp, LoginRefused
from conduit.providers.registry import LOGINS, get_login
from ingress.models import Source
from ingress.selectors import source_identity_holder
from ingress.services.credentials import credential_store
from ingress.services.sources import (
    MAX_NAME_LENGTH,
    SourceConflict,
    source_connection_authorize,
    source_reauthorized,
    source_register,
)
from ingress.services.subscriptions import source_subscribe
from ingress.signals import source_connected

logger = logging.getLogger("conduit.ingress")

FLOWS = "conduit_connect_flows"
GRANT = "conduit_connect_grant"
STATE_SECONDS = 600
GRANT_SECONDS = 900
MAX_FLOWS = 5  # flows one session may have open at once (the oldest is dropped)


class ConnectRefused(Exception):
    """A step of connecting refused: `reason` a short token for the log, the message for the owner."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class PendingAsset:
    """An asset of the grant waiting for the owner's pick: what it is and whom it would reconnect."""

    account_ref: str
    name: str
    expires_at: datetime | None
    scopes: tuple[str, ...]
    existing: str  # the source it reconnects ("" for a new source)


@dataclass(frozen=True)
class Connected:
    """What connecting one asset did: its source, whether it was new, the subscription's read-back
    ("" when verified, else what is wrong) and, for a source that waited, whether sends resume."""

    source: str  # its name (the account's, when it was refused)
    created: bool
    subscription_problem: str
    resumed: str = ""  # "" (did not wait), "resumed", or why sending still waits
    refused: str = ""  # why the account was not connected ("": it was)


def _refuse(login: str, reason: str, message: str, actor: str) -> ConnectRefused:
    logger.warning("connect refused login=%s reason=%s actor=%s", login, reason, actor)
    return ConnectRefused(reason, message)


def connect_missing(login: AccountLogin) -> list[str]:
    """The settings and variables this deployment lacks for `login` (empty: it can run)."""
    missing = [
        name
        for name in (login.client_id_setting, login.callback_app_setting, login.config_id_setting)
        if name and not getattr(settings, name, "")
    ]
    missing += [v for v in (login.secret_variable, login.verify_token_variable) if not secret_read(v)]
    if not settings.CONDUIT_CREDENTIAL_KEYS:
        missing.append("CONDUIT_CREDENTIAL_KEYS")
    return missing


def _app(login: AccountLogin, redirect_uri: str) -> LoginApp:
    secret = secret_read(login.secret_variable)
    register_secret(secret)
    return LoginApp(
        client_id=getattr(settings, login.client_id_setting),
        client_secret=secret,
        redirect_uri=redirect_uri,
        config_id=getattr(settings, login.config_id_setting, "") if login.config_id_setting else "",
        graph_version=settings.CONDUIT_GRAPH_API_VERSION,
        simulator_url=settings.CONDUIT_CONNECT_SIMULATOR_URL,
    )


def connect_begin(
    *,
    session: MutableMapping,
    login_name: str,
    user_id: int,
    actor: str,
    redirect_uri: str,
    source_id: int | None = None,
) -> str:
    """Open a flow in `session` and return the platform URL the owner is sent to. `source_id`:
    a reconnect of that source (its account is then the one expected back)."""
    if login_name not in LOGINS:
        raise _refuse(login_name, "unknown_login", f"there is no login {login_name!r}", actor)
    login = get_login(login_name)
    missing = connect_missing(login)
    if missing:
        raise _refuse(
            login_name,
            "not_configured",
            f"Connect {login.label} needs {', '.join(missing)} set first (docs/platforms/connect.md)",
            actor,
        )
    if source_id is not None:
        source = Source.objects.filter(pk=source_id).first()
        if source is None or source.adapter != login.adapter:
            raise _refuse(login_name, "wrong_source", f"no {login.label} source to reconnect", actor)
    state = secrets.token_urlsafe(32)
    flows = dict(session.get(FLOWS) or {})
    while len(flows) >= MAX_FLOWS:
        flows.pop(min(flows, key=lambda s: flows[s]["at"]))
    flows[state] = {
        "login": login_name,
        "user": user_id,
        "at": timezone.now().timestamp(),
        "source": source_id,
    }
    session[FLOWS] = flows
    logger.info("connect begun login=%s actor=%s reconnect=%s", login_name, actor, source_id or "-")
    return login.authorize_url(_app(login, redirect_uri), state)


def connect_callback(
    *,
    session: MutableMapping,
    login_name: str,
    state: str,
    code: str,
    error: str,
    user_id: int,
    actor: str,
    redirect_uri: str,
    timeout: float = 10.0,
) -> int:
    """The platform sent the owner back: take the flow's `state` (once), exchange the `code`, keep
    the grant for the pick. Returns the number of assets the grant reaches; ConnectRefused for a
    state not issued to this session (forged, another owner's, used, expired), the owner declining,
    or the platform refusing the exchange (a code used twice among them)."""
    flows = dict(session.get(FLOWS) or {})
    flow = flows.pop(state, None) if state else None
    session[FLOWS] = flows  # a state is taken once, whatever follows
    if flow is None:
        raise _refuse(
            login_name,
            "state_unknown",
            "This sign-in was not started from this session (or was already used): start again with "
            "the Connect button.",
            actor,
        )
    if flow["login"] != login_name or flow["user"] != user_id:
        raise _refuse(
            login_name, "state_mismatch", "This sign-in belongs to another flow: start again.", actor
        )
    if timezone.now().timestamp() - flow["at"] > STATE_SECONDS:
        raise _refuse(login_name, "state_expired", "The sign-in took too long: start again.", actor)
    if error:
        raise _refuse(login_name, "declined", "The platform reports the grant was not given.", actor)
    if not code or len(code) > 2048:
        raise _refuse(login_name, "code_missing", "The platform sent no authorization code back.", actor)
    login = get_login(login_name)
    try:
        assets = login.grant(_app(login, redirect_uri), code, now=timezone.now(), timeout=timeout)
    except LoginRefused as exc:
        raise _refuse(login_name, "grant_refused", f"Connecting failed: {exc}", actor) from None
    for asset in assets:
        register_secret(asset.access_token)
    session[GRANT] = {
        "login": login_name,
        "user": user_id,
        "at": timezone.now().timestamp(),
        "source": flow["source"],
        "assets": [_sealed(asset) for asset in assets],
    }
    logger.info("connect granted login=%s actor=%s assets=%d", login_name, actor, len(assets))
    return len(assets)


def _sealed(asset: GrantedAsset) -> dict:
    return {
        "account_ref": asset.account_ref,
        "name": asset.name[:200],
        "token": sealed(asset.access_token),
        "expires_at": asset.expires_at.timestamp() if asset.expires_at else None,
        "scopes": list(asset.scopes),
        "source_url": asset.source_url,
    }


def _grant(session: MutableMapping, user_id: int) -> dict | None:
    grant = session.get(GRANT)
    if not grant or grant["user"] != user_id or timezone.now().timestamp() - grant["at"] > GRANT_SECONDS:
        return None
    return grant


def connect_pending(
    *, session: MutableMapping, user_id: int
) -> tuple[AccountLogin, list[PendingAsset], int | None]:
    """The grant waiting for this owner's pick: its login, its assets, the source a reconnect
    expects. ConnectRefused when there is none (or it expired)."""
    grant = _grant(session, user_id)
    if grant is None:
        raise ConnectRefused("no_grant", "No sign-in is waiting: start with a Connect button.")
    login = get_login(grant["login"])
    assets = []
    for item in grant["assets"]:
        holder = source_identity_holder(adapter=login.adapter, account_ref=item["account_ref"])
        assets.append(
            PendingAsset(
                account_ref=item["account_ref"],
                name=item["name"],
                expires_at=_when(item["expires_at"]),
                scopes=tuple(item["scopes"]),
                existing=holder.name if holder else "",
            )
        )
    return login, assets, grant["source"]


def _when(stamp: float | None) -> datetime | None:
    return datetime.fromtimestamp(stamp, tz=timezone.get_current_timezone()) if stamp else None


def _free_name(login: AccountLogin, asset: dict) -> str:
    base = slugify(f"{login.name}-{asset['name']}")[: MAX_NAME_LENGTH - 20].strip("-") or login.name
    for name in (base, f"{base}-{asset['account_ref']}"[:MAX_NAME_LENGTH]):
        if not Source.objects.filter(name=name).exists():
            return name
    raise SourceConflict(f"no free source name for account {asset['account_ref']}")


def connect_finish(
    *, session: MutableMapping, user_id: int, actor: str, accounts: list[str], timeout: float = 10.0
) -> list[Connected]:
    """Connect each picked account of the waiting grant (used once): a new source with the login's
    event types, purposes and default routes, or the existing source of that identity (identity
    never moves) with its new token. The connection is authorised in `actor`'s name; the app is
    subscribed and the subscription read back; a source that waited for re-authorisation resumes
    only once a Graph call with the new token succeeds."""
    grant = _grant(session, user_id)
    if grant is None:
        raise ConnectRefused("no_grant", "No sign-in is waiting: start with a Connect button.")
    picked = [a for a in grant["assets"] if a["account_ref"] in set(accounts)]
    if not picked:
        raise ConnectRefused("nothing_picked", "Pick at least one account to connect.")
    login = get_login(grant["login"])
    if grant["source"] is not None:
        expected = Source.objects.filter(pk=grant["source"]).values_list("account_ref", flat=True).first()
        if expected not in {a["account_ref"] for a in picked}:
            raise _refuse(
                login.name,
                "other_account",
                "The grant does not include the account of the source being reconnected: sign in as "
                "that account.",
                actor,
            )
    session.pop(GRANT, None)
    results = []
    for asset in picked:
        try:
            token = opened(asset["token"])
        except (CredentialUndecryptable, CredentialKeysMissing):
            raise ConnectRefused(
                "grant_unreadable", "The sign-in can no longer be read: start again."
            ) from None
        try:
            results.append(_connect_one(login, asset, token, actor=actor, timeout=timeout))
        except (SourceConflict, ValidationError, IntegrityError, ValueError) as exc:
            # This account is left as it was (its transaction rolled back); the others go on.
            logger.warning(
                "connect refused login=%s reason=source_refused account=%s actor=%s",
                login.name,
                asset["account_ref"],
                actor,
            )
            results.append(
                Connected(source=asset["name"], created=False, subscription_problem="", refused=_words(exc))
            )
    return results


def _words(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())
    if isinstance(exc, IntegrityError):
        return "the account was being connected at the same time: look at the sources, then try again"
    return str(exc)


def _connect_one(login: AccountLogin, asset: dict, token: str, *, actor: str, timeout: float) -> Connected:
    now = timezone.now()
    with transaction.atomic():
        source = source_identity_holder(adapter=login.adapter, account_ref=asset["account_ref"])
        created = source is None
        if created:
            source, _ = source_register(
                name=_free_name(login, asset),
                adapter=login.adapter,
                account_ref=asset["account_ref"],
                event_types=list(login.event_types),
                purposes=list(login.purposes),
                secret_env=login.secret_variable,
                verify_token_env=login.verify_token_variable,
                app_id=getattr(settings, login.callback_app_setting),
                source_url=asset["source_url"],
                credential_follows=True,
            )
        credential_store(
            source_id=source.pk,
            token=token,
            actor=actor,
            scopes=asset["scopes"],
            issued_at=now,
            expires_at=_when(asset["expires_at"]),
        )
        source.refresh_from_db()
        if source.connection_authorized_at is None:
            source_connection_authorize(source_id=source.pk, actor=actor)
        source_connected.send(sender=Source, source_id=source.pk, created=created)
    problem = source_subscribe(source_id=source.pk, timeout=timeout)
    resumed = ""
    if source.needs_reauth:
        try:
            source_reauthorized(source_id=source.pk, actor=actor)
            resumed = "resumed"
        except ValueError as exc:
            resumed = str(exc)
    logger.info(
        "connect done login=%s source=%s created=%s subscribed=%s actor=%s",
        login.name,
        source.name,
        created,
        "no" if problem else "yes",
        actor,
    )
    return Connected(source=source.name, created=created, subscription_problem=problem, resumed=resumed)
