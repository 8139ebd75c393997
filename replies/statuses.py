"""Statuses as receipts: what the platform reported of a message Conduit sent (WhatsApp's
`statuses[]`, recorded by ingress.statuses) settles the reply that sent it.

A status names its reply by the reply key Conduit sent with the message
(`biz_opaque_callback_data`, which Meta documents in sent, delivered and read statuses). A status
without one (Meta does not say a `failed` one carries it) names the one action holding its
message id, the id the send was answered with; a status of a message Conduit did not send names
none. Any status (sent, delivered, read, or failed) shows the
platform accepted the message, so it settles a SENDING or SEND_STATUS_UNKNOWN action as SENT,
with the message's id as the receipt, by `system:status`, without a person and without a resend.
A status never moves a state backwards: a SENT action stays SENT whatever arrives after, in any
order; a `failed` status keeps SENT (the platform had accepted the message) and waits, recorded,
in the admin's queue of messages the platform could not deliver. A status whose reply holds
another message id names no reply (never two receipts for one action).
"""

from __future__ import annotations

import logging

from django.db import transaction

from ingress.services import message_status_correlate
from replies.ledger import reply_action_transition
from replies.models import DeliveryState as S
from replies.models import ReplyAction

logger = logging.getLogger("conduit.replies")

STATUS_ACTOR = "system:status"
# What a status settles: a send whose outcome Conduit did not hear, or has not heard yet.
SETTLED_BY_STATUS = (S.SENDING, S.SEND_STATUS_UNKNOWN)
MAX_ID = 200


def _reply_key(correlation: str) -> str:
    key = (correlation or "")[:64]
    return key if len(key) == 64 and all(c in "0123456789abcdef" for c in key) else ""


def action_for_status(source_id: int, item: dict) -> ReplyAction | None:
    """The action a status is the receipt of: the one whose reply key it carries back, on this
    source, unless that action holds another message id; without a reply key (Meta does not say a
    `failed` status carries it), the one action holding the status's message id."""
    wamid = (item.get("provider_id") or "")[:MAX_ID]
    actions = ReplyAction.objects.filter(event__source_id=source_id)
    key = _reply_key(item.get("correlation", ""))
    if not key:
        held = list(actions.filter(provider_reply_id=wamid)[:2]) if wamid else []
        return held[0] if len(held) == 1 else None
    action = actions.filter(reply_key=key).first()
    if action is None or (action.provider_reply_id and action.provider_reply_id != wamid):
        return None
    return action


def statuses_settle(*, source_id: int, items: list[dict]) -> int:
    """Settle the sends these statuses show (ingress.signals.message_statuses_seen, on commit).
    Idempotent, in any order: returns how many actions moved to SENT."""
    settled = 0
    for item in sorted(items, key=lambda i: (i.get("provider_id", ""), i.get("status", ""))):
        action = action_for_status(source_id, item)
        wamid = (item.get("provider_id") or "")[:MAX_ID]
        if action is not None and not _reply_key(item.get("correlation", "")):
            # Found by its message id (a `failed` status carries no key): the ledger row names the
            # reply too, so the queue of undelivered messages links it.
            message_status_correlate(
                source_id=source_id,
                provider_id=wamid,
                status=item.get("status", ""),
                reply_key=action.reply_key,
            )
        if action is None or action.delivery_state not in SETTLED_BY_STATUS:
            continue
        with transaction.atomic():
            outcome = reply_action_transition(
                action_id=action.pk,
                to=S.SENT,
                actor=STATUS_ACTOR,
                reason_code="status_seen",
                expected=action.delivery_state,
                record_lost_race=False,
                extra={"provider_reply_id": wamid, "last_error_code": "", "next_attempt_at": None},
            )
        if outcome.applied:
            logger.info("send action=%s resolved SENT by status %s", action.pk, item.get("status", ""))
        settled += outcome.applied
    return settled
