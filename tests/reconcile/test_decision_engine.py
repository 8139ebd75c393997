"""The replay-decision engine: the seed's worked examples, every clause and verdict, and properties."""

import copy
import json

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from reconcile.decisions.engine import VERDICTS, decide
from reconcile.decisions.evidence import Answer, HttpSemanticsModel, load
from reconcile.decisions.schema import violations
from tests.conftest import FIXTURES

ROLE = "Inventory Controller"
MODEL = HttpSemanticsModel()


def example(name: str) -> tuple[dict, dict]:
    folder = FIXTURES / "decisions"
    return (
        json.loads((folder / f"{name}.request.json").read_text()),
        json.loads((folder / f"{name}.response.json").read_text()),
    )


@pytest.mark.parametrize("name", ["deliver__journal_already_exists", "apply__same_key_different_content"])
def test_worked_examples_come_out_exactly_as_printed(name):
    request, expected = example(name)
    assert violations(request) == []
    assert decide(request, role=ROLE, model=None) == expected
    assert json.dumps(decide(request, role=ROLE, model=None), sort_keys=True) == json.dumps(
        expected, sort_keys=True
    )


def test_with_the_http_model_the_duplicate_message_settles_it_as_applied():
    request, _ = example("deliver__journal_already_exists")
    decision = decide(request, role=ROLE, model=MODEL)
    assert decision["verdict"] == "applied" and decision["next"]["action"] == "record_applied"
    answers = [(q["answer"], q["rule"]) for q in decision["questions"]]
    assert answers == [
        ("not_established", "http-semantics/timeout"),
        ("applied", "http-semantics/duplicate-message"),
    ]


def req(operation="deliver", *, kind=None, events=(), destination=None, attempts=(), key="k1", digest="d1"):
    proposal = {"operation": operation, "key": key, "digest": digest}
    if kind:
        proposal["kind"] = kind
    doc = {"decision": "replay", "proposal": proposal}
    if events:
        doc["events"] = list(events)
    if destination:
        doc["destination"] = destination
    if attempts:
        doc["attempts"] = list(attempts)
    assert violations(doc) == [], violations(doc)
    return doc


EVENT_NONE = {"name": "Dest", "mode": "event", "dedupe": "none"}
EVENT_VERIFIED = {"name": "Dest", "mode": "event", "dedupe": "verified"}
SNAPSHOT_NONE = {"name": "Dest", "mode": "snapshot", "dedupe": "none"}
NOT_SENT = {"transport": "not_sent", "evidence": "connection refused"}
TIMEOUT = {"transport": "sent", "evidence": "ReadTimeout: timed out"}
REJECTED = {"transport": "response_received", "http_status": 422, "evidence": "invalid field"}
OK_201 = {"transport": "response_received", "http_status": 201, "evidence": "created"}
ERROR_503 = {"transport": "response_received", "http_status": 503, "evidence": "unavailable"}


