"""The one transition helper on PostgreSQL: declared moves apply, others are refused and recorded."""

from datetime import datetime, timezone

import pytest
from django.db import connection

from conduit.statemachine import record_created, transition, transition_many
from replies.contract import REPLY_TABLE
from replies.models import DeliveryState, ReplyAction, ReplyTransition
from tests.rules.conftest import lock_held_elsewhere

pytestmark = pytest.mark.django_db
AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
STATES = DeliveryState.values


def move(action, to, **kw):
    return transition(
        table=REPLY_TABLE,
        model=ReplyAction,
        history=ReplyTransition,
        owner_field="action",
        pk=action.pk,
        to=to,
        actor="tester",
        reason_code="test_move",
        state_field="delivery_state",
        at=AT,
        **kw,
    )


def state_of(action) -> str:
    return ReplyAction.objects.values_list("delivery_state", flat=True).get(pk=action.pk)


def history(action):
    return list(
        ReplyTransition.objects.filter(action=action).values_list(
            "ledger",
            "prior_state",
            "next_state",
            "actor",
            "reason_code",
            "refused",
            "at",
        )
    )


def test_each_pair_applies_exactly_when_declared_and_is_recorded_either_way(make_action):
    """docs/concepts/ledgers.md#transitions: "Every transition records its owning ledger, prior state, next state,
    timestamp, actor, and reason code. Reject and log any transition outside the declared state model."
    """
    for prior in STATES:
        for to in STATES:
            action = make_action(prior)
            outcome = move(action, to)
            declared = REPLY_TABLE.allows(prior, to)
            assert (outcome.applied, outcome.prior, outcome.next) == (declared, prior, to)
            assert (outcome.ledger, outcome.reason_code, outcome.at) == ("reply", "test_move", AT)
            assert state_of(action) == (to if declared else prior)
            assert history(action) == [("reply", prior, to, "tester", "test_move", not declared, AT)]


def test_compare_and_set_applies_from_the_expected_state_and_sets_extra_columns(make_action):
    action = make_action("APPROVED")
    outcome = move(action, "SENDING", expected="APPROVED", extra={"attempt_count": 1})
    assert (outcome.applied, outcome.prior) == (True, "APPROVED")
    action.refresh_from_db()
    assert (action.delivery_state, action.attempt_count) == ("SENDING", 1)
    assert history(action) == [("reply", "APPROVED", "SENDING", "tester", "test_move", False, AT)]


def test_a_lost_compare_and_set_reports_the_real_state_and_is_recorded_as_refused(make_action):
    action = make_action("SENDING")
    outcome = move(action, "SENDING", expected="APPROVED", extra={"attempt_count": 7})
    assert (outcome.applied, outcome.prior, outcome.next) == (False, "SENDING", "SENDING")
    action.refresh_from_db()
    assert (action.delivery_state, action.attempt_count) == ("SENDING", 0)
    assert history(action) == [("reply", "SENDING", "SENDING", "tester", "test_move", True, AT)]


def test_a_lost_race_leaves_no_history_when_asked_not_to_record_it(make_action):
    action = make_action("SENT")
    outcome = move(action, "SENDING", expected="APPROVED", record_lost_race=False)
    assert (outcome.applied, outcome.prior, outcome.next, outcome.at) == (False, "SENT", "SENDING", AT)
    assert (outcome.ledger, outcome.reason_code) == ("reply", "test_move")
    assert history(action) == []


def test_an_extra_condition_that_does_not_hold_stops_the_compare_and_set(make_action):
    action = make_action("APPROVED")
    outcome = move(action, "SENDING", expected="APPROVED", where={"attempt_count": 3})
    assert not outcome.applied
    assert state_of(action) == "APPROVED"
    outcome = move(action, "SENDING", expected="APPROVED", where={"attempt_count": 0})
    assert outcome.applied and state_of(action) == "SENDING"


