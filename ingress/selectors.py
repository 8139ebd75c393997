"""Ingress reads."""

from django.db import connection
from django.db.models import Prefetch, QuerySet

from conduit.sql import from_row, select_list
from ingress.models import InboundEvent, QuarantineReceipt, Source
from replies.models import ReplyAction


def source_by_name(name: str) -> Source | None:
    """The registered source named `name`, read fresh on every delivery.

    A plain cursor, the ORM's own column converters and Model.from_db: this is
    the one read on the webhook hot path, and compiling a QuerySet costs more
    CPU than the query itself.
    """
    qn = connection.ops.quote_name
    sql = f"SELECT {select_list(Source, 's')} FROM {qn(Source._meta.db_table)} s WHERE s.{qn('name')} = %s"
    with connection.cursor() as cursor:
        cursor.execute(sql, [name])
        row = cursor.fetchone()
    return None if row is None else from_row(Source, row)[0]


def event_list(*, event_key: str = "", source: str = "", state: str = "") -> QuerySet[InboundEvent]:
    """Canonical events with their reply actions, filtered by whichever of the arguments is not blank."""
    queryset = InboundEvent.objects.select_related("source").prefetch_related(
        Prefetch("reply_actions", queryset=ReplyAction.objects.order_by("purpose"))
    )
    if event_key:
        queryset = queryset.filter(event_key=event_key)
    if source:
        queryset = queryset.filter(source__name=source)
    if state:
        queryset = queryset.filter(event_state=state)
    return queryset


def quarantine_list(*, source: str = "", state: str = "") -> QuerySet[QuarantineReceipt]:
    """Quarantine receipts, filtered by whichever of the arguments is not blank."""
    queryset = QuarantineReceipt.objects.select_related("source")
    if source:
        queryset = queryset.filter(source__name=source)
    if state:
        queryset = queryset.filter(state=state)
    return queryset
