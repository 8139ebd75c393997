"""Evidence without an idempotency key: the account's own items (an echo of a message, its own
comment under a comment, a message it sent, whether a webhook or a read-back showed them) matched
to the reply actions they are the receipts of (the receipt repair, docs/concepts/reconciliation.md#repairs).

One rule matches an item to an action, for the sender (which looks once more when a send ends
unknown), the receiver of ingress's `self_authored_seen` signal and reconciliation's read-back:

1. the item carries the action's reply key (Messenger echoes `message.metadata`), or its id is
   the action's provider reply id (the id Meta answered the send with): that action;
2. otherwise the item's text is the approved copy (compared as reply_text_digest) of exactly one
   action that could have left it, counting every action whatever it holds: through the kind of
   item its transport leaves, on any comment of the same media or post for a comment (a reply
   to a reply lands on the top-level comment's thread), to the same person for a message. That
   one must answer the item's comment (for a comment) and hold no receipt yet. Two actions
   with the same copy, a reply a person wrote by hand (another text), or an action that holds
   another receipt (a lookup's conversation id, say) match nothing: the send stays for a person.

An item is never the receipt of two actions, and never of an action that holds another receipt.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import lru_cache

from django.db import transaction

from conduit.providers.base import ProviderReceipt, reply_text_digest
from conduit.providers.registry import transport_class
from ingress.models import InboundEvent, SelfAuthoredItem
from replies.ledger import reply_action_transition
from replies.models import DeliveryState as S
from replies.models import ReplyAction, ReplyCopy, ReplyRoute

logger = logging.getLogger("conduit.replies")

EVIDENCE_ACTOR = "system:echo"
MAX_ID = 200
# Candidates read for one item; more fitting than this is as ambiguous as two.
MAX_CANDIDATES = 200


@dataclass(frozen=True)
class OwnSeen:
    """An item the account authored, as the matching rule reads it."""

    kind: str  # comment | message
    provider_id: str
    parent_ref: str  # the comment answered, or the person written to
    correlation: str = ""
    text_digest: str = ""

    @classmethod
    def of(cls, item) -> OwnSeen:
        """From an OwnItem, a SelfAuthoredItem or the signal's dict."""
        get = item.get if isinstance(item, dict) else lambda name, default="": getattr(item, name, default)
        return cls(
            kind=get("kind", ""),
            provider_id=get("provider_id", "") or "",
            parent_ref=get("parent_ref", "") or "",
            correlation=get("correlation", "") or "",
            text_digest=get("text_digest", "") or "",
        )


@lru_cache(maxsize=4096)
def _copy_digest(source_id: int, purpose: str, copy_version: str) -> str:
    """The approved copy's digest (versions are never edited, so caching one is exact)."""
    text = (
        ReplyCopy.objects.filter(source_id=source_id, purpose=purpose, copy_version=copy_version)
        .values_list("text", flat=True)
        .first()
    )
    return reply_text_digest(text)


def _purposes_leaving(source_id: int, kind: str) -> list[str]:
    """The source's purposes whose route's transport leaves items of this kind."""
    purposes = []
    for purpose, name in ReplyRoute.objects.filter(source_id=source_id).values_list(
        "purpose", "transport_name"
    ):
        try:
            leaves = transport_class(name).leaves
        except KeyError:
            continue
        if leaves == kind:
            purposes.append(purpose)
    return purposes


def action_for_own_item(source_id: int, item: OwnSeen) -> ReplyAction | None:
    """The one action this item is the receipt of, by the module's rule, or None."""
    actions = ReplyAction.objects.filter(event__source_id=source_id).select_related("event")
    if item.correlation:
        by_key = list(actions.filter(reply_key=item.correlation[:64])[:2])
        if len(by_key) == 1:
            return by_key[0]
    if item.provider_id:
        by_id = list(actions.filter(provider_reply_id=item.provider_id[:MAX_ID])[:2])
        if by_id:
            # An id held by two actions (a person confirmed one by hand with it) names neither.
            return by_id[0] if len(by_id) == 1 else None
    if not item.text_digest or not item.parent_ref or item.kind not in ("comment", "message"):
        return None
    purposes = _purposes_leaving(source_id, item.kind)
    if not purposes:
        return None
    if item.kind == "comment":
        # A reply to a reply lands on the top-level comment's thread (Instagram, Facebook): every
        # action on a comment of the same media or post could have left it, so all are counted.
        posts = set(
            InboundEvent.objects.filter(source_id=source_id, message_ref=item.parent_ref).values_list(
                "conversation_ref", flat=True
            )
        )
        target = (
            {"event__conversation_ref__in": sorted(posts)}
            if posts
            else {"event__message_ref": item.parent_ref}
        )
    else:
        target = {"event__sender_ref": item.parent_ref}
    # Every action that could have left this item counts, whatever it holds or its state, so an
    # action already holding another receipt never lends this one to a sibling.
    fitting = [
        action
        for action in actions.filter(purpose__in=purposes, **target)
        .exclude(copy_version="")
        .order_by("id")[:MAX_CANDIDATES]
        if _copy_digest(source_id, action.purpose, action.copy_version) == item.text_digest
    ]
    if len(fitting) != 1:
        return None
    (action,) = fitting
    if action.provider_reply_id or (item.kind == "comment" and action.event.message_ref != item.parent_ref):
        return None  # it holds a receipt already, or it answered another comment of that thread
    return action


