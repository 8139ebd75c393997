"""The http-semantics model says `applied` only when nothing in the reply contradicts it.

docs/concepts/replay-decisions.md#evidence: applied is "Yes. It recorded the event, or reports that it already holds this event.";
not_applied is "No. It rejected the event or never processed it, and recorded nothing.";
not_established is "Unknown. The reply does not settle it, such as a timeout, a dropped
connection, a queued acknowledgement or an ambiguous error."
"""

import json
import re

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from reconcile.decisions import evidence
from reconcile.decisions.engine import decide
from reconcile.decisions.evidence import QUESTION, HttpSemanticsModel
from tests.conftest import FIXTURES

MODEL = HttpSemanticsModel()


def reply(status: int | None = None, text: str | None = None, transport: str = "response_received") -> dict:
    attempt = {"transport": transport}
    if status is not None:
        attempt["http_status"] = status
    if text is not None:
        attempt["evidence"] = text
    return attempt


def answered(attempt: dict) -> str | None:
    found = MODEL.answer(QUESTION, attempt)
    return None if found is None else found.answer


# The two replies of the issue: the destination recorded nothing, and the model said `applied`.
FAILED_200 = reply(200, '{"status": "failed", "message": "The request failed and nothing was recorded."}')
OTHER_DUPLICATE_400 = reply(
    400,
    '{"error": "Duplicate reference CUST-0042 on another customer record; the journal entry was not saved."}',
)
RECORD_EXISTS_NOT_SAVED = reply(
    400,
    "A record with reference CUST-0042 already exists for another customer; the journal entry was not saved.",
)

# Replies that must not be `applied`: each holds a signal that contradicts it.
NOT_APPLIED_BY_ANY_READING = [
    ("issue: a 200 saying the request failed", FAILED_200),
    ("issue: a 400 with a duplicate of something else, entry not saved", OTHER_DUPLICATE_400),
    ("400 a record of something else exists, entry not saved", RECORD_EXISTS_NOT_SAVED),
    ("200 with ok false", reply(200, '{"ok": false, "error": "unknown account"}')),
    ("200 with success false", reply(200, '{"success": false}')),
    ("201 that could not create", reply(201, "Entry could not be created")),
    ("200 with an error list", reply(200, '{"errors": [{"code": "E42", "message": "amount out of range"}]}')),
    ("200 with an exception", reply(200, "NullPointerException at JournalService.post")),
    ("204 queued", reply(204, "queued for the nightly import")),
    ("200 will be processed later", reply(200, "Received; it will be processed shortly")),
    ("200 mentioning a duplicate field", reply(200, "duplicate memo field ignored")),
    ("200 rolled back", reply(200, "batch rolled back")),
    ("400 duplicate of another object", reply(400, "Customer with this email already exists")),
    ("409 duplicate request beside an invalid field", reply(409, "Duplicate request error: invalid amount")),
    ("400 duplicate value", reply(400, "Duplicate value for the unique field external_ref")),
    ("400 duplicate of an invoice, rejected", reply(400, "Duplicate of invoice INV-9: request rejected")),
    (
        "400 record exists but the write failed",
        reply(400, "A record with external ID k1 already exists, but the update failed and was rolled back"),
    ),
    ("409 conflict on a unique field", reply(409, "Conflict: duplicate value for unique field email")),
    ("500 already exists", reply(500, "Record already exists")),
    ("503 duplicate", reply(503, "duplicate request")),
    ("sent, no reply, duplicate text", reply(None, "record already exists", transport="sent")),
    ("302 already exists", reply(302, "record already exists")),
    ("201 timed out", reply(201, "timed out waiting for the commit")),
    ("200 connection reset", reply(200, "connection reset while reading the body")),
    ("202 created", reply(202, "created")),
]

