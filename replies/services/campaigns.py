"""Campaigns: a person's trigger rule and copy per account, made, edited, versioned and switched.

Every change counts the source's trigger_rule_version up in the same transaction (ingest reads
the active rules once per version: replies.matching), and a change of rule or copy is a new
campaign version, recorded in CampaignVersion with what it said. Refusals are CampaignRefused
(a ValueError) naming the problem, for the command line and the admin alike.
"""

from __future__ import annotations

from datetime import datetime
from datetime import timezone as dt_timezone
from typing import Any, Mapping

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from ingress.models import Source
from ingress.services.sources import source_rules_version_next
from replies.models import Campaign, CampaignState, CampaignVersion, ReplyCopy, RulesVersion
from replies.selectors import copy_sets_current

MAX_KEYWORD_LENGTH = 64
# The every-post campaign a source's keyword list makes matches whatever occurred, as the
# source-wide keywords did before campaigns.
SINCE_ALWAYS = datetime(1970, 1, 1, tzinfo=dt_timezone.utc)
RULE_FIELDS = (
    "every_post",
    "posts",
    "keywords",
    "any_comment",
    "top_level_only",
    "purposes",
    "starts_at",
    "ends_at",
)
# The moves a campaign's state may make; ended is final.
STATE_MOVES = {
    CampaignState.DRAFT: {CampaignState.ACTIVE, CampaignState.ENDED},
    CampaignState.ACTIVE: {CampaignState.PAUSED, CampaignState.ENDED},
    CampaignState.PAUSED: {CampaignState.ACTIVE, CampaignState.ENDED},
    CampaignState.ENDED: set(),
}


class CampaignRefused(ValueError):
    """A campaign input or move refused; the message names the problem."""


def _dedupe(values) -> list[str]:
    return list(dict.fromkeys(str(v).strip() for v in values if str(v).strip()))


def _rules_changed(source_id: int) -> None:
    """The source's rules are a new version: count it up (ingest's cached rules and cached source
    rows are read again at it) and record what it is (RulesVersion), in the caller's transaction."""
    _rules_recorded(source_id, source_rules_version_next(source_id=source_id))


def _rules_recorded(source_id: int, version: int | None = None) -> None:
    if version is None:
        version = Source.objects.filter(pk=source_id).values_list("trigger_rule_version", flat=True).get()
    active = Campaign.objects.filter(source_id=source_id, state=CampaignState.ACTIVE)
    RulesVersion.objects.update_or_create(
        source_id=source_id,
        version=version,
        defaults={
            "campaigns": {str(pk): v for pk, v in active.values_list("pk", "version")},
            "created_at": timezone.now(),
        },
    )


def _keywords_checked(keywords) -> list[str]:
    keywords = _dedupe(keywords)
    bad = [k for k in keywords if len(k) > MAX_KEYWORD_LENGTH or not k.isprintable()]
    if bad:
        raise CampaignRefused(
            f"each keyword is printable and at most {MAX_KEYWORD_LENGTH} characters; {bad[0][:80]!r} is not"
        )
    return keywords


def _rule_checked(campaign: Campaign, source: Source, *, default: bool = False) -> None:
    """Refuse a campaign whose scope, rule, window or purposes do not hold together."""
    campaign.posts = _dedupe(campaign.posts)
    campaign.keywords = _keywords_checked(campaign.keywords)
    campaign.purposes = _dedupe(campaign.purposes)
    if campaign.every_post and campaign.posts:
        raise CampaignRefused("a campaign covers chosen posts or every post, not both")
    if not campaign.every_post and not campaign.posts:
        raise CampaignRefused("choose the posts a campaign covers (--post ID), or every post (--every-post)")
    bad_post = [p for p in campaign.posts if len(p) > 200 or not p.isprintable() or " " in p]
    if bad_post:
        raise CampaignRefused(
            f"a post is named by its platform id (no spaces, at most 200 characters): {bad_post[0][:80]!r}"
        )
    if campaign.any_comment and campaign.keywords:
        raise CampaignRefused("a campaign matches keywords or any comment, not both")
    if not default and not campaign.any_comment and not campaign.keywords:
        raise CampaignRefused("give the keywords a comment must contain (--keyword WORD), or --any-comment")
    undeclared = [p for p in campaign.purposes if p not in source.purposes]
    if undeclared:
        declared = ", ".join(source.purposes) or "none"
        raise CampaignRefused(
            f"{undeclared[0]!r} is not a declared purpose of source {source.name!r} (declared: {declared})"
        )
    if campaign.ends_at is not None and campaign.ends_at <= campaign.starts_at:
        raise CampaignRefused("a campaign ends after it starts")


