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

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from conduit.providers.base import Observation
from conduit.providers.registry import ADAPTERS
from ingress.models import EventState, InboundEvent, Source
from ingress.services import events_reopen_for_replies
from replies.matching import CampaignMatch, rule_of
from replies.models import Campaign, CampaignState, ReplyAction
from replies.services.campaigns import CampaignRefused
from replies.services.planning import purposes_answering, reply_actions_plan

CATCH_UP_MAX = 5000  # comments planned by one decision; a larger backlog takes several
COMMENTS = "comment.created"


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
    (REVIEW_PENDING, under the campaign's current version). Refused unless the campaign is active."""
    now = timezone.now()
    with transaction.atomic():
        campaign = Campaign.objects.select_related("source").filter(pk=campaign_id).first()
        if campaign is None:
            raise CampaignRefused("no such campaign")
        # The source's lock serializes catch-ups (of any campaign) on one account.
        source = Source.objects.select_for_update(no_key=True).get(pk=campaign.source_id)
        if campaign.state != CampaignState.ACTIVE:
            raise CampaignRefused(f"campaign {campaign.name!r} is {campaign.state}: activate it first")
        rule = rule_of(campaign)
        answering = purposes_answering(source=source)(COMMENTS)
        purposes = tuple(p for p in answering if not rule.purposes or p in rule.purposes)
        if not purposes:
            raise CampaignRefused(
                f"no purpose of campaign {campaign.name!r} has a route that answers comments"
            )
        events = InboundEvent.objects.filter(source=source, event_type=COMMENTS).exclude(
            content_purged_at__isnull=False
        )
        window = ADAPTERS[source.adapter].private_reply_window if source.adapter in ADAPTERS else None
        if window is not None:
            events = events.filter(occurred_at__gte=now - window)
        if not campaign.every_post:
            events = events.filter(conversation_ref__in=campaign.posts)
        # Ready records may lack a purpose; closed ones only where no campaign matched on arrival.
        events = events.filter(event_state=EventState.RECORD_READY) | events.filter(
            event_state=EventState.CLOSED_NO_REPLY, trigger_match=False
        )
        connected = source.connected_at.replace(microsecond=0) if source.connected_at else None
        replied = set(
            ReplyAction.objects.filter(event__in=events, purpose__in=purposes).values_list(
                "event_id", "purpose"
            )
        )
        chosen: list[tuple[InboundEvent, tuple[str, ...]]] = []
        history_left_out = 0
        for event in events.order_by("occurred_at", "id").iterator(chunk_size=1000):
            observation = _observation(event)
            if rule.observed_refusal(observation):
                continue
            wanted = tuple(p for p in purposes if (event.event_key, p) not in replied)
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
