"""Replies reads: approved copy, reply routes, and the questions the queues ask (admin, doctor)."""

from __future__ import annotations

from functools import lru_cache

from django.db.models import Exists, F, OuterRef, Prefetch, Q, QuerySet

from conduit.providers.base import OutboundReply
from ingress.models import InboundEvent
from replies.contract import INCURABLE_FAILURES, MAX_AUTOMATIC_ATTEMPTS
from replies.matching import variant_index
from replies.models import (
    Campaign,
    DeliveryState,
    ReplyAction,
    ReplyCopy,
    ReplyRoute,
    SendAttempt,
)


@lru_cache(maxsize=4096)
def approved_copy(*, source_id: int, purpose: str, copy_version: str) -> ReplyCopy:
    """One approved copy version. Versions are never edited, so caching one is exact."""
    return ReplyCopy.objects.get(source_id=source_id, purpose=purpose, copy_version=copy_version)


def outbound_reply(action: ReplyAction, copy: ReplyCopy) -> OutboundReply:
    """What a transport is handed for an action: its keys, destination and approved copy."""
    return OutboundReply(
        reply_key=action.reply_key,
        event_key=action.event_id,
        purpose=action.purpose,
        channel=action.channel,
        copy_version=action.copy_version,
        text=copy.text,
        conversation_ref=action.event.conversation_ref,
        message_ref=action.event.message_ref,
    )


def copy_current(*, source_id: int, purpose: str) -> ReplyCopy | None:
    """The newest copy of a purpose of the source's every-post campaign made from its keywords."""
    return (
        ReplyCopy.objects.filter(source_id=source_id, purpose=purpose, campaign__account_default=True)
        .order_by("-id")
        .first()
    )


def campaign_name(campaign_id: int) -> str:
    return Campaign.objects.filter(pk=campaign_id).values_list("name", flat=True).first() or f"#{campaign_id}"


@lru_cache(maxsize=4096)
def copy_set_variants(*, campaign_id: int, purpose: str, copy_set: int) -> tuple[ReplyCopy, ...]:
    """One copy set's variants in order. Sets are never edited (a change is a new set), so caching one is exact."""
    return tuple(
        ReplyCopy.objects.filter(campaign_id=campaign_id, purpose=purpose, copy_set=copy_set).order_by(
            "variant"
        )
    )


def copy_set_now(*, campaign_id: int, purpose: str) -> int | None:
    return (
        ReplyCopy.objects.filter(campaign_id=campaign_id, purpose=purpose)
        .order_by("-copy_set")
        .values_list("copy_set", flat=True)
        .first()
    )


def copy_variant(action: ReplyAction, copy_set: int | None) -> ReplyCopy | None:
    """The variant of `copy_set` (of the action's campaign and purpose) its reply key picks."""
    if copy_set is None:
        return None
    variants = copy_set_variants(campaign_id=action.campaign_id, purpose=action.purpose, copy_set=copy_set)
    return variants[variant_index(action.reply_key, len(variants))] if variants else None


def copy_for(action: ReplyAction) -> ReplyCopy | None:
    """The copy this action would be approved with now: the variant its reply key picks from its
    campaign's current copy set for its purpose; None when the campaign has none."""
    return copy_variant(action, copy_set_now(campaign_id=action.campaign_id, purpose=action.purpose))


def route_for(*, source_id: int, purpose: str) -> ReplyRoute | None:
    """The route replies of `purpose` from this source take, or None when none is declared."""
    return ReplyRoute.objects.filter(source_id=source_id, purpose=purpose).first()


def action_route(action: ReplyAction) -> ReplyRoute | None:
    """The action's own route: its source's route for its purpose."""
    return route_for(source_id=action.event.source_id, purpose=action.purpose)


def no_copy_reason(action: ReplyAction) -> str:
    return (
        f"no approved copy for purpose {action.purpose!r} in campaign {action.campaign.name!r}: "
        "add it on the campaign's page (Replies > Campaigns)"
    )


