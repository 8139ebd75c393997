"""Meta's login flows as the simulator plays them: a consent page with one `Allow` button, codes
used once, and the token exchanges, in the shapes of Meta's documentation and recorded answers
(fixtures/meta_recorded_PROVENANCE.md, "Connecting accounts").

- Business Login for Instagram: `GET /oauth/authorize` (consent) and `POST` (Allow: a redirect
  to `redirect_uri?code=...&state=...#_`); `POST /instagram/oauth/access_token` (the form
  exchange: a short-lived token, 1 hour); `GET /instagram/access_token?grant_type=ig_exchange_token`
  (60 days); `GET /instagram/vNN/me`.
- Facebook Login for Business: `GET|POST /vNN/dialog/oauth`; `GET /vNN/oauth/access_token` (the
  code, or `grant_type=fb_exchange_token`); `GET /vNN/me/accounts` (each Page with its token,
  which never expires).

The account a grant reaches is the one `POST /_sim/login` names (`{"object", "account"}`), else
the first account of that object the simulator holds (every Page, for Facebook Login). The
Instagram code exchange answers as Meta's documentation shows it (`{"data": [{...}]}`);
`"code_answer": "flat"` makes it answer as clients meet it live (`{"access_token", "user_id":
<number>, "permissions": [...]}`), until a call without it.
"""

from __future__ import annotations

import html
import secrets
from urllib.parse import urlencode

from simulators.meta.errors import GraphError
from simulators.meta.tokens import FACEBOOK_USER_ID

SHORT_SECONDS = 3600  # Instagram's short-lived token: "valid for 1 hour"
LONG_SECONDS = 60 * 24 * 3600  # the long-lived tokens: 60 days
FACEBOOK_USER_SECONDS = 5183944  # the expires_in Meta's documented fb_exchange_token answer shows
CODE_SECONDS = 600  # a code is "valid for 1 hour" at most; the simulator keeps it 10 minutes
INSTAGRAM_PERMISSIONS = (
    "instagram_business_basic",
    "instagram_business_manage_messages",
    "instagram_business_manage_comments",
)
FACEBOOK_PERMISSIONS = (
    "pages_show_list",
    "pages_manage_metadata",
    "pages_read_engagement",
    "pages_manage_engagement",
    "pages_messaging",
)


class LoginRefusal(Exception):
    """An OAuth step refused: `status` and the JSON answer Meta gives for it."""

    def __init__(self, status: int, answer: dict) -> None:
        super().__init__(answer)
        self.status, self.answer = status, answer


def _instagram_refusal(message: str) -> LoginRefusal:
    # api.instagram.com's error shape: {"error_type", "code", "error_message"}.
    return LoginRefusal(400, {"error_type": "OAuthException", "code": 400, "error_message": message})


