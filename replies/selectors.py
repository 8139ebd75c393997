"""Replies reads: approved copy, reply routes, and the questions the queues ask (admin, doctor)."""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache

from django.db.models import Exists, F, Max, OuterRef, Prefetch, Q, QuerySet

from conduit.providers.base import OutboundReply
from conduit.providers.registry import ADAPTERS
from conduit.providers.transport import message_form
from conduit.search import keyed_matching
from ingress.models import InboundEvent, MessageStatus
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


def free_form_until(event: InboundEvent) -> datetime | None:
    """Until when free-form text may answer the event's author: their last message to the source
    plus the platform's free-form window (WhatsApp's 24 hours); None where no such window holds."""
    adapter = ADAPTERS.get(event.source.adapter)
    window = adapter.free_form_window if adapter is not None else None
    if window is None:
        return None
    last = InboundEvent.objects.filter(
        source_id=event.source_id, conversation_ref=event.conversation_ref, sender_ref=event.sender_ref
    ).aggregate(last=Max("occurred_at"))["last"]
    return max(last or event.occurred_at, event.occurred_at) + window


def outgoing_form(action: ReplyAction, copy: ReplyCopy | None) -> tuple[str, datetime | None]:
    """How the action's reply would go out now with `copy` (TEXT, TEMPLATE, or "" when it cannot),
    and until when free-form text may answer its author (None where no such window holds): what
    approval and the send decide by (conduit.providers.transport.message_form)."""
    until = free_form_until(action.event)
    template = (copy.template or None) if copy is not None else None
    return message_form(free_form_until=until, template=template), until


def delivery_statuses(action: ReplyAction) -> list[MessageStatus]:
    """What the platform reported of the action's message, oldest first (at most 20)."""
    return list(
        MessageStatus.objects.filter(
            source_id=action.event.source_id, provider_id=action.provider_reply_id
        ).order_by("occurred_at", "id")[:20]
    )


