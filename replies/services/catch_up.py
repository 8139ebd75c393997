"""Catch-up: a person's decision to plan replies for earlier comments a campaign now matches.

Only comments the rule matches now, within the platform's private-reply window (Meta: 7 days
after the comment; none for the sandbox), that have no reply for a purpose yet: one action per
comment and purpose (the unique reply key holds it whatever runs at once). Comments recorded
as history before the account was connected are left out unless the person includes them. A
closed record is reopened (CLOSED_NO_REPLY -> RECORD_READY, recorded) only where no campaign
matched it when it arrived; one a person closed stays closed. The planned replies wait for
review as any others, and the account's send budget paces their sends.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta

from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from conduit.providers.base import Observation
from conduit.providers.registry import ADAPTERS
from ingress.models import EventState, EventTransition, InboundEvent, Source
from ingress.services import events_reopen_for_replies
from replies.matching import CampaignMatch, active_rules, rule_of, rules_winner
from replies.models import Campaign, CampaignState, ReplyAction
from replies.services.campaigns import CampaignRefused
from replies.services.planning import purposes_answering, reply_actions_plan

CATCH_UP_MAX = 5000  # comments planned by one decision; a larger backlog takes several
COMMENTS = "comment.created"
# How far back a platform without a private-reply window (the sandbox) is caught up.
NO_WINDOW = timedelta(days=7)
# Why ingest closed a record that a catch-up may reopen (ingress.services.body): no campaign
# matched it, or it was history from before the account was connected.
CLOSED_ON_ARRIVAL = ("trigger_not_matched", "before_connection")


@dataclass(frozen=True)
class CatchUp:
    comments: int  # earlier comments that would get (or got) replies
    replies: int  # replies, one per comment and purpose
    history_left_out: int  # comments recorded before the connection, not included
    planned: bool


def _observation(event: InboundEvent) -> Observation:
    return Observation(
        index=0,
        source_system=event.source_system,
        source_account_ref=event.source_account_ref,
        source_event_id=event.source_event_id,
        event_type=event.event_type,
        conversation_ref=event.conversation_ref,
        message_ref=event.message_ref,
        sender_ref=event.sender_ref,
        occurred_at=event.occurred_at,
        occurred_at_original=event.occurred_at_original,
        payload_hash=event.payload_hash,
        contract_version=event.contract_version,
        canary=event.canary,
        text=event.message_text,
        parent_ref=event.parent_ref,
    )


def campaign_catch_up(
    *, campaign_id: int, actor: str, include_history: bool = False, plan: bool = False
) -> CatchUp:
    """How many earlier comments the campaign would plan replies for now; with `plan`, plan them
    (REVIEW_PENDING, under the campaign's current version). Refused unless the campaign is active.

    Counting reads only. Planning locks the source's row FOR UPDATE first: ingest's inserts (their
    KEY SHARE) in flight finish before it reads, and new ones wait until it commits, so no comment
    gets its reply from ingest and from the catch-up both; the campaign is read under that lock.
    """
    now = timezone.now()
    with transaction.atomic():
        source_id = Campaign.objects.filter(pk=campaign_id).values_list("source_id", flat=True).first()
        if source_id is None:
            raise CampaignRefused("no such campaign")
        sources = Source.objects.select_for_update() if plan else Source.objects
        source = sources.get(pk=source_id)
        campaign = Campaign.objects.get(pk=campaign_id)
        if campaign.state != CampaignState.ACTIVE:
            raise CampaignRefused(f"campaign {campaign.name!r} is {campaign.state}: activate it first")
        # Earlier comments: the rule as it stands, whenever in the window they were made.
        rule = replace(
            rule_of(campaign), starts_at=now - (ADAPTERS[source.adapter].private_reply_window or NO_WINDOW)
        )
        others = [r for r in active_rules(source) if r.campaign_id != campaign.pk]
        answering = purposes_answering(source=source)(COMMENTS)
        purposes = tuple(p for p in answering if not rule.purposes or p in rule.purposes)
        if not purposes:
            raise CampaignRefused(
                f"no purpose of campaign {campaign.name!r} has a route that answers comments"
            )
        events = InboundEvent.objects.filter(
            source=source,
            event_type=COMMENTS,
            occurred_at__gte=rule.starts_at,
            content_purged_at__isnull=True,
        )
        if not campaign.every_post:
            events = events.filter(conversation_ref__in=campaign.posts)
        # Ready records may lack a purpose; closed ones only where ingest closed them for having no
        # campaign matching, or as history before the connection (never one a person closed).
        closed_on_arrival = EventTransition.objects.filter(
            event_id=OuterRef("pk"), next_state=EventState.CLOSED_NO_REPLY, reason_code__in=CLOSED_ON_ARRIVAL
        )
        events = events.annotate(
            closed=Exists(closed_on_arrival),
            **{
                f"has_{p}": Exists(ReplyAction.objects.filter(event_id=OuterRef("event_key"), purpose=p))
                for p in purposes
            },
        ).filter(
            Q(event_state=EventState.RECORD_READY) | Q(event_state=EventState.CLOSED_NO_REPLY, closed=True)
        )
        connected = source.connected_at.replace(microsecond=0) if source.connected_at else None
        chosen: list[tuple[InboundEvent, tuple[str, ...]]] = []
        history_left_out = 0
        for event in events.order_by("occurred_at", "id").iterator(chunk_size=1000):
            observation = _observation(event)
            # This campaign must be the one that answers it now: never a purpose a more specific
            # campaign answering the comment left out.
            winner = rules_winner([rule, *others], observation)
            if winner is None or winner.campaign_id != campaign.pk:
                continue
            wanted = tuple(p for p in purposes if not getattr(event, f"has_{p}"))
            if not wanted:
                continue
            if connected is not None and event.occurred_at < connected and not include_history:
                history_left_out += 1
                continue
            chosen.append((event, wanted))
            if len(chosen) == CATCH_UP_MAX:
                break
        count = sum(len(w) for _, w in chosen)
        if not plan or not chosen:
            return CatchUp(len(chosen), count, history_left_out, False)
        match = CampaignMatch(campaign.pk, campaign.version, rule.purposes)
        wanted_of = {event.event_key: wanted for event, wanted in chosen}
        reply_actions_plan(
            observations=[_observation(event) for event, _ in chosen],
            adapter=source.adapter,
            purposes=list(purposes),
            actor=actor,
            at=now,
            match_of=lambda _: match,
            purposes_of=lambda o: wanted_of[o.event_key],
        )
        events_reopen_for_replies(
            event_ids=[e.pk for e, _ in chosen if e.event_state == EventState.CLOSED_NO_REPLY],
            actor=actor,
            at=now,
        )
    return CatchUp(len(chosen), count, history_left_out, True)
