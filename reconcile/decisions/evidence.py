"""Evidence models: who answers destination_outcome@1 for an attempt. Chosen in settings."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from conduit.providers.registry import evidence_answers

QUESTION = "destination_outcome@1"
SETTLING = ("applied", "not_applied")


@dataclass(frozen=True)
class Answer:
    answer: str  # applied | not_applied | not_established
    rule: str


class EvidenceModel(Protocol):
    name: str

    def answer(self, question: str, attempt: dict) -> Answer | None:
        """An answer, or None to abstain."""


# The http-semantics model reads only the attempt's transport, HTTP status and
# evidence text. Its signals, as data: each is a pattern over the evidence.

# A duplicate message about the record itself: this record, entry or request
# already exists or was already processed (NetSuite's DUP_RCRD). A duplicate of
# something else (a customer, a field value) is not this: see _MENTIONS_DUPLICATE.
_HOLDS_IT = re.compile(
    r"\bDUP_RCRD\b"
    r"|\b(record|entry|event|transaction|request|submission|delivery|message|journal entry)\b"
    r"(?:[^.;\n]|\.(?!\s)){0,120}?\balready\s+(exists|been\s+(processed|applied|recorded|received|created)"
    r"|(processed|applied|recorded|received|created))\b"
    r"|\bduplicate\s+(record|entry|event|request|transaction|submission|delivery|message)\b",
    re.IGNORECASE,
)
# Any duplicate talk at all, about whatever.
_MENTIONS_DUPLICATE = re.compile(r"duplicate|already|DUP_", re.IGNORECASE)
# The reply says nothing was recorded, or that the request failed.
_SAYS_NOT_RECORDED = re.compile(
    r"(not|never)\s+(been\s+|be\s+)?(saved|recorded|created|stored|persisted|processed|applied|accepted"
    r"|committed|imported|posted|written|inserted)"
    r"|n't\s+(been\s+|be\s+)?(saved|recorded|created|stored|persisted|processed|applied|accepted|committed"
    r"|imported|posted|written|inserted)"
    r"|nothing\s+(was\s+|has\s+been\s+|is\s+|got\s+)?(saved|recorded|created|stored|persisted|processed"
    r"|applied|accepted|committed|imported|posted|written|inserted|changed)"
    r"|no\s+(records?|entr(y|ies)|events?|changes?|data|rows?)\s+(was|were|has\s+been|have\s+been)"
    r"|(could\s+not|couldn't|cannot|can't|unable\s+to)"
    r"|fail(s|ed|ure|ing)?|rolled\s+back|rollback|discarded"
    r"|(rejected|refused|denied|declined|aborted|cancell?ed)"
    r"|\"(success|ok|saved|created|recorded|applied)\"\s*:\s*(false|0|null)",
    re.IGNORECASE,
)
# The contradiction patterns match anywhere, even inside a word: a false match
# costs one query, a missed one an event that is never resent.
# In a success reply, any word of failure is a contradiction (an error envelope in a 200).
_SAYS_ERROR = re.compile(
    r"error|exception|unsuccessful|invalid|\"status\"\s*:\s*\"(fail|ko)",
    re.IGNORECASE,
)
# The reply refuses the request for a reason of its own: beside a duplicate
# message, the duplicate may be of something else.
_SAYS_REFUSED = re.compile(
    r"invalid|malformed|missing|required|not\s+allowed|forbidden|unauthori[sz]ed|not\s+found|unknown",
    re.IGNORECASE,
)
# The reply says the work is queued, not done.
_SAYS_PENDING = re.compile(
    r"(queued|pending|enqueued|scheduled|will\s+be\s+(processed|applied|recorded)|accepted\s+for\s+processing"
    r"|in\s+progress|being\s+processed)",
    re.IGNORECASE,
)
# In a refusal, any claim that something was recorded (not negated) is a contradiction.
_CLAIMS_RECORDED = re.compile(
    r"(created|saved|recorded|stored|persisted|applied|processed|accepted|committed|posted|inserted|exists"
    r"|partial)",
    re.IGNORECASE,
)
_NEGATION_BEFORE = re.compile(r"\b(not|never|nothing|no|without)\b|n't", re.IGNORECASE)
_TIMEOUT = re.compile(r"time(d)? ?out|ReadTimeout|deadline exceeded", re.IGNORECASE)
_DROPPED = re.compile(r"connection (reset|aborted|closed|lost)|broken pipe|RemoteDisconnected", re.IGNORECASE)
_SUCCESS = (200, 201, 204)


def _claims_recorded(text: str) -> bool:
    """A recording word ("created", "saved", ...) not negated within the few words before it."""
    for match in _CLAIMS_RECORDED.finditer(text):
        window = text[max(0, match.start() - 30) : match.start()]
        if not _NEGATION_BEFORE.search(window):
            return True
    return False


class HttpSemanticsModel:
    """Deterministic answers from HTTP semantics and the reply's text, conservative by construction.

    docs/concepts/replay-decisions.md#evidence defines the answers:
      applied: "Yes. It recorded the event, or reports that it already holds this event."
      not_applied: "No. It rejected the event or never processed it, and recorded nothing."
      not_established: "Unknown. The reply does not settle it, such as a timeout, a dropped
        connection, a queued acknowledgement or an ambiguous error."
    and why a wrong `applied` is the costly error (replay.delivery: "receivers without
    deduplication require reconciliation before retry"): an `applied` that is wrong records an
    event that never arrived and is never resent. A wrong `not_established` costs one query.

    So a rule may say `applied` (or `not_applied`) only when every signal in the reply agrees;
    any conflicting signal makes the answer `not_established` (rule conflicting-signals).
    The rules, in the order they are tried:

    http-semantics/meta-error-table: the evidence is a reason token of Meta's error table
        (conduit/providers/meta/errors.py), the table the Instagram and Page transports act on: its
        ambiguous tokens -> not_established (a 4xx from Meta is not always "not applied":
        20/1772107 was seen after the comment had been created), its not-applied tokens ->
        not_applied, `already_replied` -> applied; only for a reply received (a reason token
        recorded with transport `sent` is not the receiver's: the no-response rule answers).
    http-semantics/whatsapp-error-table: the same, for a token only WhatsApp's error table
        (conduit/providers/whatsapp/errors.py) declares; tokens the tables share answer alike.
    http-semantics/timeout: the evidence is a timeout -> not_established
        ("such as a timeout")
    http-semantics/dropped: the connection was reset or closed -> not_established
        ("a dropped connection")
    http-semantics/no-response: transport `sent` (no reply was received) -> not_established,
        whatever the text says: nothing the receiver said is in it.
    http-semantics/server-error: 5xx -> not_established ("an ambiguous error")
    http-semantics/accepted-queued: 202, or text saying queued/pending -> not_established
        ("a queued acknowledgement")
    http-semantics/duplicate-message: a 2xx or 4xx (or no status) whose text says this record,
        entry or request already exists or was already processed (or DUP_RCRD) -> applied
        ("reports that it already holds this event"), unless the text also says nothing was
        recorded, the request failed, or it was refused for another reason (invalid, missing ...).
    http-semantics/success: 200, 201 or 204 -> applied ("It recorded the event"), unless the
        text speaks of failure, an error, a refusal, a duplicate or nothing recorded.
    http-semantics/conflict: 409 without a duplicate message -> not_established
    http-semantics/rejected: another 4xx -> not_applied ("It rejected the event ... and
        recorded nothing"), unless the text claims something was recorded (created, saved,
        exists, partially ...) or mentions a duplicate.
    http-semantics/conflicting-signals: a rule above matched, but the reply also says the
        opposite -> not_established ("an ambiguous error").
    otherwise (1xx, 3xx, other 2xx, or a response with neither status nor message): abstain.
    """

    name = "http-semantics"

    def answer(self, question: str, attempt: dict) -> Answer | None:
        if question != QUESTION:
            return None
        text = attempt.get("evidence", "")
        status = attempt.get("http_status")
        conflicting = Answer("not_established", "http-semantics/conflicting-signals")
        tabled = evidence_answers().get(text.strip())
        # A transport's own error table knows this reason; with no reply received (transport `sent`)
        # the reason is not the receiver's, and the no-response rule below answers.
        if tabled is not None and attempt.get("transport") != "sent":
            return Answer(*tabled)
        if _TIMEOUT.search(text):
            return Answer("not_established", "http-semantics/timeout")
        if _DROPPED.search(text):
            return Answer("not_established", "http-semantics/dropped")
        if attempt.get("transport") == "sent":
            return Answer("not_established", "http-semantics/no-response")
        if status is not None and status >= 500:
            return Answer("not_established", "http-semantics/server-error")
        if status == 202 or _SAYS_PENDING.search(text):
            return Answer("not_established", "http-semantics/accepted-queued")
        if _HOLDS_IT.search(text) and (status is None or 200 <= status < 300 or 400 <= status < 500):
            if _SAYS_NOT_RECORDED.search(text) or _SAYS_REFUSED.search(text):
                return conflicting
            return Answer("applied", "http-semantics/duplicate-message")
        if status in _SUCCESS:
            if any(
                p.search(text) for p in (_SAYS_NOT_RECORDED, _SAYS_ERROR, _SAYS_REFUSED, _MENTIONS_DUPLICATE)
            ):
                return conflicting
            return Answer("applied", "http-semantics/success")
        if status == 409:
            return Answer("not_established", "http-semantics/conflict")
        if status is not None and 400 <= status < 500:
            if _MENTIONS_DUPLICATE.search(text) or _claims_recorded(text):
                return conflicting
            return Answer("not_applied", "http-semantics/rejected")
        return None


MODELS: dict[str, type] = {HttpSemanticsModel.name: HttpSemanticsModel}


def load(name: str | None) -> EvidenceModel | None:
    """The model named in settings, or None (every question then abstains)."""
    if not name:
        return None
    try:
        return MODELS[name]()
    except KeyError:
        raise ValueError(f"unknown evidence model {name!r}; known: {', '.join(sorted(MODELS))}") from None
