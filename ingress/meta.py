"""Meta's app callback: the verification handshake, the proof over the app's secrets, and each
entry routed to the source that owns its account, all in one transaction.

One Meta app posts every object it is subscribed to (`instagram`, `page`) to
/webhooks/meta/<app id>/. A body is verified against any of the secrets the
app's sources name (two while a secret is being changed), then split by entry:
an entry goes to the source whose adapter serves the body's object and whose
account is the entry's id; an entry no source owns gets an authenticated
`unknown_account` receipt. Meta understands only 200, so every authentic body
is answered 200, its receipts named in the answer.
"""

from __future__ import annotations

import hmac
import logging
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Mapping

from django.db import DataError, transaction
from django.db.models import F
from django.utils import timezone

from conduit.canonical import sha256_hex
from conduit.logging import register_secret
from conduit.process_secrets import secret_read
from conduit.providers.base import OwnItem, ProofError, Rejection, SecretUnavailable
from conduit.providers.meta.subscriptions import (
    subscription_problem,
    token_expiry_problem,
)
from conduit.providers.meta.webhook import MetaBody, body_split
from conduit.providers.registry import ADAPTERS, get_adapter
from conduit.sql import insert_rows, update_rows
from ingress.models import IgnoredUpdate, QuarantineReceipt, SelfAuthoredItem, Source
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


def self_authored_record(source: Source, items: list[OwnItem], at: datetime) -> None:
    """Keep what the account itself authored (seen by a webhook or a read-back) as receipt
    evidence, once per item; whoever listens (replies) hears of it after commit."""
    for item in items:
        values = {"source": source.pk, "kind": item.kind, "provider_id": item.provider_id,
                  "parent_ref": item.parent_ref, "correlation": item.correlation,
                  "occurred_at": item.occurred_at, "first_seen_at": at, "seen_count": 1}
        (created,) = insert_rows(SelfAuthoredItem, list(values), [list(values.values())],
                                 ignore_conflicts=True) or [None]
        if created is None:
            update_rows(SelfAuthoredItem, where={"source": source.pk, "kind": item.kind,
                                                 "provider_id": item.provider_id},
                        assign={"seen_count": F("seen_count") + 1})
    if items:
        seen = [{"kind": i.kind, "provider_id": i.provider_id, "parent_ref": i.parent_ref,
                 "correlation": i.correlation} for i in items]
        # After commit: whoever listens (replies) reads what this transaction recorded.
        transaction.on_commit(lambda: self_authored_seen.send(sender=SelfAuthoredItem, source_id=source.pk,
                                                              items=seen))


def ignored_count(source: Source, names: Counter, at: datetime) -> None:
    """Count updates outside the source's allowlist (one upsert per name)."""
    for name, count in sorted(names.items()):
        values = {"source": source.pk, "name": name[:64], "count": count, "last_seen_at": at}
        (created,) = insert_rows(IgnoredUpdate, list(values), [list(values.values())],
                                 ignore_conflicts=True) or [None]
        if created is None:
            update_rows(IgnoredUpdate, where={"source": source.pk, "name": name[:64]},
                        assign={"count": F("count") + count, "last_seen_at": at})


def _receipt_once(*, source: Source, reason_code: str, detail: str, event_index: int | None,
                  quarantine: dict) -> str:
    """One authenticated receipt per body and finding: Meta retries a body for up to 36 hours, and
    each retry (the same bytes, so the same delivery id) meets the first receipt, not a new one."""
    earlier = QuarantineReceipt.objects.filter(
        source=source, delivery_id=quarantine["delivery_id"], authenticated=True, reason_code=reason_code,
        event_index=event_index,
    ).values_list("receipt_id", flat=True).first()
    if earlier is not None:
        return str(earlier)
    receipt = _quarantine(source=source, reason_code=reason_code, detail=detail, event_index=event_index,
                          **quarantine)
    return str(receipt.receipt_id)


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
    source) and SecretUnavailable (no secret the sources name is set).
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

    result = MetaResult(delivery_id=proof.delivery_id)
    quarantine = dict(authenticated=True, body_sha256=body_hash, body_bytes=len(body), at=now,
                      delivery_id=proof.delivery_id)
    split = body_split(body)
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
                ignored_count(anchor, Counter({f"object.{split.object}"[:64]: len(split.entries)}), now)
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
                accepted = _source_accept(source, routed[source.pk], proof.delivery_id, quarantine, now)
                result.ignored += accepted[1]
                for r in accepted[0]:
                    result.results.append(_result_row(source, r))
                    if r.receipt_id and r.receipt_id not in result.receipt_ids:
                        result.receipt_ids.append(r.receipt_id)
    except DataError as exc:
        logger.error("store refused a value app=%s delivery=%s error=%s", app_id, proof.delivery_id,
                     type(exc).__name__)
        with transaction.atomic(durable=True):
            receipt = _quarantine(source=anchor, reason_code="unstorable_value", **quarantine,
                                  detail="the event store refused a value of this body; nothing of it was accepted")
        result.results = [{"index": None, "result": "quarantined", "reason_code": "unstorable_value",
                           "receipt_id": str(receipt.receipt_id)}]
        result.receipt_ids = [str(receipt.receipt_id)]
    logger.info("ingested meta app=%s delivery=%s results=%s ignored=%s", app_id, proof.delivery_id,
                ",".join(f"{r['result']}:{r.get('reason_code') or 'ok'}" for r in result.results), result.ignored)
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
