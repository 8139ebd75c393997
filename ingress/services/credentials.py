"""The access tokens Conduit stores: sealed at rest (conduit/credentials.py), read where a token
is presented, re-sealed under the first key by `manage.py credentials_rotate`."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from conduit.credentials import CredentialUndecryptable, opened, rotated, sealed, sealed_by_first
from conduit.logging import register_secret
from ingress.models import Source, SourceCredential

logger = logging.getLogger("conduit.ingress")

MAX_TOKEN_CHARS = 4096  # Meta's tokens run to a few hundred characters


def credential_store(
    *,
    source_id: int,
    token: str,
    actor: str,
    scopes: list[str] | tuple[str, ...] = (),
    issued_at: datetime | None = None,
    expires_at: datetime | None = None,
) -> SourceCredential:
    """Store (or replace) the access token source `source_id` acts with, sealed under the first
    key. Refused (ValueError) for an empty or over-long token or without a person's (or a
    schedule's) name; a value that is not a token is never stored in its place.

    A token other than the one stored changes what the source acts as the account with, so the
    account's connection authorisation is cleared (an owner authorises it again), as a change of
    `token_env` clears it; storing the same token again keeps it."""
    token = token.strip()
    if not token or len(token) > MAX_TOKEN_CHARS or any(c.isspace() for c in token):
        raise ValueError(f"an access token is 1 to {MAX_TOKEN_CHARS} characters without spaces")
    if not actor.strip():
        raise ValueError("a stored credential names who stored it")
    register_secret(token)
    issued_at = issued_at or timezone.now()
    if expires_at is not None and expires_at <= issued_at:
        raise ValueError(f"the token's expiry {expires_at.isoformat()} is not after its issue")
    with transaction.atomic():
        source = Source.objects.select_for_update().get(pk=source_id)
        before = SourceCredential.objects.filter(source=source).first()
        if before is None or _token_of(before) != token:
            Source.objects.filter(pk=source_id).update(
                connection_authorized_by="", connection_authorized_at=None
            )
        credential, _ = SourceCredential.objects.update_or_create(
            source=source,
            defaults={
                "sealed_token": sealed(token),
                "last_four": token[-4:],
                "scopes": sorted(set(scopes)),
                "issued_at": issued_at,
                "expires_at": expires_at,
                "stored_by": actor,
            },
        )
    logger.info("source=%s credential stored (…%s) by actor=%s", source.name, token[-4:], actor)
    return credential


def credential_remove(*, source_id: int, actor: str) -> bool:
    """Wipe the stored token of source `source_id` (the source, its history and its keys stay);
    the account's connection authorisation goes with it. False when none was stored."""
    with transaction.atomic():
        source = Source.objects.select_for_update().get(pk=source_id)
        removed, _ = SourceCredential.objects.filter(source=source).delete()
        if removed:
            Source.objects.filter(pk=source_id).update(
                connection_authorized_by="", connection_authorized_at=None
            )
    if removed:
        logger.info("source=%s credential removed by actor=%s", source.name, actor)
    return bool(removed)


@dataclass(frozen=True)
class RotationResult:
    total: int
    resealed: int
    already_current: int
    unreadable: tuple[str, ...]  # the sources whose credential no configured key decrypts


def credentials_rotate(*, dry_run: bool = False, progress=None) -> RotationResult:
    """Re-seal every stored credential under the first key of CONDUIT_CREDENTIAL_KEYS.

    Each row is re-sealed in its own transaction under a row lock, so a token stored meanwhile is
    never overwritten with an older one. One no key decrypts is left as it is and named in the
    result. `dry_run` counts what would be re-sealed and changes nothing.
    """
    rows = list(SourceCredential.objects.order_by("pk").values_list("pk", "source__name"))
    resealed = current = 0
    unreadable = []
    for done, (pk, name) in enumerate(rows, start=1):
        with transaction.atomic():
            row = SourceCredential.objects.select_for_update().filter(pk=pk).first()
            if row is None:  # removed meanwhile
                continue
            try:
                if sealed_by_first(row.sealed_token):
                    current += 1
                else:
                    fresh = rotated(row.sealed_token)
                    resealed += 1
                    if not dry_run:
                        SourceCredential.objects.filter(pk=pk).update(sealed_token=fresh)
            except CredentialUndecryptable:
                unreadable.append(name)
        if progress is not None:
            progress(done, len(rows))
    return RotationResult(
        total=len(rows), resealed=resealed, already_current=current, unreadable=tuple(unreadable)
    )


def credentials_unreadable() -> list[str]:
    """The names of the sources whose stored credential no configured key decrypts."""
    unreadable = []
    for name, sealed_token in SourceCredential.objects.order_by("source__name").values_list(
        "source__name", "sealed_token"
    ):
        try:
            opened(sealed_token)
        except CredentialUndecryptable:
            unreadable.append(name)
    return unreadable


REFRESH_ACTOR = "system:token-refresh"
EXPIRING_WITHIN = timedelta(days=7)  # the front page, the metric and its alert count these


