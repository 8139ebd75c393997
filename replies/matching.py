"""Which campaign an event matches: the rules, read once per version of a source's rules.

A rule is pure (`CampaignRule.refusal`): the comment's post in the campaign's scope, the comment
made within its window, on the post itself where it takes top-level comments only, and any of its
keywords as a whole word ignoring case (or any comment). Of the active campaigns that match, the
most specific wins: a campaign on chosen posts before an every-post one, then the earliest
activated, then the first made. A reply's copy variant is picked by its reply key
(`variant_index`). Ingest asks through ingress.hooks (replies registers
TRIGGER_RULES); the preview asks the same rules of recorded comments.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from typing import Iterable

from conduit.providers.base import Observation
from ingress.contract import trigger_matches

# Why a rule did not match a comment (the preview shows them; "" is a match).
NOT_IN_SCOPE = "not_in_scope"
BEFORE_START = "before_start"
AFTER_END = "after_end"
REPLY_TO_COMMENT = "reply_to_comment"
NO_KEYWORD = "no_keyword"

REFUSAL_WORDS = {
    "": "matched",
    NOT_IN_SCOPE: "on a post the campaign does not cover",
    BEFORE_START: "made before the campaign starts",
    AFTER_END: "made after the campaign ends",
    REPLY_TO_COMMENT: "a reply to another comment (top-level comments only)",
    NO_KEYWORD: "none of the keywords as a whole word",
}


@dataclass(frozen=True)
class CampaignRule:
    """One version of a campaign's rule, as matching reads it."""

    campaign_id: int
    campaign_version: int
    every_post: bool
    posts: frozenset[str]
    keywords: tuple[str, ...]
    any_comment: bool
    top_level_only: bool
    purposes: tuple[str, ...]  # empty: every purpose the source declares
    starts_at: datetime
    ends_at: datetime | None
    activated_at: datetime | None

    def refusal(self, *, post: str, parent: str, text: str, occurred_at: datetime) -> str:
        """Why this rule does not match the comment, or "" when it does."""
        if not self.every_post and post not in self.posts:
            return NOT_IN_SCOPE
        if occurred_at < self.starts_at:
            return BEFORE_START
        if self.ends_at is not None and occurred_at >= self.ends_at:
            return AFTER_END
        if self.top_level_only and parent:
            return REPLY_TO_COMMENT
        if not self.any_comment and not trigger_matches(text, list(self.keywords)):
            return NO_KEYWORD
        return ""

    def observed_refusal(self, observation: Observation) -> str:
        return self.refusal(
            post=observation.conversation_ref,
            parent=observation.parent_ref,
            text=observation.text,
            occurred_at=observation.occurred_at,
        )


@dataclass(frozen=True)
class CampaignMatch:
    """ingress.hooks.Match: the campaign that matched, its version, the purposes it answers with."""

    campaign_id: int
    campaign_version: int
    purposes: tuple[str, ...]


def rules_winner(rules: Iterable[CampaignRule], observation: Observation) -> CampaignRule | None:
    """The most specific of `rules` that matches the observation, or None."""
    matching = [rule for rule in rules if not rule.observed_refusal(observation)]
    return min(matching, key=_precedence) if matching else None


def _precedence(rule: CampaignRule) -> tuple:
    """Lower wins: chosen posts before every post, then the earliest activated, then the first made."""
    activated = rule.activated_at.timestamp() if rule.activated_at is not None else float("inf")
    return (rule.every_post, activated, rule.campaign_id)


def variant_index(reply_key: str, count: int) -> int:
    """Which of `count` copy variants a reply uses (0-based): the same reply key always the same
    one, spread evenly over reply keys (a reply key is a SHA-256 in hex)."""
    return int(reply_key[:16], 16) % count


def rule_of(campaign) -> CampaignRule:
    """A campaign row's current rule."""
    return CampaignRule(
        campaign_id=campaign.pk,
        campaign_version=campaign.version,
        every_post=campaign.every_post,
        posts=frozenset(campaign.posts),
        keywords=tuple(campaign.keywords),
        any_comment=campaign.any_comment,
        top_level_only=campaign.top_level_only,
        purposes=tuple(campaign.purposes),
        starts_at=campaign.starts_at,
        ends_at=campaign.ends_at,
        activated_at=campaign.activated_at,
    )


# The active rules of each source, by the version of its rules they were read at: every
# campaign change counts the source's trigger_rule_version up in the same transaction, so a
# version read names one set of rules.
_RULES: OrderedDict[tuple[int, int], tuple[CampaignRule, ...]] = OrderedDict()
_RULES_HELD = 1024
_LOCK = threading.Lock()


