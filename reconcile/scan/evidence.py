"""The page as it is compared: receipts of the account's own items, and edits read back."""

from __future__ import annotations

from dataclasses import replace

from conduit.providers.base import SourcePage
from conduit.providers.registry import get_adapter
from ingress.models import InboundEvent, Source
from replies.evidence import own_item_receipts


def page_evidence(source: Source, page: SourcePage) -> SourcePage:
    """The page as it is compared: the account's own items it showed become the receipts of the
    actions they answer (replies.evidence's one rule), and a comment read back with the text of a
    later edit is staged as that edit event beside its creation (never an identity conflict)."""
    receipts = own_item_receipts(source_id=source.pk, items=page.own) if page.own else []
    observations = edits_seen(source, get_adapter(source.adapter), page.observations)
    if not receipts and observations is page.observations:
        return page
    return replace(page, observations=observations, receipts=[*page.receipts, *receipts])


def edits_seen(source: Source, adapter, observations: list) -> list:
    """Where the adapter maps a read comment onto its edit event (`edit_of`) and the ledger holds the
    comment under its key with another payload, the comment is staged with the payload first accepted
    (the source still shows it) and its current text as the edit event the webhook would have made."""
    edit_of = getattr(adapter, "edit_of", None)
    if edit_of is None:
        return observations
    allowed = set(source.event_types)
    editable = {o.event_key: o for o in observations if edit_of(o) is not None}
    if not editable:
        return observations
    held = {
        key: rest
        for key, *rest in InboundEvent.objects.filter(
            source=source, event_key__in=list(editable)
        ).values_list("event_key", "payload_hash", "sender_ref", "conversation_ref", "message_text")
    }
    staged = []
    for observation in observations:
        first, sender, post, text = held.get(observation.event_key) or (None, None, None, None)
        # An edit changes the text only: another author or post is an identity conflict, and the
        # same text (where it is still kept) is no edit either.
        edited = (
            first is not None
            and first != observation.payload_hash
            and sender == observation.sender_ref
            and post == observation.conversation_ref
            and (not text or text != observation.text)
        )
        if observation.event_key in editable and edited:
            staged.append(replace(observation, payload_hash=first))
            edit = edit_of(observation)
            if edit.event_type in allowed:
                staged.append(edit)
        else:
            staged.append(observation)
    return staged
