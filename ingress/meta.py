"""Meta's app callback: the verification handshake, the proof over the app's secrets, and each
entry routed to the source that owns its account, all in one transaction.

One Meta app posts every object it is subscribed to (`instagram`, `page`) to
/webhooks/meta/<app id>/. A body is verified against any of the secrets the
app's sources name (two while a secret is being changed), then split by entry:
an entry goes to the source whose adapter serves the body's object and whose
account is the entry's id; an entry no source owns gets an authenticated
`unknown_account` receipt. Meta understands only 200, so every authentic body
is answered 200, its receipts named in the answer.

Concurrent bodies lock what they share in one order: each source's events (by
event key, ingress.services), then its own items (by kind and id), then its
ignored counts (by name), sources by primary key, each table in one statement.
A refused body meets its first receipt: by a read, and where copies of one body
race to write it, by the database's constraint (ONE_WAITING_RECEIPT): the copy
that loses has written nothing that stays and is run again, meeting it.
"""

from __future__ import annotations

import hmac
import logging
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Mapping

from django.db import DataError, IntegrityError, connection, models, transaction
from django.utils import timezone

from conduit.canonical import sha256_hex
from conduit.logging import register_secret
from conduit.process_secrets import secret_read
from conduit.providers.base import OwnItem, ProofError, Rejection, SecretUnavailable
from conduit.providers.meta.subscriptions import (
    subscription_problem,
    token_expiry_problem,
)
from conduit.providers.meta.webhook import MetaBody, body_split, counter_name
from conduit.providers.registry import ADAPTERS, get_adapter
from conduit.sql import columns_sql, json_casts, json_encoded
from ingress.models import ONE_WAITING_RECEIPT, IgnoredUpdate, QuarantineReceipt, SelfAuthoredItem, Source
from ingress.selectors import source_config
from ingress.services import (
    EventResult,
    ProofRefused,
    _proof_failure_record,
    _quarantine,
    observations_accept,
)
from ingress.signals import self_authored_seen

logger = logging.getLogger("conduit.ingress")

META_ADAPTERS = tuple(name for name, cls in ADAPTERS.items() if getattr(cls, "object", ""))
MAX_CHALLENGE = 256
# How often one body is run again after losing a receipt race: once suffices (the receipt it lost
# to is committed when it learns of it); the bound keeps a broken invariant from looping.
RECEIPT_RACE_ATTEMPTS = 3


@dataclass
class MetaResult:
    delivery_id: str
    results: list[dict] = field(default_factory=list)
    receipt_ids: list[str] = field(default_factory=list)
    ignored: int = 0


def app_sources(app_id: str) -> list[Source]:
    """The app's Meta sources, oldest first (the first is where app-level receipts are kept)."""
    return list(Source.objects.filter(meta_app_id=app_id, adapter__in=META_ADAPTERS).order_by("pk"))


def _values(names: list[str]) -> list[str]:
    values = []
    for name in dict.fromkeys(n for n in names if n):
        value = secret_read(name)
        if value:
            register_secret(value)
            values.append(value)
    return values


def verification_answer(*, app_id: str, mode: str, token: str, challenge: str) -> str | None:
    """The challenge to echo when `token` is one of the app's verify tokens, else None."""
    if mode != "subscribe" or not token or not challenge or len(challenge) > MAX_CHALLENGE \
            or not challenge.isascii() or not challenge.isprintable():
        return None
    tokens = _values([s.verify_token_env for s in app_sources(app_id)])
    # Every candidate is compared, in constant time each.
    matched = [hmac.compare_digest(token.encode("utf-8", "surrogatepass"), t.encode("utf-8")) for t in tokens]
    return challenge if any(matched) else None


