"""Thin SQL built from model metadata, for the hot paths (ingest, the sender's claim).

The ORM's bulk_create and update() build model instances, expressions and a
compiler per call; ingest and the sender write a handful of rows per delivery
or send, so they use these helpers instead. Values go through each field's
get_db_prep_save unless they are plain strings, integers, booleans or None for
a field that stores them as they are, so types and time zones behave as through
the ORM. Works on PostgreSQL and SQLite 3.35+.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence

import orjson
from django.db import DEFAULT_DB_ALIAS, connection, connections, models
from psycopg.types.json import Jsonb

if TYPE_CHECKING:
    from django.db.backends.base.base import BaseDatabaseWrapper


def fast_paths(connection: BaseDatabaseWrapper | None = None) -> bool:
    """Whether the PostgreSQL fast paths run on `connection` (the default database when None).

    Where hand-written SQL beats the ORM (a webhook body or a claim as one statement, rows as one
    JSON parameter, COPY and set-based staging, the planner's count estimate, prepared plans), the
    SQL and the ORM or portable path it stands beside sit together, switched by this one predicate.
    Elsewhere (SQLite, the demo's default) the portable path does the same work, and the tests run
    both (docs/internals.md#set-based-writes, #staging, #sender).
    """
    return (connections[DEFAULT_DB_ALIAS] if connection is None else connection).vendor == "postgresql"


# Fields whose database value is the Python value itself for str/int/bool (and None).
_PLAIN_FIELDS = (
    models.CharField,
    models.TextField,
    models.IntegerField,
    models.BooleanField,
    models.ForeignKey,
)
_PLAIN_VALUES = (str, int, bool, type(None))
# Fields whose preparation returns any text (a str subclass: a TextChoices member) as it is.
_TEXT_FIELDS = (models.CharField, models.TextField)


def columns_sql(model: type[models.Model], names: Sequence[str]) -> tuple[str, tuple]:
    """The quoted column list of `names` and their fields (built once per model and names)."""
    return _columns(model, tuple(names))


@lru_cache(maxsize=None)
def _columns(model: type[models.Model], names: tuple[str, ...]) -> tuple[str, tuple]:
    meta = model._meta
    fields = tuple(meta.get_field(name) for name in names)
    qn = connection.ops.quote_name
    return ", ".join(qn(f.column) for f in fields), fields


def _prep(field: models.Field, value: Any) -> Any:
    return _preparer(field, fast_paths())(value, connection)


@lru_cache(maxsize=None)
def _preparer(field: models.Field, postgres: bool) -> Callable[[Any, Any], Any]:
    """How one column's values are prepared: as they are where the ORM would return them unchanged
    (plain strings, integers, booleans and None; on PostgreSQL an aware time), else get_db_prep_save
    (decided once per field)."""
    prepare = field.get_db_prep_save
    plain = isinstance(field, _PLAIN_FIELDS)
    aware_time = postgres and isinstance(field, models.DateTimeField)

    def prep(value: Any, database) -> Any:
        kind = type(value)
        if plain and kind in _PLAIN_VALUES:
            return value
        if aware_time and kind is datetime and value.tzinfo is not None:
            return value
        return prepare(value, database)

    return prep


def _prepped(fields: tuple, rows: list[Sequence[Any]]) -> list[list[Any]]:
    # The connection is resolved once for the rows, not once per value.
    database = connections[DEFAULT_DB_ALIAS]
    postgres = fast_paths(database)
    preparers = [_preparer(f, postgres) for f in fields]
    return [[prep(v, database) for prep, v in zip(preparers, row)] for row in rows]


_JSON_PLAIN = (str, int, bool, type(None))
_NO_JSON_FORM = object()
# A JSON column's value is written by the standard library's encoder as it always was, which refuses
# what JSON cannot carry (NaN, the infinities, a circular value) where orjson would write null for a
# non-finite number; ASCII, so a lone surrogate goes as its escape, as before.
_STRICT_JSON = json.JSONEncoder(allow_nan=False)


def _json_form(field: models.Field, value: Any) -> Any:
    """A prepared value as orjson carries it exactly, or _NO_JSON_FORM.

    orjson writes a time in UTC as isoformat() writes it, but cuts an offset's seconds: any other
    time goes as isoformat()'s text. A JSON column's value goes as its own strict JSON text."""
    kind = type(value)
    if kind in _JSON_PLAIN or isinstance(value, str):  # a TextChoices member is its text
        return value
    if kind is datetime:
        return value if value.tzinfo is timezone.utc else value.isoformat()
    if isinstance(value, Jsonb) and isinstance(field, models.JSONField) and field.encoder is None:
        try:
            return orjson.Fragment(_STRICT_JSON.encode(value.obj))
        except (TypeError, ValueError):
            return _NO_JSON_FORM
    return _NO_JSON_FORM


def _json_dumps(rows: list[list[Any]]) -> str | None:
    """The rows as one JSON array of arrays, or None where orjson has no exact form for a value
    (an integer past 64 bits, text with a lone surrogate): the caller then writes VALUES."""
    try:
        return orjson.dumps(rows).decode()
    except TypeError:  # orjson.JSONEncodeError
        return None


def _json_rows(fields: tuple, rows: list[list[Any]]) -> str | None:
    """Prepared rows as one JSON array of arrays, or None when a value has no exact JSON form."""
    encoded = []
    for row in rows:
        out = [_json_form(field, value) for field, value in zip(fields, row)]
        if _NO_JSON_FORM in out:
            return None
        encoded.append(out)
    return _json_dumps(encoded)


def _json_cast(db_type: str, value: str) -> str:
    """`value` (JSON's text of one value) as a column of `db_type` takes it.

    Text goes uncast: the INSERT's own assignment converts it and checks a varchar(n)'s length
    ("value too long"), as a VALUES row's would; an explicit cast to varchar(n) would cut a longer
    value to fit instead. Leaving the cast out also keeps ingest's one statement under the length
    psycopg caches its conversion for (tests/ingress/test_one_statement.py). Any other type is cast
    to itself without its length, and the column checks that too."""
    unbounded = re.sub(r"\(\d+\)$", "", db_type)
    if unbounded in ("varchar", "text"):
        return value
    return f"({value})::{unbounded}"


def json_casts(fields: Sequence[models.Field], alias: str, start: int = 0) -> list[str]:
    """Each field's value read from the JSON array `alias`.e (positions from `start`), as its
    column takes it: the row source of an INSERT ... SELECT from one JSON parameter."""
    return [
        # Python's None is SQL NULL in a JSON column too, as the ORM stores it.
        f"NULLIF({alias}.e->{i}, 'null'::jsonb)"
        if isinstance(f, models.JSONField)
        else _json_cast(f.db_type(connection), f"{alias}.e->>{i}")
        for i, f in enumerate(fields, start)
    ]


def json_encoded(fields: Sequence[models.Field], rows: list[Sequence[Any]]) -> str | None:
    """Rows prepared as the ORM would, as one JSON array of arrays (None: a value has no exact JSON form)."""
    return _json_rows(tuple(fields), _prepped(tuple(fields), rows))


class JsonRows:
    """`json_encoded` for one column list used again and again (a statement's JSON parameter), in
    one pass: each column's way of preparing is decided once, not per call (a field's hash is not
    free), and a value the ORM would store as it is (a string, integer, boolean or None for a column
    that stores it as it is, any text for a text column; on PostgreSQL a time in UTC or none) goes
    into the JSON with no call at all."""

    def __init__(self, fields: Sequence[models.Field]) -> None:
        self.fields = tuple(fields)
        self._columns: dict[bool, tuple[tuple[bool, bool, bool, models.Field], ...]] = {}

    def encoded(self, rows: list[Sequence[Any]]) -> str | None:
        database = connections[DEFAULT_DB_ALIAS]
        postgres = fast_paths(database)
        columns = self._columns.get(postgres)
        if columns is None:
            columns = self._columns[postgres] = tuple(
                (
                    isinstance(f, _PLAIN_FIELDS),
                    isinstance(f, _TEXT_FIELDS),
                    postgres and isinstance(f, models.DateTimeField),
                    f,
                )
                for f in self.fields
            )
        encoded = []
        for row in rows:
            out = []
            for (plain, text, aware_time, field), value in zip(columns, row):
                kind = type(value)
                if (
                    (plain and kind in _PLAIN_VALUES)
                    # A TextChoices member: a text column's preparation returns it as it is.
                    or (text and isinstance(value, str))
                    # A time in UTC, or none: orjson writes it as _json_form would.
                    or (aware_time and (value is None or (kind is datetime and value.tzinfo is timezone.utc)))
                ):
                    out.append(value)
                    continue
                if not (aware_time and kind is datetime and value.tzinfo is not None):
                    value = field.get_db_prep_save(value, database)
                value = _json_form(field, value)
                if value is _NO_JSON_FORM:
                    return None
                out.append(value)
            encoded.append(out)
        return _json_dumps(encoded)


@lru_cache(maxsize=None)
def _json_select(fields: tuple) -> str:
    columns = ", ".join(json_casts(fields, "r"))
    return f"SELECT {columns} FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS r(e, n) ORDER BY r.n"


def _row_sources(fields: tuple, rows: list[Sequence[Any]]) -> Iterator[tuple[str, list[Any]]]:
    """The rows as the source of an INSERT: (SQL, parameters), in as few statements as the
    database takes.

    PostgreSQL takes several rows as one JSON parameter, unpacked by the server
    (``SELECT (e->>0)::type, ... FROM jsonb_array_elements(%s)``, in the rows'
    order): the statement's text is the same for 2 rows or 2,000, so psycopg
    converts it once and PostgreSQL prepares it once per connection, and the
    values cost one JSON encoding instead of adapting each one (measured: a fifth
    of the client CPU of a VALUES list, half of binary arrays). One row, a value
    without an exact JSON form, and SQLite take VALUES (SQLite in chunks under
    its parameter limit).
    """
    prepped = _prepped(fields, rows)
    if fast_paths() and len(prepped) > 1:
        encoded = _json_rows(fields, prepped)
        if encoded is not None:
            yield _json_select(fields), [encoded]
            return
    placeholders = "(" + ", ".join(["%s"] * len(fields)) + ")"
    limit = connection.features.max_query_params or 65535
    size = max(1, limit // len(fields))
    for start in range(0, len(prepped), size):
        chunk = prepped[start : start + size]
        yield f"VALUES {', '.join([placeholders] * len(chunk))}", [v for row in chunk for v in row]


def insert_rows(
    model: type[models.Model],
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    ignore_conflicts: bool = False,
) -> list[int | None]:
    """INSERT rows (values in `columns` order) RETURNING the primary keys, in the rows' order.

    With ignore_conflicts, a row that any unique constraint already holds is
    skipped (ON CONFLICT DO NOTHING) and returns no key: the database, not a
    prior lookup, decides who was first.
    """
    rows = list(rows)
    if not rows:
        return []
    head, tail, fields = _insert_sql(model, tuple(columns), ignore_conflicts)
    keys: list[int | None] = []
    with connection.cursor() as cursor:
        for source, params in _row_sources(fields, rows):
            cursor.execute(f"{head} {source}{tail}", params)
            keys += [r[0] for r in cursor.fetchall()]
    return keys


@lru_cache(maxsize=None)
def _insert_sql(
    model: type[models.Model], columns: tuple[str, ...], ignore_conflicts: bool
) -> tuple[str, str, tuple]:
    """An INSERT's text before and after its row source (built once per model and columns)."""
    column_sql, fields = _columns(model, columns)
    qn = connection.ops.quote_name
    return (
        f"INSERT INTO {qn(model._meta.db_table)} ({column_sql})",
        f"{' ON CONFLICT DO NOTHING' if ignore_conflicts else ''} RETURNING {qn(model._meta.pk.column)}",
        fields,
    )


def upsert_counting(
    model: type[models.Model],
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    conflict: Sequence[str],
    same: Sequence[str],
    count: str,
    touch: Sequence[str] = (),
) -> dict[tuple, tuple[int, int]]:
    """INSERT rows, or count another sighting of the row a unique key already holds.

    One statement: ``INSERT ... ON CONFLICT (<conflict>) DO UPDATE SET <count> =
    <count> + 1, <touch> = the new values WHERE every <same> column equals the
    new row's``. Returns {conflict values: (primary key, count)} for each row
    inserted (count 1: the insert writes 1) or counted (2 and more); a row held
    under its key with different <same> values is left untouched and absent from
    the result, so the caller sees the conflict. The row lock ON CONFLICT takes
    serializes concurrent sightings, and it reads the latest committed row, so a
    concurrent first insert is counted, never mistaken for a conflict. Rows must
    not repeat a conflict key (one statement cannot update a row twice).
    """
    rows = list(rows)
    if not rows:
        return {}
    head, tail, fields = upsert_sql(model, tuple(columns), tuple(conflict), tuple(same), count, tuple(touch))
    found: dict[tuple, tuple[int, int]] = {}
    with connection.cursor() as cursor:
        for source, params in _row_sources(fields, rows):
            cursor.execute(f"{head} {source} {tail}", params)
            found.update({tuple(r[1:-1]): (r[0], r[-1]) for r in cursor.fetchall()})
    return found


@lru_cache(maxsize=None)
def upsert_sql(
    model: type[models.Model],
    columns: Sequence[str],
    conflict: Sequence[str],
    same: Sequence[str],
    count: str,
    touch: Sequence[str],
) -> tuple[str, str, tuple]:
    """upsert_counting's text before and after its row source (built once per shape): the INSERT
    head, and the ON CONFLICT ... RETURNING primary key, conflict columns and count."""
    column_sql, fields = _columns(model, columns)
    qn = connection.ops.quote_name
    meta = model._meta
    column_of = {name: qn(meta.get_field(name).column) for name in (*conflict, *same, count, *touch)}
    held = "held"
    assign = [f"{column_of[count]} = {held}.{column_of[count]} + 1"]
    assign += [f"{column_of[name]} = EXCLUDED.{column_of[name]}" for name in touch]
    unchanged = " AND ".join(f"{held}.{column_of[name]} = EXCLUDED.{column_of[name]}" for name in same)
    returned = ", ".join([qn(meta.pk.column), *(column_of[name] for name in conflict), column_of[count]])
    return (
        f"INSERT INTO {qn(meta.db_table)} AS {held} ({column_sql})",
        f"ON CONFLICT ({', '.join(column_of[name] for name in conflict)}) "
        f"DO UPDATE SET {', '.join(assign)} WHERE {unchanged} RETURNING {returned}",
        fields,
    )


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
    return model.from_db(connection.alias, attnames, values), row[len(attnames) :]


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
            if not (
                isinstance(lhs, F)
                and lhs.name == name
                and isinstance(rhs, Value)
                and value.connector in ("+", "-")
                and isinstance(rhs.value, int)
            ):
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
