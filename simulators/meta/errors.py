"""Meta's error envelope as the simulator answers it: codes, wording, types, and GraphError."""

from __future__ import annotations

import secrets

# Meta's wording per code, "(#code) ..." as Graph phrases most of them; a fault may override it.
MESSAGES = {
    1: "An unknown error occurred",
    2: "An unexpected error has occurred. Please retry your request later.",
    3: "(#3) Application does not have the capability to make this API call.",
    4: "(#4) Application request limit reached",
    10: "(#10) This message is sent outside of allowed window.",
    17: "(#17) User request limit reached",
    32: "(#32) Page request limit reached",
    100: "(#100) Invalid parameter",
    104: "An access token is required to request this resource.",
    190: "Error validating access token: Session has expired.",
    200: "(#200) Requires pages_messaging permission to manage the object",
    230: "(#230) Requires pages_messaging_subscriptions permission to manage the object",
    551: "(#551) This person isn't available right now.",
    613: "(#613) Calls to this api have exceeded the rate limit.",
    10900: "(#10900) Activity already replied to",
    80001: "(#80001) There have been too many calls to this Page account. Wait a bit and try again.",
    80002: "(#80002) There have been too many calls to this Instagram account. Wait a bit and try again.",
    80006: "(#80006) There have been too many messenger api calls to this Page account. "
    "Wait a bit and try again.",
}
TRANSIENT = {1, 2, 4, 17, 32, 613, 80001, 80002, 80006}
OAUTH = {3, 4, 10, 17, 32, 102, 104, 190, 613, 10900, 80001, 80002, 80006} | set(range(200, 300))
# Error envelopes as recorded: throttles and server errors carry `is_transient` and the user
# title/message; the refusals recorded (3, 10, 100, 190, 200-299...) carry only message, type,
# code, error_subcode (when there is one) and fbtrace_id. GraphError(full=True) forces the former.
FULL_ENVELOPE = TRANSIENT
# On graph.instagram.com Meta types its errors IGApiException (restfb's ig_login_exception.json,
# a code 10/2534022 answer quoted by an open-source client); the token and throttle codes keep theirs.
IG_HOST_KEEPS_TYPE = {102, 104, 190} | TRANSIENT


class GraphError(Exception):
    """A Graph answer in Meta's error envelope."""

    def __init__(
        self,
        code: int,
        *,
        subcode: int | None = None,
        status: int | None = None,
        message: str | None = None,
        type_: str | None = None,
        full: bool | None = None,
        user_title: str | None = None,
        user_msg: str | None = None,
    ) -> None:
        super().__init__(message or MESSAGES.get(code, f"(#{code}) Error"))
        self.code, self.subcode = code, subcode
        self.status = status or (500 if code in (1, 2) else 403 if 200 <= code < 300 else 400)
        self.message = message or MESSAGES.get(
            code, f"(#{code}) Permissions error" if 200 <= code < 300 else f"(#{code}) Error"
        )
        self.type = type_ or (
            "OAuthException"
            if code in OAUTH
            else "FacebookApiException"
            if code in (1, 2)
            else "GraphMethodException"
        )
        self.full = code in FULL_ENVELOPE if full is None else full
        self.user_title, self.user_msg = user_title, user_msg

    def envelope(self, host: str = "facebook") -> dict:
        error: dict = {"message": self.message, "type": self.type, "code": self.code}
        if host == "instagram" and self.code not in IG_HOST_KEEPS_TYPE:
            error["type"] = "IGApiException"
        if self.subcode is not None:
            error["error_subcode"] = self.subcode
        if self.full:
            error["is_transient"] = self.code in TRANSIENT
        if self.full or self.user_title is not None or self.user_msg is not None:
            error["error_user_title"] = self.user_title or ""
            error["error_user_msg"] = self.user_msg or ""
        error["fbtrace_id"] = "A" + secrets.token_urlsafe(15)
        return {"error": error}


def not_found(node: str) -> GraphError:
    return GraphError(
        100,
        subcode=33,
        message=(
            f"Unsupported get request. Object with ID '{node}' does not exist, cannot be loaded due "
            "to missing permissions, or does not support this operation."
        ),
    )