# Replies that must not be `not_applied`: a 4xx that also says something was recorded.
NOT_NOT_APPLIED = [
    ("422 that created with defaults", reply(422, "Validation warning: entry created with defaults")),
    ("400 partially applied", reply(400, "Partially applied: 3 of 5 lines posted")),
    ("429 already queued", reply(429, "rate limited; the request is already queued")),
    ("400 mentioning a duplicate", reply(400, "duplicate")),
    ("404 that exists", reply(404, "the journal exists but the line was not found")),
]

# Clean replies that must still be answered as before.
CLEAN = [
    (
        "worked example: NetSuite DUP_RCRD",
        reply(
            400,
            json.dumps(
                {
                    "o:errorDetails": [
                        {
                            "detail": "A record with external ID adj-2026-10-02-0091 already exists (Journal Entry JE-118204).",
                            "o:errorCode": "DUP_RCRD",
                        }
                    ]
                }
            ),
        ),
        "applied",
        "http-semantics/duplicate-message",
    ),
    (
        "201 created",
        reply(201, '{"id": "je_test_1", "status": "created"}'),
        "applied",
        "http-semantics/success",
    ),
    ("200 without text", reply(200), "applied", "http-semantics/success"),
    ("204 without text", reply(204), "applied", "http-semantics/success"),
    ("200 ok true", reply(200, '{"ok": true}'), "applied", "http-semantics/success"),
    ("409 duplicate request", reply(409, "Duplicate request"), "applied", "http-semantics/duplicate-message"),
    (
        "200 already processed",
        reply(200, "This event has already been processed"),
        "applied",
        "http-semantics/duplicate-message",
    ),
    (
        "400 transaction exists",
        reply(400, "Transaction TX-1 already exists"),
        "applied",
        "http-semantics/duplicate-message",
    ),
    (
        "422 invalid, nothing recorded",
        reply(422, "invalid field 'amount'; nothing was recorded"),
        "not_applied",
        "http-semantics/rejected",
    ),
    (
        "400 missing field",
        reply(400, '{"error": "missing field account"}'),
        "not_applied",
        "http-semantics/rejected",
    ),
    ("403 forbidden", reply(403, "Forbidden"), "not_applied", "http-semantics/rejected"),
    ("429 without text", reply(429), "not_applied", "http-semantics/rejected"),
    (
        "timeout",
        reply(None, "httpx.ReadTimeout: The read operation timed out", transport="sent"),
        "not_established",
        "http-semantics/timeout",
    ),
    ("202", reply(202), "not_established", "http-semantics/accepted-queued"),
    ("409 without a duplicate", reply(409), "not_established", "http-semantics/conflict"),
    ("502", reply(502), "not_established", "http-semantics/server-error"),
]


@pytest.mark.parametrize(
    "case, attempt", NOT_APPLIED_BY_ANY_READING, ids=[c for c, _ in NOT_APPLIED_BY_ANY_READING]
)
def test_a_contradicted_reply_is_never_applied(case, attempt):
    """docs/concepts/replay-decisions.md#evidence: `applied` means "It recorded the event, or reports that it already holds this event."."""
    assert answered(attempt) != "applied", case


@pytest.mark.parametrize("case, attempt", NOT_NOT_APPLIED, ids=[c for c, _ in NOT_NOT_APPLIED])
def test_a_refusal_that_claims_a_record_is_never_not_applied(case, attempt):
    """docs/concepts/replay-decisions.md#evidence: `not_applied` means "It rejected the event or never processed it, and recorded nothing."."""
    assert answered(attempt) == "not_established", case


@pytest.mark.parametrize("case, attempt, answer, rule", CLEAN, ids=[c for c, *_ in CLEAN])
def test_clean_replies_keep_their_answers(case, attempt, answer, rule):
    found = MODEL.answer(QUESTION, attempt)
    assert (found.answer, found.rule) == (answer, rule), case


