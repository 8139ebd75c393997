"""A platform app's shared callback: one endpoint per platform app, a body verified against the
app's sources and split by entry to the source owning each account, all in one transaction.

One app posts every kind of body it is subscribed to (each served by one of the
platform's adapters) to /webhooks/<platform>/<app id>/. A body is verified
against any of the secrets the app's sources name (two while a secret is being
changed), then split by entry (the platform's `SharedCallback.split`): an entry
goes to the source whose adapter serves the body's object and whose account is
the entry's id; an entry no source owns gets an authenticated `unknown_account`
receipt. Every authentic body is answered 200, its receipts named in the answer.

Concurrent bodies lock what they share in one order: each source's events (by
event key, ingress.services), then its own items and ignored counts
(ingress.services.evidence), sources by primary key. A refused body meets its
first receipt: by a read, and where copies of one body race to write it, by
the database's constraint (ONE_WAITING_RECEIPT): the copy that loses has
written nothing that stays and is run again, meeting it.
"""

from __future__ import annotations

import hmac
import logging
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Mapping

from django.db import DataError, IntegrityError, transaction
from django.utils import timezone

from conduit.canonical import sha256_hex
from conduit.logging import register_secret
from conduit.process_secrets import secret_read
from conduit.providers.base import CallbackBody, ProofError, Rejection, SecretUnavailable, SharedCallback
from conduit.providers.registry import ADAPTERS, callback_adapters, get_adapter
from ingress.models import ONE_WAITING_RECEIPT, QuarantineReceipt, Source
from ingress.selectors import source_config
from ingress.services.evidence import ignored_count, message_statuses_record, self_authored_record
from ingress.services.ingest import observations_accept
from ingress.services.quarantine import _proof_failure_record, _quarantine
from ingress.services.results import EventResult, ProofRefused

logger = logging.getLogger("conduit.ingress")

MAX_CHALLENGE = 256
# How often one body is run again after losing a receipt race: once suffices (the receipt it lost
# to is committed when it learns of it); the bound keeps a broken invariant from looping.
RECEIPT_RACE_ATTEMPTS = 3


@dataclass
class CallbackResult:
    delivery_id: str
    results: list[dict] = field(default_factory=list)
    receipt_ids: list[str] = field(default_factory=list)
    ignored: int = 0


def callback_sources(*, callback: SharedCallback, app_id: str) -> list[Source]:
    """The app's sources on the callback, oldest first (the first is where app-level receipts are kept)."""
    adapters = callback_adapters(callback.platform)
    return list(Source.objects.filter(app_id=app_id, adapter__in=adapters).order_by("pk"))


def _values(names: list[str]) -> list[str]:
    values = []
    for name in dict.fromkeys(n for n in names if n):
        value = secret_read(name)
        if value:
            register_secret(value)
            values.append(value)
    return values


def verification_answer(*, callback: SharedCallback, app_id: str, query: Mapping[str, str]) -> str | None:
    """The challenge to echo when the query is the platform's verification request and its token
    is one of the app's verify tokens, else None."""
    request = callback.handshake(query)
    if request is None:
        return None
    token, challenge = request
    if (
        not token
        or not challenge
        or len(challenge) > MAX_CHALLENGE
        or not challenge.isascii()
        or not challenge.isprintable()
    ):
        return None
    tokens = _values([s.verify_token_env for s in callback_sources(callback=callback, app_id=app_id)])
    # Every candidate is compared, in constant time each.
    matched = [hmac.compare_digest(token.encode("utf-8", "surrogatepass"), t.encode("utf-8")) for t in tokens]
    return challenge if any(matched) else None


