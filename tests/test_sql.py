"""The thin SQL helpers behave as the ORM does, and step aside for what they do not take; set-based
writes (docs/internals.md#set-based-writes): upsert_counting, and several rows as one JSON parameter."""

import json
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from django.db import connection, models
from django.db.models import F
from django.test import Client
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from psycopg.types.json import Jsonb

from conduit import sql
from conduit.sql import Unsupported, insert_rows, update_rows, upsert_counting
from ingress.models import Delivery, EventState, EventTransition, InboundEvent
from replies.models import ApprovalState, DeliveryState, ReplyAction
from tests.conftest import account_campaign, fixture_body, sign
from tests.reconcile.conftest import body as batch_body
from tests.reconcile.conftest import item


@pytest.fixture
def delivery(sandbox_source, deliver):
    deliver(fixture_body("comment__northstar"), delivery_id="msg_test_sql")
    return Delivery.objects.get()


def test_update_rows_compares_sets_and_increments_like_the_orm(delivery):
    moved = update_rows(
        Delivery,
        where={"pk": delivery.pk, "seen_count": 1, "body_hash__gte": ""},
        assign={"seen_count": F("seen_count") + 2, "delivery_id": "msg_test_renamed"},
    )
    assert moved == 1
    assert update_rows(Delivery, where={"pk": delivery.pk, "seen_count": 1}, assign={"seen_count": 9}) == 0
    assert (
        update_rows(Delivery, where={"delivery_id": "nope"}, assign={"seen_count": F("seen_count") + 1}) == 0
    )
    delivery.refresh_from_db()
    assert (delivery.seen_count, delivery.delivery_id) == (3, "msg_test_renamed")


@pytest.mark.parametrize(
    "where, assign",
    [
        ({"seen_count__in": [3]}, {"seen_count": 1}),
        ({"pk": 1}, {"seen_count": F("id") + 1}),
        ({"last_received_at__lt": None}, {"seen_count": 1}),
        ({}, {"seen_count": 1}),  # never an UPDATE of every row
    ],
)
def test_update_rows_refuses_what_it_does_not_take(delivery, where, assign):
    with pytest.raises(Unsupported):
        update_rows(Delivery, where=where, assign=assign)
    delivery.refresh_from_db()
    assert delivery.seen_count == 1


AT = datetime(2026, 1, 15, 14, 30, 0, 123456, tzinfo=timezone.utc)


def _sighting(source, delivery_id: str, body_hash: str, at: datetime):
    return upsert_counting(
        Delivery,
        [
            "source",
            "delivery_id",
            "body_hash",
            "event_keys",
            "first_received_at",
            "last_received_at",
            "seen_count",
        ],
        [(source.pk, delivery_id, body_hash, ["k1"], at, at, 1)],
        conflict=["source", "delivery_id"],
        same=["body_hash"],
        count="seen_count",
        touch=["last_received_at"],
    )


def test_upsert_counting_inserts_counts_a_same_row_and_leaves_a_different_one_alone(sandbox_source):
    first = _sighting(sandbox_source, "msg_test_u1", "h1", AT)
    ((pk, count),) = first.values()
    assert list(first) == [(sandbox_source.pk, "msg_test_u1")] and count == 1
    again = _sighting(sandbox_source, "msg_test_u1", "h1", AT + timedelta(seconds=5))
    assert again == {(sandbox_source.pk, "msg_test_u1"): (pk, 2)}
    # Held under the key with a different body: absent from the result, the row untouched.
    assert _sighting(sandbox_source, "msg_test_u1", "h2", AT + timedelta(seconds=9)) == {}
    row = Delivery.objects.get(pk=pk)
    assert (row.seen_count, row.body_hash, row.last_received_at, row.first_received_at) == (
        2,
        "h1",
        AT + timedelta(seconds=5),
        AT,
    )


