"""Ingress reads."""

from django.db import connection

from conduit.sql import from_row, select_list
from ingress.models import Source


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