def test_two_contradictory_replies_are_conflicting_signals_and_the_engine_reconciles():
    """replay.delivery: "receivers without deduplication require reconciliation before retry"."""
    for attempt in (FAILED_200, OTHER_DUPLICATE_400):
        assert MODEL.answer(QUESTION, attempt).rule == "http-semantics/conflicting-signals"
        request = {
            "decision": "replay",
            "proposal": {"operation": "deliver", "key": "k1", "digest": "d1"},
            "destination": {"name": "Dest", "mode": "event", "dedupe": "none"},
            "attempts": [attempt],
        }
        assert decide(request, role="r", model=MODEL)["verdict"] == "reconcile"


def test_control_without_the_contradiction_guard_the_contradictory_replies_are_applied(monkeypatch):
    """The guard is what refuses them: with it disabled the naive answer (`applied`) comes back."""
    never = re.compile(r"(?!x)x")
    for name in ("_SAYS_NOT_RECORDED", "_SAYS_ERROR", "_MENTIONS_DUPLICATE"):
        monkeypatch.setattr(evidence, name, never)
    assert answered(FAILED_200) == "applied"
    assert answered(RECORD_EXISTS_NOT_SAVED) == "applied"


def test_control_with_the_old_bare_duplicate_pattern_a_duplicate_of_something_else_is_applied(monkeypatch):
    """Only a duplicate of the record itself reports "that it already holds this event"."""
    monkeypatch.setattr(evidence, "_HOLDS_IT", re.compile(r"duplicate|already exists", re.IGNORECASE))
    monkeypatch.setattr(evidence, "_SAYS_NOT_RECORDED", re.compile(r"(?!x)x"))
    assert answered(OTHER_DUPLICATE_400) == "applied"


def test_worked_example_with_the_model_is_applied():
    request = json.loads(
        (FIXTURES / "decisions" / "deliver__journal_already_exists.request.json").read_text()
    )
    assert decide(request, role="r", model=MODEL)["verdict"] == "applied"


# Property: adding any contradicting sentence to a reply that is `applied` makes it not `applied`.
_APPLIED_REPLIES = st.sampled_from(
    [
        reply(200),
        reply(201, "created"),
        reply(204),
        reply(200, '{"ok": true}'),
        reply(409, "Duplicate request"),
        reply(400, "A record with external ID k1 already exists."),
        reply(200, "This event has already been processed"),
    ]
)
_CONTRADICTIONS = st.sampled_from(
    [
        "nothing was recorded",
        "the entry was not saved",
        "Request failed.",
        "could not save",
        "rolled back",
        '"success": false',
        "error: invalid amount",
        "queued for processing",
        "timed out",
        "it wasn't stored",
        "no records were created",
        "the write was rejected",
        "unable to commit",
        "connection reset",
        "invalid amount",
        "missing field account",
        "unknown ledger",
    ]
)


@hsettings(max_examples=300, deadline=None)
@given(_APPLIED_REPLIES, _CONTRADICTIONS, st.booleans(), st.sampled_from(["", " ", "; ", "\n"]))
def test_any_contradiction_added_to_an_applied_reply_unsettles_it(attempt, contradiction, before, glue):
    assert answered(attempt) == "applied"
    text = attempt.get("evidence", "")
    combined = f"{contradiction}{glue}{text}" if before else f"{text}{glue}{contradiction}"
    assert answered({**attempt, "evidence": combined.strip() or contradiction}) != "applied"


@hsettings(max_examples=300, deadline=None)
@given(
    st.sampled_from(["response_received", "sent"]),
    st.none() | st.integers(100, 599),
    st.none() | st.text(min_size=1, max_size=200),
)
def test_every_answer_is_from_the_closed_set_or_an_abstention(transport, status, text):
    found = MODEL.answer(QUESTION, reply(status, text, transport))
    assert found is None or (
        found.answer in ("applied", "not_applied", "not_established")
        and found.rule.startswith("http-semantics/")
    )
    if found is not None and found.answer == "applied":
        assert transport == "response_received" and (status is None or status < 500)