def _rule_snapshot(campaign: Campaign) -> dict:
    return {
        "every_post": campaign.every_post,
        "posts": list(campaign.posts),
        "keywords": list(campaign.keywords),
        "any_comment": campaign.any_comment,
        "top_level_only": campaign.top_level_only,
        "purposes": list(campaign.purposes),
        "starts_at": campaign.starts_at.isoformat(),
        "ends_at": campaign.ends_at.isoformat() if campaign.ends_at else None,
    }


def _copy_snapshot(campaign: Campaign) -> dict:
    return {
        purpose: [c.copy_version for c in copies]
        for purpose, copies in copy_sets_current(campaign_id=campaign.pk).items()
    }


def _version_record(campaign: Campaign, actor: str) -> None:
    CampaignVersion.objects.create(
        campaign=campaign,
        version=campaign.version,
        rule=_rule_snapshot(campaign),
        copy=_copy_snapshot(campaign),
        created_by=actor,
        created_at=timezone.now(),
    )


def _texts_checked(texts) -> list[str]:
    texts = [str(t).strip() for t in texts]
    if not texts or any(not t for t in texts):
        raise CampaignRefused("approved copy needs a text for every variant")
    if len(set(texts)) != len(texts):
        raise CampaignRefused("the variants of one purpose's copy are different texts")
    return texts


def _copy_set_write(
    campaign: Campaign, purpose: str, texts: list[str], channel: str, actor: str, template: dict | None = None
) -> bool:
    """Write `texts` as the purpose's next copy set (each variant with `template`, where the
    platform needs one past its free-form window); False (nothing written) when they are the
    current set already. Runs under the campaign's lock."""
    template = dict(template or {})
    current = copy_sets_current(campaign_id=campaign.pk).get(purpose, [])
    # No channel given (the admin's copy box): the purpose's current one, else the purpose's name.
    channel = channel.strip() or (current[0].channel if current else purpose)
    if [(c.text, c.channel, c.template) for c in current] == [(t, channel, template) for t in texts]:
        return False
    number = (
        ReplyCopy.objects.filter(campaign=campaign, purpose=purpose).aggregate(n=Max("copy_set"))["n"] or 0
    ) + 1
    if campaign.account_default:
        # The names source-wide copy had before campaigns: v1, v2, ...
        number = max(
            number, ReplyCopy.objects.filter(source_id=campaign.source_id, purpose=purpose).count() + 1
        )
    prefix = "" if campaign.account_default else f"c{campaign.pk}-"
    ReplyCopy.objects.bulk_create(
        ReplyCopy(
            source_id=campaign.source_id,
            campaign=campaign,
            purpose=purpose,
            channel=channel,
            text=text,
            template=template,
            copy_set=number,
            variant=n,
            copy_version=f"{prefix}v{number}" + (f".{n}" if len(texts) > 1 else ""),
            created_by=actor,
        )
        for n, text in enumerate(texts, start=1)
    )
    return True


def campaign_create(
    *,
    name: str,
    source_id: int,
    copies: Mapping[str, list[str]],
    actor: str,
    every_post: bool = False,
    posts: list[str] = (),
    keywords: list[str] = (),
    any_comment: bool = False,
    top_level_only: bool = False,
    starts_at: datetime | None = None,
    ends_at: datetime | None = None,
    activate: bool = False,
    channels: Mapping[str, str] | None = None,
) -> Campaign:
    """Make a campaign (a draft, or active with `activate`) with its copy per purpose: each
    purpose's texts are its variants. Its purposes are the ones given copy."""
    name = name.strip()
    if not name or len(name) > 100 or not name.isprintable():
        raise CampaignRefused("a campaign's name is printable and 1 to 100 characters")
    if not copies:
        raise CampaignRefused("give each purpose's approved copy (--copy PURPOSE=TEXT)")
    texts = {purpose.strip(): _texts_checked(t) for purpose, t in copies.items()}
    with transaction.atomic():
        # NO KEY: ingest's inserts take KEY SHARE on the source (their foreign keys) and must not wait.
        source = Source.objects.select_for_update(no_key=True).filter(pk=source_id).first()
        if source is None:
            raise CampaignRefused("no such source")
        if Campaign.objects.filter(name=name).exists():
            raise CampaignRefused(f"a campaign named {name!r} exists already")
        campaign = Campaign(
            name=name,
            source=source,
            every_post=every_post,
            posts=list(posts),
            keywords=list(keywords),
            any_comment=any_comment,
            top_level_only=top_level_only,
            purposes=list(texts),
            # Platform times are whole seconds: a campaign made now matches this second's comments.
            starts_at=starts_at or timezone.now().replace(microsecond=0),
            ends_at=ends_at,
            created_by=actor,
        )
        _rule_checked(campaign, source)
        campaign.save()
        for purpose, variant_texts in texts.items():
            _copy_set_write(campaign, purpose, variant_texts, (channels or {}).get(purpose, ""), actor)
        _version_record(campaign, actor)
        if activate:
            _state_move(campaign, CampaignState.ACTIVE)
        _rules_changed(source.pk)
    return campaign


def _locked(campaign_id: int) -> Campaign:
    """The campaign, locked for a change: its source's row first, then its own, both FOR NO KEY
    UPDATE. One order for every change on an account (a copy, keywords, an edit, a switch), so two
    never wait for each other crosswise; and NO KEY, so ingest's inserts, which take KEY SHARE on
    both through their foreign keys, never wait for a person's change (nor it for them)."""
    source_id = Campaign.objects.filter(pk=campaign_id).values_list("source_id", flat=True).first()
    if source_id is None:
        raise CampaignRefused("no such campaign")
    Source.objects.select_for_update(no_key=True).filter(pk=source_id).values_list("pk").get()
    campaign = (
        Campaign.objects.select_for_update(no_key=True, of=("self",))
        .select_related("source")
        .filter(pk=campaign_id)
        .first()
    )
    if campaign is None:
        raise CampaignRefused("no such campaign")
    return campaign


def campaign_update(*, campaign_id: int, changes: Mapping[str, Any], actor: str) -> Campaign:
    """Change a campaign's name, scope, rule, window or purposes. A change of anything but the
    name is a new version; an ended campaign is not changed."""
    unknown = set(changes) - {"name", *RULE_FIELDS}
    if unknown:
        raise CampaignRefused(f"a campaign's {', '.join(sorted(unknown))} cannot be changed")
    with transaction.atomic():
        campaign = _locked(campaign_id)
        if campaign.state == CampaignState.ENDED:
            raise CampaignRefused(f"campaign {campaign.name!r} has ended; make a new one")
        before = _rule_snapshot(campaign)
        for field, value in changes.items():
            setattr(campaign, field, value)
        campaign.name = campaign.name.strip()
        if not campaign.name or len(campaign.name) > 100:
            raise CampaignRefused("a campaign's name is printable and 1 to 100 characters")
        if Campaign.objects.filter(name=campaign.name).exclude(pk=campaign.pk).exists():
            raise CampaignRefused(f"a campaign named {campaign.name!r} exists already")
        _rule_checked(campaign, campaign.source, default=campaign.account_default)
        if _rule_snapshot(campaign) != before:
            campaign.version += 1
            campaign.save()
            _version_record(campaign, actor)
            _rules_changed(campaign.source_id)
        else:
            campaign.save()
    return campaign


def campaign_copy_set(
    *, campaign_id: int, purpose: str, texts: list[str], actor: str, channel: str = ""
) -> tuple[Campaign, bool]:
    """Make `texts` the purpose's approved copy (its variants): a new copy set and a new campaign
    version, unless they are the current set. Replies already approved keep the text they were
    approved with. Returns (campaign, changed)."""
    texts = _texts_checked(texts)
    with transaction.atomic():
        campaign = _locked(campaign_id)
        if campaign.state == CampaignState.ENDED:
            raise CampaignRefused(f"campaign {campaign.name!r} has ended; make a new one")
        if purpose not in campaign.source.purposes:
            raise CampaignRefused(f"{purpose!r} is not a declared purpose of source {campaign.source.name!r}")
        if not _copy_set_write(campaign, purpose, texts, channel, actor):
            return campaign, False
        if campaign.purposes and purpose not in campaign.purposes:
            campaign.purposes = [*campaign.purposes, purpose]
        campaign.version += 1
        campaign.save()
        _version_record(campaign, actor)
        _rules_changed(campaign.source_id)
    return campaign, True


def _state_move(campaign: Campaign, state: str) -> None:
    if state not in STATE_MOVES[campaign.state]:
        raise CampaignRefused(f"campaign {campaign.name!r} is {campaign.state}: it cannot be made {state}")
    if state == CampaignState.ACTIVE:
        held = copy_sets_current(campaign_id=campaign.pk)
        missing = [p for p in campaign.purposes if p not in held]
        if missing or not held:
            raise CampaignRefused(
                f"campaign {campaign.name!r} has no approved copy for {', '.join(missing) or 'any purpose'}"
            )
        # The first activation orders it among campaigns that match the same comment.
        campaign.activated_at = campaign.activated_at or timezone.now()
    campaign.state = state
    campaign.save(update_fields=["state", "activated_at", "updated_at"])


def campaign_state_set(*, campaign_id: int, state: str, actor: str) -> Campaign:
    """Activate, pause or end a campaign (draft -> active -> paused -> active ..., any -> ended)."""
    if state not in CampaignState.values:
        raise CampaignRefused(f"no campaign state {state!r}")
    with transaction.atomic():
        campaign = _locked(campaign_id)
        _state_move(campaign, state)
        _rules_changed(campaign.source_id)
    return campaign


# --- the source's every-post keyword list (ingress.hooks.TriggerRules) -----------------------


def account_default(source: Source) -> Campaign | None:
    return Campaign.objects.filter(source_id=source.pk, account_default=True).first()


def _account_default_made(source: Source, actor: str) -> Campaign:
    campaign = account_default(source)
    if campaign is not None:
        return campaign
    campaign = Campaign.objects.create(
        name=_free_name(f"{source.name}: every post"),
        source=source,
        every_post=True,
        purposes=[],
        starts_at=SINCE_ALWAYS,
        state=CampaignState.ACTIVE,
        activated_at=timezone.now(),
        account_default=True,
        created_by=actor,
    )
    _version_record(campaign, actor)
    return campaign


def _free_name(name: str) -> str:
    taken = set(Campaign.objects.filter(name__startswith=name).values_list("name", flat=True))
    n, free = 1, name[:100]
    while free in taken:
        n += 1
        free = f"{name[:94]} ({n})"
    return free


def keywords_set(*, source: Source, keywords: list[str], actor: str, registering: bool = False) -> None:
    """Make `keywords` the source's every-post keyword list, in its account-default campaign
    (made on first need, active, answering with every purpose the source declares). A change is
    a new trigger rule version, except when the campaign is made with the source."""
    try:
        keywords = _keywords_checked(keywords)
    except CampaignRefused as refused:
        raise ValidationError({"trigger_keywords": str(refused)}) from None
    existing = account_default(source)
    if existing is None and not keywords:
        if registering:
            _rules_recorded(source.pk)  # the source's first rules: no campaign at all
        return
    with transaction.atomic():
        campaign = _account_default_made(source, actor)
        campaign = _locked(campaign.pk)
        if campaign.keywords == keywords:
            return
        campaign.keywords = keywords
        if existing is not None:
            campaign.version += 1
        campaign.save()
        if existing is not None:
            _version_record(campaign, actor)
        else:
            CampaignVersion.objects.filter(campaign=campaign, version=campaign.version).update(
                rule=_rule_snapshot(campaign)
            )
        if registering:
            _rules_recorded(source.pk)  # the source's first rules, at its first version
        else:
            _rules_changed(source.pk)


def keywords_of(source: Source) -> list[str]:
    campaign = account_default(source)
    return list(campaign.keywords) if campaign is not None else []
