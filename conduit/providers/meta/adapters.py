"""The Meta source adapters: each platform's webhook map with its Graph read-back mixed in,
so a comment read back is normalized by the very code that normalized its webhook, and each
platform's event families declared (seed 004): how far the read recovers them, what is lost."""

from __future__ import annotations

from dataclasses import replace

from conduit.canonical import sha256_hex
from conduit.providers.base import (
    ANSWERS_COMMENT,
    ANSWERS_MESSAGE,
    COMPLETE,
    LIMITED,
    NOT_RECOVERABLE,
    Family,
    Observation,
)
from conduit.providers.meta.graph import GRAPH_HOSTS
from conduit.providers.meta.reader import MetaInstagramReader, MetaPageReader
from conduit.providers.meta.webhook import MetaInstagramWebhook, MetaPageWebhook

# The Conversations API gives the details of a conversation's 20 newest messages only, and leaves
# out Requests-folder conversations idle for 30 days (instagram-platform/.../conversations-api,
# messenger-platform/conversations): an older DM is not read back, so absence proves nothing.
_DM_LIMITATION = ("read back through the Conversations API, which shows only the 20 newest messages of each "
                  "conversation and no Requests-folder conversation idle for 30 days: an older DM is not "
                  "recovered, and a DM not seen is not taken as missing")


class MetaInstagramAdapter(MetaInstagramReader, MetaInstagramWebhook):
    """Instagram professional accounts: comments, live comments and DMs; read back from the Graph API."""

    credential_hosts = GRAPH_HOSTS

    families = (
        # /{ig-media-id}/comments returns neither live comments after the broadcast nor ad comments
        # (instagram-graph-api/reference/ig-media/comments): those are known from webhooks only.
        Family("comment.created", COMPLETE,
               "live comments after the broadcast and comments on ads are not returned by the media "
               "comments edge", answers=ANSWERS_COMMENT),
        Family("message.created", LIMITED, _DM_LIMITATION, answers=ANSWERS_MESSAGE),
    )


class MetaPageAdapter(MetaPageReader, MetaPageWebhook):
    """Facebook Pages: feed comments and Messenger; read back from the Graph API."""

    credential_hosts = GRAPH_HOSTS

    families = (
        Family("comment.created", COMPLETE,
               "comments on posts that are not in the Page's /feed (ads never published to it) are not read "
               "back", answers=ANSWERS_COMMENT),
        # The read shows a comment's current text: an edit it shows is recorded as that edit event.
        Family("comment.edited", LIMITED,
               "the read shows only a comment's current text: the latest edit is recovered, an intermediate "
               "edit is not"),
        Family("comment.removed", NOT_RECOVERABLE,
               "a removed comment is no longer returned: removals are known from webhooks only"),
        Family("comment.hidden", NOT_RECOVERABLE,
               "the read does not report moderation: hides are known from webhooks only"),
        Family("comment.unhidden", NOT_RECOVERABLE,
               "the read does not report moderation: unhides are known from webhooks only"),
        Family("message.created", LIMITED, _DM_LIMITATION, answers=ANSWERS_MESSAGE),
    )

    def edit_of(self, observation: Observation) -> Observation | None:
        """The edit event a read comment is, should the ledger hold the comment with other text: the
        read shows a comment's current text only, so a text that differs from the created event's is
        the latest edit, keyed and hashed exactly as the `edited` webhook's (webhook.py's field map)."""
        if observation.event_type != "comment.created":
            return None
        return replace(observation, event_type="comment.edited",
                       source_event_id=f"{observation.message_ref}@{sha256_hex(observation.text)[:16]}")