def test_several_rows_in_one_json_parameter_store_what_the_orm_stores_in_order(sandbox_source):
    """The JSON row source: times (microseconds, offsets), JSON values and None (SQL NULL, as the
    ORM stores it), choices, booleans and foreign keys come back as the ORM wrote them by hand."""
    columns = [
        "reply_key",
        "event",
        "purpose",
        "campaign",
        "campaign_version",
        "delivery_state",
        "approval_state",
        "canary",
        "created_at",
        "reply_deadline",
    ]
    event = _an_event(sandbox_source)
    campaign = account_campaign(sandbox_source)
    aware = datetime(2026, 3, 1, 9, 0, 0, 7, tzinfo=timezone(timedelta(hours=5, minutes=30)))
    rows = [
        (
            f"key_test_{n}",
            event.event_key,
            purpose,
            campaign.pk,
            1,
            DeliveryState.REVIEW_PENDING,
            ApprovalState.REVIEW_PENDING,
            n % 2 == 0,
            aware,
            None if n % 2 else aware + timedelta(days=7),
        )
        for n, purpose in enumerate(["public_ack", "private_delivery", "public_ack"])
    ]
    with CaptureQueriesContext(connection) as queries:
        ids = insert_rows(ReplyAction, columns, rows)
    assert len(queries) == 1 and "jsonb_array_elements" in queries[0]["sql"]
    stored = {a.pk: a for a in ReplyAction.objects.filter(pk__in=ids)}
    assert [stored[pk].reply_key for pk in ids] == ["key_test_0", "key_test_1", "key_test_2"]
    for pk, row in zip(ids, rows):
        action = stored[pk]
        assert (
            action.reply_key,
            action.event_id,
            action.purpose,
            action.campaign_id,
            action.campaign_version,
            action.delivery_state,
            action.approval_state,
            action.canary,
            action.created_at,
            action.reply_deadline,
        ) == row


def _an_event(source) -> InboundEvent:
    body = fixture_body("comment__northstar")
    response = Client().post(
        "/webhooks/sandbox/", data=body, content_type="application/json", headers=sign(body)
    )
    assert response.status_code == 200
    return InboundEvent.objects.get()


def test_a_large_body_is_written_set_based_with_its_duplicates_counted(sandbox_source, deliver):
    """300 events (a third of them sent before) in one statement whatever the size (PostgreSQL):
    each new event gets its row, its two-step history and its planned actions; each one seen
    before is counted, not written again."""
    deliver(batch_body(*(item(n) for n in range(100))))
    body = batch_body(*(item(n) for n in range(100, 300)), *(item(n) for n in range(100)))
    with CaptureQueriesContext(connection) as queries:
        response = deliver(body)
    assert response.status_code == 200, response.content
    results = response.json()["results"]
    assert [r["result"] for r in results] == ["accepted"] * 200 + ["duplicate"] * 100
    writes = [q["sql"] for q in queries if "INSERT" in q["sql"]]
    # Delivery, events, their history, actions, their history: one statement.
    assert len(writes) == 1 and writes[0].lstrip().startswith("WITH"), writes
    assert InboundEvent.objects.count() == 300
    assert set(
        InboundEvent.objects.values_list("seen_count", flat=True).filter(
            source_event_id__in=[item(n)["id"] for n in range(100)]
        )
    ) == {2}
    assert EventTransition.objects.filter(next_state=EventState.RECORD_READY).count() == 300
    assert ReplyAction.objects.count() == 600


def test_positive_control_the_json_row_source_carries_the_values_it_is_given(sandbox_source, monkeypatch):
    """Break the row source on purpose (it drops the fraction of every time): the ORM comparison
    above must fail."""
    real = sql._json_rows

    def truncating(fields, rows):
        return real(
            fields,
            [[v.replace(microsecond=0) if isinstance(v, datetime) else v for v in row] for row in rows],
        )

    monkeypatch.setattr(sql, "_json_rows", truncating)
    with pytest.raises(AssertionError, match=r"diff: datetime\.datetime"):  # a stored time differs
        test_several_rows_in_one_json_parameter_store_what_the_orm_stores_in_order(sandbox_source)


_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.text(max_size=12),
    st.sampled_from([EventState.RECEIVED, DeliveryState.SENT, ApprovalState.APPROVED]),
    st.datetimes(timezones=st.sampled_from([timezone.utc, timezone(timedelta(hours=-5))])),
    st.datetimes(),  # naive
    st.floats(allow_nan=True),
    st.lists(st.text(max_size=4), max_size=3),
)


def _statement_columns() -> list[tuple]:
    """Every JSON parameter's fields of ingest's one statement (all the column kinds it writes)."""
    from ingress.hooks import reply_planner
    from ingress.services import EVENT_COLUMNS
    from ingress.writes import _statement

    return [parameter.fields for parameter in _statement(tuple(EVENT_COLUMNS), reply_planner())[1]]


