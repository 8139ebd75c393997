"""Evidence models: who answers destination_outcome@1 for an attempt. Chosen in settings."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

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


# The http-semantics model's rules, in the order they are tried. Each reads
# only the attempt's transport, HTTP status and evidence text.
_DUPLICATE = re.compile(
    r"already exists|already been (processed|applied|recorded)|duplicate|DUP_RCRD|already processed",
    re.IGNORECASE,
)
_TIMEOUT = re.compile(r"time(d)? ?out|ReadTimeout|deadline exceeded", re.IGNORECASE)
_DROPPED = re.compile(r"connection (reset|aborted|closed|lost)|broken pipe|RemoteDisconnected", re.IGNORECASE)


class HttpSemanticsModel:
    """Deterministic answers from HTTP semantics and provider duplicate messages.

    http-semantics/duplicate-message: the evidence says the record already exists (or is a duplicate) -> applied
    http-semantics/timeout: the evidence is a timeout -> not_established
    http-semantics/dropped: the connection was reset or closed before an answer -> not_established
    http-semantics/no-response: transport `sent` and no HTTP status -> not_established
    http-semantics/accepted-queued: 202 -> not_established (a queued acknowledgement)
    http-semantics/success: 200, 201 or 204 -> applied
    http-semantics/rejected: 4xx other than 409 -> not_applied (the request was refused, nothing recorded)
    http-semantics/conflict: 409 without a duplicate message -> not_established
    http-semantics/server-error: 5xx -> not_established
    otherwise: abstain
    """

    name = "http-semantics"

    def answer(self, question: str, attempt: dict) -> Answer | None:
        if question != QUESTION:
            return None
        evidence = attempt.get("evidence", "")
        status = attempt.get("http_status")
        if _DUPLICATE.search(evidence):
            return Answer("applied", "http-semantics/duplicate-message")
        if _TIMEOUT.search(evidence):
            return Answer("not_established", "http-semantics/timeout")
        if _DROPPED.search(evidence):
            return Answer("not_established", "http-semantics/dropped")
        if status is None:
            if attempt.get("transport") == "sent":
                return Answer("not_established", "http-semantics/no-response")
            return None
        if status == 202:
            return Answer("not_established", "http-semantics/accepted-queued")
        if status in (200, 201, 204):
            return Answer("applied", "http-semantics/success")
        if status == 409:
            return Answer("not_established", "http-semantics/conflict")
        if 400 <= status < 500:
            return Answer("not_applied", "http-semantics/rejected")
        if status >= 500:
            return Answer("not_established", "http-semantics/server-error")
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