def test_an_expected_state_the_table_refuses_falls_back_to_the_locked_read(make_action):
    """With an undeclared expected move the helper reads the row itself and refuses by the table."""
    action = make_action("SENT")
    outcome = move(action, "APPROVED", expected="SENT")
    assert (outcome.applied, outcome.prior) == (False, "SENT")
    assert history(action) == [("reply", "SENT", "APPROVED", "tester", "test_move", True, AT)]


def test_a_locked_move_sets_extra_columns_only_when_applied(make_action):
    action = make_action("SENDING")
    assert move(action, "SENT", extra={"provider_reply_id": "rpl_test_1"}).applied
    refused = make_action("REVIEW_PENDING")
    assert not move(refused, "SENT", extra={"provider_reply_id": "rpl_test_2"}).applied
    assert ReplyAction.objects.get(pk=action.pk).provider_reply_id == "rpl_test_1"
    assert ReplyAction.objects.get(pk=refused.pk).provider_reply_id == ""


def test_a_missing_row_is_an_error_not_a_refusal(make_action):
    with pytest.raises(ReplyAction.DoesNotExist, match="ReplyAction 987654 does not exist"):
        transition(
            table=REPLY_TABLE,
            model=ReplyAction,
            history=ReplyTransition,
            owner_field="action",
            pk=987654,
            to="APPROVED",
            actor="tester",
            reason_code="test_move",
            state_field="delivery_state",
        )


def test_without_a_time_the_move_is_stamped_now(make_action):
    action = make_action("REVIEW_PENDING")
    before = datetime.now(timezone.utc)
    outcome = transition(
        table=REPLY_TABLE,
        model=ReplyAction,
        history=ReplyTransition,
        owner_field="action",
        pk=action.pk,
        to="APPROVED",
        actor="tester",
        reason_code="test_move",
        state_field="delivery_state",
    )
    assert before <= outcome.at <= datetime.now(timezone.utc)
    assert ReplyTransition.objects.get(action=action).at == outcome.at


def test_the_move_and_its_history_are_one_unit_with_the_callers_transaction(make_action):
    """A failure after the move inside the caller's transaction rolls back both."""
    from django.db import transaction as db_transaction

    action = make_action("REVIEW_PENDING")
    with pytest.raises(RuntimeError):
        with db_transaction.atomic():
            move(action, "APPROVED")
            raise RuntimeError("caller failed")
    assert state_of(action) == "REVIEW_PENDING"
    assert history(action) == []


def test_creation_records_each_step_of_a_declared_path(make_action):
    a, b = make_action("APPROVED"), make_action("APPROVED")
    record_created(
        table=REPLY_TABLE,
        history=ReplyTransition,
        owner_field="action",
        owner_ids=[a.pk, b.pk],
        path=["REVIEW_PENDING", "APPROVED"],
        actor="planner",
        reason_codes=["planned", "auto"],
        at=AT,
    )
    for action in (a, b):
        assert history(action) == [
            ("reply", None, "REVIEW_PENDING", "planner", "planned", False, AT),
            ("reply", "REVIEW_PENDING", "APPROVED", "planner", "auto", False, AT),
        ]


def test_creation_without_a_time_is_stamped_now(make_action):
    a = make_action("REVIEW_PENDING")
    before = datetime.now(timezone.utc)
    record_created(
        table=REPLY_TABLE,
        history=ReplyTransition,
        owner_field="action",
        owner_ids=[a.pk],
        path=["REVIEW_PENDING"],
        actor="planner",
        reason_codes=["planned"],
    )
    assert before <= ReplyTransition.objects.get(action=a).at <= datetime.now(timezone.utc)


@pytest.mark.parametrize(
    "path, reasons",
    [
        (["APPROVED"], ["x"]),  # creation must start at REVIEW_PENDING
        (["REVIEW_PENDING", "SENT"], ["x", "y"]),  # an undeclared later step
        (["REVIEW_PENDING", "APPROVED"], ["x"]),  # one reason code per step
        (["REVIEW_PENDING"], ["x", "y"]),
    ],
)
def test_creation_along_an_undeclared_path_is_refused_before_writing(make_action, path, reasons):
    a = make_action("REVIEW_PENDING")
    with pytest.raises(ValueError, match="reply: undeclared creation path"):
        record_created(
            table=REPLY_TABLE,
            history=ReplyTransition,
            owner_field="action",
            owner_ids=[a.pk],
            path=path,
            actor="planner",
            reason_codes=reasons,
            at=AT,
        )
    assert history(a) == []


