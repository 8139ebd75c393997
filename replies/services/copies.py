"""Approved copy: versioned texts per source and purpose."""

from __future__ import annotations

from django.db import transaction

from ingress.models import Source
from replies.models import ReplyCopy
from replies.selectors import copy_current

# --- approved copy -------------------------------------------------------------------------


def reply_copy_create(
    *, source_id: int, purpose: str, channel: str, text: str, actor: str
) -> tuple[ReplyCopy, bool]:
    """Record approved copy; an identical current text changes nothing. Returns (copy, created)."""
    text, channel = text.strip(), channel.strip()
    if not text or not channel:
        raise ValueError("approved copy needs a channel and a text")
    with transaction.atomic():
        source = Source.objects.select_for_update().get(pk=source_id)  # serializes versions
        if purpose not in source.purposes:
            raise ValueError(f"{purpose!r} is not a declared purpose of source {source.name!r}")
        current = copy_current(source_id=source_id, purpose=purpose)
        if current and (current.text, current.channel) == (text, channel):
            return current, False
        count = ReplyCopy.objects.filter(source_id=source_id, purpose=purpose).count()
        return ReplyCopy.objects.create(
            source=source,
            purpose=purpose,
            channel=channel,
            text=text,
            copy_version=f"v{count + 1}",
            created_by=actor,
        ), True