def _upsert(model: type[models.Model], columns: tuple[str, ...], rows: list[list], *,
            conflict: tuple[str, ...], assign: str, returning: tuple[str, ...]) -> list[tuple]:
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
    tail = (f"ON CONFLICT ({', '.join(column[name] for name in conflict)}) DO UPDATE SET {assign} "
            f"RETURNING {', '.join(column[name] for name in returning)}")
    encoded = json_encoded(fields, rows) if connection.vendor == "postgresql" else None
    with connection.cursor() as cursor:
        if encoded is not None:
            cursor.execute(f"{head} SELECT {', '.join(json_casts(fields, 'r'))} "
                           f"FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS r(e, n) ORDER BY r.n {tail}",
                           [encoded])
        else:
            placeholders = "(" + ", ".join(["%s"] * len(fields)) + ")"
            cursor.execute(f"{head} VALUES {', '.join([placeholders] * len(rows))} {tail}",
                           [f.get_db_prep_save(v, connection) for row in rows for f, v in zip(fields, row)])
        return cursor.fetchall()


SELF_AUTHORED_COLUMNS = ("source", "kind", "provider_id", "parent_ref", "correlation", "text_digest",
                         "occurred_at", "first_seen_at", "seen_count")


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
    rows = [[source.pk, kind, provider_id, item.parent_ref, item.correlation, item.text_digest,
             item.occurred_at, at, 1] for (kind, provider_id), item in ordered]
    digests = {(kind, provider_id): digest for kind, provider_id, digest in _upsert(
        SelfAuthoredItem, SELF_AUTHORED_COLUMNS, rows, conflict=("source", "kind", "provider_id"),
        assign="seen_count = held.seen_count + 1, "
               "text_digest = COALESCE(NULLIF(held.text_digest, ''), EXCLUDED.text_digest)",
        returning=("kind", "provider_id", "text_digest"))}
    seen = [{"kind": kind, "provider_id": provider_id, "parent_ref": item.parent_ref,
             "correlation": item.correlation, "text_digest": digests[(kind, provider_id)]}
            for (kind, provider_id), item in ordered]
    # After commit: whoever listens (replies) reads what this transaction recorded.
    transaction.on_commit(lambda: self_authored_seen.send(sender=SelfAuthoredItem, source_id=source.pk,
                                                          items=seen))


IGNORED_COLUMNS = ("source", "name", "count", "last_seen_at")


def ignored_count(source: Source, names: Counter, at: datetime) -> None:
    """Count updates outside the source's allowlist: one upsert, in name order.

    Names come escaped and bounded (counter_name); escaping again leaves such a name as it is,
    and makes any other storable, so a count is never what refuses a body.
    """
    counts: Counter = Counter()
    for name, count in names.items():
        counts[counter_name(name)] += count  # two names may meet once bounded: one row, one count
    if not counts:
        return
    rows = [[source.pk, name, count, at] for name, count in sorted(counts.items())]
    _upsert(IgnoredUpdate, IGNORED_COLUMNS, rows, conflict=("source", "name"),
            assign="count = held.count + EXCLUDED.count, last_seen_at = EXCLUDED.last_seen_at",
            returning=("name",))


def _receipt_once(*, source: Source, reason_code: str, detail: str, event_index: int | None,
                  quarantine: dict) -> str:
    """One authenticated receipt per body and finding: Meta retries a body for up to 36 hours, and
    each retry (the same bytes, so the same delivery id) meets the first receipt, not a new one.

    Copies of a body arriving at once may all read no receipt: the database's constraint
    (ONE_WAITING_RECEIPT) lets one write it, and the others' IntegrityError makes the caller run
    them again (meta_webhook_receive), when this read meets it.
    """
    earlier = QuarantineReceipt.objects.filter(
        source=source, delivery_id=quarantine["delivery_id"], body_sha256=quarantine["body_sha256"],
        authenticated=True, reason_code=reason_code, event_index=event_index,
    ).order_by("pk").values_list("receipt_id", flat=True).first()
    if earlier is not None:
        return str(earlier)
    receipt = _quarantine(source=source, reason_code=reason_code, detail=detail, event_index=event_index,
                          **quarantine)
    return str(receipt.receipt_id)


def _receipt_race(error: IntegrityError) -> bool:
    """Whether `error` is a copy of a body losing the race to write a receipt (ONE_WAITING_RECEIPT),
    not a broken invariant."""
    diagnosis = getattr(error.__cause__, "diag", None)  # psycopg names the constraint
    return ONE_WAITING_RECEIPT in (getattr(diagnosis, "constraint_name", None) or str(error))


