"""The Meta source adapters: each platform's webhook map with its Graph read-back mixed in,
so a comment read back is normalized by the very code that normalized its webhook, and each
platform's event families declared (docs/platforms/meta.md#families): how far the read recovers
them, what is lost."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Mapping

from conduit.canonical import sha256_hex
from conduit.providers.base import (
    ANSWERS_COMMENT,
    ANSWERS_MESSAGE,
    COMPLETE,
    LIMITED,
    NOT_RECOVERABLE,
    Family,
    Observation,
    Rejection,
    SharedCallback,
)
from conduit.providers.meta import graph, signed_request, subscriptions, tokens, webhook
from conduit.providers.meta.graph import GRAPH_HOSTS
from conduit.providers.meta.platform_readers import MetaInstagramReader, MetaPageReader
from conduit.providers.meta.transport import MetaCommentReplyTransport, MetaPrivateReplyTransport
from conduit.providers.meta.webhook import MetaBody, MetaInstagramWebhook, MetaPageWebhook

# The Conversations API gives the details of a conversation's 20 newest messages only, and leaves
# out Requests-folder conversations idle for 30 days (instagram-platform/.../conversations-api,
# messenger-platform/conversations): an older DM is not read back, so absence proves nothing.
_DM_LIMITATION = (
    "read back through the Conversations API, which shows only the 20 newest messages of each "
    "conversation and no Requests-folder conversation idle for 30 days: an older DM is not "
    "recovered, and a DM not seen is not taken as missing"
)


class MetaAppCallback(SharedCallback):
    """One Meta app posts every object it is subscribed to (`instagram`, `page`) to
    /webhooks/meta/<app id>/, signed with the app secret; Meta understands only 200."""

    platform = "meta"
    label = "Meta"
    app_id = re.compile(r"[0-9]{1,32}")
    proof_headers = (webhook.SIGNATURE_HEADER,)

    def handshake(self, query: Mapping[str, str]) -> tuple[str, str] | None:
        """Meta's verification request: `hub.mode=subscribe` with the verify token and a challenge."""
        if query.get("hub.mode", "") != "subscribe":
            return None
        return query.get("hub.verify_token", ""), query.get("hub.challenge", "")

    def split(self, body: bytes) -> MetaBody | Rejection:
        return webhook.body_split(body)

    def counter_name(self, *parts: str) -> str:
        return webhook.counter_name(*parts)  # looked up at each call: the fuzzer's control plants one

    def user_request(self, value: str, secret: str) -> tuple[str, datetime]:
        """The deauthorize and data deletion callbacks' `signed_request` (conduit/providers/meta/signed_request.py)."""
        request = signed_request.signed_user_request(value, secret=secret)
        return request.user_id, request.issued_at

    def unsubscribe(self, *, account: str, base_url: str, token: str, timeout: float) -> tuple[str, bool]:
        """`DELETE /{page-id or ig-id}/subscribed_apps` with the account's token (Meta answers
        `{"success": true}`; graph-api/reference/page/subscribed_apps, "Deleting"). The token is
        refused when Meta answers 190 or 104 (graph_failures' token_invalid)."""
        try:
            document = graph.graph_request(
                method="DELETE",
                base_url=base_url.rstrip("/"),
                path=f"{account}/subscribed_apps",
                params={},
                access_token=token,
                timeout=timeout,
            ).document
        except graph.GraphError as exc:
            refused = f"Meta refused the unsubscribe (code {exc.code}, {exc.meaning})"
            return refused, exc.meaning == graph.TOKEN_INVALID
        except graph.GraphCallFailed as exc:
            return (
                f"the unsubscribe got no answer from Meta ({exc.kind}): it may or may not have applied",
                False,
            )
        if document.get("success") is not True:
            return "Meta did not confirm the unsubscribe (no success: true)", False
        return "", False


META_APP_CALLBACK = MetaAppCallback()
# Meta allows one private reply per comment within 7 days of the comment (docs/platforms/meta.md#private-reply-window).
PRIVATE_REPLY_WINDOW = timedelta(days=7)
# A Meta source's public acknowledgement is a comment reply and its private delivery a private
# reply, both through the source's own Graph URL, unless routed otherwise.
DEFAULT_ROUTES = MappingProxyType(
    {"public_ack": MetaCommentReplyTransport.name, "private_delivery": MetaPrivateReplyTransport.name}
)


