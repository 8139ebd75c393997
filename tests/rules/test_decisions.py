"""The replay-decision engine and the http-semantics model, exactly as docs/concepts/replay-decisions.md
states them."""

import json

import pytest

from conduit.providers.registry import evidence_answers
from reconcile.decisions import evidence
from reconcile.decisions.engine import decide
from reconcile.decisions.evidence import QUESTION, Answer, HttpSemanticsModel, load
from tests.conftest import FIXTURES
from tests.reconcile.test_decision_engine import req
from tests.reconcile.test_decision_evidence import reply

ROLE = "Inventory Controller"
MODEL = HttpSemanticsModel()

DEST_NONE = {"name": "NetSuite", "mode": "event", "dedupe": "none"}
DEST_VERIFIED = {"name": "NetSuite", "mode": "event", "dedupe": "verified"}
DEST_SNAPSHOT = {"name": "NetSuite", "mode": "snapshot", "dedupe": "none"}

NOT_SENT = {"transport": "not_sent", "evidence": "connection refused"}
TIMEOUT = {
    "transport": "sent",
    "at": "2026-10-02T16:01:09Z",
    "evidence": "httpx.ReadTimeout: The read operation timed out",
}
DUP_RCRD = {
    "transport": "response_received",
    "http_status": 400,
    "at": "2026-10-02T16:03:40Z",
    "evidence": json.dumps(
        {
            "o:errorDetails": [
                {
                    "detail": "A record with external ID adj-2026-10-02-0091 already exists (Journal Entry JE-118204).",
                    "o:errorCode": "DUP_RCRD",
                }
            ]
        }
    ),
}
CREATED = {"transport": "response_received", "http_status": 201, "evidence": "created"}
REJECTED = {"transport": "response_received", "http_status": 422, "evidence": "invalid field 'amount'"}
UNAVAILABLE = {"transport": "response_received", "http_status": 503, "evidence": "service unavailable"}

KEY = "adj-2026-10-02-0091"
RETRY = "Retry the transport under the same key."


def request(operation="deliver", **fields):
    """A schema-valid request (docs/concepts/replay-decisions.md#request; checked, so every case is one the API would decide)."""
    return req(operation, **{"key": KEY, "digest": "9be1d2", **fields})


def event(key=KEY, digest="9be1d2", kind="event", delta="5"):
    return {"key": key, "digest": digest, "kind": kind, "delta": delta}


# ---------------------------------------------------------------- the engine: verdict and next action


def test_worked_example_finance_replies_that_the_journal_already_exists():
    """The first worked example of docs/concepts/replay-decisions.md#examples, "Response from the rules with no model loaded, so every
    question abstains", printed in full."""
    doc = request(destination=DEST_NONE, attempts=[TIMEOUT, DUP_RCRD])
    expected = json.loads(
        (FIXTURES / "decisions" / "deliver__journal_already_exists.response.json").read_text()
    )
    assert (
        decide(doc, role=ROLE, model=None)
        == {
            "verdict": "reconcile",
            "next": {
                "action": "query_destination",
                "text": "It is not established whether NetSuite applied event adj-2026-10-02-0091, and it does "
                "not deduplicate. Query it before any retry.",
                "role": "Inventory Controller",
            },
            "questions": [
                {
                    "ask": "attempts/0",
                    "question": "destination_outcome@1",
                    "status": "model_unavailable",
                    "evidence": ["/attempts/0/evidence"],
                },
                {
                    "ask": "attempts/1",
                    "question": "destination_outcome@1",
                    "status": "model_unavailable",
                    "evidence": ["/attempts/1/evidence"],
                },
            ],
        }
        == expected
    )


def test_worked_example_the_same_event_key_arrives_with_different_content():
    """The second worked example of docs/concepts/replay-decisions.md#examples: replay.key, "conflicting digest is rejected"."""
    doc = request(
        "apply",
        key="rcp-55120",
        digest="a71e",
        kind="event",
        events=[
            {"key": "open", "digest": "o1", "kind": "opening", "delta": "100"},
            {"key": "rcp-55120", "digest": "f02c", "kind": "event", "delta": "20"},
        ],
    )
    doc["proposal"]["delta"] = "25"
    assert decide(doc, role=ROLE, model=None) == {
        "verdict": "reject",
        "next": {
            "action": "resolve_conflict",
            "text": "Event key rcp-55120 was applied with different content. A changed digest under the same "
            "key is a conflict.",
            "role": "Inventory Controller",
        },
        "questions": [],
    }


