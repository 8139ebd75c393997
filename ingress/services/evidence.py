"""What a body holds besides events: what the account itself authored and what the platform
reported of the account's messages, kept as receipt evidence, and the updates outside a source's
allowlist, counted.

Concurrent bodies lock what they share in one order: each source's own items (by kind and id),
then its ignored counts (by name), each table in one statement.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from django.db import connection, models, transaction

from conduit.providers.base import OwnItem, SharedCallback, StatusItem
from conduit.sql import columns_sql, fast_paths, json_casts, json_encoded
from ingress.models import IgnoredUpdate, MessageStatus, SelfAuthoredItem, Source
from ingress.signals import message_statuses_seen, self_authored_seen


def _upsert(
    model: type[models.Model],
    columns: tuple[str, ...],
    rows: list[list],
    *,
    conflict: tuple[str, ...],
    assign: str,
    returning: tuple[str, ...],
) -> list[tuple]:
    """INSERT `rows` in the order given or, where `conflict` already holds one, apply `assign` (SQL
    over `held`, the row held, and EXCLUDED, the row offered): one statement, returning the
    `returning` columns of each row written.

    One statement takes its rows' locks in its rows' order, so callers pass them sorted by key:
    two transactions sharing rows then wait for each other in one order, never in a cycle. On
    PostgreSQL the rows travel as one JSON parameter read in order (WITH ORDINALITY ... ORDER BY).
    """
    column_sql, fields = columns_sql(model, columns)
    qn = connection.ops.quote_name
    column = {name: qn(model._meta.get_field(name).column) for name in (*conflict, *returning)}
    head = f"INSERT INTO {qn(model._meta.db_table)} AS held ({column_sql})"
    tail = (
        f"ON CONFLICT ({', '.join(column[name] for name in conflict)}) DO UPDATE SET {assign} "
        f"RETURNING {', '.join(column[name] for name in returning)}"
    )
    encoded = json_encoded(fields, rows) if fast_paths(connection) else None
    with connection.cursor() as cursor:
        if encoded is not None:
            cursor.execute(
                f"{head} SELECT {', '.join(json_casts(fields, 'r'))} "
                f"FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS r(e, n) ORDER BY r.n {tail}",
                [encoded],
            )
        else:
            placeholders = "(" + ", ".join(["%s"] * len(fields)) + ")"
            cursor.execute(
                f"{head} VALUES {', '.join([placeholders] * len(rows))} {tail}",
                [f.get_db_prep_save(v, connection) for row in rows for f, v in zip(fields, row)],
            )
        return cursor.fetchall()


SELF_AUTHORED_COLUMNS = (
    "source",
    "kind",
    "provider_id",
    "parent_ref",
    "correlation",
    "text_digest",
    "occurred_at",
    "first_seen_at",
    "seen_count",
)


def self_authored_record(source: Source, items: list[OwnItem], at: datetime) -> None:
    """Keep what the account itself authored (seen by a webhook or a read-back) as receipt
    evidence, once per item; whoever listens (replies) hears of it after commit.

    One upsert in (kind, provider id) order, as events are written in key order: two bodies
    carrying the same items in opposite orders wait for each other, never deadlock. An item is
    one sighting per body (as an event is), its first record kept: a repeat counts, and the text
    digest first seen stays (one recorded before digests were kept is filled in).
    """
    first: dict[tuple[str, str], OwnItem] = {}
    for item in items:
        first.setdefault((item.kind, item.provider_id), item)
    if not first:
        return
    ordered = sorted(first.items())
    rows = [
        [
            source.pk,
            kind,
            provider_id,
            item.parent_ref,
            item.correlation,
            item.text_digest,
            item.occurred_at,
            at,
            1,
        ]
        for (kind, provider_id), item in ordered
    ]
    digests = {
        (kind, provider_id): digest
        for kind, provider_id, digest in _upsert(
            SelfAuthoredItem,
            SELF_AUTHORED_COLUMNS,
            rows,
            conflict=("source", "kind", "provider_id"),
            assign="seen_count = held.seen_count + 1, "
            "text_digest = COALESCE(NULLIF(held.text_digest, ''), EXCLUDED.text_digest)",
            returning=("kind", "provider_id", "text_digest"),
        )
    }
    seen = [
        {
            "kind": kind,
            "provider_id": provider_id,
            "parent_ref": item.parent_ref,
            "correlation": item.correlation,
            "text_digest": digests[(kind, provider_id)],
        }
        for (kind, provider_id), item in ordered
    ]
    # After commit: whoever listens (replies) reads what this transaction recorded.
    transaction.on_commit(
        lambda: self_authored_seen.send(sender=SelfAuthoredItem, source_id=source.pk, items=seen)
    )


STATUS_COLUMNS = (
    "source",
    "provider_id",
    "status",
    "correlation",
    "error_code",
    "occurred_at",
    "first_seen_at",
    "seen_count",
)


def message_statuses_record(source: Source, items: list[StatusItem], at: datetime) -> None:
    """Keep what the platform reported of the account's messages (ingress.statuses), once per
    (message, status): one upsert in that order, a repeat counted on its row; whoever listens
    (replies) hears of each after commit, repeats included, as a settlement is idempotent."""
    first: dict[tuple[str, str], StatusItem] = {}
    for item in items:
        first.setdefault((item.provider_id, item.status), item)
    if not first:
        return
    ordered = sorted(first.items())
    rows = [
        [source.pk, wamid, status, item.correlation, item.error_code, item.occurred_at, at, 1]
        for (wamid, status), item in ordered
    ]
    _upsert(
        MessageStatus,
        STATUS_COLUMNS,
        rows,
        conflict=("source", "provider_id", "status"),
        assign="seen_count = held.seen_count + 1, "
        "correlation = COALESCE(NULLIF(held.correlation, ''), EXCLUDED.correlation)",
        returning=("provider_id",),
    )
    seen = [
        {
            "provider_id": wamid,
            "status": status,
            "correlation": item.correlation,
            "error_code": item.error_code,
        }
        for (wamid, status), item in ordered
    ]
    transaction.on_commit(
        lambda: message_statuses_seen.send(sender=MessageStatus, source_id=source.pk, items=seen)
    )


def message_status_correlate(*, source_id: int, provider_id: str, status: str, reply_key: str) -> int:
    """A status that came without the reply key, found to be of a reply by its message id (a
    `failed` status carries none): its ledger row names that reply too. Never overwrites a
    correlation the platform carried. Returns the rows changed (0 or 1)."""
    return MessageStatus.objects.filter(
        source_id=source_id, provider_id=provider_id, status=status, correlation=""
    ).update(correlation=reply_key)


def message_status_review(*, status_id: int, actor: str, at: datetime | None = None) -> bool:
    """A person has looked at a failed delivery: it leaves the queue. False if it already had."""
    from django.utils import timezone

    return bool(
        MessageStatus.objects.filter(pk=status_id, reviewed_at__isnull=True).update(
            reviewed_at=at or timezone.now(), reviewed_by=actor[:150] or "unknown"
        )
    )


IGNORED_COLUMNS = ("source", "name", "count", "last_seen_at")


def ignored_count(source: Source, names: Counter, at: datetime, *, callback: SharedCallback) -> None:
    """Count updates outside the source's allowlist: one upsert, in name order.

    Names come escaped and bounded (the callback's counter_name); escaping again leaves such a
    name as it is, and makes any other storable, so a count is never what refuses a body.
    """
    counts: Counter = Counter()
    for name, count in names.items():
        counts[callback.counter_name(name)] += count  # two names may meet once bounded: one row, one count
    if not counts:
        return
    rows = [[source.pk, name, count, at] for name, count in sorted(counts.items())]
    _upsert(
        IgnoredUpdate,
        IGNORED_COLUMNS,
        rows,
        conflict=("source", "name"),
        assign="count = held.count + EXCLUDED.count, last_seen_at = EXCLUDED.last_seen_at",
        returning=("name",),
    )