@dataclass(frozen=True)
class SourceRules:
    """A source's active rules at one version of them (ingress.hooks.TriggerRules.rules)."""

    version: int
    rules: tuple[CampaignRule, ...]

    def match(self, observation: Observation) -> CampaignMatch | None:
        """The campaign the observation matches (the most specific), or None."""
        winner = rules_winner(self.rules, observation) if self.rules else None
        if winner is None:
            return None
        return CampaignMatch(winner.campaign_id, winner.campaign_version, winner.purposes)


def source_rules(source) -> SourceRules:
    """The source's active campaigns' rules, at the version `source` was read at when they are
    held; else read now, with the version they are read at (which an event then records)."""
    key = (source.pk, source.trigger_rule_version)
    with _LOCK:
        held = _RULES.get(key)
    if held is not None:
        return SourceRules(source.trigger_rule_version, held)
    version, rules = _rules_read(source.pk)
    if version is None:
        # The source is gone: its write refuses the cached row and ingest reads it afresh.
        return SourceRules(source.trigger_rule_version, ())
    with _LOCK:
        _RULES[(source.pk, version)] = rules
        while len(_RULES) > _RULES_HELD:
            _RULES.popitem(last=False)
    return SourceRules(version, rules)


def _rules_read(source_id: int) -> tuple[int | None, tuple[CampaignRule, ...]]:
    """The active rules and the version they are: the version read before and after them is the
    same (a change commits both at once), else read again."""
    from ingress.models import Source
    from replies.models import Campaign, CampaignState

    def version() -> int | None:
        return Source.objects.filter(pk=source_id).values_list("trigger_rule_version", flat=True).first()

    before = version()
    while before is not None:
        rules = tuple(
            rule_of(c) for c in Campaign.objects.filter(source_id=source_id, state=CampaignState.ACTIVE)
        )
        after = version()
        if after == before:
            return after, rules
        before = after
    return None, ()  # no such source (a cached one deleted since): nothing matches, nothing is held


def active_rules(source) -> tuple[CampaignRule, ...]:
    """The source's active campaigns' rules (the preview compares a campaign with them)."""
    return source_rules(source).rules


# --- what a campaign would match (read only) --------------------------------------------------


@dataclass(frozen=True)
class PreviewRow:
    event_key: str
    post: str
    occurred_at: datetime
    matched: bool
    why: str


def campaign_preview(*, campaign_id: int, last: int = 20) -> list[PreviewRow]:
    """The last `last` recorded comments in the campaign's scope, newest first, each with whether
    its rule matches and why, read from the event ledger: nothing is planned. A match another
    active campaign would answer first says so."""
    from ingress.models import InboundEvent
    from replies.models import Campaign

    campaign = Campaign.objects.select_related("source").get(pk=campaign_id)
    rule = rule_of(campaign)
    others = [r for r in active_rules(campaign.source) if r.campaign_id != campaign.pk]
    names = dict(Campaign.objects.filter(pk__in=[r.campaign_id for r in others]).values_list("pk", "name"))
    events = InboundEvent.objects.filter(source_id=campaign.source_id, event_type="comment.created")
    if not campaign.every_post:
        events = events.filter(conversation_ref__in=campaign.posts)
    rows = []
    for event in events.order_by("-occurred_at", "-id").only(
        "event_key", "conversation_ref", "parent_ref", "message_text", "occurred_at", "content_purged_at"
    )[:last]:
        if event.content_purged_at is not None and not rule.any_comment:
            rows.append(
                PreviewRow(
                    event.event_key,
                    event.conversation_ref,
                    event.occurred_at,
                    False,
                    "its text was purged by the retention rule: the keywords cannot be read",
                )
            )
            continue
        comment = dict(
            post=event.conversation_ref,
            parent=event.parent_ref,
            text=event.message_text,
            occurred_at=event.occurred_at,
        )
        refusal = rule.refusal(**comment)
        why = REFUSAL_WORDS[refusal]
        if not refusal:
            first = min(
                (r for r in others if not r.refusal(**comment) and _precedence(r) < _precedence(rule)),
                key=_precedence,
                default=None,
            )
            if first is not None:
                why = f"matched, but campaign {names.get(first.campaign_id, first.campaign_id)!r} answers it first"
        rows.append(PreviewRow(event.event_key, event.conversation_ref, event.occurred_at, not refusal, why))
    return rows
