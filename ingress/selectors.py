"""Ingress reads."""

import copy
import functools
import logging

from django.conf import settings
from django.db import connection
from django.db.models import QuerySet
from django.utils.crypto import salted_hmac

from conduit.credentials import CredentialUndecryptable, opened
from conduit.logging import register_secret
from conduit.loopback import credential_url_refusal
from conduit.process_secrets import secret_read
from conduit.providers.base import SourceConfig
from conduit.providers.registry import get_adapter
from conduit.sql import fast_paths, from_row, select_list
from ingress.models import QuarantineReceipt, Source, SourceCredential

logger = logging.getLogger("conduit.ingress")


def credential_token(source: Source) -> str | None:
    """The stored token of `source`, decrypted, or None when it stores none.

    CredentialUndecryptable when no configured key opens it: the caller stops, never falls
    back to another token."""
    sealed_token = (
        SourceCredential.objects.filter(source_id=source.pk).values_list("sealed_token", flat=True).first()
    )
    if sealed_token is None:
        return None
    try:
        token = opened(sealed_token)
    except CredentialUndecryptable:
        logger.error("source=%s: its stored credential decrypts under no configured key", source.name)
        raise
    register_secret(token)
    return token


def access_token_words(source: Source) -> str:
    """Where the source's access token comes from, in words: the stored one's last four
    characters, scopes and expiry, or the variable it names; never the token."""
    credential = SourceCredential.objects.filter(source_id=source.pk).first()
    if credential is None:
        return f"not stored: read from the variable {source.token_env}" if source.token_env else "none"
    expiry = (
        f"expires {credential.expires_at:%Y-%m-%d %H:%M} UTC"
        if credential.expires_at
        else "no expiry recorded"
    )
    return (
        f"stored encrypted: …{credential.last_four}; scopes {', '.join(credential.scopes) or '(not recorded)'}; "
        f"{expiry}; stored by {credential.stored_by} at {credential.updated_at:%Y-%m-%d %H:%M} UTC"
    )


def source_config(source: Source, *, with_token: bool = False) -> SourceConfig:
    """The trusted configuration an adapter reads; `with_token` adds the access token a
    reader presents: the one Conduit stores for the source (sealed at rest), else the one in the
    variable the source names; registered as a secret either way.

    A stored token no configured key decrypts raises CredentialUndecryptable: never a fallback
    to the variable, never an empty token in its place."""
    token = ""
    hosts = get_adapter(source.adapter).credential_hosts
    # A read URL the token may not go to (a row written before the rule) reads no token at all.
    if with_token and (hosts is None or not credential_url_refusal(source.source_url, hosts)):
        stored = credential_token(source)
        if stored is not None:
            token = stored
        elif source.token_env:
            token = secret_read(source.token_env) or ""
        if token:
            register_secret(token)
    return SourceConfig(
        name=source.name,
        source_system=source.source_system,
        account_ref=source.account_ref,
        event_types=frozenset(source.event_types),
        contract_version=source.contract_version,
        canary=source.canary,
        access_token=token,
        connected_at=source.connected_at,
        ref_key=sender_ref_key(settings.SECRET_KEY),
    )


@functools.lru_cache(maxsize=4)
def sender_ref_key(secret_key: str) -> bytes:
    """The key sender refs made from phone numbers are hashed with (SourceConfig.ref_key), derived
    from SECRET_KEY for that one use: changing SECRET_KEY gives a person a new sender ref."""
    return salted_hmac("conduit.sender_ref", "whatsapp", secret=secret_key, algorithm="sha256").digest()


@functools.cache
def _source_by_name_sql() -> str:
    qn = connection.ops.quote_name
    row_text = "s::text" if fast_paths(connection) else "NULL"
    return (
        f"SELECT {select_list(Source, 's')}, {row_text} FROM {qn(Source._meta.db_table)} s "
        f"WHERE s.{qn('name')} = %s"
    )


# The last source each name was read as in this process, with the row's text as read.
_READ: dict[str, Source] = {}


def source_by_name(name: str, *, cached: bool = False) -> Source | None:
    """The registered source named `name`, read fresh; with `cached`, on PostgreSQL, the one this
    process read last (`from_cache` set on it).

    Every source read here carries `row_text`, its whole row as PostgreSQL
    printed it: a webhook's write checks in its own statement that the row
    still reads the same, and writes nothing if not (ingress.writes), so a
    cached source is never acted on once changed. A plain cursor, the ORM's own
    column converters and Model.from_db: this is the one read on the webhook
    hot path, and compiling a QuerySet costs more CPU than the query itself.
    """
    if cached and fast_paths(connection):
        held = _READ.get(name)
        if held is not None:
            return held
    with connection.cursor() as cursor:
        cursor.execute(_source_by_name_sql(), [name])
        row = cursor.fetchone()
    if row is None:
        _READ.pop(name, None)
        return None
    source, (row_text,) = from_row(Source, row)
    source.row_text, source.from_cache = row_text, False
    held = copy.copy(source)
    held.from_cache = True
    _READ[name] = held
    return source


def source_identity_holder(*, adapter: str, account_ref: str, other_than: int | None = None) -> Source | None:
    """The source holding this identity, other than `other_than`: the one source-identity rule.

    A source is identified by its platform (the adapter's source_system, not
    the adapter's name) and its account there; the database enforces it too
    (source_identity_unique). KeyError for an unknown adapter.
    """
    return (
        Source.objects.filter(source_system=get_adapter(adapter).source_system, account_ref=account_ref)
        .exclude(pk=other_than)
        .first()
    )


def quarantine_list(*, source: str = "", state: str = "") -> QuerySet[QuarantineReceipt]:
    """Quarantine receipts, filtered by whichever of the arguments is not blank."""
    queryset = QuarantineReceipt.objects.select_related("source")
    if source:
        queryset = queryset.filter(source__name=source)
    if state:
        queryset = queryset.filter(state=state)
    return queryset