CASES = [
    (
        "key: same digest",
        req("apply", events=[{"key": "k1", "digest": "d1", "kind": "event", "delta": "5"}]),
        None,
        "existing",
        "return_existing",
    ),
    (
        "key: different digest",
        req("apply", events=[{"key": "k1", "digest": "zz", "kind": "event", "delta": "5"}]),
        None,
        "reject",
        "resolve_conflict",
    ),
    (
        "key: deliver of a key already applied",
        req(
            events=[{"key": "k1", "digest": "d1", "kind": "event", "delta": "1"}],
            destination=EVENT_NONE,
            attempts=[TIMEOUT],
        ),
        None,
        "existing",
        "return_existing",
    ),
    ("apply a new event", req("apply", kind="event"), None, "proceed", "post_delta"),
    (
        "snapshot: never posts",
        req(
            "apply", kind="snapshot", events=[{"key": "s0", "digest": "x", "kind": "snapshot", "delta": "10"}]
        ),
        None,
        "proceed",
        "replace_position",
    ),
    ("deliver: first time", req(destination=EVENT_NONE), None, "proceed", "deliver"),
    (
        "deliver: nothing left the process",
        req(destination=EVENT_NONE, attempts=[NOT_SENT, NOT_SENT]),
        None,
        "retry",
        "retry_delivery",
    ),
    (
        "deliver: may have reached, no dedupe, no model",
        req(destination=EVENT_NONE, attempts=[TIMEOUT]),
        None,
        "reconcile",
        "query_destination",
    ),
    (
        "deliver: may have reached, no dedupe, model not established",
        req(destination=EVENT_NONE, attempts=[ERROR_503]),
        MODEL,
        "reconcile",
        "query_destination",
    ),
    (
        "deliver: every reached attempt not applied",
        req(destination=EVENT_NONE, attempts=[NOT_SENT, REJECTED]),
        MODEL,
        "retry",
        "retry_delivery",
    ),
    (
        "deliver: one of two reached attempts unsettled",
        req(destination=EVENT_NONE, attempts=[REJECTED, TIMEOUT]),
        MODEL,
        "reconcile",
        "query_destination",
    ),
    (
        "deliver: verified dedupe",
        req(destination=EVENT_VERIFIED, attempts=[TIMEOUT]),
        None,
        "retry",
        "retry_delivery",
    ),
    (
        "deliver: snapshot destination",
        req(destination=SNAPSHOT_NONE, attempts=[TIMEOUT]),
        None,
        "retry",
        "retry_delivery",
    ),
    (
        "deliver: applied event",
        req(destination=EVENT_NONE, attempts=[TIMEOUT, OK_201]),
        MODEL,
        "applied",
        "record_applied",
    ),
    (
        "deliver: applied snapshot",
        req(kind="snapshot", destination=EVENT_NONE, attempts=[OK_201]),
        MODEL,
        "applied",
        "replace_position",
    ),
    (
        "deliver: applied to a snapshot destination",
        req(destination=SNAPSHOT_NONE, attempts=[OK_201]),
        MODEL,
        "applied",
        "replace_position",
    ),
    (
        "deliver: applied wins over verified dedupe",
        req(destination=EVENT_VERIFIED, attempts=[OK_201]),
        MODEL,
        "applied",
        "record_applied",
    ),
    (
        "deliver: no destination given is read as no dedupe",
        req(attempts=[TIMEOUT]),
        None,
        "reconcile",
        "query_destination",
    ),
]


@pytest.mark.parametrize("case, request_doc, model, verdict, action", CASES)
def test_clauses_and_verdicts(case, request_doc, model, verdict, action):
    decision = decide(request_doc, role="operator", model=model)
    assert (decision["verdict"], decision["next"]["action"]) == (verdict, action), case
    assert decision["next"]["role"] == "operator"


def test_every_verdict_is_reached_by_some_case_and_the_set_is_closed():
    reached = {decide(doc, role="r", model=model)["verdict"] for _, doc, model, _, _ in CASES}
    assert reached == set(VERDICTS) == {"proceed", "existing", "reject", "applied", "retry", "reconcile"}


def test_questions_only_for_attempts_that_may_have_reached():
    doc = req(destination=EVENT_NONE, attempts=[NOT_SENT, {"transport": "sent"}, OK_201])
    questions = decide(doc, role="r", model=None)["questions"]
    assert [q["ask"] for q in questions] == ["attempts/1", "attempts/2"]
    assert questions[0]["evidence"] == [] and questions[1]["evidence"] == ["/attempts/2/evidence"]


def test_an_abstaining_or_unsettling_model_changes_nothing():
    class Abstains:
        name = "abstains"

        def answer(self, question, attempt):
            return None

    class Unsure:
        name = "unsure"

        def answer(self, question, attempt):
            return Answer("not_established", "unsure/always")

    doc = req(destination=EVENT_NONE, attempts=[TIMEOUT, ERROR_503])
    bare = decide(doc, role="r", model=None)
    for model in (Abstains(), Unsure()):
        decided = decide(doc, role="r", model=model)
        assert (decided["verdict"], decided["next"]) == (bare["verdict"], bare["next"])
    assert {q["status"] for q in decide(doc, role="r", model=Abstains())["questions"]} == {"abstained"}


@pytest.mark.parametrize(
    "attempt, answer, rule",
    [
        (
            {"transport": "response_received", "http_status": 409, "evidence": "Duplicate request"},
            "applied",
            "http-semantics/duplicate-message",
        ),
        (
            {"transport": "sent", "evidence": "connection reset by peer"},
            "not_established",
            "http-semantics/dropped",
        ),
        ({"transport": "sent"}, "not_established", "http-semantics/no-response"),
        (
            {"transport": "response_received", "http_status": 202},
            "not_established",
            "http-semantics/accepted-queued",
        ),
        ({"transport": "response_received", "http_status": 200}, "applied", "http-semantics/success"),
        (
            {"transport": "response_received", "http_status": 409},
            "not_established",
            "http-semantics/conflict",
        ),
        ({"transport": "response_received", "http_status": 429}, "not_applied", "http-semantics/rejected"),
        (
            {"transport": "response_received", "http_status": 502},
            "not_established",
            "http-semantics/server-error",
        ),
    ],
)
def test_http_semantics_rules(attempt, answer, rule):
    assert MODEL.answer("destination_outcome@1", attempt) == Answer(answer, rule)


