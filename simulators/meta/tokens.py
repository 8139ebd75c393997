"""Access tokens as Meta holds them: issued, expiring, refreshed, on a clock a test can move.

Off until a test registers a token (`POST /_sim/tokens`): then every Graph call's token must be
one registered and unexpired, else Meta's 190 (an unknown token; subcode 463 with Meta's recorded
"Session has expired on ..." wording for an expired one). `GET graph.instagram.com/
refresh_access_token?grant_type=ig_refresh_token` answers a new token valid 60 days from the
refresh, in the documented and recorded shape; the old token keeps its own expiry. Meta documents
that only a token at least 24 hours old may be refreshed but not what it answers otherwise, so the
simulator does not enforce that rule: Conduit's own rule is held by counting its calls.
"""

from __future__ import annotations

import secrets
import time
from datetime import datetime, timedelta, timezone

from simulators.meta.errors import GraphError

REFRESHED_SECONDS = 60 * 24 * 3600  # "valid for 60 days from the date at which they are refreshed"
# Data access lasts 90 days from the person's last grant; the simulator counts from each
# token's issue (a refresh or an exchange moves it on).
DATA_ACCESS_SECONDS = 90 * 24 * 3600
FACEBOOK_USER_ID = "10000000000000001"  # the simulator's one Facebook user, who grants every Page
DEBUG_APPLICATION = "Conduit simulator app"
_PACIFIC = timezone(timedelta(hours=-8), "PST")


def _meta_time(at: float) -> str:
    """Meta's wording of a time in its 190/463 message: "Tuesday, 25-Nov-25 15:00:00 PST"."""
    return datetime.fromtimestamp(at, _PACIFIC).strftime("%A, %d-%b-%y %H:%M:%S PST")


class Tokens:
    """The tokens the simulator knows (none: any token is accepted), and its clock's offset."""

    def _tokens_init(self) -> None:
        self.tokens: dict[str, dict] = {}
        # Every token is checked once a test registers one; tokens a login flow issues are known
        # (to /me, /me/accounts, debug_token) without switching checking on.
        self.token_checking = False
        self.clock_offset = 0.0
        self.refreshes = 0

    def now(self) -> float:
        return time.time() + self.clock_offset

    def token_register(self, data: dict) -> dict:
        token = str(data.get("token") or f"IGQ{secrets.token_urlsafe(48)}")
        now = self.now()
        issued = float(data.get("issued_at", now))
        expires = (
            float(data["expires_at"])
            if data.get("expires_at")
            else issued + float(data.get("expires_in", 3600))
        )
        with self.lock:
            self.token_checking = True
            self.tokens[token] = {
                "issued_at": issued,
                "expires_at": expires,
                "valid": bool(data.get("valid", True)),
                "scopes": list(data.get("scopes", [])),
            }
        return {"token": token, "expires_at": int(expires)}

    def clock_advance(self, seconds: float) -> dict:
        with self.lock:
            self.clock_offset += seconds
        return {"now": int(self.now())}

    def token_check(self, token: str) -> None:
        """Refuse the call as Meta does when token checking is on and `token` is not usable."""
        with self.lock:
            if not self.token_checking:
                return
            known = self.tokens.get(token)
        if known is None or not known["valid"]:
            raise GraphError(190, message="Invalid OAuth access token - Cannot parse access token")
        now = self.now()
        if now >= known["expires_at"]:
            raise GraphError(
                190,
                subcode=463,
                message=f"Error validating access token: Session has expired on {_meta_time(known['expires_at'])}. "
                f"The current time is {_meta_time(now)}.",
            )

    def token_refresh(self, token: str, query: dict) -> dict:
        """GET /refresh_access_token: a new long-lived token, 60 days from now."""
        if query.get("grant_type", [""])[0] != "ig_refresh_token":
            raise GraphError(100, message="(#100) Invalid parameter")
        self.token_check(token)
        fresh = f"IGQ{secrets.token_urlsafe(48)}"
        now = self.now()
        with self.lock:
            self.tokens[fresh] = {
                **self.tokens.get(token, {"scopes": []}),
                "issued_at": now,
                "expires_at": now + REFRESHED_SECONDS,
                "valid": True,
            }
            self.refreshes += 1
            scopes = self.tokens[fresh]["scopes"]
        # Since Graph v24 (recorded from the Graph API Explorer) the answer names the permissions.
        return {
            "access_token": fresh,
            "token_type": "bearer",
            "expires_in": REFRESHED_SECONDS,
            "permissions": ",".join(scopes),
        }

    def token_debug(self, token: str) -> dict | None:
        """What GET /debug_token says of a registered `token` (None: not registered)."""
        with self.lock:
            known = self.tokens.get(token)
        if known is None:
            return None
        never = known["expires_at"] == float("inf")  # a Page token: no clock expiry
        # As Meta's reference and a recorded answer show: the app's name, when data access ends
        # (90 days), each scope also as a granular one, and whose token it is.
        whose = (
            {"profile_id": known["page"]}
            if "page" in known
            else {"user_id": known.get("account", FACEBOOK_USER_ID)}
        )
        return {
            "application": DEBUG_APPLICATION,
            "data_access_expires_at": int(known["issued_at"] + DATA_ACCESS_SECONDS),
            "is_valid": known["valid"] and self.now() < known["expires_at"],
            "expires_at": 0 if never else int(known["expires_at"]),
            "issued_at": int(known["issued_at"]),
            "scopes": known["scopes"],
            "granular_scopes": [{"scope": scope} for scope in known["scopes"]],
            **({"type": known["type"]} if "type" in known else {}),
            **whose,
        }

    def token_issue(self, *, lasts: float, scopes: list[str], **owner) -> str:
        """A token a login flow hands out (`lasts` seconds; inf: never expires), known by its
        owner: `account` (an Instagram user's), `pages` (a Facebook user's) or `page` (a Page's)."""
        token = f"{'IGQ' if 'account' in owner else 'EAA'}{secrets.token_urlsafe(48)}"
        now = self.now()
        with self.lock:
            self.tokens[token] = {
                "issued_at": now,
                "expires_at": now + lasts,
                "valid": True,
                "scopes": list(scopes),
                "type": "PAGE" if "page" in owner else "USER",
                **owner,
            }
        return token

    def token_owner(self, token: str) -> dict:
        with self.lock:
            return dict(self.tokens.get(token) or {})