class _MetaAccount:
    """What both Meta adapters share: the app callback, the private-reply window and its read of a
    comment's real time, the default routes, and the subscription check."""

    credential_hosts = GRAPH_HOSTS
    shared_callback = META_APP_CALLBACK
    private_reply_window = PRIVATE_REPLY_WINDOW
    default_routes = DEFAULT_ROUTES

    def subscription_problem(
        self,
        *,
        account: str,
        app_id: str,
        event_types: frozenset[str],
        base_url: str,
        access_token: str,
        now: datetime,
        timeout: float,
    ) -> str:
        """The account's subscribed_apps read back (Meta unsubscribes silently) and its token's expiry."""
        problem = subscriptions.subscription_problem(
            object_=self.object,
            account=account,
            app_id=app_id,
            event_types=event_types,
            base_url=base_url,
            access_token=access_token,
            timeout=timeout,
        )
        expiry = subscriptions.token_expiry_problem(
            base_url=base_url, access_token=access_token, now=now, timeout=timeout
        )
        return "; ".join(p for p in (problem, expiry) if p)

    def token_renew(
        self,
        *,
        base_url: str,
        access_token: str,
        issued_at: datetime,
        now: datetime,
        timeout: float,
        app_token: str = "",
    ) -> tokens.TokenRenewal:
        """Keep a stored token alive: refresh an Instagram Login one, inspect a Facebook one."""
        return tokens.token_renew(
            base_url=base_url,
            access_token=access_token,
            issued_at=issued_at,
            now=now,
            timeout=timeout,
            app_token=app_token,
        )

    def subscribe(
        self, *, account: str, event_types: frozenset[str], base_url: str, access_token: str, timeout: float
    ) -> str:
        """Subscribe the app to the account's fields (POST subscribed_apps): "" or why not."""
        return subscriptions.subscribe(
            object_=self.object,
            account=account,
            event_types=event_types,
            base_url=base_url,
            access_token=access_token,
            timeout=timeout,
        )

    def token_verify(self, *, base_url: str, account: str, access_token: str, timeout: float) -> str:
        """ "" when a Graph call with the token reads the account, else what went wrong."""
        return tokens.token_verify(
            base_url=base_url, account=account, access_token=access_token, timeout=timeout
        )

    def comment_created_at(
        self, *, base_url: str, comment_ref: str, access_token: str, timeout: float
    ) -> datetime:
        """The comment's real creation time: read once from the Graph (`GET /{comment}?fields=timestamp`)."""
        response = graph.graph_request(
            method="GET",
            base_url=base_url.rstrip("/"),
            path=comment_ref,
            params={"fields": "id,timestamp"},
            timeout=timeout,
            access_token=access_token,
        )
        value = response.document.get("timestamp") or response.document.get("created_time")
        if not isinstance(value, str):
            raise ValueError("the comment's read carries no timestamp")
        created = datetime.fromisoformat(value)
        if created.tzinfo is None:
            raise ValueError("the comment's timestamp has no offset")
        return created


class MetaInstagramAdapter(_MetaAccount, MetaInstagramReader, MetaInstagramWebhook):
    """Instagram professional accounts: comments, live comments and DMs; read back from the Graph API."""

    # Documented limits (docs/platforms/meta.md#send-budgets): Instagram private replies to posts and reels 750/hour
    # per account. Public comment replies have no documented per-call number: no count, pauses only.
    send_budgets = MappingProxyType({MetaPrivateReplyTransport.name: (750, 3600)})

    families = (
        # /{ig-media-id}/comments returns neither live comments after the broadcast nor ad comments
        # (instagram-graph-api/reference/ig-media/comments): those are known from webhooks only.
        Family(
            "comment.created",
            COMPLETE,
            "live comments after the broadcast and comments on ads are not returned by the media "
            "comments edge",
            answers=ANSWERS_COMMENT,
        ),
        Family("message.created", LIMITED, _DM_LIMITATION, answers=ANSWERS_MESSAGE),
    )


class MetaPageAdapter(_MetaAccount, MetaPageReader, MetaPageWebhook):
    """Facebook Pages: feed comments and Messenger; read back from the Graph API."""

    # The Send API about 300/s per Page for text (docs/platforms/meta.md#send-budgets). Messenger's 200 x engaged
    # users per 24 h depends on a number Conduit cannot read: not counted.
    send_budgets = MappingProxyType({MetaPrivateReplyTransport.name: (300, 1)})

    families = (
        Family(
            "comment.created",
            COMPLETE,
            "comments on posts that are not in the Page's /feed (ads never published to it) are not read "
            "back",
            answers=ANSWERS_COMMENT,
        ),
        # The read shows a comment's current text: an edit it shows is recorded as that edit event.
        Family(
            "comment.edited",
            LIMITED,
            "the read shows only a comment's current text: the latest edit is recovered, an intermediate "
            "edit is not",
        ),
        Family(
            "comment.removed",
            NOT_RECOVERABLE,
            "a removed comment is no longer returned: removals are known from webhooks only",
        ),
        Family(
            "comment.hidden",
            NOT_RECOVERABLE,
            "the read does not report moderation: hides are known from webhooks only",
        ),
        Family(
            "comment.unhidden",
            NOT_RECOVERABLE,
            "the read does not report moderation: unhides are known from webhooks only",
        ),
        Family("message.created", LIMITED, _DM_LIMITATION, answers=ANSWERS_MESSAGE),
    )

    def edit_of(self, observation: Observation) -> Observation | None:
        """The edit event a read comment is, should the ledger hold the comment with other text: the
        read shows a comment's current text only, so a text that differs from the created event's is
        the latest edit, keyed and hashed exactly as the `edited` webhook's (webhook.py's field map)."""
        if observation.event_type != "comment.created":
            return None
        return replace(
            observation,
            event_type="comment.edited",
            source_event_id=f"{observation.message_ref}@{sha256_hex(observation.text)[:16]}",
        )
