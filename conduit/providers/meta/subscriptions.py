"""Whether Meta still delivers an account's webhooks: its subscribed apps and fields.

Meta unsubscribes an app from a Page or an Instagram account silently (after
about an hour of failed deliveries, or when a person removes it), so the
subscription is read back (`GET /{account}/subscribed_apps`) rather than
assumed.
"""

from __future__ import annotations

from conduit.providers.meta.graph import GraphCallFailed, GraphError, graph_get

# The fields a source needs, by the event types it allowlists.
NEEDED_FIELDS = {
    "instagram": {"comment.created": "comments", "message.created": "messages"},
    "page": {"comment.created": "feed", "comment.edited": "feed", "comment.removed": "feed",
             "comment.hidden": "feed", "comment.unhidden": "feed", "message.created": "messages"},
}


def subscription_problem(*, object_: str, account: str, app_id: str, event_types: frozenset[str],
                         base_url: str, access_token: str, timeout: float) -> str:
    """What is wrong with the account's subscription to the app, in Conduit's words, or ""."""
    if not access_token:
        return "no access token is set in the variable the source names"
    try:
        document = graph_get(base_url=base_url, path=f"{account}/subscribed_apps", params={},
                             access_token=access_token, timeout=timeout).document
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
