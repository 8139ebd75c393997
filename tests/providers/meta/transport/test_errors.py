"""The error meanings table (conduit.providers.meta.errors): every row docs/platforms/meta.md#error-meanings
names, its order, its defaults."""

from __future__ import annotations

import pytest

from conduit.providers.meta import errors
from conduit.providers.meta.errors import (
    ALREADY_REPLIED,
    AMBIGUOUS,
    NOT_APPLIED_FINAL,
    NOT_APPLIED_RETRYABLE,
    meaning,
    message_hint,
)

# (status, code, subcode, outcome, reason): the rows of docs/platforms/meta.md#error-meanings.
DOCUMENTED_ROWS = [
    (400, 4, None, NOT_APPLIED_RETRYABLE, "throttled"),
    (400, 17, None, NOT_APPLIED_RETRYABLE, "throttled"),
    (400, 32, None, NOT_APPLIED_RETRYABLE, "throttled"),
    (400, 613, None, NOT_APPLIED_RETRYABLE, "throttled"),
    (400, 613, 2534040, NOT_APPLIED_RETRYABLE, "throttled"),
    (400, 80001, None, NOT_APPLIED_RETRYABLE, "throttled"),
    (400, 80002, None, NOT_APPLIED_RETRYABLE, "throttled"),
    (400, 80006, None, NOT_APPLIED_RETRYABLE, "throttled"),
    (400, 190, None, NOT_APPLIED_FINAL, "token_invalid"),
    (400, 190, 463, NOT_APPLIED_FINAL, "token_invalid"),
    (400, 10, 2534022, NOT_APPLIED_FINAL, "window_expired"),
    (400, 10, 2018278, NOT_APPLIED_FINAL, "window_expired"),
    (400, 100, 2534025, NOT_APPLIED_FINAL, "not_private_replyable"),
    (400, 100, 33, NOT_APPLIED_FINAL, "object_gone"),
    (400, 10, 1893063, NOT_APPLIED_FINAL, "page_restricted"),
    (403, 200, 2534041, NOT_APPLIED_FINAL, "messages_disabled"),
    (403, 200, 1545041, NOT_APPLIED_FINAL, "person_unavailable"),
    (400, 551, None, NOT_APPLIED_FINAL, "person_unavailable"),
    (400, 10900, None, ALREADY_REPLIED, "already_replied"),
    (500, 1, None, AMBIGUOUS, "graph_server_error"),
    (400, 1, None, AMBIGUOUS, "graph_unknown_error"),
    (400, 2, None, AMBIGUOUS, "graph_unexpected_error"),
    (400, 20, 1772107, AMBIGUOUS, "graph_refused_after_apply"),
]
# "Codes 3, 200-299, 100/2018047 and any other documented 'refused' code are not-sent
# outcomes with an incurable reason a person can act on"; their rows cite Meta's error-handling guide.
REFUSED_ROWS = [
    (400, 3, None, NOT_APPLIED_FINAL, "capability_missing"),
    (403, 200, None, NOT_APPLIED_FINAL, "permission_missing"),
    (403, 230, None, NOT_APPLIED_FINAL, "permission_missing"),
    (403, 299, 12, NOT_APPLIED_FINAL, "permission_missing"),
    (400, 100, 2018047, NOT_APPLIED_FINAL, "attachment_refused"),
    # The named rows inside the range stay theirs.
    (403, 200, 2534041, NOT_APPLIED_FINAL, "messages_disabled"),
]


@pytest.mark.parametrize("status,code,subcode,outcome,reason", REFUSED_ROWS)
def test_documented_refusals_applied_nothing_and_are_never_retried(status, code, subcode, outcome, reason):
    meant = meaning(status, code, subcode, "")
    assert (meant.outcome, meant.reason) == (outcome, reason)
    assert meant.applied_nothing and not meant.retryable and not meant.stop_source
    assert meant.send_state == "FAILED_BEFORE_SEND"
    assert "error-handling" in meant.source or "error codes" in meant.source