# Every verdict and action with the text the role reads, in the form of the seed's printed
# examples ("<what is known>. <what to do>."): the destination's name, the key, whether it is an
# event or a snapshot, and the instruction, all of which the role acts on.
NEXT = [
    (
        "replay.key: same key, same digest",
        request("apply", events=[event(key="other", digest="x"), event()]),
        None,
        "existing",
        "return_existing",
        f"Event key {KEY} was already applied with the same content. Return the existing effect and change nothing.",
    ),
    (
        "replay.key: one of two matches differs",
        request("apply", events=[event(), event(digest="zz")]),
        None,
        "reject",
        "resolve_conflict",
        f"Event key {KEY} was applied with different content. A changed digest under the same key is a conflict.",
    ),
    (
        "replay.key decides before delivery",
        request(events=[event()], destination=DEST_NONE, attempts=[TIMEOUT]),
        None,
        "existing",
        "return_existing",
        f"Event key {KEY} was already applied with the same content. Return the existing effect and change nothing.",
    ),
    (
        "replay.snapshot: a snapshot never posts",
        request("apply", kind="snapshot"),
        None,
        "proceed",
        "replace_position",
        (
            f"Snapshot {KEY} replaces the non-posting position at a new revision; it posts nothing, so it cannot count "
            "as a fresh increase."
        ),
    ),
    (
        "apply a new event",
        request("apply", kind="event", events=[event(key="other")]),
        None,
        "proceed",
        "post_delta",
        f"Apply event {KEY} once: post its delta.",
    ),
    (
        "apply without a kind is an event",
        request("apply"),
        None,
        "proceed",
        "post_delta",
        f"Apply event {KEY} once: post its delta.",
    ),
    (
        "deliver an event for the first time",
        request(destination=DEST_NONE),
        None,
        "proceed",
        "deliver",
        f"Deliver event {KEY} to NetSuite now.",
    ),
    (
        "deliver a snapshot for the first time",
        request(kind="snapshot", destination=DEST_NONE),
        None,
        "proceed",
        "deliver",
        f"Deliver snapshot {KEY} to NetSuite now.",
    ),
    (
        "deliver: nothing left the process",
        request(destination=DEST_NONE, attempts=[NOT_SENT, NOT_SENT]),
        None,
        "retry",
        "retry_delivery",
        f"No attempt of event {KEY} reached NetSuite. {RETRY}",
    ),
    (
        "deliver a snapshot: nothing left the process",
        request(kind="snapshot", destination=DEST_NONE, attempts=[NOT_SENT]),
        None,
        "retry",
        "retry_delivery",
        f"No attempt of snapshot {KEY} reached NetSuite. {RETRY}",
    ),
    (
        "replay.delivery: snapshot-mode destination",
        request(destination=DEST_SNAPSHOT, attempts=[TIMEOUT]),
        None,
        "retry",
        "retry_delivery",
        (
            f"NetSuite replaces a non-posting position at a monotonic revision, so a transport retry of {KEY} cannot "
            f"double-count. {RETRY}"
        ),
    ),
    (
        "replay.delivery: a snapshot to an event-mode destination",
        request(kind="snapshot", destination=DEST_NONE, attempts=[TIMEOUT]),
        None,
        "retry",
        "retry_delivery",
        (
            f"NetSuite replaces a non-posting position at a monotonic revision, so a transport retry of {KEY} cannot "
            f"double-count. {RETRY}"
        ),
    ),
    (
        "replay.delivery: verified deduplication",
        request(destination=DEST_VERIFIED, attempts=[TIMEOUT]),
        None,
        "retry",
        "retry_delivery",
        f"NetSuite verifiably deduplicates by key, so a transport retry of {KEY} cannot apply it twice. {RETRY}",
    ),
    (
        "every reaching attempt answered not_applied",
        request(destination=DEST_NONE, attempts=[NOT_SENT, REJECTED]),
        MODEL,
        "retry",
        "retry_delivery",
        f"Every attempt shows NetSuite did not apply event {KEY}. {RETRY}",
    ),
    (
        "one not_applied, one not established",
        request(destination=DEST_NONE, attempts=[REJECTED, UNAVAILABLE]),
        MODEL,
        "reconcile",
        "query_destination",
        (
            f"It is not established whether NetSuite applied event {KEY}, and it does not deduplicate. "
            "Query it before any retry."
        ),
    ),
    (
        "an applied event",
        request(destination=DEST_NONE, attempts=[TIMEOUT, DUP_RCRD]),
        MODEL,
        "applied",
        "record_applied",
        f"NetSuite applied event {KEY}. Record it; never resend it.",
    ),
    (
        "applied beside not_applied and verified dedupe",
        request(destination=DEST_VERIFIED, attempts=[REJECTED, CREATED]),
        MODEL,
        "applied",
        "record_applied",
        f"NetSuite applied event {KEY}. Record it; never resend it.",
    ),
    (
        "an applied snapshot",
        request(kind="snapshot", destination=DEST_NONE, attempts=[CREATED]),
        MODEL,
        "applied",
        "replace_position",
        f"NetSuite applied snapshot {KEY}. Record the replaced position; never resend it.",
    ),
    (
        "applied at a snapshot-mode destination",
        request(destination=DEST_SNAPSHOT, attempts=[CREATED]),
        MODEL,
        "applied",
        "replace_position",
        f"NetSuite applied snapshot {KEY}. Record the replaced position; never resend it.",
    ),
]


@pytest.mark.parametrize("case, doc, model, verdict, action, text", NEXT, ids=[c[0] for c in NEXT])
def test_verdict_and_next_action_for_the_role(case, doc, model, verdict, action, text):
    """docs/concepts/replay-decisions.md#clauses: "replay.key: Same EventKey and digest returns the existing effect, while conflicting
    digest is rejected. replay.snapshot: ... can never each be treated as a fresh physical increase.
    replay.delivery: WarehouseDeliveries retries only transport; ... receivers without deduplication
    require reconciliation before retry." The next action is for the configured role."""
    decision = decide(doc, role="Warehouse Lead", model=model)
    assert decision["verdict"] == verdict
    assert decision["next"] == {"action": action, "text": text, "role": "Warehouse Lead"}


# Without a destination, the default is {"name": "the destination", "mode": "event", "dedupe": "none"}:
# the text names "the destination", and an event-mode receiver without deduplication is reconciled.
DEFAULT_DESTINATION = [
    ("first delivery", request(), None, "proceed", "deliver", f"Deliver event {KEY} to the destination now."),
    (
        "nothing reached",
        request(attempts=[NOT_SENT]),
        None,
        "retry",
        "retry_delivery",
        f"No attempt of event {KEY} reached the destination. {RETRY}",
    ),
    (
        "may have reached",
        request(attempts=[TIMEOUT]),
        None,
        "reconcile",
        "query_destination",
        (
            f"It is not established whether the destination applied event {KEY}, and it does not deduplicate. "
            "Query it before any retry."
        ),
    ),
    (
        "applied",
        request(attempts=[CREATED]),
        MODEL,
        "applied",
        "record_applied",
        f"the destination applied event {KEY}. Record it; never resend it.",
    ),
    (
        "every attempt not applied",
        request(attempts=[REJECTED]),
        MODEL,
        "retry",
        "retry_delivery",
        f"Every attempt shows the destination did not apply event {KEY}. {RETRY}",
    ),
]


@pytest.mark.parametrize(
    "case, doc, model, verdict, action, text", DEFAULT_DESTINATION, ids=[c[0] for c in DEFAULT_DESTINATION]
)
def test_without_a_destination_it_is_an_event_mode_receiver_without_deduplication(
    case, doc, model, verdict, action, text
):
    """replay.delivery: "receivers without deduplication require reconciliation before retry": a
    destination not described is not assumed to deduplicate or to hold snapshots."""
    decision = decide(doc, role=ROLE, model=model)
    assert (decision["verdict"], decision["next"]) == (
        verdict,
        {"action": action, "text": text, "role": ROLE},
    )


# ---------------------------------------------------------------- the engine: questions


def test_each_attempt_that_may_have_reached_is_asked_with_its_status_and_evidence_pointer():
    """docs/concepts/replay-decisions.md#evidence: destination_outcome@1 "is asked for each attempt whose transport is sent or
    response_received"; a model's question is "answered (with answer and the rule that produced
    it)"; evidence lists the pointers read."""
    attempts = [NOT_SENT, TIMEOUT, {"transport": "response_received", "http_status": 201}, DUP_RCRD]
    decision = decide(request(destination=DEST_NONE, attempts=attempts), role=ROLE, model=MODEL)
    assert decision["questions"] == [
        {
            "ask": "attempts/1",
            "question": QUESTION,
            "status": "answered",
            "answer": "not_established",
            "rule": "http-semantics/timeout",
            "evidence": ["/attempts/1/evidence"],
        },
        {
            "ask": "attempts/2",
            "question": QUESTION,
            "status": "answered",
            "answer": "applied",
            "rule": "http-semantics/success",
            "evidence": [],
        },
        {
            "ask": "attempts/3",
            "question": QUESTION,
            "status": "answered",
            "answer": "applied",
            "rule": "http-semantics/duplicate-message",
            "evidence": ["/attempts/3/evidence"],
        },
    ]
    assert decision["verdict"] == "applied"


def test_an_abstaining_model_leaves_the_question_abstained_without_an_answer():
    """docs/concepts/replay-decisions.md#evidence: a model's question is `answered` ... or `abstained`."""
    attempt = {"transport": "response_received", "http_status": 302, "evidence": "moved"}
    decision = decide(request(destination=DEST_NONE, attempts=[attempt]), role=ROLE, model=MODEL)
    assert decision["questions"] == [
        {
            "ask": "attempts/0",
            "question": QUESTION,
            "status": "abstained",
            "evidence": ["/attempts/0/evidence"],
        }
    ]
    assert decision["verdict"] == "reconcile"


def test_with_no_model_every_question_is_model_unavailable():
    """docs/concepts/replay-decisions.md#examples: "Response from the rules with no model loaded, so
    every question abstains."."""
    decision = decide(request(destination=DEST_NONE, attempts=[CREATED, REJECTED]), role=ROLE, model=None)
    assert [q["status"] for q in decision["questions"]] == ["model_unavailable", "model_unavailable"]
    assert all("answer" not in q and "rule" not in q for q in decision["questions"])
    assert decision["verdict"] == "reconcile"


# ---------------------------------------------------------------- the http-semantics model


CONFLICTING = Answer("not_established", "http-semantics/conflicting-signals")

