"""Thin SQL built from model metadata, for the hot paths (ingest, the sender's claim).

The ORM's bulk_create and update() build model instances, expressions and a
compiler per call; ingest and the sender write a handful of rows per delivery
or send, so they use these helpers instead. Values go through each field's
get_db_prep_save unless they are plain strings, integers or booleans for a
field that stores them as they are, so types and time zones behave as through
the ORM. Works on PostgreSQL and SQLite 3.35+.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Iterable, Sequence

from django.db import connection, models

# Fields whose database value is the Python value itself for str/int/bool.
_PLAIN_FIELDS = (
    models.CharField, models.TextField, models.IntegerField, models.BooleanField, models.ForeignKey,
)
_PLAIN_VALUES = (str, int, bool)


@lru_cache(maxsize=None)
def _columns(model: type[models.Model], names: tuple[str, ...]) -> tuple[str, tuple]:
    meta = model._meta
    fields = tuple(meta.get_field(name) for name in names)
    qn = connection.ops.quote_name
    return ", ".join(qn(f.column) for f in fields), fields


def _prep(field: models.Field, value: Any) -> Any:
    if type(value) in _PLAIN_VALUES and isinstance(field, _PLAIN_FIELDS):
        return value
    return field.get_db_prep_save(value, connection)


def insert_rows(
    model: type[models.Model],
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    ignore_conflicts: bool = False,
) -> list[int | None]:
    """INSERT rows (values in `columns` order) RETURNING the primary keys.

    With ignore_conflicts, a row that any unique constraint already holds is
    skipped (ON CONFLICT DO NOTHING) and returns no key: the database, not a
    prior lookup, decides who was first.
    """
    rows = list(rows)
    if not rows:
        return []
    column_sql, fields = _columns(model, tuple(columns))
    qn = connection.ops.quote_name
    placeholders = "(" + ", ".join(["%s"] * len(fields)) + ")"
    params: list[Any] = []
    for row in rows:
        params.extend(_prep(f, v) for f, v in zip(fields, row))
    sql = (
        f"INSERT INTO {qn(model._meta.db_table)} ({column_sql}) "
        f"VALUES {', '.join([placeholders] * len(rows))}"
        f"{' ON CONFLICT DO NOTHING' if ignore_conflicts else ''} RETURNING {qn(model._meta.pk.column)}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [r[0] for r in cursor.fetchall()]


@lru_cache(maxsize=None)
def _readers(model: type[models.Model]) -> tuple[list[str], list]:
    """Each concrete column's attname and the converters the ORM would apply to it."""
    converters = []
    for field in model._meta.concrete_fields:
        col = field.get_col(model._meta.db_table)
        converters.append((col, connection.ops.get_db_converters(col) + col.get_db_converters(connection)))
    return [f.attname for f in model._meta.concrete_fields], converters


def select_list(model: type[models.Model], alias: str) -> str:
    """All concrete columns of `model` under a table alias, in field order."""
    qn = connection.ops.quote_name
    return ", ".join(f"{alias}.{qn(f.column)}" for f in model._meta.concrete_fields)


def from_row(model: type[models.Model], row: Sequence[Any]) -> tuple[models.Model, Sequence[Any]]:
    """Build one instance from the head of `row` as the ORM would; returns (instance, rest)."""
    attnames, converters = _readers(model)
    values = []
    for value, (col, column_converters) in zip(row, converters):
        for convert in column_converters:
            value = convert(value, col, connection)
        values.append(value)
    return model.from_db(connection.alias, attnames, values), row[len(attnames):]


_OPERATORS = {"": "=", "lt": "<", "lte": "<=", "gt": ">", "gte": ">="}


class Unsupported(ValueError):
    """A lookup or expression update_rows does not take; use the ORM for it."""


def update_rows(model: type[models.Model], *, where: dict[str, Any], assign: dict[str, Any]) -> int:
    """UPDATE ... SET <assign> WHERE <where>; returns the rows changed.

    `where` takes `field` (None means IS NULL) or `field__lt|lte|gt|gte`;
    `assign` takes plain values or `F("field") +/- n` on the same field. Anything
    else raises Unsupported: this is a fast path, not a second query language.
    An UPDATE's row lock serializes concurrent increments, so a counter needs no prior read.
    """
    from django.db.models import F
    from django.db.models.expressions import CombinedExpression, Value

    qn = connection.ops.quote_name
    meta = model._meta
    sets, conditions, params = [], [], []
    for name, value in assign.items():
        field = meta.get_field(name)
        column = qn(field.column)
        if isinstance(value, CombinedExpression):
            lhs, rhs = value.lhs, value.rhs
            if not (isinstance(lhs, F) and lhs.name == name and isinstance(rhs, Value)
                    and value.connector in ("+", "-") and isinstance(rhs.value, int)):
                raise Unsupported(f"assignment to {name}")
            sets.append(f"{column} = {column} {value.connector} %s")
            params.append(rhs.value)
        elif hasattr(value, "resolve_expression"):
            raise Unsupported(f"assignment to {name}")
        else:
            sets.append(f"{column} = %s")
            params.append(_prep(field, value))
    for lookup, value in where.items():
        name, _, op = lookup.partition("__")
        if op not in _OPERATORS or hasattr(value, "resolve_expression") or (value is None and op):
            raise Unsupported(f"condition {lookup}")
        field = meta.pk if name == "pk" else meta.get_field(name)
        if value is None:
            conditions.append(f"{qn(field.column)} IS NULL")
        else:
            conditions.append(f"{qn(field.column)} {_OPERATORS[op]} %s")
            params.append(_prep(field, value))
    if not conditions:
        raise Unsupported("an UPDATE without a condition")
    sql = f"UPDATE {qn(meta.db_table)} SET {', '.join(sets)} WHERE {' AND '.join(conditions)}"
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount
