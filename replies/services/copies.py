"""Approved copy of a source's every-post campaign, one text per purpose: registration's and the
source-wide copy's way (a campaign's own copy and variants: replies.services.campaigns)."""

from __future__ import annotations

from django.db import transaction

from conduit.providers.base import template_valid
from ingress.models import Source
from replies.models import ReplyCopy
from replies.services.campaigns import (
    _account_default_made,
    _copy_set_write,
    _locked,
    _rules_changed,
    _version_record,
    copy_sets_current,
)


def reply_copy_create(
    *, source_id: int, purpose: str, channel: str, text: str, actor: str, template: dict | None = None
) -> tuple[ReplyCopy, bool]:
    """Approved copy for a purpose of the source's every-post campaign (one text, and the template
    sent in its place past a free-form window, if any). An identical current copy changes nothing.
    Returns (copy, created)."""
    text, channel = text.strip(), channel.strip()
    if not text or not channel:
        raise ValueError("approved copy needs a channel and a text")
    if template and not template_valid(template):
        raise ValueError(
            'a template needs a "name" and a "language", and its "parameters" must be a list of texts'
        )
    with transaction.atomic():
        source = Source.objects.select_for_update(no_key=True).get(pk=source_id)  # serializes versions
        if purpose not in source.purposes:
            raise ValueError(f"{purpose!r} is not a declared purpose of source {source.name!r}")
        campaign = _locked(_account_default_made(source, actor).pk)
        written = _copy_set_write(campaign, purpose, [text], channel, actor, template)
        if written:
            campaign.version += 1
            campaign.save()
            _version_record(campaign, actor)
            _rules_changed(source.pk)
        (copy,) = copy_sets_current(campaign_id=campaign.pk)[purpose]
    return copy, written
