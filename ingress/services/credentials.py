"""The access tokens Conduit stores: sealed at rest (conduit/credentials.py), read where a token
is presented, re-sealed under the first key by `manage.py credentials_rotate`."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

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
    schedule's) name; a value that is not a token is never stored in its place."""
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
