"""Disconnecting an account: by a platform's signed word that a person removed the app or asked for
their data's deletion (the app's user callbacks), or by an owner in the admin.

A disconnected source keeps itself, its keys and its history; its stored token is wiped
(credential_remove, which clears the connection authorisation too) and it is marked
`needs_reauth`, so its sends wait at the next claim and none goes out until a person connects
it again (a new token, an authorised connection, "Token replaced: resume sending").
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from conduit.canonical import sha256_hex
from conduit.credentials import CredentialUndecryptable
from conduit.logging import register_secret
from conduit.process_secrets import secret_read
from conduit.providers.base import ProofError, SecretUnavailable, SharedCallback
from conduit.providers.registry import get_adapter
from ingress.deletion_requests import DeletionRequest, DeletionStatus
from ingress.models import InboundEvent, Source, SourceCredential
from ingress.selectors import credential_token
from ingress.services.credentials import credential_remove
from ingress.services.shared_callback import callback_sources

logger = logging.getLogger("conduit.ingress")

CALLBACK_ACTOR = "system:platform-callback"


class UnknownApp(Exception):
    """No source of the platform is registered for the app."""


@dataclass
class Disconnected:
    sources: list[str] = field(default_factory=list)  # names, for the log and the answer's count


def _verified(*, callback: SharedCallback, sources: list[Source], value: str) -> tuple[str, datetime]:
    """(user id, signing time) of a request signed with a secret one of the app's sources names.
    ProofError names why not (invalid_signature when no secret signed it); SecretUnavailable when
    no secret is set."""
    names = dict.fromkeys(n for s in sources for n in (s.secret_env, s.secret_env_next) if n)
    values = [v for v in (secret_read(n) for n in names) if v]
    if not values:
        raise SecretUnavailable(f"no signing secret of {callback.label} app is set in the environment")
    failure: ProofError | None = None
    for secret in values:
        register_secret(secret)
        try:
            return callback.user_request(value, secret)
        except ProofError as error:
            if error.code != "invalid_signature":
                raise  # the value itself is wrong, whatever the secret
            failure = error
    assert failure is not None
    raise failure


def _disconnect(source: Source, *, actor: str, signed_at: datetime | None) -> bool:
    """Wipe the source's token and stop its sends: whether that changed anything. Nothing changes
    when the stored token was issued after `signed_at`: the request was about an earlier grant."""
    credential = SourceCredential.objects.filter(source_id=source.pk).first()
    if credential is not None and signed_at is not None and credential.issued_at > signed_at:
        logger.info("source=%s kept: its token was issued after the request was signed", source.name)
        return False
    removed = credential_remove(source_id=source.pk, actor=actor)
    stopped = Source.objects.filter(pk=source.pk, needs_reauth=False).update(needs_reauth=True)
    return removed or bool(stopped)


def _user_sources(sources: list[Source], user_ref: str) -> list[Source]:
    """The app's sources the person's grant connected (the credential names its grantor), or that
    are the person's own account (Instagram Login: the user is the professional account)."""
    pks = [s.pk for s in sources]
    return list(
        Source.objects.select_for_update(of=("self",), no_key=True)
        .filter(pk__in=pks)
        .filter(Q(credential__grantor_ref=user_ref) | Q(account_ref=user_ref))
        .order_by("pk")
    )


def _app_sources(callback: SharedCallback, app_id: str) -> list[Source]:
    sources = callback_sources(callback=callback, app_id=app_id)
    if not sources:
        raise UnknownApp(app_id)
    return sources


def account_deauthorize(*, callback: SharedCallback, app_id: str, value: str) -> Disconnected:
    """A signed "this person removed the app": disconnect the sources their grant connected.

    Raises UnknownApp, ProofError or SecretUnavailable, having changed nothing. A retry, or a copy
    replayed after the account was connected again with a newer token, changes nothing more.
    """
    sources = _app_sources(callback, app_id)
    user_ref, signed_at = _verified(callback=callback, sources=sources, value=value)
    done = Disconnected()
    with transaction.atomic():
        for source in _user_sources(sources, user_ref):
            if _disconnect(source, actor=CALLBACK_ACTOR, signed_at=signed_at):
                done.sources.append(source.name)
    logger.info(
        "%s deauthorize app=%s disconnected=%s", callback.platform, app_id, ",".join(done.sources) or "none"
    )
    return done