def _route(split: MetaBody, sources: list[Source]) -> tuple[dict[int, list], list[int]]:
    """Entries by owning source pk (items in body order), and the indexes of unowned entries."""
    owners = {s.account_ref: s for s in sources if getattr(ADAPTERS[s.adapter], "object", "") == split.object}
    routed: dict[int, list] = {}
    unowned: list[int] = []
    for entry in split.entries:
        owner = owners.get(entry.account)
        if owner is None:
            unowned.append(entry.index)
        else:
            routed.setdefault(owner.pk, []).extend(entry.items)
    return routed, unowned


def meta_webhook_receive(
    *, app_id: str, sources: list[Source], body: bytes, headers: Mapping[str, str],
    now: datetime | None = None,
) -> MetaResult:
    """Verify one Meta body against the app's secrets and accept its entries in one transaction.

    Raises ProofRefused (after recording the failure on the app's first
    source) and SecretUnavailable (no secret the sources name is set). A copy
    of the body that loses the race to write a receipt (ONE_WAITING_RECEIPT)
    is taken back whole and run again, meeting the receipt the winner wrote.
    """
    now = now or timezone.now()
    anchor = sources[0]
    adapter = get_adapter(anchor.adapter)
    secrets = _values([n for s in sources for n in (s.secret_env, s.secret_env_next)])
    if not secrets:
        raise SecretUnavailable(f"no signing secret of Meta app {app_id} is set in the environment")
    body_hash = sha256_hex(body)
    proof, failure = None, None
    for secret in secrets:
        try:
            proof = adapter.verify(body=body, headers=headers, secret=secret, now=now)
            break
        except ProofError as error:
            failure = failure if failure and failure.code == "invalid_signature" else error
    if proof is None:
        receipt_id, coalesced = _proof_failure_record(
            source=anchor, error=failure, body_hash=body_hash, body_bytes=len(body), at=now)
        raise ProofRefused(failure, receipt_id, coalesced)

    quarantine = dict(authenticated=True, body_sha256=body_hash, body_bytes=len(body), at=now,
                      delivery_id=proof.delivery_id)
    split = body_split(body)
    for attempt in range(1, RECEIPT_RACE_ATTEMPTS + 1):
        try:
            result = _accept(app_id=app_id, sources=sources, split=split, quarantine=quarantine, now=now)
            break
        except IntegrityError as exc:
            if attempt == RECEIPT_RACE_ATTEMPTS or not _receipt_race(exc):
                raise  # a broken invariant is a bug, not an outage
            # A copy of this body wrote the receipt first and committed; nothing of this attempt
            # stays, and the next meets that receipt.
            logger.info("meta receipt race app=%s delivery=%s attempt=%s", app_id, proof.delivery_id, attempt)
    logger.info("ingested meta app=%s delivery=%s results=%s ignored=%s", app_id, proof.delivery_id,
                ",".join(f"{r['result']}:{r.get('reason_code') or 'ok'}" for r in result.results), result.ignored)
    return result


