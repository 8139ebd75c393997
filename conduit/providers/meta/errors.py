"""What a Graph error answer to a reply write means for that reply, as one table of data.

docs/replies.md#outcomes gives a send three outcomes: FAILED_BEFORE_SEND (nothing was applied),
SENT (the provider holds the reply) and SEND_STATUS_UNKNOWN (it may). Meta's
answers map onto them through `ROWS`, conservative by default: only a row that
says "not applied" makes a send safe to try again, only throttling is retried
automatically, and every answer no row claims (an unknown code on a 4xx above
all) is ambiguous, never retried.

This is the one table of Meta's error meanings: the Meta transports read it,
and so do the `http-semantics` evidence model and the unknown-send view (the
lead wires those), so a code means one thing everywhere.

How a row is chosen, most specific first:
  1. HTTP 5xx is ambiguous whatever the body says (the server failed mid-way);
  2. a row whose message pattern matches the answer's text (any case);
  3. a row for (code, subcode);
  4. a row for (code, any subcode);
  5. a row for a range of codes (200-299, permissions);
  6. otherwise ambiguous (`graph_unknown_code`).

Meta localizes `message` (the 7-day window's text exists in several languages), so a text
pattern is only ever a last resort beside the codes; the one kept ("already replied") reaches
here as `message_hint`, the table's own phrase that `graph.graph_error` derives from the text.

`message_text` is only ever matched here, never stored or logged: Meta's text
may carry anything. `message_hint` turns it into this module's own constant
(or ""), which a caller may keep where it must not keep Meta's words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# The outcomes, and the reply state each one leads to (docs/replies.md#outcomes).
NOT_APPLIED_RETRYABLE = "not_applied_retryable"
NOT_APPLIED_FINAL = "not_applied_final"
ALREADY_REPLIED = "already_replied"
AMBIGUOUS = "ambiguous"

SEND_STATES = {
    NOT_APPLIED_RETRYABLE: "FAILED_BEFORE_SEND",
    NOT_APPLIED_FINAL: "FAILED_BEFORE_SEND",
    ALREADY_REPLIED: "SENT",
    AMBIGUOUS: "SEND_STATUS_UNKNOWN",
}

# Where each row's meaning is stated, with Meta's own sources: the docs' error table.
META_MD = "docs/platforms/meta.md#error-meanings"


@dataclass(frozen=True)
class Meaning:
    """What one Graph answer means for a reply write.

    `reason` is a stable snake_case token (safe to store as last_error_code);
    `sentence` is what a person reads; `stop_source` says the source's sends
    must stop until a person acts (a dead token).
    """

    outcome: str
    reason: str
    sentence: str
    stop_source: bool = False
    source: str = ""

    @property
    def applied_nothing(self) -> bool:
        return self.outcome in (NOT_APPLIED_RETRYABLE, NOT_APPLIED_FINAL)

    @property
    def retryable(self) -> bool:
        """Whether retrying automatically can help: throttling only
        (docs/platforms/meta.md#error-meanings)."""
        return self.outcome == NOT_APPLIED_RETRYABLE

    @property
    def send_state(self) -> str:
        return SEND_STATES[self.outcome]


@dataclass(frozen=True)
class Row:
    """One line of the table: (code, subcode or None = any, message pattern or None) -> meaning."""

    code: int | None
    subcode: int | None
    pattern: str | None
    meaning: Meaning
    # The last code of a range this row covers (code..code_to, any subcode), or None.
    code_to: int | None = None


def _throttled(code: int, subcode: int | None, what: str) -> Row:
    return Row(
        code,
        subcode,
        None,
        Meaning(
            NOT_APPLIED_RETRYABLE,
            "throttled",
            f"Meta refused the call for now ({what}); nothing was sent, and the send is retried once "
            "the account's limit allows it.",
            source=f"{META_MD} Error meanings (graph-api/guides/error-handling; rate-limiting BUC table)",
        ),
    )


def _final(
    code: int, subcode: int | None, reason: str, sentence: str, source: str, *, stop_source: bool = False
) -> Row:
    return Row(code, subcode, None, Meaning(NOT_APPLIED_FINAL, reason, sentence, stop_source, source))


def _ambiguous(code: int | None, subcode: int | None, reason: str, sentence: str, source: str) -> Row:
    return Row(code, subcode, None, Meaning(AMBIGUOUS, reason, sentence, source=source))


ALREADY_REPLIED_PATTERN = r"already\s+replied"
_ALREADY_REPLIED_MEANING = Meaning(
    ALREADY_REPLIED,
    "already_replied",
    "Meta answered that this comment already holds a reply: the reply exists, so it is recorded as sent "
    "with that answer as the evidence, and nothing is sent again.",
    source=f"{META_MD} Error meanings: '(#10900) Activity already replied to' (unverified, seen in "
    f"open-source integrations, not in Meta's list): match the message text as well",
)

ROWS: tuple[Row, ...] = (
    # -- throttled, not applied: retried automatically, after the announced wait --------------
    _throttled(4, None, "application request limit"),
    _throttled(17, None, "user request limit"),
    _throttled(32, None, "Page request limit"),
    _throttled(613, None, "calls within one hour exceeded"),
    _throttled(613, 2534040, "private replies per hour exceeded"),
    _throttled(80001, None, "business use case limit: Pages"),
    _throttled(80002, None, "business use case limit: Instagram"),
    _throttled(80006, None, "business use case limit: Messenger"),
    # -- not applied, final: never retried; a person reads the sentence ------------------------
    # 190, any subcode (458, 459, 460, 463, 464, 467): docs/platforms/meta.md#error-meanings.
    _final(
        190,
        None,
        "token_invalid",
        "Meta refused the source's access token (invalid or expired): nothing was sent. A person must "
        "re-authorise the account and replace the token; the source's sends stop until then.",
        f"{META_MD} Error meanings: token invalid or expired (error-handling guide)",
        stop_source=True,
    ),
    # 104: the call carried no access token at all (recorded answers, fixtures/meta_recorded_PROVENANCE.md).
    _final(
        104,
        None,
        "token_invalid",
        "Meta answered that the call carried no access token: nothing was sent. A person must "
        "re-authorise the account so the source has a token again; the source's sends stop until then.",
        f"{META_MD} Error meanings: access token required (OAuthException 104, recorded answers)",
        stop_source=True,
    ),
    _final(
        10,
        2534022,
        "window_expired",
        "The comment is older than the 7 days in which Instagram allows a private reply: nothing was sent.",
        f"{META_MD} Error meanings: outside the private-reply window (Messenger Platform error codes)",
    ),
    _final(
        10,
        2018278,
        "window_expired",
        "The comment is older than the 7 days in which Messenger allows a private reply: nothing was sent.",
        f"{META_MD} Error meanings: outside the private-reply window (Messenger Platform error codes)",
    ),
    _final(
        100,
        2534025,
        "not_private_replyable",
        "Meta does not allow a private reply to this comment (the account's own comment, or one Meta "
        "marks as not valid for a private reply): nothing was sent.",
        f"{META_MD} Error meanings: not valid for a private reply (Messenger Platform error codes)",
    ),
    _final(
        100,
        33,
        "object_gone",
        "The comment no longer exists (deleted), or Conduit's token cannot see it: nothing was sent.",
        f"{META_MD} Error meanings: object gone (Messenger Platform error codes)",
    ),
    _final(
        10,
        1893063,
        "page_restricted",
        "Meta has restricted the Page from sending this: nothing was sent. The Page's owner must resolve "
        "the restriction in Meta's Business tools.",
        f"{META_MD} Error meanings: restricted (Messenger Platform error codes)",
    ),
    _final(
        200,
        2534041,
        "messages_disabled",
        "The account's owner has not allowed access to messages (Instagram's \"Allow access to "
        'messages"): nothing was sent.',
        f"{META_MD} Error meanings: DM access off (Messenger Platform error codes)",
    ),
    _final(
        200,
        1545041,
        "person_unavailable",
        "The person cannot be messaged right now (unavailable, or they blocked the account): nothing "
        "was sent.",
        f"{META_MD} Error meanings: person unavailable (Messenger Platform error codes)",
    ),
    _final(
        551,
        None,
        "person_unavailable",
        "The person cannot be messaged right now (unavailable, or they blocked the account): nothing "
        "was sent.",
        f"{META_MD} Error meanings: person unavailable (Messenger Platform error codes)",
    ),
    # Refusals Meta's error-handling guide describes as the call refused (nothing applied); a
    # person can act on each (a capability, a permission, an attachment), so none is retried.
    _final(
        3,
        None,
        "capability_missing",
        "Meta refused the call: the app lacks the capability for it (as Instagram answers a private reply "
        "sent to the Instagram account's node under Facebook Login, which must send from the Page): "
        "nothing was sent. Check the source's send node and the app's products.",
        f"{META_MD} Seen in recorded material: refused, not applied, code 3 (graph-api/guides/"
        "error-handling: 'Capability: permission issue, the app lacks the capability')",
    ),
    _final(
        100,
        2018047,
        "attachment_refused",
        "Meta refused the message's attachment (upload failed or type not accepted): nothing was sent.",
        f"{META_MD} Seen in recorded material: 100/2018047 attachment upload refused (ChatbotX PR #1122; "
        "Messenger Platform error codes)",
    ),
    # -- already replied: the reply exists -> SENT with that answer as evidence -----------------
    Row(10900, None, None, _ALREADY_REPLIED_MEANING),
    Row(None, None, ALREADY_REPLIED_PATTERN, _ALREADY_REPLIED_MEANING),
    # -- ambiguous: the reply may have been applied; never retried automatically ---------------
    _ambiguous(
        1,
        None,
        "graph_unknown_error",
        "Meta answered with an unknown error: the reply may or may not have been posted. Check the "
        "conversation before anything is sent again.",
        f"{META_MD} Error meanings: ambiguous 1 (Meta error pages)",
    ),
    _ambiguous(
        2,
        None,
        "graph_unexpected_error",
        "Meta answered with an unexpected error (it also does so when the person blocked the "
        "account): the reply may or may not have been posted. Check the conversation before "
        "anything is sent again.",
        f"{META_MD} Error meanings: ambiguous 2 (Meta error pages)",
    ),
    _ambiguous(
        20,
        1772107,
        "graph_refused_after_apply",
        "Meta answered with an error that has been seen after the reply had in fact been posted: "
        "check the conversation before anything is sent again.",
        f"{META_MD} Error meanings: 20/1772107 seen after the Instagram comment had been created "
        f"(brightbean-studio PR #140): a 4xx is not always 'not applied'",
    ),
)

SERVER_ERROR = Meaning(
    AMBIGUOUS,
    "graph_server_error",
    "Meta's server failed while handling the reply (HTTP 5xx): it may or may not have been posted. Check the "
    "conversation before anything is sent again.",
    source=f"{META_MD} Error meanings: ambiguous 5xx",
)
UNKNOWN = Meaning(
    AMBIGUOUS,
    "graph_unknown_code",
    "Meta refused the reply with an error Conduit does not know: it may or may not have been posted. Check "
    "the conversation before anything is sent again.",
    source=f"{META_MD}: everything else, including an unknown code on a 4xx -> SEND_STATUS_UNKNOWN",
)

# 200-299: permission errors (graph-api/guides/error-handling: "Permission denied ... the app
# lacks a permission, or the person has not granted it"): the call was refused, nothing applied.
PERMISSION_RANGE = Row(
    200,
    None,
    None,
    Meaning(
        NOT_APPLIED_FINAL,
        "permission_missing",
        "Meta refused the call for lack of a permission (codes 200-299): nothing was sent. The account's owner "
        "must grant the missing permission (re-connect the account with it) before sending again.",
        source=f"{META_MD} Seen in recorded material: refused, not applied, 200-299 (graph-api/guides/"
        "error-handling: permission errors)",
    ),
    code_to=299,
)
ROWS = ROWS + (PERMISSION_RANGE,)

_PATTERNS = [(re.compile(row.pattern, re.IGNORECASE), row) for row in ROWS if row.pattern]
_BY_CODE = {(row.code, row.subcode): row for row in ROWS if row.pattern is None and row.code_to is None}
_RANGES = [row for row in ROWS if row.code_to is not None]


def meaning(
    status: int | None, code: int | None, subcode: int | None, message_text: str | None = ""
) -> Meaning:
    """The meaning of one Graph error answer to a reply write (see the module docstring for the order)."""
    if status is not None and status >= 500:
        return SERVER_ERROR
    text = (message_text or "")[:2000]
    for pattern, row in _PATTERNS:
        if pattern.search(text):
            return row.meaning
    row = (
        _BY_CODE.get((code, subcode))
        or _BY_CODE.get((code, None))
        or next((r for r in _RANGES if code is not None and r.code <= code <= r.code_to), None)
    )
    return row.meaning if row is not None else UNKNOWN


# What the Meta transports store as a send attempt's evidence is the table's reason token (or one of
# the transport's own below): by token, the table answers what the attempt's outcome was, so the
# evidence model and the unknown-send view read the same meanings the transports acted on.
TRANSPORT_REASONS = {
    "timeout_after_request": AMBIGUOUS,
    "connection_lost_after_request": AMBIGUOUS,
    "unreadable_receipt": AMBIGUOUS,
    "connect_failed": NOT_APPLIED_RETRYABLE,
    "graph_token_unavailable": NOT_APPLIED_FINAL,
    "graph_url_refused": NOT_APPLIED_FINAL,
    "reply_target_invalid": NOT_APPLIED_FINAL,
    "send_node_invalid": NOT_APPLIED_FINAL,
}
REASON_OUTCOMES: dict[str, str] = {
    **{row.meaning.reason: row.meaning.outcome for row in ROWS},
    SERVER_ERROR.reason: SERVER_ERROR.outcome,
    UNKNOWN.reason: UNKNOWN.outcome,
    **TRANSPORT_REASONS,
}

# The table's outcomes as the answers of docs/concepts/replay-decisions.md#evidence.
EVIDENCE_ANSWERS_OF_OUTCOME = {
    AMBIGUOUS: "not_established",
    NOT_APPLIED_RETRYABLE: "not_applied",
    NOT_APPLIED_FINAL: "not_applied",
    ALREADY_REPLIED: "applied",
}
EVIDENCE_ANSWERS: dict[str, str] = {
    reason: EVIDENCE_ANSWERS_OF_OUTCOME[outcome] for reason, outcome in REASON_OUTCOMES.items()
}


def outcome_of_reason(reason: str) -> str | None:
    """The table's outcome for a reason token a Meta transport stored, or None if it is not one."""
    return REASON_OUTCOMES.get(reason.strip())


def message_hint(message_text: str | None) -> str:
    """This table's own phrase for what Meta's text says ("already replied"), or "".

    Keep this, never Meta's text: `meaning(..., message_hint(text))` equals `meaning(..., text)`.
    """
    text = (message_text or "")[:2000]
    for pattern, row in _PATTERNS:
        if pattern.search(text):
            return row.meaning.reason.replace("_", " ")
    return ""
