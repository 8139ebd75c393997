"""Keeping a stored Meta token alive: Instagram Login tokens refreshed, Facebook tokens inspected.

- graph.instagram.com: `GET /refresh_access_token?grant_type=ig_refresh_token` refreshes a
  long-lived token "that is at least 24 hours old but has not expired"; the refreshed token is
  "valid for 60 days from the date at which they are refreshed" (Meta's reference,
  instagram-platform/reference/refresh_access_token). Asked at the host's root, as documented.
- graph.facebook.com: `GET /debug_token?input_token=` reports validity, expiry (0: never, as a
  Page token) and the scopes granted; nothing to refresh.

Meta refusing the token (104, 190) is `refused`: a person must reconnect the account. Anything
else (no answer, a throttle, a malformed answer) is `failed`: asked again at the next run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from urllib.parse import urlsplit, urlunsplit

from conduit.providers.meta.graph import GraphCallFailed, GraphError, graph_get
from conduit.providers.meta.graph_failures import TOKEN_INVALID_CODES

# Meta refreshes only a token at least this old; Conduit refreshes once it is, daily after that.
REFRESH_AFTER = timedelta(hours=24)


@dataclass(frozen=True)
class TokenRenewal:
    """What keeping a token alive found.

    outcome: refreshed (a new `access_token`), checked (the token stands, `expires_at` and
    `scopes` as Meta reports them), kept (too young to refresh: nothing asked), refused (Meta
    refused the token: reconnect), failed (no usable answer: ask again later). `problem`: Conduit's
    words for refused and failed, never Meta's text.
    """

    outcome: str
    access_token: str = field(default="", repr=False)
    expires_at: datetime | None = None  # None: not known, unless never_expires
    never_expires: bool = False  # Meta reports an expiry of 0 (a Page token)
    scopes: tuple[str, ...] | None = None
    problem: str = ""


def instagram_host(base_url: str) -> bool:
    parts = urlsplit(base_url)
    return parts.hostname == "graph.instagram.com" or parts.path.strip("/").split("/")[:1] == ["instagram"]


def _unversioned(base_url: str) -> str:
    """The Graph URL without its version segment ("/v26.0"): where refresh_access_token lives."""
    parts = urlsplit(base_url.rstrip("/"))
    segments = parts.path.rstrip("/").split("/")
    if segments and segments[-1].startswith("v") and segments[-1][1:].replace(".", "").isdigit():
        segments = segments[:-1]
    return urlunsplit((parts.scheme, parts.netloc, "/".join(segments), "", ""))


def _failure(exc: GraphCallFailed, what: str) -> TokenRenewal:
    if isinstance(exc, GraphError) and exc.code in TOKEN_INVALID_CODES:
        return TokenRenewal(
            "refused", problem=f"Meta refused the access token ({exc.code}): reconnect the account"
        )
    if isinstance(exc, GraphError):
        return TokenRenewal("failed", problem=f"{what} failed (Meta code {exc.code})")
    return TokenRenewal("failed", problem=f"{what} failed ({exc.kind})")


def token_verify(*, base_url: str, account: str, access_token: str, timeout: float) -> str:
    """ "" when a Graph call with `access_token` reads the account (`GET /{account}?fields=id`);
    else what went wrong, in Conduit's words (a reconnect clears needs_reauth only on "")."""
    try:
        answer = graph_get(
            base_url=base_url,
            path=account,
            params={"fields": "id"},
            access_token=access_token,
            timeout=timeout,
        ).document
    except GraphCallFailed as exc:
        return _failure(exc, "reading the account with the new token").problem
    if str(answer.get("id", "")) != account:
        return "reading the account with the new token answered another account"
    return ""


def token_renew(
    *,
    base_url: str,
    access_token: str,
    issued_at: datetime,
    now: datetime,
    timeout: float,
    app_token: str = "",
) -> TokenRenewal:
    """Refresh an Instagram Login token once it is 24 hours old; inspect a Facebook one.

    debug_token is asked with the app access token (`app_token`, "app-id|app-secret") where the
    caller has one, as Meta's reference asks ("the app access token or a valid user access token
    from a developer of the app"); else the token inspects itself."""
    if instagram_host(base_url):
        if now - issued_at < REFRESH_AFTER:
            return TokenRenewal("kept")
        try:
            answer = graph_get(
                base_url=_unversioned(base_url),
                path="refresh_access_token",
                params={"grant_type": "ig_refresh_token"},
                access_token=access_token,
                timeout=timeout,
            ).document
        except GraphCallFailed as exc:
            return _failure(exc, "the token refresh")
        token, lasts = answer.get("access_token"), answer.get("expires_in")
        if not (isinstance(token, str) and token.strip()) or not isinstance(lasts, int) or lasts <= 0:
            return TokenRenewal("failed", problem="the token refresh answered no token and lifetime")
        return TokenRenewal(
            "refreshed", access_token=token.strip(), expires_at=now + timedelta(seconds=lasts)
        )
    try:
        data = graph_get(
            base_url=base_url,
            path="debug_token",
            params={"input_token": access_token},
            access_token=app_token or access_token,
            timeout=timeout,
        ).document.get("data")
    except GraphCallFailed as exc:
        return _failure(exc, "the token check")
    if not isinstance(data, dict):
        return TokenRenewal("failed", problem="the token check answered no data")
    if data.get("is_valid") is False:
        return TokenRenewal(
            "refused", problem="Meta says the access token is no longer valid: reconnect the account"
        )
    expires = data.get("expires_at")
    scopes = data.get("scopes")
    whole = isinstance(expires, int) and not isinstance(expires, bool)
    return TokenRenewal(
        "checked",
        expires_at=datetime.fromtimestamp(expires, tz=timezone.utc)
        if whole and 0 < expires < 2**33
        else None,
        never_expires=whole and expires == 0,
        scopes=tuple(s for s in scopes if isinstance(s, str)) if isinstance(scopes, list) else None,
    )