def _receipt_once(
    *, source: Source, reason_code: str, detail: str, event_index: int | None, quarantine: dict
) -> str:
    """One authenticated receipt per body and finding: a platform retries a body for hours (Meta for 36), and
    each retry (the same bytes, so the same delivery id) meets the first receipt, not a new one.

    Copies of a body arriving at once may all read no receipt: the database's constraint
    (ONE_WAITING_RECEIPT) lets one write it, and the others' IntegrityError makes the caller run
    them again (shared_callback_receive), when this read meets it.
    """
    earlier = (
        QuarantineReceipt.objects.filter(
            source=source,
            delivery_id=quarantine["delivery_id"],
            body_sha256=quarantine["body_sha256"],
            authenticated=True,
            reason_code=reason_code,
            event_index=event_index,
        )
        .order_by("pk")
        .values_list("receipt_id", flat=True)
        .first()
    )
    if earlier is not None:
        return str(earlier)
    receipt = _quarantine(
        source=source, reason_code=reason_code, detail=detail, event_index=event_index, **quarantine
    )
    return str(receipt.receipt_id)


def _receipt_race(error: IntegrityError) -> bool:
    """Whether `error` is a copy of a body losing the race to write a receipt (ONE_WAITING_RECEIPT),
    not a broken invariant."""
    diagnosis = getattr(error.__cause__, "diag", None)  # psycopg names the constraint
    return ONE_WAITING_RECEIPT in (getattr(diagnosis, "constraint_name", None) or str(error))


def _serves(source: Source, split: CallbackBody) -> bool:
    """Whether the source's adapter serves the body's object."""
    return ADAPTERS[source.adapter].object == split.object


def _route(split: CallbackBody, sources: list[Source]) -> tuple[dict[int, list], list[int]]:
    """Entries by owning source pk (items in body order), and the indexes of unowned entries."""
    owners = {s.account_ref: s for s in sources if _serves(s, split)}
    routed: dict[int, list] = {}
    unowned: list[int] = []
    for entry in split.entries:
        owner = owners.get(entry.account)
        if owner is None:
            unowned.append(entry.index)
        else:
            routed.setdefault(owner.pk, []).extend(entry.items)
    return routed, unowned


