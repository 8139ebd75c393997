"""The reviewer's inbox, read: one card per comment or message with replies waiting for review.

A card is one event: the post it is on (as last read from the platform), the buyer's handle
and words, their earlier comments on that post, the campaign that matched, the time left in
the platform's window, and each waiting reply with the exact text approval would send.
Oldest first. A page of cards costs a fixed number of queries, whatever its size.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Prefetch

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


@dataclass
class Page:
    """One page of the inbox: its events, oldest first, and where the next page starts."""

    event_keys: list[str]
    after: int | None  # the next page's cursor (an action id), None on the last page
    waiting: int  # replies waiting (matching the search), counted up to COUNTED
    more: bool  # more than COUNTED wait


COUNTED = 10_000


def waiting_page(*, term: str = "", words: bool = False, after: int = 0, size: int = 20) -> Page:
    """The events with a reply waiting for review, oldest first (by their replies' ids), from the
    action after `after` on: read from the queue's (delivery_state, id) index a batch at a time,
    never grouping or counting the whole queue. `term` searches as every ledger does."""
    pending = ReplyAction.objects.filter(delivery_state=DeliveryState.REVIEW_PENDING)
    if term.strip():
        pending = selectors.actions_matching(pending, term, words=words)
    keys: list[str] = []
    cursor, following, batch = after, None, size * 4
    while following is None:
        rows = list(pending.filter(id__gt=cursor).order_by("id").values_list("id", "event_id")[:batch])
        for pk, key in rows:
            if key in keys:
                continue
            if len(keys) == size:
                following = pk - 1  # the next page starts with this event
                break
            keys.append(key)
        if len(rows) < batch:
            break
        cursor = rows[-1][0]
    counted = pending.order_by().values("pk")[: COUNTED + 1].count()
    return Page(keys, following, min(counted, COUNTED), counted > COUNTED)


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
