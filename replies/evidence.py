"""Evidence without an idempotency key: an echo of a message carrying the reply key, or the
account's own comment on the comment, resolves an unknown send (seed 000's receipt repair).

Its own module so the sender (which looks once more when a send ends unknown) and the receiver of
ingress's `self_authored_seen` signal share it without importing each other.
"""

from __future__ import annotations

import logging

from django.db import transaction

from ingress.models import SelfAuthoredItem
from replies.ledger import reply_action_transition
from replies.models import DeliveryState as S
from replies.models import ReplyAction

logger = logging.getLogger("conduit.replies")

EVIDENCE_ACTOR = "system:echo"
PUBLIC_PURPOSE = "public_ack"


def _evidence_for(action: ReplyAction) -> SelfAuthoredItem | None:
    """The self-authored item that shows this action's reply exists, or None.

    A message echo carrying the reply key (Messenger returns `message.metadata`) is this reply's
    own. A comment by the account on the action's comment is this public reply's only when it is
    unambiguous: this is the one public_ack action of that comment in SEND_STATUS_UNKNOWN, and the
    comment is not already the receipt of another action.
    """
    source_id = action.event.source_id
    echo = SelfAuthoredItem.objects.filter(source_id=source_id, kind="message",
                                           correlation=action.reply_key).order_by("id").first()
    if echo is not None:
        return echo
    if action.purpose != PUBLIC_PURPOSE:
        return None
    comments = list(SelfAuthoredItem.objects.filter(
        source_id=source_id, kind="comment", parent_ref=action.event.message_ref).order_by("id"))
    receipts = set(ReplyAction.objects.filter(event__source_id=source_id, provider_reply_id__in=[
        c.provider_id for c in comments]).values_list("provider_reply_id", flat=True))
    unclaimed = [c for c in comments if c.provider_id not in receipts]
    unknown = ReplyAction.objects.filter(event__source_id=source_id, purpose=PUBLIC_PURPOSE,
                                         event__message_ref=action.event.message_ref,
                                         delivery_state=S.SEND_STATUS_UNKNOWN).count()
    return unclaimed[0] if len(unclaimed) == 1 and unknown == 1 else None


def reply_evidence_resolve(*, action_id: int) -> bool:
    """Seed 000's receipt repair from self-authored evidence: an action in SEND_STATUS_UNKNOWN whose
    reply an echo or the account's own comment shows is marked SENT with that item as evidence,
    by `system:echo`. Idempotent: anything but SEND_STATUS_UNKNOWN is left as it is."""
    action = ReplyAction.objects.select_related("event").filter(pk=action_id).first()
    if action is None or action.delivery_state != S.SEND_STATUS_UNKNOWN:
        return False
    item = _evidence_for(action)
    if item is None:
        return False
    reason = "echo_confirmed" if item.kind == "message" else "own_comment_seen"
    with transaction.atomic():
        outcome = reply_action_transition(
            action_id=action_id, to=S.SENT, actor=EVIDENCE_ACTOR, reason_code=reason,
            expected=S.SEND_STATUS_UNKNOWN, record_lost_race=False,
            extra={"provider_reply_id": item.provider_id[:200], "last_error_code": ""},
        )
    if outcome.applied:
        logger.info("send action=%s resolved SENT by %s %s", action_id, item.kind, item.provider_id)
    return outcome.applied


def self_authored_resolve(*, source_id: int, items: list[dict]) -> int:
    """What ingress saw the account author (ingress.signals.self_authored_seen, on commit): resolve
    the unknown sends it shows. Returns how many were resolved."""
    candidates: set[int] = set()
    for item in items:
        if item.get("kind") == "message" and item.get("correlation"):
            candidates.update(ReplyAction.objects.filter(
                event__source_id=source_id, reply_key=item["correlation"][:64],
                delivery_state=S.SEND_STATUS_UNKNOWN).values_list("id", flat=True))
        elif item.get("kind") == "comment" and item.get("parent_ref"):
            candidates.update(ReplyAction.objects.filter(
                event__source_id=source_id, purpose=PUBLIC_PURPOSE, event__message_ref=item["parent_ref"],
                delivery_state=S.SEND_STATUS_UNKNOWN).values_list("id", flat=True))
    return sum(reply_evidence_resolve(action_id=action_id) for action_id in sorted(candidates))