def shared_callback_receive(
    *,
    callback: SharedCallback,
    app_id: str,
    sources: list[Source],
    body: bytes,
    headers: Mapping[str, str],
    now: datetime | None = None,
) -> CallbackResult:
    """Verify one body against the app's secrets and accept its entries in one transaction.

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
        raise SecretUnavailable(
            f"no signing secret of {callback.label} app {app_id} is set in the environment"
        )
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
            source=anchor, error=failure, body_hash=body_hash, body_bytes=len(body), at=now
        )
        raise ProofRefused(failure, receipt_id, coalesced)

    quarantine = dict(
        authenticated=True, body_sha256=body_hash, body_bytes=len(body), at=now, delivery_id=proof.delivery_id
    )
    split = callback.split(body)
    for attempt in range(1, RECEIPT_RACE_ATTEMPTS + 1):
        try:
            result = _accept(
                callback=callback, app_id=app_id, sources=sources, split=split, quarantine=quarantine, now=now
            )
            break
        except IntegrityError as exc:
            if attempt == RECEIPT_RACE_ATTEMPTS or not _receipt_race(exc):
                raise  # a broken invariant is a bug, not an outage
            # A copy of this body wrote the receipt first and committed; nothing of this attempt
            # stays, and the next meets that receipt.
            logger.info(
                "%s receipt race app=%s delivery=%s attempt=%s",
                callback.platform,
                app_id,
                proof.delivery_id,
                attempt,
            )
    logger.info(
        "ingested %s app=%s delivery=%s results=%s ignored=%s",
        callback.platform,
        app_id,
        proof.delivery_id,
        ",".join(f"{r['result']}:{r.get('reason_code') or 'ok'}" for r in result.results),
        result.ignored,
    )
    return result


def _accept(
    *,
    callback: SharedCallback,
    app_id: str,
    sources: list[Source],
    split: CallbackBody | Rejection,
    quarantine: dict,
    now: datetime,
) -> CallbackResult:
    """An authentic body's entries accepted in one transaction (or its refusal recorded): the
    attempt shared_callback_receive runs again when it loses a receipt race."""
    anchor = sources[0]
    delivery_id = quarantine["delivery_id"]
    result = CallbackResult(delivery_id=delivery_id)
    try:
        with transaction.atomic(durable=True):
            if isinstance(split, Rejection):  # the whole body
                receipt_id = _receipt_once(
                    source=anchor,
                    reason_code=split.reason_code,
                    detail=split.detail,
                    event_index=None,
                    quarantine=quarantine,
                )
                result.receipt_ids.append(receipt_id)
                result.results.append(
                    {
                        "index": None,
                        "result": "quarantined",
                        "reason_code": split.reason_code,
                        "receipt_id": receipt_id,
                    }
                )
                return result
            served = [s for s in sources if _serves(s, split)]
            if not served:
                # An object none of the app's sources takes (user, permissions, ...): counted, not kept.
                ignored_count(
                    anchor,
                    Counter({callback.counter_name("object", split.object): len(split.entries)}),
                    now,
                    callback=callback,
                )
                result.ignored = len(split.entries)
                return result
            routed, unowned = _route(split, sources)
            for index in unowned:
                receipt_id = _receipt_once(
                    source=served[0],
                    reason_code="unknown_account",
                    event_index=index,
                    detail=f"entry {index} is for an account no {split.object} source of this app owns",
                    quarantine=quarantine,
                )
                result.receipt_ids.append(receipt_id)
                result.results.append(
                    {
                        "index": index,
                        "result": "quarantined",
                        "reason_code": "unknown_account",
                        "receipt_id": receipt_id,
                    }
                )
            for source in sorted((s for s in sources if s.pk in routed), key=lambda s: s.pk):
                accepted = _source_accept(source, routed[source.pk], delivery_id, quarantine, now, callback)
                result.ignored += accepted[1]
                for r in accepted[0]:
                    result.results.append(_result_row(source, r))
                    if r.receipt_id and r.receipt_id not in result.receipt_ids:
                        result.receipt_ids.append(r.receipt_id)
    except DataError as exc:
        # The adapter's boundary should have refused this value; say so loudly, but answer the
        # platform as a refusal, one receipt however often the body comes back.
        logger.error(
            "store refused a value app=%s delivery=%s error=%s", app_id, delivery_id, type(exc).__name__
        )
        with transaction.atomic(durable=True):
            receipt_id = _receipt_once(
                source=anchor,
                reason_code="unstorable_value",
                event_index=None,
                quarantine=quarantine,
                detail="the event store refused a value of this body; nothing of it was accepted",
            )
        result = CallbackResult(
            delivery_id=delivery_id,
            receipt_ids=[receipt_id],
            results=[
                {
                    "index": None,
                    "result": "quarantined",
                    "reason_code": "unstorable_value",
                    "receipt_id": receipt_id,
                }
            ],
        )
    return result


def _source_accept(
    source: Source, items: list, delivery_id: str, quarantine: dict, now: datetime, callback: SharedCallback
) -> tuple[list[EventResult], int]:
    """One source's share of a body: its events (the all-or-nothing body of docs/concepts/event-contract.md#batches), its own
    items as evidence, its ignored updates counted."""
    parsed = get_adapter(source.adapter).normalize(items, source.account_ref, source_config(source))
    outcome = observations_accept(
        source=source,
        parsed=parsed,
        delivery_id=delivery_id,
        body_hash=quarantine["body_sha256"],
        body_bytes=quarantine["body_bytes"],
        now=now,
    )
    if not outcome.refused:
        self_authored_record(source, parsed.own, now)
    # Statuses are receipts of what was sent, not events of the body: a message refused beside
    # them (the body quarantined whole) does not take them with it. Kept again on a replay.
    message_statuses_record(source, parsed.statuses, now)
    ignored_count(source, parsed.ignored, now, callback=callback)
    return outcome.results, sum(parsed.ignored.values())


def _result_row(source: Source, r: EventResult) -> dict:
    return {
        "source": source.name,
        "index": r.index,
        "result": r.result,
        **({"event_key": r.event_key} if r.event_key else {}),
        **({"receipt_id": r.receipt_id} if r.receipt_id else {}),
        **({"reason_code": r.reason_code} if r.reason_code else {}),
    }