def own_item_receipts(*, source_id: int, items: list) -> list[ProviderReceipt]:
    """The receipts a read-back's own items are: one per matched action, an item at most once."""
    receipts: dict[str, ProviderReceipt] = {}
    taken: set[str] = set()
    for item in sorted((OwnSeen.of(i) for i in items), key=lambda i: (i.kind, i.provider_id)):
        if not item.provider_id or item.provider_id in taken:
            continue
        action = action_for_own_item(source_id, item)
        if action is None or action.reply_key in receipts:
            continue
        taken.add(item.provider_id)
        receipts[action.reply_key] = ProviderReceipt(
            reply_key=action.reply_key, provider_reply_id=item.provider_id[:MAX_ID], event_key=action.event_id
        )
    return list(receipts.values())


def _evidence_for(action: ReplyAction) -> SelfAuthoredItem | None:
    """The self-authored item that is this action's receipt by the module's rule, or None."""
    source_id = action.event.source_id
    candidates = SelfAuthoredItem.objects.filter(source_id=source_id).order_by("id")
    by_key = candidates.filter(kind="message", correlation=action.reply_key)
    by_id = candidates.filter(provider_id=action.provider_reply_id) if action.provider_reply_id else None
    answering = candidates.filter(kind="comment", parent_ref=action.event.message_ref) | candidates.filter(
        kind="message", parent_ref=action.event.sender_ref
    )
    for group in (by_key, by_id, answering):
        if group is None:
            continue
        for item in group[:50]:
            matched = action_for_own_item(source_id, OwnSeen.of(item))
            if matched is not None and matched.pk == action.pk:
                return item
    return None


def reply_evidence_resolve(*, action_id: int) -> bool:
    """The receipt repair (docs/concepts/reconciliation.md#repairs) from self-authored evidence: an
    action in SEND_STATUS_UNKNOWN whose reply an item of the account's shows (by the module's rule) is marked SENT with that item as
    evidence, by `system:echo`. Idempotent: anything but SEND_STATUS_UNKNOWN is left as it is."""
    action = ReplyAction.objects.select_related("event").filter(pk=action_id).first()
    if action is None or action.delivery_state != S.SEND_STATUS_UNKNOWN:
        return False
    item = _evidence_for(action)
    if item is None:
        return False
    reason = "echo_confirmed" if item.kind == "message" else "own_comment_seen"
    with transaction.atomic():
        outcome = reply_action_transition(
            action_id=action_id,
            to=S.SENT,
            actor=EVIDENCE_ACTOR,
            reason_code=reason,
            expected=S.SEND_STATUS_UNKNOWN,
            record_lost_race=False,
            extra={"provider_reply_id": item.provider_id[:MAX_ID], "last_error_code": ""},
        )
    if outcome.applied:
        logger.info("send action=%s resolved SENT by %s %s", action_id, item.kind, item.provider_id)
    return outcome.applied


def self_authored_resolve(*, source_id: int, items: list[dict]) -> int:
    """What ingress saw the account author (ingress.signals.self_authored_seen, on commit): resolve
    the unknown sends it shows. Returns how many were resolved."""
    resolved = 0
    for item in sorted((OwnSeen.of(i) for i in items), key=lambda i: (i.kind, i.provider_id)):
        action = action_for_own_item(source_id, item)
        if action is not None and action.delivery_state == S.SEND_STATUS_UNKNOWN:
            resolved += reply_evidence_resolve(action_id=action.pk)
    return resolved