def test_history_rows_read_as_moves(make_action):
    action = make_action("REVIEW_PENDING")
    move(action, "APPROVED")
    move(action, "SENT")
    applied, refused = ReplyTransition.objects.filter(action=action).order_by("id")
    assert str(applied) == "REVIEW_PENDING -> APPROVED by tester (test_move)"
    assert str(refused) == "REFUSED APPROVED -> SENT by tester (test_move)"
    record_created(
        table=REPLY_TABLE,
        history=ReplyTransition,
        owner_field="action",
        owner_ids=[action.pk],
        path=["REVIEW_PENDING"],
        actor="planner",
        reason_codes=["planned"],
        at=AT,
    )
    assert str(ReplyTransition.objects.filter(action=action).order_by("id").last()) == (
        "(created) -> REVIEW_PENDING by planner (planned)"
    )


def test_a_condition_the_thin_update_cannot_express_goes_through_the_orm(make_action):
    """conduit.sql.update_rows refuses `__in`; the helper must then use the ORM, same result."""
    bystander = make_action("APPROVED")
    action = make_action("APPROVED")
    assert not move(action, "SENDING", expected="APPROVED", where={"attempt_count__in": [4, 5]}).applied
    outcome = move(action, "SENDING", expected="APPROVED", where={"attempt_count__in": [0, 1]})
    assert outcome.applied and state_of(action) == "SENDING"
    # Only the named row moves, though the bystander meets the same condition.
    assert state_of(bystander) == "APPROVED"


def test_a_three_step_creation_path_records_every_step(make_action):
    a = make_action("SENDING")
    record_created(
        table=REPLY_TABLE,
        history=ReplyTransition,
        owner_field="action",
        owner_ids=[a.pk],
        path=["REVIEW_PENDING", "APPROVED", "SENDING"],
        actor="planner",
        reason_codes=["planned", "auto", "claimed"],
        at=AT,
    )
    assert [h[1:3] for h in history(a)] == [
        (None, "REVIEW_PENDING"),
        ("REVIEW_PENDING", "APPROVED"),
        ("APPROVED", "SENDING"),
    ]


def test_a_refused_creation_names_the_undeclared_step(make_action):
    a = make_action("REVIEW_PENDING")
    with pytest.raises(ValueError) as refused:
        record_created(
            table=REPLY_TABLE,
            history=ReplyTransition,
            owner_field="action",
            owner_ids=[a.pk],
            path=["REVIEW_PENDING", "SENT"],
            actor="planner",
            reason_codes=["x", "y"],
            at=AT,
        )
    assert str(refused.value) == "reply: undeclared creation path ['REVIEW_PENDING -> SENT']"


def test_a_move_inside_the_callers_transaction_adds_no_savepoint(make_action):
    """statemachine.transition: "No savepoint: inside an ingest or admin transaction the move and
    its history commit or roll back with the caller's work" (one round trip fewer per move)."""
    from django.db import transaction as db_transaction
    from django.test.utils import CaptureQueriesContext

    action = make_action("REVIEW_PENDING")
    with db_transaction.atomic(), CaptureQueriesContext(connection) as queries:
        assert move(action, "APPROVED").applied
        assert move(action, "SENDING", expected="APPROVED").applied
    assert not [q["sql"] for q in queries if "SAVEPOINT" in q["sql"].upper()]


@pytest.mark.django_db(transaction=True)
def test_a_move_in_flight_does_not_block_rows_that_reference_the_ledger_row(make_action):
    """The helper locks with FOR NO KEY UPDATE: while one transaction holds a ledger row, another
    may still insert history or attempt rows that reference it (their foreign key check takes
    FOR KEY SHARE, which FOR UPDATE would block)."""

    action = make_action("SENT")

    def hold_by_a_refused_move():
        # Refused (SENT -> APPROVED is undeclared): only the locking read holds the row.
        assert not move(action, "APPROVED").applied

    with lock_held_elsewhere(hold_by_a_refused_move):
        ReplyTransition.objects.create(
            action_id=action.pk,
            ledger="reply",
            prior_state="SENT",
            next_state="SENT",
            at=AT,
            actor="other",
            reason_code="concurrent_note",
        )


