"""Ingress reads."""

import functools

from django.db import connection
from django.db.models import QuerySet

from conduit.logging import register_secret
from conduit.process_secrets import secret_read
from conduit.providers.base import SourceConfig
from conduit.providers.registry import get_adapter
from conduit.sql import from_row, select_list
from ingress.models import QuarantineReceipt, Source


def source_config(source: Source, *, with_token: bool = False) -> SourceConfig:
    """The trusted configuration an adapter reads; `with_token` adds the access token a
    reader presents (read from the variable the source names, registered as a secret)."""
    token = ""
    if with_token and source.token_env:
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
    )


@functools.cache
def _source_by_name_sql() -> str:
    qn = connection.ops.quote_name
    return f"SELECT {select_list(Source, 's')} FROM {qn(Source._meta.db_table)} s WHERE s.{qn('name')} = %s"


def source_by_name(name: str) -> Source | None:
    """The registered source named `name`, read fresh on every delivery.

    A plain cursor, the ORM's own column converters and Model.from_db: this is
    the one read on the webhook hot path, and compiling a QuerySet costs more
    CPU than the query itself.
    """
    with connection.cursor() as cursor:
        cursor.execute(_source_by_name_sql(), [name])
        row = cursor.fetchone()
    return None if row is None else from_row(Source, row)[0]


def source_identity_holder(*, adapter: str, account_ref: str, other_than: int | None = None) -> Source | None:
    """The source holding this identity, other than `other_than`: the one source-identity rule.

    A source is identified by its platform (the adapter's source_system, not
    the adapter's name) and its account there; the database enforces it too
    (source_identity_unique). KeyError for an unknown adapter.
    """
    return (
        Source.objects.filter(source_system=get_adapter(adapter).source_system, account_ref=account_ref)
        .exclude(pk=other_than).first()
    )


def quarantine_list(*, source: str = "", state: str = "") -> QuerySet[QuarantineReceipt]:
    """Quarantine receipts, filtered by whichever of the arguments is not blank."""
    queryset = QuarantineReceipt.objects.select_related("source")
    if source:
        queryset = queryset.filter(source__name=source)
    if state:
        queryset = queryset.filter(state=state)
    return queryset