def _accept(*, app_id: str, sources: list[Source], split: MetaBody | Rejection, quarantine: dict,
            now: datetime) -> MetaResult:
    """An authentic body's entries accepted in one transaction (or its refusal recorded): the
    attempt meta_webhook_receive runs again when it loses a receipt race."""
    anchor = sources[0]
    delivery_id = quarantine["delivery_id"]
    result = MetaResult(delivery_id=delivery_id)
    try:
        with transaction.atomic(durable=True):
            if isinstance(split, Rejection):  # the whole body
                receipt_id = _receipt_once(source=anchor, reason_code=split.reason_code, detail=split.detail,
                                           event_index=None, quarantine=quarantine)
                result.receipt_ids.append(receipt_id)
                result.results.append({"index": None, "result": "quarantined",
                                       "reason_code": split.reason_code, "receipt_id": receipt_id})
                return result
            served = [s for s in sources if getattr(ADAPTERS[s.adapter], "object", "") == split.object]
            if not served:
                # An object none of the app's sources takes (user, permissions, ...): counted, not kept.
                ignored_count(anchor, Counter({counter_name("object", split.object): len(split.entries)}), now)
                result.ignored = len(split.entries)
                return result
            routed, unowned = _route(split, sources)
            for index in unowned:
                receipt_id = _receipt_once(
                    source=served[0], reason_code="unknown_account", event_index=index,
                    detail=f"entry {index} is for an account no {split.object} source of this app owns",
                    quarantine=quarantine)
                result.receipt_ids.append(receipt_id)
                result.results.append({"index": index, "result": "quarantined",
                                       "reason_code": "unknown_account", "receipt_id": receipt_id})
            for source in sorted((s for s in sources if s.pk in routed), key=lambda s: s.pk):
                accepted = _source_accept(source, routed[source.pk], delivery_id, quarantine, now)
                result.ignored += accepted[1]
                for r in accepted[0]:
                    result.results.append(_result_row(source, r))
                    if r.receipt_id and r.receipt_id not in result.receipt_ids:
                        result.receipt_ids.append(r.receipt_id)
    except DataError as exc:
        # The adapter's boundary should have refused this value; say so loudly, but answer Meta
        # as a refusal, one receipt however often the body comes back.
        logger.error("store refused a value app=%s delivery=%s error=%s", app_id, delivery_id,
                     type(exc).__name__)
        with transaction.atomic(durable=True):
            receipt_id = _receipt_once(
                source=anchor, reason_code="unstorable_value", event_index=None, quarantine=quarantine,
                detail="the event store refused a value of this body; nothing of it was accepted")
        result = MetaResult(delivery_id=delivery_id, receipt_ids=[receipt_id], results=[
            {"index": None, "result": "quarantined", "reason_code": "unstorable_value", "receipt_id": receipt_id}])
    return result


def _source_accept(source: Source, items: list, delivery_id: str, quarantine: dict,
                   now: datetime) -> tuple[list[EventResult], int]:
    """One source's share of a body: its events (seed 004's all-or-nothing batch), its own
    items as evidence, its ignored updates counted."""
    parsed = get_adapter(source.adapter).normalize(items, source.account_ref, source_config(source))
    outcome = observations_accept(
        source=source, parsed=parsed, delivery_id=delivery_id, body_hash=quarantine["body_sha256"],
        body_bytes=quarantine["body_bytes"], now=now,
    )
    if not outcome.refused:
        self_authored_record(source, parsed.own, now)
    ignored_count(source, parsed.ignored, now)
    return outcome.results, sum(parsed.ignored.values())


def _result_row(source: Source, r: EventResult) -> dict:
    return {
        "source": source.name, "index": r.index, "result": r.result,
        **({"event_key": r.event_key} if r.event_key else {}),
        **({"receipt_id": r.receipt_id} if r.receipt_id else {}),
        **({"reason_code": r.reason_code} if r.reason_code else {}),
    }


def meta_subscriptions_check(*, timeout: float = 10.0, now: datetime | None = None) -> dict[str, str]:
    """Read each Meta source's subscribed_apps and its token's expiry, and record what is wrong:
    {source name: problem or ""}.

    Run by `doctor` and daily by the schedule (Meta unsubscribes silently, and tokens expire).
    Canary sources are left out (their Graph is the simulator a canary run starts).
    """
    now = now or timezone.now()
    found: dict[str, str] = {}
    for source in Source.objects.filter(adapter__in=META_ADAPTERS, canary=False).order_by("name"):
        config = source_config(source, with_token=True)
        problem = subscription_problem(
            object_=ADAPTERS[source.adapter].object, account=source.account_ref, app_id=source.meta_app_id,
            event_types=config.event_types, base_url=source.source_url, access_token=config.access_token,
            timeout=timeout,
        )
        expiry = token_expiry_problem(base_url=source.source_url, access_token=config.access_token, now=now,
                                      timeout=timeout)
        problem = "; ".join(p for p in (problem, expiry) if p)[:256]
        Source.objects.filter(pk=source.pk).update(subscription_checked_at=now, subscription_problem=problem)
        if problem:
            logger.warning("meta subscription source=%s problem=%s", source.name, problem)
        found[source.name] = problem
    return found