# (case, attempt, expected Answer or None for an abstention). The rules in order, each at the
# edges of its status range, and each contradiction that turns a settling answer into
# conflicting-signals.
RULES = [
    # docs/concepts/replay-decisions.md#evidence, not_established: "such as a timeout, a dropped connection, a queued acknowledgement
    # or an ambiguous error".
    (
        "timeout, even in a 200",
        reply(200, "upstream timed out"),
        Answer("not_established", "http-semantics/timeout"),
    ),
    (
        "dropped, even in a 200",
        reply(200, "connection reset by peer"),
        Answer("not_established", "http-semantics/dropped"),
    ),
    (
        "sent: no reply was received",
        reply(None, "record already exists", transport="sent"),
        Answer("not_established", "http-semantics/no-response"),
    ),
    ("500", reply(500), Answer("not_established", "http-semantics/server-error")),
    (
        "500 saying it already exists",
        reply(500, "Record already exists"),
        Answer("not_established", "http-semantics/server-error"),
    ),
    ("599", reply(599), Answer("not_established", "http-semantics/server-error")),
    ("202", reply(202), Answer("not_established", "http-semantics/accepted-queued")),
    (
        "200 pending",
        reply(200, "pending review"),
        Answer("not_established", "http-semantics/accepted-queued"),
    ),
    # docs/concepts/replay-decisions.md#evidence, applied: "reports that it already holds this event".
    (
        "worked example: NetSuite DUP_RCRD in a 400",
        DUP_RCRD,
        Answer("applied", "http-semantics/duplicate-message"),
    ),
    (
        "duplicate request, no status",
        reply(None, "Duplicate request"),
        Answer("applied", "http-semantics/duplicate-message"),
    ),
    (
        "200 already processed",
        reply(200, "This event has already been processed"),
        Answer("applied", "http-semantics/duplicate-message"),
    ),
    (
        "299 already processed",
        reply(299, "This event has already been processed"),
        Answer("applied", "http-semantics/duplicate-message"),
    ),
    (
        "400 transaction exists",
        reply(400, "Transaction TX-1 already exists"),
        Answer("applied", "http-semantics/duplicate-message"),
    ),
    (
        "409 duplicate request",
        reply(409, "Duplicate request"),
        Answer("applied", "http-semantics/duplicate-message"),
    ),
    (
        "499 duplicate request",
        reply(499, "Duplicate request"),
        Answer("applied", "http-semantics/duplicate-message"),
    ),
    ("300 already exists: not a 2xx or 4xx", reply(300, "record already exists"), None),
    ("399 already exists: not a 2xx or 4xx", reply(399, "record already exists"), None),
    (
        "exists, but nothing recorded",
        reply(
            400,
            "A record with reference K-1 already exists for another customer; "
            "the journal entry was not saved.",
        ),
        CONFLICTING,
    ),
    (
        "exists, but refused for another reason",
        reply(400, "Duplicate request: missing field account"),
        CONFLICTING,
    ),
    # docs/concepts/replay-decisions.md#evidence, applied: "It recorded the event".
    ("200", reply(200), Answer("applied", "http-semantics/success")),
    (
        "201 created",
        reply(201, '{"id": "je_test_1", "status": "created"}'),
        Answer("applied", "http-semantics/success"),
    ),
    ("204", reply(204), Answer("applied", "http-semantics/success")),
    ("203 is not a success the model reads", reply(203), None),
    ("206 is not a success the model reads", reply(206), None),
    ("200 that failed", reply(200, '{"status": "failed"}'), CONFLICTING),
    ("200 with an error", reply(200, '{"error": "E42"}'), CONFLICTING),
    ("200 refused", reply(200, "forbidden"), CONFLICTING),
    ("200 mentioning a duplicate of something else", reply(200, "duplicate memo field ignored"), CONFLICTING),
    (
        "409 without a duplicate message",
        reply(409, "version mismatch"),
        Answer("not_established", "http-semantics/conflict"),
    ),
    # docs/concepts/replay-decisions.md#evidence, not_applied: "It rejected the event or never processed it, and recorded nothing."
    ("400", reply(400, "Bad Request"), Answer("not_applied", "http-semantics/rejected")),
    ("400 without text", reply(400), Answer("not_applied", "http-semantics/rejected")),
    (
        "422 invalid, nothing recorded",
        reply(422, "invalid field 'amount'; nothing was recorded"),
        Answer("not_applied", "http-semantics/rejected"),
    ),
    ("499", reply(499, "client closed request"), Answer("not_applied", "http-semantics/rejected")),
    ("4xx mentioning a duplicate", reply(400, "duplicate"), CONFLICTING),
    (
        "4xx mentioning a duplicate of another object",
        reply(400, "Customer with this email already exists"),
        CONFLICTING,
    ),
    ("4xx claiming a record", reply(422, "Validation warning: entry created with defaults"), CONFLICTING),
    ("4xx claiming a partial record", reply(400, "Partially applied: 3 of 5 lines posted"), CONFLICTING),
    (
        "4xx whose only claim is negated",
        reply(400, "no rows created"),
        Answer("not_applied", "http-semantics/rejected"),
    ),
    (
        "4xx with one negated and one plain claim",
        reply(400, "line 1 was not saved; the other four lines of the batch were saved"),
        CONFLICTING,
    ),
    # Otherwise the model abstains.
    ("1xx", reply(100), None),
    ("3xx", reply(302, "moved"), None),
    ("neither status nor message", reply(None, "ok"), None),
    ("a bare response", reply(), None),
]


@pytest.mark.parametrize("case, attempt, expected", RULES, ids=[c[0] for c in RULES])
def test_http_semantics_rules_in_order(case, attempt, expected):
    """The model's rules, as docs/concepts/replay-decisions.md#http-semantics lists them "in order",
    each answer from the table of docs/concepts/replay-decisions.md#evidence."""
    assert MODEL.answer(QUESTION, attempt) == expected


def test_a_reason_token_of_a_transports_error_table_takes_that_tables_answer():
    """docs/concepts/replay-decisions.md#http-semantics, meta-error-table and whatsapp-error-table: a
    stored reason token of a transport's error table is answered as that table says, before the text
    and status rules, for a reply received (with or without a status, the token padded by whitespace
    or not)."""
    from conduit.providers.meta.errors import EVIDENCE_ANSWERS as META_TABLE
    from conduit.providers.whatsapp.errors import EVIDENCE_ANSWERS as WHATSAPP_TABLE

    tables = evidence_answers()
    assert {answer for answer, _ in tables.values()} == {"applied", "not_applied", "not_established"}
    assert set(tables) == set(META_TABLE) | set(WHATSAPP_TABLE)
    for token, (answer, rule) in tables.items():
        expected = Answer(answer, rule)
        declared = META_TABLE if token in META_TABLE else WHATSAPP_TABLE
        assert answer == declared[token], token
        assert rule == (
            "http-semantics/meta-error-table"
            if token in META_TABLE
            else "http-semantics/whatsapp-error-table"
        ), token
        assert MODEL.answer(QUESTION, reply(400, token)) == expected, token
        assert MODEL.answer(QUESTION, reply(None, f" {token}\n")) == expected, token
    # The table wins over the generic 4xx rule: a 4xx seen after the object was created.
    assert MODEL.answer(QUESTION, reply(400, "graph_refused_after_apply")).answer == "not_established"
    assert MODEL.answer(QUESTION, reply(400, "graph refused after apply")) == Answer(
        "not_applied", "http-semantics/rejected"
    )  # the control: the same words, not the token