def outbound_reply(action: ReplyAction, copy: ReplyCopy) -> OutboundReply:
    """What a transport is handed for an action: its keys, destination and approved copy (with
    its template and the free-form window's end, where the platform has one)."""
    return OutboundReply(
        reply_key=action.reply_key,
        event_key=action.event_id,
        purpose=action.purpose,
        channel=action.channel,
        copy_version=action.copy_version,
        text=copy.text,
        conversation_ref=action.event.conversation_ref,
        message_ref=action.event.message_ref,
        address=action.event.reply_address,
        template=copy.template or None,
        free_form_until=free_form_until(action.event),
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


def current_sets(copies) -> dict[str, list[ReplyCopy]]:
    """Each purpose's current copy set among `copies` (its newest copy_set), variants in order."""
    sets: dict[str, list[ReplyCopy]] = {}
    for copy in sorted(copies, key=lambda c: (c.purpose, -c.copy_set, c.variant)):
        held = sets.setdefault(copy.purpose, [])
        if not held or held[0].copy_set == copy.copy_set:
            held.append(copy)
    return sets


def copy_sets_current(*, campaign_id: int) -> dict[str, list[ReplyCopy]]:
    """The campaign's current copy set for each purpose, variants in order."""
    return current_sets(ReplyCopy.objects.filter(campaign_id=campaign_id))


def variant_now(action: ReplyAction, copies) -> ReplyCopy | None:
    """The variant its reply key picks from the current set for the action's purpose among
    `copies` (the campaign's; a page's prefetch holds them all); None when there is none."""
    variants = current_sets(c for c in copies if c.purpose == action.purpose).get(action.purpose)
    return variants[variant_index(action.reply_key, len(variants))] if variants else None


def copy_for(action: ReplyAction) -> ReplyCopy | None:
    """The copy this action would be approved with now: the variant its reply key picks from its
    campaign's current copy set for its purpose (one query); None when the campaign has none."""
    return variant_now(
        action, ReplyCopy.objects.filter(campaign_id=action.campaign_id, purpose=action.purpose)
    )


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


def actions_matching(actions: QuerySet[ReplyAction], term: str, *, words: bool) -> QuerySet[ReplyAction]:
    """`actions` whose reply key starts with `term` or whose event matches it (conduit.search)."""
    return keyed_matching(actions, term, words=words, events=InboundEvent.objects.all())


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


def campaign_activity(campaign: Campaign, *, days: int = 30) -> list[dict]:
    """What a campaign did over the last `days` days, per day of the comments (UTC): comments in
    its scope, comments it matched, and its replies planned, approved, sent, unknown, closed and
    expired, with the median minutes from comment to approval. Counted by the database, per day.
    Processing states only: nothing here is a buyer or a sale."""
    from datetime import timedelta
    from datetime import timezone as dt_timezone
    from statistics import median

    from django.db.models import Count
    from django.db.models.functions import TruncDate
    from django.utils import timezone

    from replies.services.window import WINDOW_CLOSER

    since = timezone.now() - timedelta(days=days)
    table: dict = {}

    def row(day) -> dict:
        return table.setdefault(
            day.isoformat(),
            {
                "day": day.isoformat(),
                "comments_in_scope": 0,
                "matched": 0,
                "planned": 0,
                "approved": 0,
                "sent": 0,
                "unknown": 0,
                "closed": 0,
                "expired": 0,
                "median_minutes_to_approval": None,
            },
        )

    on_day = TruncDate("occurred_at", tzinfo=dt_timezone.utc)
    events = InboundEvent.objects.filter(
        source_id=campaign.source_id, event_type="comment.created", occurred_at__gte=since
    )
    if not campaign.every_post:
        events = events.filter(conversation_ref__in=campaign.posts)
    for day, n, matched in (
        events.annotate(day=on_day)
        .values("day")
        .annotate(n=Count("id"), matched=Count("id", filter=Q(trigger_campaign=campaign.pk)))
        .values_list("day", "n", "matched")
    ):
        row(day).update(comments_in_scope=n, matched=matched)
    actions = ReplyAction.objects.filter(
        event__source_id=campaign.source_id, event__occurred_at__gte=since, campaign=campaign
    ).annotate(day=TruncDate("event__occurred_at", tzinfo=dt_timezone.utc))
    expired = Q(
        delivery_state=DeliveryState.CLOSED_NO_REPLY,
        transitions__actor=WINDOW_CLOSER,
        transitions__next_state=DeliveryState.CLOSED_NO_REPLY,
    )
    for day, planned, approved, sent, unknown, closed in (
        actions.values("day")
        .annotate(
            planned=Count("id", distinct=True),
            approved=Count("id", filter=Q(approved_at__isnull=False), distinct=True),
            sent=Count("id", filter=Q(delivery_state=DeliveryState.SENT), distinct=True),
            unknown=Count("id", filter=Q(delivery_state=DeliveryState.SEND_STATUS_UNKNOWN), distinct=True),
            closed=Count("id", filter=Q(delivery_state=DeliveryState.CLOSED_NO_REPLY), distinct=True),
        )
        .values_list("day", "planned", "approved", "sent", "unknown", "closed")
    ):
        row(day).update(planned=planned, approved=approved, sent=sent, unknown=unknown, closed=closed)
    for day, n in (
        actions.filter(expired).values("day").annotate(n=Count("id", distinct=True)).values_list("day", "n")
    ):
        row(day)["expired"] = n
        row(day)["closed"] -= n
    waits: dict = {}
    for day, occurred, approved_at in actions.filter(approved_at__isnull=False).values_list(
        "day", "event__occurred_at", "approved_at"
    ):
        waits.setdefault(day.isoformat(), []).append((approved_at - occurred).total_seconds() / 60)
    for day, minutes in waits.items():
        table[day]["median_minutes_to_approval"] = round(median(minutes), 1)
    return [table[day] for day in sorted(table)]