@pytest.mark.django_db
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_one_pass_encoding_is_the_orm_preparation_then_json(data):
    """JsonRows (ingest's one statement) prepares and encodes in one pass; for any values, of any
    column it writes, its JSON is byte for byte what preparing as the ORM does and then encoding
    gives (json_encoded), or both find a value with no exact JSON form. The control below breaks
    the pass and sees it differ."""
    fields = data.draw(st.sampled_from(_statement_columns()))
    rows = data.draw(st.lists(st.lists(_VALUES, min_size=len(fields), max_size=len(fields)), max_size=3))
    try:
        expected = sql.json_encoded(fields, rows)
    except Exception as error:
        # A value the ORM's preparation refuses: the one pass raises it too, or stops first at a
        # value with no JSON form (None), and the statement-by-statement path then prepares every
        # value through the ORM and raises it there.
        try:
            assert sql.JsonRows(fields).encoded(rows) is None
        except type(error):
            pass
        return
    assert sql.JsonRows(fields).encoded(rows) == expected


@pytest.mark.django_db
@pytest.mark.parametrize("rule", ["_PLAIN_FIELDS", "_TEXT_FIELDS"])
def test_positive_control_a_one_pass_that_skips_a_time_s_preparation_is_caught(rule):
    """Break the one pass (a time column added to the columns whose text it takes as it is, where
    the ORM parses the text into a time written in ISO form): its JSON differs from the ORM's
    preparation, which is what the property above compares."""
    fields = _statement_columns()[1]  # the events
    row = _row_with(fields, models.DateTimeField, "2026-01-15 14:30:00+00:00")
    expected = sql.json_encoded(fields, [row])  # the ORM's rules, decided once per field
    assert "2026-01-15T14:30:00+00:00" in expected
    assert sql.JsonRows(fields).encoded([row]) == expected
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(sql, rule, (*getattr(sql, rule), models.DateTimeField))
        assert sql.JsonRows(fields).encoded([row]) != expected


# -- orjson writes the JSON parameters: the values the standard library wrote ----------------


def _former_encoding(fields, rows) -> str | None:
    """json_encoded as the standard library wrote it before orjson (the reference): the ORM's
    prepared values, times as isoformat() text, a JSON column's value as it is, one json.dumps
    refusing NaN and the infinities; None where a value had no exact JSON form."""
    encoded = []
    for row in sql._prepped(tuple(fields), rows):
        out = []
        for field, value in zip(fields, row):
            if type(value) in (str, int, bool, type(None)) or isinstance(value, str):
                out.append(value)
            elif type(value) is datetime:
                out.append(value.isoformat())
            elif isinstance(value, Jsonb) and isinstance(field, models.JSONField) and field.encoder is None:
                out.append(value.obj)
            else:
                return None
        encoded.append(out)
    try:
        return json.dumps(encoded, allow_nan=False)
    except (TypeError, ValueError):
        return None


def _past_orjson(value) -> bool:
    """A prepared column value orjson has no form for: an integer past 64 bits, text with a lone surrogate."""
    if isinstance(value, int) and not isinstance(value, bool):
        return not -(2**63) <= value < 2**64
    return isinstance(value, str) and any(0xD800 <= ord(c) <= 0xDFFF for c in value)


def _exactly(text: str) -> str:
    """A JSON text's value written type for type (`true` is not `1`, `1.0` is not `1`, `-0.0` is
    not `0.0`, as in jsonb), whatever its whitespace and number spelling."""
    return json.dumps(json.loads(text))


def _same_values_as_the_former_encoding(fields, rows) -> bool:
    """Whether the rows were compared (False: the ORM's preparation refuses a value, which the
    property above covers); fails where the two encodings differ."""
    try:
        former = _former_encoding(fields, rows)
    except Exception:
        return False
    for now in (sql.json_encoded(fields, rows), sql.JsonRows(fields).encoded(rows)):
        if former is None:
            assert now is None, f"a value the standard library refused was written: {now}"
        elif now is None:
            prepared = sql._prepped(tuple(fields), rows)
            assert any(_past_orjson(v) for row in prepared for v in row), "rows refused with no reason"
        else:
            assert _exactly(now) == _exactly(former), "a value was written other than it was"
    return True


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3) | st.integers(), inner, max_size=3)
    ),
    max_leaves=8,
)
_WIDE_VALUES = (
    _VALUES
    | st.integers()  # past 64 bits too
    | st.text(st.characters(min_codepoint=0xD7F0, max_codepoint=0xE010), max_size=3)  # lone surrogates
    | st.datetimes(
        timezones=st.sampled_from(
            [timezone(timedelta(hours=5, minutes=30, seconds=15)), ZoneInfo("Europe/Paris")]
        )
    )
    | _JSON
)
_AWKWARD_ROWS = [  # (parameter, a column's kind, its value): what the property must meet every run
    (0, models.JSONField, [float("nan")]),
    (0, models.JSONField, {"a": [1.5e-7, 2**70, {"b": float("-inf")}]}),
    (0, models.JSONField, {1: "x", "y": -0.0, "z": [True, 1.0, False]}),
    (0, models.JSONField, ["\ud800", "\ud83d\ude00"]),
    (0, models.DateTimeField, datetime(2026, 1, 15, 14, 30, tzinfo=timezone(timedelta(seconds=-19800 - 15)))),
    (1, models.DateTimeField, datetime(1, 1, 1, tzinfo=timezone.utc)),
    (1, models.CharField, "\ud800"),
    (1, models.IntegerField, 2**64),
]