def test_http_semantics_abstains_where_no_rule_applies_and_on_other_questions():
    assert (
        MODEL.answer("destination_outcome@1", {"transport": "response_received", "http_status": 302}) is None
    )
    assert MODEL.answer("other@1", TIMEOUT) is None


def test_models_load_by_name():
    assert load(None) is None and load("") is None
    assert isinstance(load("http-semantics"), HttpSemanticsModel)
    with pytest.raises(ValueError, match="unknown evidence model"):
        load("oracle")


# Property-based: generated requests (valid by construction).
_attempt = st.fixed_dictionaries(
    {"transport": st.sampled_from(["not_sent", "sent", "response_received"])},
    optional={
        "http_status": st.integers(100, 599),
        "evidence": st.sampled_from(
            [
                "timed out",
                "already exists",
                "created",
                "rejected: bad field",
                "connection reset",
                "ok",
                "DUP_RCRD",
                "queued",
            ]
        ),
        "at": st.just("2026-10-02T16:01:09Z"),
    },
)
_event = st.fixed_dictionaries(
    {
        "key": st.sampled_from(["k1", "k2", "k3"]),
        "digest": st.sampled_from(["d1", "d2"]),
        "kind": st.sampled_from(["opening", "event", "snapshot"]),
        "delta": st.sampled_from(["1", "-2.5", "+10"]),
    }
)
_request = st.builds(
    lambda operation, key, digest, kind, events, destination, attempts: {
        "decision": "replay",
        "proposal": {
            "operation": operation,
            "key": key,
            "digest": digest,
            **({"kind": kind} if kind else {}),
        },
        **({"events": events} if events else {}),
        **({"destination": destination} if destination else {}),
        **({"attempts": attempts} if attempts else {}),
    },
    st.sampled_from(["apply", "deliver"]),
    st.sampled_from(["k1", "k2", "k3"]),
    st.sampled_from(["d1", "d2"]),
    st.sampled_from([None, "event", "snapshot"]),
    st.lists(_event, max_size=4),
    st.one_of(
        st.none(),
        st.fixed_dictionaries(
            {
                "name": st.just("Dest"),
                "mode": st.sampled_from(["event", "snapshot"]),
                "dedupe": st.sampled_from(["verified", "none"]),
            }
        ),
    ),
    st.lists(_attempt, max_size=5),
)


def assert_no_unsafe_retry(request_doc: dict, decision: dict) -> None:
    """The property: a delivery that may have reached an event-mode destination without
    verified deduplication gets retry or proceed only if every such attempt was answered not_applied."""
    assert decision["verdict"] in VERDICTS
    destination = request_doc.get("destination") or {"mode": "event", "dedupe": "none"}
    reached = [a for a in request_doc.get("attempts", []) if a["transport"] in ("sent", "response_received")]
    event_mode = destination["mode"] == "event" and request_doc["proposal"].get("kind") != "snapshot"
    if (
        request_doc["proposal"]["operation"] == "deliver"
        and reached
        and destination["dedupe"] == "none"
        and event_mode
    ):
        if decision["verdict"] in ("retry", "proceed"):
            answers = [q.get("answer") for q in decision["questions"]]
            assert len(answers) == len(reached) and set(answers) == {"not_applied"}


@hsettings(max_examples=400, deadline=None)
@given(_request, st.sampled_from([None, MODEL]))
def test_no_retry_or_proceed_without_dedupe_unless_every_reaching_attempt_was_not_applied(request_doc, model):
    assert violations(request_doc) == []
    assert_no_unsafe_retry(request_doc, decide(request_doc, role="r", model=model))


def test_control_the_property_fails_for_an_engine_that_retries_blindly():
    request_doc, _ = example("deliver__journal_already_exists")
    blind = {
        "verdict": "retry",
        "next": {"action": "retry_delivery", "text": "", "role": "r"},
        "questions": decide(request_doc, role="r", model=None)["questions"],
    }
    with pytest.raises(AssertionError):
        assert_no_unsafe_retry(request_doc, blind)


@hsettings(max_examples=200, deadline=None)
@given(_request)
def test_a_snapshot_never_gets_a_posting_action(request_doc):
    request_doc = copy.deepcopy(request_doc)
    request_doc["proposal"]["kind"] = "snapshot"
    decision = decide(request_doc, role="r", model=MODEL)
    assert decision["next"]["action"] not in ("post_delta", "record_applied")