class Logins:
    """Codes, the logged-in account per object, and the exchanges."""

    def _logins_init(self) -> None:
        self.codes: dict[str, dict] = {}
        self.logged_in: dict[str, str] = {}
        self.code_answer = "documented"
        self.grants = 0

    def login_set(self, data: dict) -> dict:
        object, account = str(data["object"]), str(data["account"])
        if object not in ("instagram", "page"):
            raise ValueError("object is instagram or page")
        code_answer = str(data.get("code_answer", "documented"))
        if code_answer not in ("documented", "flat"):
            raise ValueError("code_answer is documented or flat")
        with self.lock:
            self.logged_in[object] = account
            self.code_answer = code_answer
        return {"object": object, "account": account, "code_answer": code_answer}

    def _granted_accounts(self, object: str) -> list[dict]:
        with self.lock:
            rows = self._all("SELECT * FROM accounts WHERE object = ? ORDER BY id", object)
            chosen = self.logged_in.get(object)
        accounts = [dict(r) for r in rows]
        if chosen:
            accounts = [a for a in accounts if a["id"] == chosen] if object == "instagram" else accounts
        return accounts[:1] if object == "instagram" else accounts

    def consent_page(self, kind: str, query: dict) -> tuple[int, str]:
        """The consent page (HTML): what is asked and for which accounts, and one `Allow` button."""
        params = {k: v[0] for k, v in query.items()}
        problem = self._dialog_problem(params)
        if problem:
            return 400, f"<!doctype html><title>Error</title><h1>Error</h1><p>{html.escape(problem)}</p>"
        accounts = self._granted_accounts("instagram" if kind == "instagram" else "page")
        if not accounts:
            return 400, "<!doctype html><title>Error</title><p>No account to grant on the simulator.</p>"
        names = ", ".join(html.escape(a["name"]) for a in accounts)
        hidden = "".join(
            f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
            for k, v in params.items()
        )
        what = "Instagram" if kind == "instagram" else "Facebook"
        return 200, (
            f"<!doctype html><title>Log in with {what}</title><h1>Conduit simulator app</h1>"
            f"<p>The app asks to manage comments and messages of: <b>{names}</b>.</p>"
            f'<form method="post">{hidden}<button type="submit" name="allow" value="1">Allow</button></form>'
        )

    def _dialog_problem(self, params: dict) -> str:
        if self.app_id and params.get("client_id") != self.app_id:
            return "Invalid App ID: the client_id is not the simulator's app"
        if not params.get("redirect_uri"):
            return "redirect_uri is required"
        return ""

    def consent_allow(self, kind: str, form: dict) -> str:
        """Allow pressed: a code for the accounts shown, and the URL Meta redirects to."""
        problem = self._dialog_problem(form)
        if problem:
            raise ValueError(problem)
        object = "instagram" if kind == "instagram" else "page"
        accounts = [a["id"] for a in self._granted_accounts(object)]
        if not accounts:
            raise ValueError("no account to grant on the simulator")
        code = f"AQ{secrets.token_urlsafe(96)}"
        with self.lock:
            self.codes[code] = {
                "kind": kind,
                "client_id": form.get("client_id", ""),
                "redirect_uri": form["redirect_uri"],
                "accounts": accounts,
                "at": self.now(),
                "used": False,
            }
        back = {"code": code, **({"state": form["state"]} if form.get("state") else {})}
        sep = "&" if "?" in form["redirect_uri"] else "?"
        return f"{form['redirect_uri']}{sep}{urlencode(back)}" + ("#_" if kind == "instagram" else "")

    def _code_take(self, kind: str, params: dict) -> dict:
        """The code's grant, marked used; a refusal in `kind`'s shape otherwise."""
        refuse = (
            _instagram_refusal
            if kind == "instagram"
            else lambda m: GraphError(100, subcode=36009, message=m, type_="OAuthException")
        )
        if self.app_secret and params.get("client_secret") != self.app_secret:
            raise refuse("Error validating client secret.")
        with self.lock:
            grant = self.codes.get(params.get("code", ""))
            if grant is None or grant["kind"] != kind:
                raise refuse("Invalid verification code format.")
            if grant["used"]:
                # Recorded: api.instagram.com ends the sentence without a period, Graph with one.
                raise refuse(
                    "This authorization code has been used"
                    if kind == "instagram"
                    else "This authorization code has been used."
                )
            if self.now() - grant["at"] > CODE_SECONDS:
                raise refuse("This authorization code has expired.")
            if params.get("redirect_uri") != grant["redirect_uri"] or (
                self.app_id and params.get("client_id") != grant["client_id"]
            ):
                raise refuse(
                    "Error validating verification code. Please make sure your redirect_uri is identical"
                )
            grant["used"] = True
            self.grants += 1
        return grant

    # -- Business Login for Instagram ------------------------------------------------------
    def instagram_code_exchange(self, form: dict) -> dict:
        if form.get("grant_type") != "authorization_code":
            raise _instagram_refusal("Invalid grant_type")
        grant = self._code_take("instagram", form)
        account = grant["accounts"][0]
        token = self.token_issue(lasts=SHORT_SECONDS, scopes=list(INSTAGRAM_PERMISSIONS), account=account)
        if self.code_answer == "flat":
            return {
                "access_token": token,
                "user_id": int(account) if account.isdigit() else account,
                "permissions": list(INSTAGRAM_PERMISSIONS),
            }
        return {
            "data": [
                {"access_token": token, "user_id": account, "permissions": ",".join(INSTAGRAM_PERMISSIONS)}
            ]
        }

    def instagram_long_lived(self, token: str, query: dict) -> dict:
        if query.get("grant_type", [""])[0] != "ig_exchange_token":
            raise GraphError(100, message="(#100) Invalid parameter")
        if self.app_secret and query.get("client_secret", [""])[0] != self.app_secret:
            raise GraphError(101, message="Error validating client secret.", type_="OAuthException")
        owner = self.token_owner(token)
        if "account" not in owner:
            raise GraphError(190, message="Invalid OAuth access token - Cannot parse access token")
        fresh = self.token_issue(lasts=LONG_SECONDS, scopes=owner["scopes"], account=owner["account"])
        return {"access_token": fresh, "token_type": "bearer", "expires_in": LONG_SECONDS}

    # -- Facebook Login for Business -------------------------------------------------------
    def facebook_access_token(self, query: dict) -> dict:
        params = {k: v[0] for k, v in query.items()}
        if params.get("grant_type") == "fb_exchange_token":
            if self.app_secret and params.get("client_secret") != self.app_secret:
                raise GraphError(101, message="Error validating client secret.", type_="OAuthException")
            owner = self.token_owner(params.get("fb_exchange_token", ""))
            if "pages" not in owner:
                raise GraphError(190, message="Invalid OAuth access token - Cannot parse access token")
            fresh = self.token_issue(
                lasts=FACEBOOK_USER_SECONDS, scopes=owner["scopes"], pages=owner["pages"]
            )
            return {"access_token": fresh, "token_type": "bearer", "expires_in": FACEBOOK_USER_SECONDS}
        grant = self._code_take("facebook", params)
        token = self.token_issue(lasts=2 * 3600, scopes=list(FACEBOOK_PERMISSIONS), pages=grant["accounts"])
        return {"access_token": token, "token_type": "bearer", "expires_in": 7200}

    def me(self, host: str, token: str) -> dict:
        owner = self.token_owner(token)
        if host == "instagram" and "account" in owner:
            row = self.account(owner["account"])
            return {
                "user_id": owner["account"],
                "username": row["name"] if row else "",
                "id": f"9{owner['account'][-15:]}",
            }
        if host == "facebook" and "pages" in owner:
            return {"name": "Test Person 01", "id": FACEBOOK_USER_ID}
        raise GraphError(190, message="Invalid OAuth access token - Cannot parse access token")

    def me_accounts(self, token: str, base_url: str) -> dict:
        owner = self.token_owner(token)
        if "pages" not in owner:
            raise GraphError(190, message="Invalid OAuth access token - Cannot parse access token")
        data = []
        for page in owner["pages"]:
            row = self.account(page)
            data.append(
                {
                    "access_token": self.token_issue(lasts=float("inf"), scopes=owner["scopes"], page=page),
                    "category": "Software",
                    "category_list": [{"id": "2211", "name": "Software"}],
                    "name": row["name"] if row else page,
                    "id": page,
                    "tasks": ["ANALYZE", "ADVERTISE", "MESSAGING", "MODERATE", "CREATE_CONTENT", "MANAGE"],
                }
            )
        return {
            "data": data,
            "paging": {"cursors": {"before": "QVFIUjBfdG9rZW4", "after": "QVFIUjBfdG9rZW4"}},
        }