def move_many(actions, to, **kw):
    return transition_many(
        table=REPLY_TABLE,
        model=ReplyAction,
        history=ReplyTransition,
        owner_field="action",
        pks=[a.pk for a in actions],
        to=to,
        actor="tester",
        reason_code="test_move",
        state_field="delivery_state",
        at=AT,
        **kw,
    )


def test_many_rows_move_from_the_prior_each_holds_and_each_is_recorded(make_action):
    """statemachine.transition_many: each row moves to `to` from the prior it holds; a row already
    in `to` is not a move (no history); a row whose prior the table does not declare stays as it
    is and its refusal is recorded; one history row per row either way, in primary-key order.
    It returns how many moved, and `extra` goes to the rows that moved only."""
    sent = make_action("SENT", last_error_code="kept")
    unknown = make_action("SEND_STATUS_UNKNOWN", last_error_code="before")
    pending = make_action("REVIEW_PENDING", last_error_code="before")
    sending = make_action("SENDING", last_error_code="before")
    untouched = make_action("SENDING", last_error_code="before")
    # An update writes the row's new version after the others: read without an order, it would
    # come back last, and its history row with it.
    ReplyAction.objects.filter(pk=unknown.pk).update(last_error_code="before")
    moved = move_many([sending, pending, sent, unknown], "SENT", extra={"last_error_code": ""})
    assert moved == 2
    rows = dict(ReplyAction.objects.values_list("pk", "delivery_state"))
    assert [rows[a.pk] for a in (sent, unknown, pending, sending, untouched)] == [
        "SENT",
        "SENT",
        "REVIEW_PENDING",
        "SENT",
        "SENDING",
    ]
    errors = dict(ReplyAction.objects.values_list("pk", "last_error_code"))
    assert [errors[a.pk] for a in (sent, unknown, pending, sending, untouched)] == [
        "kept",
        "",
        "before",
        "",
        "before",
    ]
    assert list(
        ReplyTransition.objects.order_by("id").values_list(
            "action_id", "ledger", "prior_state", "next_state", "actor", "reason_code", "refused", "at"
        )
    ) == [
        (unknown.pk, "reply", "SEND_STATUS_UNKNOWN", "SENT", "tester", "test_move", False, AT),
        (pending.pk, "reply", "REVIEW_PENDING", "SENT", "tester", "test_move", True, AT),
        (sending.pk, "reply", "SENDING", "SENT", "tester", "test_move", False, AT),
    ]


def test_many_rows_without_extra_move_alone_and_none_is_no_move(make_action):
    """Without `extra` only the state moves; no rows, no move and no history."""
    action = make_action("SENDING", last_error_code="before")
    assert move_many([], "SENT") == 0
    assert ReplyTransition.objects.count() == 0
    assert move_many([action], "SENT") == 1
    assert ReplyAction.objects.values_list("delivery_state", "last_error_code").get(pk=action.pk) == (
        "SENT",
        "before",
    )


@pytest.mark.django_db(transaction=True)
def test_many_rows_in_flight_do_not_block_rows_that_reference_them(make_action):
    """transition_many locks with FOR NO KEY UPDATE, as `transition` does: while it holds the rows,
    another transaction may still insert rows that reference them."""
    action = make_action("SENT")

    def hold_by_a_refused_move():
        assert move_many([action], "APPROVED") == 0  # refused: only the locking read holds the row

    with lock_held_elsewhere(hold_by_a_refused_move):
        ReplyTransition.objects.create(
            action_id=action.pk,
            ledger="reply",
            prior_state="SENT",
            next_state="SENT",
            at=AT,
            actor="other",
            reason_code="concurrent_note",
        )