_PLAIN_BY_KIND = {
    models.ForeignKey: 1,
    models.IntegerField: 1,
    models.BooleanField: True,
    models.DateTimeField: datetime(2026, 1, 15, 14, 30, tzinfo=timezone.utc),
    models.JSONField: [],
}


def _plain_row(fields) -> list:
    """A row the ORM prepares: a plain value of each column's kind."""
    return [next((v for k, v in _PLAIN_BY_KIND.items() if isinstance(f, k)), "x") for f in fields]


def _row_with(fields, kind, value) -> list:
    """A plain row with `value` in each column of `kind`."""
    return [value if isinstance(f, kind) else plain for f, plain in zip(fields, _plain_row(fields))]


@pytest.mark.django_db
@pytest.mark.parametrize("parameter, kind, value", _AWKWARD_ROWS)
def test_orjson_writes_what_the_standard_library_wrote_for_awkward_values(parameter, kind, value):
    """NaN and the infinities in a JSON column still have no JSON form (orjson alone would write
    null); a time with an offset's seconds keeps them (orjson alone would cut them); an integer past
    64 bits and a lone surrogate go to the VALUES path."""
    fields = _statement_columns()[parameter]
    assert _same_values_as_the_former_encoding(fields, [_row_with(fields, kind, value)])


@pytest.mark.django_db
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_orjson_writes_the_values_the_standard_library_wrote(data):
    """The statements' JSON parameters are written by orjson. For any values of any column ingest
    writes, what it writes parses to the same JSON as the standard library's encoding did
    (_former_encoding); a value the standard library refused is refused; and the rows go to the
    VALUES path only for a value orjson has no form for. Canonical JSON (hashes) is not touched."""
    fields = data.draw(st.sampled_from(_statement_columns()))
    rows = []
    for _ in range(data.draw(st.integers(1, 3))):
        row = _plain_row(fields)  # one to three columns' values drawn, the rest plain
        for column in data.draw(st.sets(st.integers(0, len(fields) - 1), min_size=1, max_size=3)):
            row[column] = data.draw(_WIDE_VALUES)
        rows.append(row)
    assume(_same_values_as_the_former_encoding(fields, rows))  # rows the ORM refuses: drawn again


@pytest.mark.django_db
def test_positive_control_a_json_column_given_to_orjson_as_it_is_writes_null_for_nan(monkeypatch):
    """Break the guard (a JSON column's value handed to orjson as it is): NaN is written as null."""
    real = sql._json_form
    monkeypatch.setattr(sql, "_json_form", lambda f, v: v.obj if isinstance(v, Jsonb) else real(f, v))
    fields = _statement_columns()[0]
    with pytest.raises(AssertionError, match="a value the standard library refused was written"):
        _same_values_as_the_former_encoding(fields, [_row_with(fields, models.JSONField, [float("nan")])])


@pytest.mark.django_db
def test_positive_control_every_aware_time_given_to_orjson_loses_an_offset_s_seconds(monkeypatch):
    """Break the guard (every aware time handed to orjson, not only UTC's): the offset's seconds go."""
    real = sql._json_form
    monkeypatch.setattr(sql, "_json_form", lambda f, v: v if type(v) is datetime else real(f, v))
    fields = _statement_columns()[0]
    odd = datetime(2026, 1, 15, 14, 30, tzinfo=timezone(timedelta(hours=5, minutes=30, seconds=15)))
    with pytest.raises(AssertionError, match="a value was written other than it was"):
        _same_values_as_the_former_encoding(fields, [_row_with(fields, models.DateTimeField, odd)])


@pytest.mark.django_db
def test_positive_control_true_written_as_one_is_a_different_value(monkeypatch):
    """Break the JSON column's encoding (true written as 1, equal in Python, another value in
    jsonb): the comparison, type for type, sees it."""

    class Loose:
        def encode(self, value):
            return json.dumps(value).replace("true", "1")

    monkeypatch.setattr(sql, "_STRICT_JSON", Loose())
    fields = _statement_columns()[0]
    with pytest.raises(AssertionError, match="a value was written other than it was"):
        _same_values_as_the_former_encoding(fields, [_row_with(fields, models.JSONField, [True, 1.0])])