def no_route_reason(action: ReplyAction) -> str:
    return (
        f"no reply route for purpose {action.purpose!r} on source "
        f"{action.event.source.name!r}: add one under Replies > Reply routes"
    )


def approval_missing(action: ReplyAction) -> str:
    """Why this action cannot be approved yet, or "" when nothing is missing.

    Reads the `copy_present`/`route_present` annotations (actions_for_review)
    when the action carries them, so a queue page asks nothing per row.
    """
    has_copy = getattr(action, "copy_present", None)
    if has_copy is None:
        has_copy = copy_for(action) is not None
    if not has_copy:
        return no_copy_reason(action)
    has_route = getattr(action, "route_present", None)
    if has_route is None:
        has_route = action_route(action) is not None
    return "" if has_route else no_route_reason(action)


def with_approval_needs(actions: QuerySet[ReplyAction]) -> QuerySet[ReplyAction]:
    """Annotate whether each action's purpose has approved copy and a route: one query per page.

    The event is joined inside each subquery (run for the page's rows only), not in the
    outer query: an outer join to the event ledger would be in every count of the queue too.
    """
    same_key = {"source__events__event_key": OuterRef("event_id"), "purpose": OuterRef("purpose")}
    return actions.annotate(
        copy_present=Exists(
            ReplyCopy.objects.filter(campaign_id=OuterRef("campaign_id"), purpose=OuterRef("purpose"))
        ),
        route_present=Exists(ReplyRoute.objects.filter(**same_key)),
    )


def stranded_q() -> Q:
    """FAILED_BEFORE_SEND that needs a person's eye: exhausted, or stopped for good.

    Exhausted: MAX_AUTOMATIC_ATTEMPTS or more attempts failed before send; the
    sender still retries it at the capped interval. Stopped: its last failure is
    one retrying cannot cure (replies.contract.INCURABLE_FAILURES), so no
    automatic attempt is scheduled (next_attempt_at is empty).
    """
    return Q(delivery_state=DeliveryState.FAILED_BEFORE_SEND) & (
        Q(attempt_count__gte=MAX_AUTOMATIC_ATTEMPTS) | Q(next_attempt_at__isnull=True)
    )


def sends_stranded() -> QuerySet[ReplyAction]:
    """The FAILED_BEFORE_SEND actions that are exhausted or stopped, oldest first."""
    return ReplyAction.objects.filter(stranded_q()).order_by("id")


def with_last_attempt(actions: QuerySet[ReplyAction]) -> QuerySet[ReplyAction]:
    """Prefetch each action's latest attempt only (`last_attempts`, 0 or 1 row): one query per page.

    An exhausted action keeps being retried at the capped interval, so its
    attempts grow without bound; the sliced prefetch reads one per action.
    """
    latest = SendAttempt.objects.order_by("action_id", "-attempt_number")[:1]
    return actions.prefetch_related(Prefetch("attempts", queryset=latest, to_attr="last_attempts"))


def last_attempt(action: ReplyAction) -> SendAttempt | None:
    if hasattr(action, "last_attempts"):
        return action.last_attempts[0] if action.last_attempts else None
    return action.attempts.order_by("-attempt_number").first()


def stranded_why(action: ReplyAction) -> str:
    """Why a FAILED_BEFORE_SEND action waits for a person, in words for the admin."""
    if action.delivery_state != DeliveryState.FAILED_BEFORE_SEND:
        return ""
    code = action.last_error_code
    if action.next_attempt_at is None:
        why = INCURABLE_FAILURES.get(code, "no automatic attempt is scheduled")
        return f"stopped by {code or 'an unrecorded failure'}: {why}"
    return (
        f"exhausted: {action.attempt_count} attempts failed before send (last: {code}); "
        f"still retried automatically, next at {action.next_attempt_at:%Y-%m-%d %H:%M:%S %Z}"
    )


