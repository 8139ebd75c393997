"""Thin SQL built from model metadata, for the ingest hot path.

The ORM's bulk_create and update() build model instances, expressions and a
compiler per call; ingest writes a handful of rows per delivery on every
request, so it uses these helpers instead. Values go through each field's
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


def increment_where(
    model: type[models.Model], *, counter: str, where: dict[str, Any], assign: dict[str, Any]
) -> int:
    """UPDATE ... SET counter = counter + 1, <assign> WHERE <where>; returns rows changed.

    The row lock the UPDATE takes serializes concurrent increments; the count
    is exact without a prior read.
    """
    qn = connection.ops.quote_name
    _, (counter_field,) = _columns(model, (counter,))
    assign_sql, assign_fields = _columns(model, tuple(assign))
    _, where_fields = _columns(model, tuple(where))
    counter_col = qn(counter_field.column)
    sets = [f"{counter_col} = {counter_col} + 1"] + [f"{qn(f.column)} = %s" for f in assign_fields]
    conditions = [f"{qn(f.column)} = %s" for f in where_fields]
    params = [_prep(f, v) for f, v in zip(assign_fields, assign.values())]
    params += [_prep(f, v) for f, v in zip(where_fields, where.values())]
    sql = f"UPDATE {qn(model._meta.db_table)} SET {', '.join(sets)} WHERE {' AND '.join(conditions)}"
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def update_where(model: type[models.Model], *, assign: dict[str, Any], where: dict[str, Any]) -> int:
    """UPDATE ... SET <assign> WHERE <where> (equality only); returns rows changed."""
    qn = connection.ops.quote_name
    _, assign_fields = _columns(model, tuple(assign))
    _, where_fields = _columns(model, tuple(where))
    sets = ", ".join(f"{qn(f.column)} = %s" for f in assign_fields)
    conditions = " AND ".join(f"{qn(f.column)} = %s" for f in where_fields)
    params = [_prep(f, v) for f, v in zip(assign_fields, assign.values())]
    params += [_prep(f, v) for f, v in zip(where_fields, where.values())]
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {qn(model._meta.db_table)} SET {sets} WHERE {conditions}", params)
        return cursor.rowcount


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


def compare_and_set(
    model: type[models.Model], *, pk: int, where: dict[str, Any], assign: dict[str, Any]
) -> int | None:
    """UPDATE ... SET <assign> WHERE pk = %s AND <where>; rows changed.

    `where` takes `field` or `field__lt|lte|gt|gte`; `assign` takes plain values
    or `F("field") + n`. Returns None for anything else, and the caller uses the
    ORM instead: this is a fast path, not a second query language.
    """
    from django.db.models import F
    from django.db.models.expressions import CombinedExpression, Value

    qn = connection.ops.quote_name
    meta = model._meta
    sets, conditions, params = [], [f"{qn(meta.pk.column)} = %s"], []
    for name, value in assign.items():
        field = meta.get_field(name)
        if isinstance(value, CombinedExpression):
            lhs, rhs = value.lhs, value.rhs
            if not (isinstance(lhs, F) and lhs.name == name and isinstance(rhs, Value)
                    and value.connector in ("+", "-") and isinstance(rhs.value, int)):
                return None
            sets.append(f"{qn(field.column)} = {qn(field.column)} {value.connector} %s")
            params.append(rhs.value)
        elif hasattr(value, "resolve_expression"):
            return None
        else:
            sets.append(f"{qn(field.column)} = %s")
            params.append(None if value is None else _prep(field, value))
    params.append(pk)
    for lookup, value in where.items():
        name, _, op = lookup.partition("__")
        if op not in _OPERATORS or hasattr(value, "resolve_expression"):
            return None
        field = meta.get_field(name)
        if value is None:
            if op:
                return None
            conditions.append(f"{qn(field.column)} IS NULL")
            continue
        conditions.append(f"{qn(field.column)} {_OPERATORS[op]} %s")
        params.append(_prep(field, value))
    sql = f"UPDATE {qn(meta.db_table)} SET {', '.join(sets)} WHERE {' AND '.join(conditions)}"
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount
