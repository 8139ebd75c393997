"""Ingress reads."""

from functools import lru_cache
from typing import Any, Callable

from django.db import connection

from ingress.models import Source

Converter = Callable[[Any, Any, Any], Any]


@lru_cache(maxsize=None)
def _source_select() -> tuple[str, list[str], list[tuple[Any, list[Converter]]]]:
    """The SELECT for one source, and each column's converters as the ORM applies them."""
    fields = Source._meta.concrete_fields
    qn = connection.ops.quote_name
    columns = ", ".join(qn(f.column) for f in fields)
    sql = f"SELECT {columns} FROM {qn(Source._meta.db_table)} WHERE {qn('name')} = %s"
    converters = []
    for field in fields:
        col = field.get_col(Source._meta.db_table)
        converters.append(
            (col, connection.ops.get_db_converters(col) + col.get_db_converters(connection))
        )
    return sql, [f.attname for f in fields], converters


def source_by_name(name: str) -> Source | None:
    """The registered source named `name`, read fresh on every delivery.

    A plain cursor, the ORM's own column converters and Model.from_db: this is
    the one read on the webhook hot path, and compiling a QuerySet costs more
    CPU than the query itself.
    """
    sql, attnames, converters = _source_select()
    with connection.cursor() as cursor:
        cursor.execute(sql, [name])
        row = cursor.fetchone()
    if row is None:
        return None
    values = []
    for value, (col, column_converters) in zip(row, converters):
        for convert in column_converters:
            value = convert(value, col, connection)
        values.append(value)
    return Source.from_db(connection.alias, attnames, values)
