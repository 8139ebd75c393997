"""Meta's two login flows, as documented (docs/platforms/meta.md#connect):

- Business Login for Instagram: `www.instagram.com/oauth/authorize` (scopes named), the code
  exchanged by a form POST to `api.instagram.com/oauth/access_token` for a short-lived token and
  the account's `user_id`, then `graph.instagram.com/access_token?grant_type=ig_exchange_token`
  for the 60-day token; the account read back with `GET /me?fields=user_id,username`.
- Facebook Login for Business: `www.facebook.com/{version}/dialog/oauth` with a `config_id` (the
  configuration fixes the permissions), the code exchanged at `/oauth/access_token` for a user
  token, `fb_exchange_token` for a long-lived one, its scopes from `debug_token`, then
  `/me/accounts`: each Page with its own token (no clock expiry when the user token was long-lived).

Every call is server-side and carries the app secret; none of Meta's text is kept in a refusal.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
from datetime import datetime, timedelta
from urllib.parse import urlencode, urlsplit

from conduit.loopback import credential_url_refusal, loopback_address
from conduit.providers.login import AccountLogin, GrantedAsset, LoginApp, LoginRefused
from conduit.providers.meta.graph import GraphCallFailed, GraphError, graph_get

INSTAGRAM_SCOPES = (
    "instagram_business_basic",
    "instagram_business_manage_messages",
    "instagram_business_manage_comments",
)
# The host Business Login for Instagram's code is exchanged at (not a Graph host).
INSTAGRAM_TOKEN_HOSTS = ("api.instagram.com",)
MAX_ANSWER_BYTES = 1024 * 1024
MAX_PAGES = 50  # /me/accounts pages followed (25 Pages each by default)


def _hosts(app: LoginApp) -> dict[str, str]:
    """Where each step goes: Meta's hosts, or the simulator's paths standing in for them."""
    v = app.graph_version
    if app.simulator_url:
        root = app.simulator_url.rstrip("/")
        return {
            "instagram_authorize": f"{root}/oauth/authorize",
            "instagram_token": f"{root}/instagram/oauth/access_token",
            "instagram_graph": f"{root}/instagram",
            "facebook_dialog": f"{root}/{v}/dialog/oauth",
            "facebook_graph": f"{root}/{v}",
        }
    return {
        "instagram_authorize": "https://www.instagram.com/oauth/authorize",
        "instagram_token": "https://api.instagram.com/oauth/access_token",
        "instagram_graph": "https://graph.instagram.com",
        "facebook_dialog": f"https://www.facebook.com/{v}/dialog/oauth",
        "facebook_graph": f"https://graph.facebook.com/{v}",
    }


def _refused(exc: GraphCallFailed, step: str) -> LoginRefused:
    if isinstance(exc, GraphError):
        code = f"{exc.code}" + (f"/{exc.subcode}" if exc.subcode is not None else "")
        return LoginRefused(f"Meta refused {step} (code {code})")
    return LoginRefused(f"{step} failed ({exc.kind})")


def _get(base_url: str, path: str, params: dict, *, token: str | None, step: str, timeout: float) -> dict:
    try:
        return graph_get(
            base_url=base_url,
            path=path,
            params=params,
            access_token=token,
            timeout=timeout,
            max_bytes=MAX_ANSWER_BYTES,
        ).document
    except GraphCallFailed as exc:
        raise _refused(exc, step) from None


def _form_post(url: str, fields: dict, *, step: str, timeout: float) -> dict:
    """A form POST to Instagram's token host (or the simulator), its JSON object back. The host's
    error answer is `{"error_type", "code", "error_message"}`: only the code is kept."""
    refusal = credential_url_refusal(url, INSTAGRAM_TOKEN_HOSTS)
    if refusal:
        raise LoginRefused(f"{step}: the token URL is refused: {refusal}")
    parts = urlsplit(url)
    if parts.scheme == "https":
        conn = http.client.HTTPSConnection(
            parts.hostname, parts.port or 443, timeout=timeout, context=ssl.create_default_context()
        )
    else:
        conn = http.client.HTTPConnection(*loopback_address(url), timeout=timeout)
    try:
        conn.request(
            "POST",
            parts.path or "/",
            body=urlencode(fields),
            headers={"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"},
        )
        response = conn.getresponse()
        payload, status = response.read(MAX_ANSWER_BYTES + 1), response.status
    except (socket.timeout, TimeoutError):
        raise LoginRefused(f"{step} failed (timeout)") from None
    except (OSError, http.client.HTTPException):
        raise LoginRefused(f"{step} failed (transport)") from None
    finally:
        conn.close()
    try:
        document = json.loads(payload) if len(payload) <= MAX_ANSWER_BYTES else None
    except (ValueError, RecursionError):
        document = None
    if not isinstance(document, dict):
        raise LoginRefused(f"{step} failed (malformed answer, HTTP {status})")
    if status != 200 or "error_type" in document or "error" in document:
        code = document.get("code")
        if not isinstance(code, int):
            error = document.get("error")
            code = error.get("code") if isinstance(error, dict) else None
        raise LoginRefused(f"Meta refused {step} (HTTP {status}" + (f", code {code})" if code else ")"))
    return document


def _token(document: dict, step: str) -> tuple[str, int | None]:
    token, lasts = document.get("access_token"), document.get("expires_in")
    if not (isinstance(token, str) and token.strip()) or any(c.isspace() for c in token.strip()):
        raise LoginRefused(f"{step} answered no token")
    whole = isinstance(lasts, int) and not isinstance(lasts, bool) and lasts > 0
    return token.strip(), lasts if whole else None


def _scopes(value: object) -> tuple[str, ...]:
    """A comma-separated string or a list of permission names."""
    items = value.split(",") if isinstance(value, str) else value if isinstance(value, list) else []
    return tuple(sorted({s.strip() for s in items if isinstance(s, str) and s.strip()}))


class MetaLogin(AccountLogin):
    callback_app_setting = "CONDUIT_META_APP_ID"
    verify_token_variable = "CONDUIT_SOURCE_META_VERIFY_TOKEN"
    event_types = ("comment.created", "message.created")
    purposes = ("public_ack", "private_delivery")


class InstagramLogin(MetaLogin):
    name = "instagram"
    label = "Instagram"
    adapter = "meta-instagram"
    client_id_setting = "CONDUIT_INSTAGRAM_APP_ID"
    secret_variable = "CONDUIT_SOURCE_INSTAGRAM_APP_SECRET"

    def authorize_url(self, app: LoginApp, state: str) -> str:
        query = {
            "client_id": app.client_id,
            "redirect_uri": app.redirect_uri,
            "response_type": "code",
            "scope": ",".join(INSTAGRAM_SCOPES),
            "state": state,
        }
        return f"{_hosts(app)['instagram_authorize']}?{urlencode(query)}"

    def grant(self, app: LoginApp, code: str, *, now: datetime, timeout: float) -> list[GrantedAsset]:
        hosts = _hosts(app)
        answer = _form_post(
            hosts["instagram_token"],
            {
                "client_id": app.client_id,
                "client_secret": app.client_secret,
                "grant_type": "authorization_code",
                "redirect_uri": app.redirect_uri,
                "code": code.removesuffix("#_"),
            },
            step="the code exchange",
            timeout=timeout,
        )
        # Documented as {"data": [{access_token, user_id, permissions}]}; older answers were flat.
        data = answer.get("data")
        first = data[0] if isinstance(data, list) and data and isinstance(data[0], dict) else answer
        short, _ = _token(first, "the code exchange")
        scopes = _scopes(first.get("permissions"))
        long_lived = _get(
            hosts["instagram_graph"],
            "access_token",
            {"grant_type": "ig_exchange_token", "client_secret": app.client_secret},
            token=short,
            step="the long-lived token exchange",
            timeout=timeout,
        )
        token, lasts = _token(long_lived, "the long-lived token exchange")
        graph_url = f"{hosts['instagram_graph']}/{app.graph_version}"
        me = _get(
            graph_url,
            "me",
            {"fields": "user_id,username"},
            token=token,
            step="reading the account",
            timeout=timeout,
        )
        account = str(me.get("user_id") or first.get("user_id") or "")
        if not account.isdigit():
            raise LoginRefused("reading the account answered no Instagram account id")
        return [
            GrantedAsset(
                account_ref=account,
                name=str(me.get("username") or account),
                access_token=token,
                expires_at=now + timedelta(seconds=lasts) if lasts else None,
                scopes=scopes,
                source_url=graph_url,
            )
        ]


class FacebookPageLogin(MetaLogin):
    name = "facebook"
    label = "Facebook Page"
    adapter = "meta-page"
    client_id_setting = "CONDUIT_META_APP_ID"
    config_id_setting = "CONDUIT_META_LOGIN_CONFIG_ID"
    secret_variable = "CONDUIT_SOURCE_META_APP_SECRET"

    def authorize_url(self, app: LoginApp, state: str) -> str:
        query = {
            "client_id": app.client_id,
            "redirect_uri": app.redirect_uri,
            "state": state,
            "config_id": app.config_id,
            "response_type": "code",
            "override_default_response_type": "true",
        }
        return f"{_hosts(app)['facebook_dialog']}?{urlencode(query)}"

    def grant(self, app: LoginApp, code: str, *, now: datetime, timeout: float) -> list[GrantedAsset]:
        graph_url = _hosts(app)["facebook_graph"]
        client = {"client_id": app.client_id, "client_secret": app.client_secret}
        user, _ = _token(
            _get(
                graph_url,
                "oauth/access_token",
                {**client, "redirect_uri": app.redirect_uri, "code": code},
                token=None,
                step="the code exchange",
                timeout=timeout,
            ),
            "the code exchange",
        )
        long_lived, _ = _token(
            _get(
                graph_url,
                "oauth/access_token",
                {**client, "grant_type": "fb_exchange_token", "fb_exchange_token": user},
                token=None,
                step="the long-lived token exchange",
                timeout=timeout,
            ),
            "the long-lived token exchange",
        )
        inspected = _get(
            graph_url,
            "debug_token",
            {"input_token": long_lived},
            token=f"{app.client_id}|{app.client_secret}",
            step="the token check",
            timeout=timeout,
        ).get("data")
        scopes = _scopes(inspected.get("scopes")) if isinstance(inspected, dict) else ()
        assets, params = [], {"fields": "id,name,access_token,tasks"}
        for _ in range(MAX_PAGES):
            page = _get(
                graph_url, "me/accounts", params, token=long_lived, step="listing the Pages", timeout=timeout
            )
            for item in page.get("data") or []:
                if not isinstance(item, dict):
                    continue
                account, token = str(item.get("id") or ""), item.get("access_token")
                if account.isdigit() and isinstance(token, str) and token.strip():
                    assets.append(
                        GrantedAsset(
                            account_ref=account,
                            name=str(item.get("name") or account),
                            access_token=token.strip(),
                            scopes=scopes,
                            source_url=graph_url,
                        )
                    )
            after = ((page.get("paging") or {}).get("cursors") or {}).get("after")
            if not (page.get("paging") or {}).get("next") or not isinstance(after, str):
                break
            params = {**params, "after": after}
        return assets


LOGINS = (InstagramLogin, FacebookPageLogin)