def credentials_expiring(now: datetime | None = None):
    """Stored credentials that expire within 7 days (or already did), of sources still sending."""
    now = now or timezone.now()
    return SourceCredential.objects.filter(expires_at__lte=now + EXPIRING_WITHIN, source__canary=False)


# The refresh runs inside a django-q2 task killed at its timeout: it starts no Graph call past this.
REFRESH_BUDGET_SECONDS = 40.0


def credentials_refresh(
    *, now: datetime | None = None, timeout: float = 10.0, budget: float = REFRESH_BUDGET_SECONDS
) -> dict[str, str]:
    """Keep every stored token alive (the adapter's `token_renew`): an Instagram Login token is
    refreshed once 24 hours old, a Facebook one inspected for validity, expiry and scopes.
    {source name: outcome}.

    Meta refusing the token (or a stored expiry already past) marks the source `needs_reauth`:
    its sends wait, `doctor` and the alert say so, and a person reconnects it. What the refresh
    finds is applied only while the credential still holds the token it asked about (a person
    may have stored another meanwhile; a rotation re-seals the same token and changes nothing).
    The oldest-issued tokens go first, each source on its own (one failing never stops the
    others), and no call starts after `budget` seconds: the rest go at the next hourly run.
    Canary sources and sources already waiting for a person are left out.
    """
    import time

    from conduit.providers.registry import get_adapter
    from ingress.selectors import credential_token

    now = now or timezone.now()
    started = time.monotonic()
    found: dict[str, str] = {}
    rows = SourceCredential.objects.select_related("source").filter(
        source__canary=False, source__needs_reauth=False
    )
    for credential in rows.order_by("issued_at", "pk"):
        source = credential.source
        renew = getattr(get_adapter(source.adapter), "token_renew", None)
        if renew is None:
            continue
        if time.monotonic() - started > budget:
            logger.warning(
                "token refresh stopped at its budget: source=%s and later wait an hour", source.name
            )
            break
        try:
            token = credential_token(source) or ""
            found[source.name] = _refresh_one(credential, token, renew, now=now, timeout=timeout)
        except CredentialUndecryptable:
            found[source.name] = "undecryptable"
        except Exception:  # one source's surprise never stops the others' refresh
            logger.exception("source=%s token refresh raised", source.name)
            found[source.name] = "failed"
    return found


def _refresh_one(credential: SourceCredential, token: str, renew, *, now: datetime, timeout: float) -> str:
    source = credential.source
    if credential.expires_at is not None and credential.expires_at <= now:
        outcome, problem, renewal = (
            "refused",
            "the stored access token has expired: reconnect the account",
            None,
        )
    else:
        renewal = renew(
            base_url=source.source_url,
            access_token=token,
            issued_at=credential.issued_at,
            now=now,
            timeout=timeout,
            app_token=_app_token(source),
        )
        outcome, problem = renewal.outcome, renewal.problem
    if outcome == "failed":
        logger.warning("source=%s token refresh failed, asked again next run: %s", source.name, problem)
        return outcome
    if outcome == "kept":
        return outcome
    if renewal is not None and renewal.access_token:
        register_secret(renewal.access_token)
    with transaction.atomic():
        current = SourceCredential.objects.select_for_update().filter(pk=credential.pk).first()
        if current is None or _token_of(current) != token:
            logger.info(
                "source=%s token refresh found a token replaced meanwhile: kept the newer", source.name
            )
            return "replaced_meanwhile"
        if outcome == "refused":
            Source.objects.filter(pk=source.pk).update(needs_reauth=True)
            logger.warning("source=%s token refresh refused: %s", source.name, problem)
        elif outcome == "refreshed":
            SourceCredential.objects.filter(pk=credential.pk).update(
                sealed_token=sealed(renewal.access_token),
                last_four=renewal.access_token[-4:],
                issued_at=now,
                expires_at=renewal.expires_at,
                stored_by=REFRESH_ACTOR,
                updated_at=now,
            )
            logger.info("source=%s token refreshed (…%s)", source.name, renewal.access_token[-4:])
        elif outcome == "checked":
            changes = {}
            if renewal.never_expires:
                changes["expires_at"] = None
            elif renewal.expires_at is not None and renewal.expires_at > current.issued_at:
                changes["expires_at"] = renewal.expires_at
            if renewal.scopes is not None:
                changes["scopes"] = sorted(set(renewal.scopes))
            if changes:
                SourceCredential.objects.filter(pk=credential.pk).update(**changes)
    return outcome


def _token_of(credential: SourceCredential) -> str | None:
    """The token a credential row holds (None when no configured key opens it)."""
    try:
        return opened(credential.sealed_token)
    except CredentialUndecryptable:
        return None


def _app_token(source: Source) -> str:
    """The app access token (`app-id|app-secret`) a token inspection presents, or "" (then the
    token inspects itself). Registered with the log boundary: it carries the app secret."""
    from conduit.process_secrets import secret_read

    secret = secret_read(source.secret_env) if source.app_id and source.secret_env else ""
    if not secret:
        return ""
    register_secret(secret)
    app_token = f"{source.app_id}|{secret}"
    register_secret(app_token)
    return app_token