def event_list(*, event_key: str = "", source: str = "", state: str = "") -> QuerySet[InboundEvent]:
    """Canonical events with their reply actions, filtered by whichever of the arguments is not blank."""
    queryset = InboundEvent.objects.select_related("source").prefetch_related(
        Prefetch("reply_actions", queryset=ReplyAction.objects.order_by("purpose"))
    )
    if event_key:
        queryset = queryset.filter(event_key=event_key)
    if source:
        queryset = queryset.filter(source__name=source)
    if state:
        queryset = queryset.filter(event_state=state)
    return queryset


def review_pending_by_deadline() -> QuerySet[ReplyAction]:
    """The review queue, what expires soonest first: actions with a reply deadline (a Meta private
    reply's 7-day window) by deadline, then the rest newest first. `time_left(action)` words it."""
    return (
        ReplyAction.objects.filter(delivery_state=DeliveryState.REVIEW_PENDING)
        .select_related("event__source")
        .order_by(F("reply_deadline").asc(nulls_last=True), "-id")
    )


def time_left(action: ReplyAction, *, now=None) -> str:
    """What is left of an action's reply window, for a person: "2 d 3 h", "41 min", "expired", or ""."""
    from django.utils import timezone

    if action.reply_deadline is None:
        return ""
    seconds = int((action.reply_deadline - (now or timezone.now())).total_seconds())
    if seconds <= 0:
        return "expired"
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {rest // 60} min"
    return f"{max(rest // 60, 1)} min"


def campaign_activity(campaign: Campaign) -> list[dict]:
    """What a campaign did, per day of the comments (UTC): comments in its scope, comments it
    matched, and its replies planned, approved, sent, unknown, closed and expired, with the median
    minutes from comment to approval. Processing states only: nothing here is a buyer or a sale."""
    from statistics import median

    from replies.services.window import WINDOW_CLOSER

    days: dict = {}

    def day(at) -> dict:
        key = at.date().isoformat()
        return days.setdefault(
            key,
            {
                "day": key,
                "comments_in_scope": 0,
                "matched": 0,
                "planned": 0,
                "approved": 0,
                "sent": 0,
                "unknown": 0,
                "closed": 0,
                "expired": 0,
                "_waits": [],
            },
        )

    events = InboundEvent.objects.filter(source_id=campaign.source_id, event_type="comment.created")
    if not campaign.every_post:
        events = events.filter(conversation_ref__in=campaign.posts)
    for occurred, matched in events.values_list("occurred_at", "trigger_campaign").iterator(chunk_size=5000):
        row = day(occurred)
        row["comments_in_scope"] += 1
        row["matched"] += matched == campaign.pk
    expired = set(
        ReplyAction.objects.filter(
            campaign=campaign,
            transitions__actor=WINDOW_CLOSER,
            transitions__next_state=DeliveryState.CLOSED_NO_REPLY,
        ).values_list("pk", flat=True)
    )
    actions = ReplyAction.objects.filter(campaign=campaign).values_list(
        "pk", "event__occurred_at", "approved_at", "delivery_state"
    )
    for pk, occurred, approved_at, state in actions.iterator(chunk_size=5000):
        row = day(occurred)
        row["planned"] += 1
        if approved_at is not None:
            row["approved"] += 1
            row["_waits"].append((approved_at - occurred).total_seconds() / 60)
        row["sent"] += state == DeliveryState.SENT
        row["unknown"] += state == DeliveryState.SEND_STATUS_UNKNOWN
        if state == DeliveryState.CLOSED_NO_REPLY:
            row["expired" if pk in expired else "closed"] += 1
    out = []
    for key in sorted(days):
        row = days[key]
        waits = row.pop("_waits")
        row["median_minutes_to_approval"] = round(median(waits), 1) if waits else None
        out.append(row)
    return out
