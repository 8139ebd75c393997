"""Whether Meta still delivers an account's webhooks (its subscribed apps and fields), and whether
its token is about to die.

Meta unsubscribes an app from a Page or an Instagram account silently (after
about an hour of failed deliveries, or when a person removes it), so the
subscription is read back (`GET /{account}/subscribed_apps`) rather than
assumed. A token's expiry is read where the token type allows
(`GET /debug_token` on the Facebook host; graph.instagram.com has none).
"""

from __future__ import annotations

from datetime import datetime, timezone

from conduit.providers.meta.graph import GraphCallFailed, GraphError, graph_get, graph_request
from conduit.providers.meta.tokens import instagram_host

# doctor warns this long before a token's expiry (Instagram Login tokens last 60 days).
EXPIRY_WARNING_DAYS = 7

# The fields a source needs, by the event types it allowlists.
NEEDED_FIELDS = {
    "instagram": {"comment.created": "comments", "message.created": "messages"},
    "page": {
        "comment.created": "feed",
        "comment.edited": "feed",
        "comment.removed": "feed",
        "comment.hidden": "feed",
        "comment.unhidden": "feed",
        "message.created": "messages",
    },
}

# Asked for with a needed field though no event type needs them: a Page's own messages come back
# as message echoes only on this field (Instagram's come on `messages`), and they tell Conduit's
# sends from the buyer's messages.
ASKED_WITH = {"page": {"messages": ("message_echoes",)}}


def subscribe(
    *,
    object_: str,
    account: str,
    event_types: frozenset[str],
    base_url: str,
    access_token: str,
    timeout: float,
) -> str:
    """Subscribe the token's app to the fields the event types need
    (`POST /{account}/subscribed_apps?subscribed_fields=...`): "" when Meta answers success, else
    why not in Conduit's words. The caller reads the subscription back: success is not proof."""
    needed = {NEEDED_FIELDS.get(object_, {}).get(t) for t in event_types} - {None}
    fields = sorted(needed | {extra for f in needed for extra in ASKED_WITH.get(object_, {}).get(f, ())})
    if not fields:
        return "the source's event types need no webhook field"
    if not access_token:
        return "no access token is stored or set for the source"
    try:
        document = graph_request(
            method="POST",
            base_url=base_url,
            path=f"{account}/subscribed_apps",
            params={"subscribed_fields": ",".join(fields)},
            access_token=access_token,
            timeout=timeout,
        ).document
    except GraphError as exc:
        return f"Meta refused the subscription (code {exc.code}, {exc.meaning})"
    except GraphCallFailed as exc:
        return f"the subscription could not be asked ({exc.kind})"
    if document.get("success") not in (True, "true"):
        return "Meta did not answer success to the subscription"
    return ""


def subscription_problem(
    *,
    object_: str,
    account: str,
    app_id: str,
    event_types: frozenset[str],
    base_url: str,
    access_token: str,
    timeout: float,
) -> str:
    """What is wrong with the account's subscription to the app, in Conduit's words, or ""."""
    if not access_token:
        return "no access token is set in the variable the source names"
    try:
        document = graph_get(
            base_url=base_url,
            path=f"{account}/subscribed_apps",
            params={},
            access_token=access_token,
            timeout=timeout,
        ).document
    except GraphError as exc:
        return f"subscribed_apps could not be read (Meta code {exc.code}, {exc.meaning})"
    except GraphCallFailed as exc:
        return f"subscribed_apps could not be read ({exc.kind})"
    apps = document.get("data") if isinstance(document.get("data"), list) else []
    ours = next((a for a in apps if isinstance(a, dict) and str(a.get("id")) == app_id), None)
    if ours is None:
        return f"app {app_id} is not subscribed to account {account}: Meta delivers nothing"
    fields = ours.get("subscribed_fields") if isinstance(ours.get("subscribed_fields"), list) else []
    needed = {NEEDED_FIELDS.get(object_, {}).get(t) for t in event_types} - {None}
    missing = sorted(needed - {f for f in fields if isinstance(f, str)})
    if missing:
        return f"fields not subscribed for app {app_id}: {', '.join(missing)}"
    return ""


def token_expiry_problem(*, base_url: str, access_token: str, now: datetime, timeout: float) -> str:
    """What is wrong with the token's lifetime, in Conduit's words, or "" (also when it cannot be read).

    Read with `GET /debug_token?input_token=` on the Facebook host; an expiry of 0 never expires
    (a Page token). On the Instagram host there is no such read: those tokens last 60 days and
    must be refreshed (`GET /refresh_access_token`), which the README says.
    """
    if not access_token or instagram_host(base_url):
        return ""
    try:
        data = graph_get(
            base_url=base_url,
            path="debug_token",
            params={"input_token": access_token},
            access_token=access_token,
            timeout=timeout,
        ).document.get("data")
    except GraphCallFailed:
        return ""  # the subscription read reports a Graph that cannot be read
    if not isinstance(data, dict):
        return ""
    if data.get("is_valid") is False:
        return "Meta says the access token is no longer valid: re-authorise the source"
    expires_at = data.get("expires_at")
    if not isinstance(expires_at, int) or isinstance(expires_at, bool) or expires_at <= 0:
        return ""
    left = datetime.fromtimestamp(expires_at, tz=timezone.utc) - now
    if left.total_seconds() <= EXPIRY_WARNING_DAYS * 86400:
        when = datetime.fromtimestamp(expires_at, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        return f"the access token expires {when} (in {max(0, left.days)} day(s)): refresh or replace it"
    return ""
