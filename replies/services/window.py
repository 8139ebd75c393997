"""The private-reply window: a private reply's deadline (where the source's platform sets one, its
adapter's `private_reply_window`), read and filled, and its expiry."""

from __future__ import annotations

import functools
import logging
from datetime import datetime, timedelta
from typing import Sequence

from django.db import transaction
from django.utils import timezone

from conduit.providers.base import APPROXIMATE, Observation
from conduit.providers.registry import ADAPTERS, get_adapter, private_reply_adapters
from ingress.models import InboundEvent
from replies.ledger import reply_action_transition
from replies.models import DeliveryState as S
from replies.models import ReplyAction

logger = logging.getLogger("conduit.replies")


def reply_deadline_reads_queue(*, action_ids: Sequence[int]) -> None:
    """Queue the read of each comment's real time once the actions are committed (at once outside a transaction)."""
    for action_id in action_ids:
        transaction.on_commit(functools.partial(_enqueue_deadline_fill, action_id))


# --- the private-reply window ---------------------------------------------------------------

PRIVATE_PURPOSE = "private_delivery"


def _window(adapter: str) -> timedelta | None:
    """How long after a comment its private reply may go out, or None (no window, or no such adapter)."""
    return ADAPTERS[adapter].private_reply_window if adapter in ADAPTERS else None


def _private_deadline(observation: Observation, adapter: str, purpose: str) -> tuple[datetime | None, bool]:
    """A comment's private reply gets its deadline as it is planned: (deadline, read later).

    A comment whose creation time is real gets it now; one whose time is
    approximate (the platform's notification carries none) is read from the
    platform after commit, by a queued task, never inside the webhook's transaction.
    """
    window = _window(adapter)
    if (
        purpose != PRIVATE_PURPOSE
        or observation.canary
        or window is None
        or not observation.event_type.startswith("comment.")
    ):
        return None, False
    if observation.occurred_at_original.startswith(APPROXIMATE):
        return None, True
    return observation.occurred_at + window, False


def _enqueue_deadline_fill(action_id: int) -> None:
    from django_q.tasks import async_task

    try:
        async_task("replies.tasks.fill_reply_deadline", action_id, group="deadline")
    except Exception:  # the queue is down: the review queue and approval fill it lazily
        logger.exception("deadline fill for action=%s not queued", action_id)


def _comment_created_at(event: InboundEvent) -> datetime:
    """The comment's real creation time: read once from the platform (its adapter's `comment_created_at`)."""
    from ingress.selectors import source_config

    source = event.source
    return get_adapter(source.adapter).comment_created_at(
        base_url=source.source_url,
        comment_ref=event.message_ref,
        access_token=source_config(source, with_token=True).access_token,
        timeout=10.0,
    )


def reply_deadline_fill(*, action_id: int) -> datetime | None:
    """Give a windowed private_delivery action its deadline (the comment's creation + 7 days) if it has
    none yet. Returns the deadline, or None when the action needs none. Raises when the Graph read
    fails (the caller decides: a task retries, approval refuses)."""
    action = ReplyAction.objects.select_related("event__source").get(pk=action_id)
    event = action.event
    if action.reply_deadline is not None:
        return action.reply_deadline
    window = _window(event.source.adapter)
    if (
        action.purpose != PRIVATE_PURPOSE
        or window is None
        or not event.event_type.startswith("comment.")
        or action.canary
    ):
        return None
    created = (
        event.occurred_at
        if not event.occurred_at_original.startswith(APPROXIMATE)
        else _comment_created_at(event)
    )
    deadline = created + window
    ReplyAction.objects.filter(pk=action_id, reply_deadline__isnull=True).update(reply_deadline=deadline)
    return deadline


def reply_deadlines_fill(*, limit: int = 200) -> int:
    """Fill the deadline of every pending windowed private reply still without one (the review queue's
    lazy path and the schedule's safety net). Returns how many were filled; failures are logged."""
    pending = (
        ReplyAction.objects.filter(
            purpose=PRIVATE_PURPOSE,
            reply_deadline__isnull=True,
            canary=False,
            delivery_state=S.REVIEW_PENDING,
            event__source__adapter__in=private_reply_adapters(),
        )
        .order_by("id")
        .values_list("id", flat=True)[:limit]
    )
    filled = 0
    for action_id in pending:
        try:
            filled += reply_deadline_fill(action_id=action_id) is not None
        except Exception as exc:
            logger.warning("deadline of action=%s not read: %s", action_id, type(exc).__name__)
    return filled


WINDOW_CLOSER = "system:window"
# What an expired window closes: nothing of it can be sent any more.
WINDOW_CLOSABLE = (S.REVIEW_PENDING, S.APPROVED, S.FAILED_BEFORE_SEND)


def reply_windows_expire(*, now: datetime | None = None) -> int:
    """Close every action whose private-reply window has passed while it waited: CLOSED_NO_REPLY,
    reason `window_expired` (the schedule runs this every minute)."""
    now = now or timezone.now()
    closed = 0
    expired = ReplyAction.objects.filter(reply_deadline__lt=now, delivery_state__in=WINDOW_CLOSABLE)
    for action_id, state in expired.order_by("id").values_list("id", "delivery_state"):
        with transaction.atomic():
            outcome = reply_action_transition(
                action_id=action_id,
                to=S.CLOSED_NO_REPLY,
                actor=WINDOW_CLOSER,
                reason_code="window_expired",
                expected=state,
                where={"reply_deadline__lt": now},
                record_lost_race=False,
                extra={"next_attempt_at": None, "last_error_code": "window_expired"},
            )
        closed += outcome.applied
    return closed