def test_two_error_tables_that_answer_one_token_differently_are_refused():
    """A stored token is read without its transport: two tables sharing it must agree. The
    control: the same tables, agreeing, make one table."""
    from dataclasses import make_dataclass

    from conduit.providers.registry import evidence_table

    def transport(rule, answers):
        return make_dataclass("T", [], namespace={"evidence_rule": rule, "evidence_answers": answers})

    agree = [
        transport("r/one", {"throttled": "not_applied"}),
        transport("r/two", {"throttled": "not_applied"}),
    ]
    assert evidence_table(agree) == {"throttled": ("not_applied", "r/one")}
    disagree = [agree[0], transport("r/two", {"throttled": "not_established"})]
    with pytest.raises(ValueError, match="'throttled' is not_applied by r/one and not_established by r/two"):
        evidence_table(disagree)


def test_a_reason_token_recorded_with_no_reply_received_is_not_the_receivers():
    """With transport `sent` no reply was received, so a reason token in the evidence is the
    transport's own and says nothing the receiver said: the timeout or no-response rule answers,
    never the table (whose `already_replied` would be a wrong `applied`)."""
    for token in evidence_answers():
        rule = "http-semantics/timeout" if "timeout" in token else "http-semantics/no-response"
        assert MODEL.answer(QUESTION, reply(None, token, transport="sent")) == Answer(
            "not_established", rule
        ), token
        assert MODEL.answer(QUESTION, reply(400, token, transport="sent")) == Answer(
            "not_established", rule
        ), token


def test_the_model_answers_only_destination_outcome_at_version_1():
    """docs/concepts/replay-decisions.md#evidence defines one question, destination_outcome@1; any other is not the model's to answer."""
    assert MODEL.answer("destination_outcome@2", reply(201)) is None
    assert MODEL.answer(QUESTION, reply(201)) == Answer("applied", "http-semantics/success")


def test_a_negation_counts_only_within_the_thirty_characters_before_a_claim():
    """A recording word in a refusal is a claim unless a negation stands in the few words before it
    (the window is 30 characters). A negation further back does not negate it, so the reply is
    conflicting (not_established), never not_applied: a wrong not_applied means a retry that may
    apply the event twice ("receivers without deduplication require reconciliation before retry")."""
    for gap in range(27):
        inside = "no" + " " * gap + " recorded"  # the claim starts within 30 characters of "no"
        assert MODEL.answer(QUESTION, reply(400, inside)) == Answer(
            "not_applied", "http-semantics/rejected"
        ), gap
    assert MODEL.answer(QUESTION, reply(400, "not" + " " * 27 + "recorded")) == Answer(
        "not_applied", "http-semantics/rejected"
    )  # "not" starts 30 characters before "recorded"
    assert MODEL.answer(QUESTION, reply(400, "not" + " " * 28 + "recorded")) == CONFLICTING  # 31: outside
    assert MODEL.answer(QUESTION, reply(400, "x" * 200 + " not recorded")) == Answer(
        "not_applied", "http-semantics/rejected"
    )  # the window follows the claim, wherever it is


# ---------------------------------------------------------------- loading a model


def test_models_load_by_name_and_an_unknown_name_lists_the_known_ones():
    """Settings choose the model by name; none means no model (every question abstains)."""
    assert load(None) is None and load("") is None
    model = load("http-semantics")
    assert isinstance(model, HttpSemanticsModel) and model.name == "http-semantics"
    with pytest.raises(ValueError) as raised:
        load("oracle")
    assert str(raised.value) == "unknown evidence model 'oracle'; known: http-semantics"


def test_an_unknown_name_lists_every_known_model_sorted_and_comma_separated(monkeypatch):
    """With a second model registered, the error names both, so settings can be corrected from it."""
    monkeypatch.setitem(evidence.MODELS, "always-unsure", HttpSemanticsModel)
    with pytest.raises(ValueError) as raised:
        load("oracle")
    assert str(raised.value) == "unknown evidence model 'oracle'; known: always-unsure, http-semantics"