@pytest.mark.parametrize("status,code,subcode,outcome,reason", DOCUMENTED_ROWS)
def test_each_error_meanings_row_means_what_the_table_says(status, code, subcode, outcome, reason):
    """docs/platforms/meta.md#error-meanings: "known 'not applied' -> FAILED_BEFORE_SEND, retried automatically only where retrying
    can help (throttling ...); known 'already holds a reply' -> SENT ...; everything else ... ->
    SEND_STATUS_UNKNOWN"."""
    meant = meaning(status, code, subcode, "")
    assert (meant.outcome, meant.reason) == (outcome, reason)
    assert meant.retryable == (outcome == NOT_APPLIED_RETRYABLE)
    assert (
        meant.send_state
        == {
            NOT_APPLIED_RETRYABLE: "FAILED_BEFORE_SEND",
            NOT_APPLIED_FINAL: "FAILED_BEFORE_SEND",
            ALREADY_REPLIED: "SENT",
            AMBIGUOUS: "SEND_STATUS_UNKNOWN",
        }[outcome]
    )
    assert meant.sentence and meant.source


def test_only_a_dead_token_stops_the_source():
    """docs/platforms/meta.md#token-health: "A 190 marks the source needs_reauth: its sends stop at
    once"; a 104 (the call carried no token) is the same credentials failure."""
    stopping = {(row.code, row.subcode) for row in errors.ROWS if row.meaning.stop_source}
    assert stopping == {(104, None), (190, None)}
    assert meaning(400, 190, 460, "").stop_source
    assert meaning(400, 104, None, "").stop_source


@pytest.mark.parametrize(
    "status,code,subcode",
    [
        (400, 12345, None),  # an unknown code on a 4xx
        (403, 99, 7),
        (400, 10, 999),  # a known code with a subcode no row names
        (400, 100, None),  # invalid parameter, no subcode: not proven "not applied"
        (400, 300, None),  # just past the permission range (200-299)
        (400, None, None),  # no code at all (an unreadable envelope)
        (200, None, None),
    ],
)
def test_everything_unknown_is_ambiguous(status, code, subcode):
    """docs/platforms/meta.md#error-meanings: "everything else, including an unknown code on a 4xx -> SEND_STATUS_UNKNOWN, never retried
    automatically"."""
    meant = meaning(status, code, subcode, "")
    assert meant.outcome == AMBIGUOUS and not meant.retryable and not meant.applied_nothing


@pytest.mark.parametrize("code", [4, 190, 10900, 2534025, None])
def test_a_5xx_is_ambiguous_whatever_the_code(code):
    """docs/platforms/meta.md#error-meanings: "Ambiguous: 1, 2 ..., 5xx"."""
    assert meaning(503, code, None, "").reason == "graph_server_error"


@pytest.mark.parametrize(
    "text", ["(#10900) Activity already replied to", "ALREADY REPLIED", "already  replied"]
)
def test_already_replied_matches_the_message_text_in_any_case(text):
    """docs/platforms/meta.md#error-meanings: '"Activity already replied to" is seen as 10900 in the wild but is not in Meta's list:
    match the message text as well.'"""
    assert meaning(400, 100, None, text).outcome == ALREADY_REPLIED
    assert meaning(400, None, None, text).outcome == ALREADY_REPLIED
    # The hint a caller may keep instead of Meta's words means the same.
    assert message_hint(text) == "already replied"
    assert meaning(400, 100, None, message_hint(text)).outcome == ALREADY_REPLIED


def test_message_hint_keeps_nothing_else():
    assert message_hint("Error validating access token: Session has expired on 2026-01-01") == ""
    assert message_hint(None) == ""


def test_every_row_cites_its_source():
    assert all(row.meaning.source.startswith("docs/platforms/meta.md#error-meanings") for row in errors.ROWS)
    assert all(row.meaning.reason.isidentifier() and row.meaning.reason.islower() for row in errors.ROWS)