def deletion_request_receive(
    *, callback: SharedCallback, app_id: str, value: str, now: datetime | None = None
) -> tuple[DeletionRequest, bool]:
    """A signed "delete my data": disconnect the person's sources and blank the retained text of
    every event of the app's sources they sent (keys, hashes, states and history stay), recorded
    as one DeletionRequest. (request, created): the same request again is the first one's row,
    nothing done twice.

    Raises UnknownApp, ProofError or SecretUnavailable, having changed nothing. The app's sources are
    locked first, so copies of one request arriving at once run one after the other.
    """
    now = now or timezone.now()
    sources = _app_sources(callback, app_id)
    user_ref, signed_at = _verified(callback=callback, sources=sources, value=value)
    digest = sha256_hex(value.encode("ascii"))
    with transaction.atomic():
        list(
            Source.objects.select_for_update(no_key=True)
            .filter(pk__in=[s.pk for s in sources])
            .order_by("pk")
        )
        earlier = DeletionRequest.objects.filter(request_digest=digest).first()
        if earlier is not None:
            return earlier, False
        disconnected = [
            s.name
            for s in _user_sources(sources, user_ref)
            if _disconnect(s, actor=CALLBACK_ACTOR, signed_at=signed_at)
        ]
        blanked = (
            InboundEvent.objects.filter(source__in=sources, sender_ref=user_ref, first_received_at__lte=now)
            .exclude(message_text="", sender_handle="", reply_address="")
            .update(message_text="", sender_handle="", reply_address="", content_purged_at=now)
        )
        request = DeletionRequest.objects.create(
            confirmation_code=secrets.token_urlsafe(18),
            request_digest=digest,
            user_digest=sha256_hex(user_ref.encode("ascii")),
            app_id=app_id,
            issued_at=signed_at,
            received_at=now,
            status=DeletionStatus.COMPLETED,
            events_blanked=blanked,
            sources_disconnected=len(disconnected),
            completed_at=now,
        )
    logger.info(
        "%s deletion request app=%s code=%s events_blanked=%s disconnected=%s",
        callback.platform,
        app_id,
        request.confirmation_code,
        blanked,
        ",".join(disconnected) or "none",
    )
    return request, True


def deletion_request_status(*, app_id: str, confirmation_code: str) -> DeletionRequest | None:
    return DeletionRequest.objects.filter(app_id=app_id, confirmation_code=confirmation_code).first()


def credential_grantor_set(*, source_id: int, grantor_ref: str) -> None:
    """Record whose grant the stored token is (the id the platform's signed requests name)."""
    if grantor_ref and not (grantor_ref.isascii() and grantor_ref.isdigit() and len(grantor_ref) <= 32):
        raise ValueError("a grantor id is 1 to 32 digits")
    if not SourceCredential.objects.filter(source_id=source_id).update(grantor_ref=grantor_ref):
        raise ValueError("the source has no stored credential")


def source_disconnect(*, source_id: int, actor: str, timeout: float = 10.0) -> tuple[bool, str]:
    """An owner disconnects a source's account: the platform is asked to stop delivering it to the
    app (with the source's token), then its token is wiped and its sends stop; its history stays.
    (ok, what happened).

    When the platform refuses or cannot be asked while the token works, nothing changes and its
    refusal is the answer (ok False): the account stays subscribed and connected until it succeeds.
    When there is no usable token (none, undecryptable, or the platform refused the token itself)
    the app cannot be unsubscribed by anyone here, so the source is disconnected all the same and
    the answer (ok False, to be seen) says the subscription is left for the account's own settings.
    """
    if not actor.strip():
        raise ValueError("an account is disconnected by a person: name them")
    source = Source.objects.get(pk=source_id)
    adapter = get_adapter(source.adapter)
    left = ""
    if adapter.shared_callback is not None:
        try:
            token = credential_token(source) or secret_read(source.token_env)
        except CredentialUndecryptable:
            token, left = "", "its stored token cannot be decrypted with the configured keys"
        if token:
            register_secret(token)
            problem, token_refused = adapter.shared_callback.unsubscribe(
                account=source.account_ref, base_url=source.source_url, token=token, timeout=timeout
            )
            if problem and not token_refused:
                logger.warning("source=%s unsubscribe failed: %s", source.name, problem)
                return False, f"{problem}; nothing changed"
            left = problem
        else:
            left = left or "it has no access token"
    with transaction.atomic():
        _disconnect(Source.objects.select_for_update().get(pk=source_id), actor=actor, signed_at=None)
    logger.info("source=%s disconnected by actor=%s unsubscribed=%s", source.name, actor, not left)
    kept = ""
    if source.token_env and secret_read(source.token_env):
        kept = f"; its token variable {source.token_env} still holds a token: unset it"
    if left:
        return False, (
            f"{left}, so the app could not be unsubscribed: disconnected here (stored token deleted, sends "
            f"stopped){kept}; remove the app in the account's own settings to stop its webhooks"
        )
    # A token left in a variable is for a person to remove: said as a refusal is, so it is seen.
    done = f"disconnected: the app is unsubscribed, the stored token wiped and sends stopped{kept}"
    return not kept, done
