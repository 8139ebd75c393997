"""The reviewer's inbox, read: one card per comment or message with replies waiting for review.

A card is one event: the post it is on (as last read from the platform), the buyer's handle
and words, their earlier comments on that post, the campaign that matched, the time left in
the platform's window, and each waiting reply with the exact text approval would send.
Oldest first. A page of cards costs a fixed number of queries, whatever its size.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Min, Prefetch, QuerySet

from ingress.models import InboundEvent
from replies import selectors
from replies.models import DeliveryState, Post, ReplyAction, ReplyCopy

EARLIER_SHOWN = 3  # earlier comments of the same person on the same post, newest first
EARLIER_READ = 500  # at most this many read for a page: a person's comments on one post are few


@dataclass
class Card:
    event: InboundEvent
    actions: list[ReplyAction]  # waiting for review, by purpose; each with `copy_now`, the copy
    # approval would send now (None: its campaign has none for the purpose)
    post: Post | None
    earlier: list[InboundEvent] = field(default_factory=list)

    @property
    def campaign(self):
        return self.actions[0].campaign

    @property
    def time_left(self) -> str:
        """The soonest window of its replies ("" when the platform sets none)."""
        deadlines = [a for a in self.actions if a.reply_deadline is not None]
        return selectors.time_left(min(deadlines, key=lambda a: a.reply_deadline)) if deadlines else ""


def waiting(*, term: str = "", words: bool = False) -> QuerySet:
    """The events with a reply waiting for review, oldest first, as (event_key, first id) rows:
    what the inbox pages through. `term` searches as every ledger does (conduit.search)."""
    pending = ReplyAction.objects.filter(delivery_state=DeliveryState.REVIEW_PENDING)
    if term.strip():
        pending = selectors.actions_matching(pending, term, words=words)
    return pending.values("event_id").annotate(first=Min("id")).order_by("first")


def cards(event_keys: list[str]) -> list[Card]:
    """The cards of `event_keys`, in that order."""
    if not event_keys:
        return []
    events = {
        e.event_key: e for e in InboundEvent.objects.select_related("source").filter(event_key__in=event_keys)
    }
    actions: dict[str, list[ReplyAction]] = {}
    rows = (
        ReplyAction.objects.filter(event_id__in=event_keys, delivery_state=DeliveryState.REVIEW_PENDING)
        .select_related("campaign")
        .prefetch_related(
            Prefetch(
                "campaign__copies",
                queryset=ReplyCopy.objects.order_by("purpose", "copy_set", "variant"),
                to_attr="copies_all",
            )
        )
        .order_by("purpose", "id")
    )
    for action in rows:
        action.event = events[action.event_id]
        action.copy_now = selectors.variant_now(action, action.campaign.copies_all)
        actions.setdefault(action.event_id, []).append(action)
    posts = _posts(events.values())
    earlier = _earlier(events.values())
    return [
        Card(
            event=events[key],
            actions=actions[key],
            post=posts.get((events[key].source_id, events[key].conversation_ref)),
            earlier=earlier.get(key, []),
        )
        for key in event_keys
        if key in events and key in actions
    ]


def _posts(events) -> dict[tuple[int, str], Post]:
    refs = {e.conversation_ref for e in events}
    sources = {e.source_id for e in events}
    return {
        (p.source_id, p.post_ref): p for p in Post.objects.filter(source_id__in=sources, post_ref__in=refs)
    }


def _earlier(events) -> dict[str, list[InboundEvent]]:
    """Each event's earlier comments by the same person on the same post (one query for the page)."""
    events = [e for e in events if e.event_type.startswith("comment")]
    if not events:
        return {}
    rows = (
        InboundEvent.objects.filter(
            source_id__in={e.source_id for e in events},
            conversation_ref__in={e.conversation_ref for e in events},
            sender_ref__in={e.sender_ref for e in events},
            event_type="comment.created",
        )
        .only("event_key", "source_id", "conversation_ref", "sender_ref", "occurred_at", "message_text", "id")
        .order_by()[:EARLIER_READ]  # read by the (source, post, sender) index; sorted here
    )
    rows = sorted(rows, key=lambda r: (r.occurred_at, r.id), reverse=True)
    found: dict[str, list[InboundEvent]] = {}
    for event in events:
        same = [
            r
            for r in rows
            if (r.source_id, r.conversation_ref, r.sender_ref)
            == (event.source_id, event.conversation_ref, event.sender_ref)
            and r.event_key != event.event_key
            and (r.occurred_at, r.id) < (event.occurred_at, event.id)
        ]
        found[event.event_key] = same[:EARLIER_SHOWN]
    return found
