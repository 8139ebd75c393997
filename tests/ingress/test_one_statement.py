"""A body's writes as one PostgreSQL statement (ingress.writes, docs/internals.md#set-based-writes): the same rows as the
statement-by-statement path SQLite takes, and a cached source never acted on once changed."""

import base64
import re
from datetime import datetime, timezone

import psycopg._queries as psycopg_queries  # where psycopg decides which statements it caches
import pytest
from django.db import connection

from conduit import sql
from conduit.providers.registry import get_adapter
from ingress import selectors, views, writes
from ingress.hooks import reply_planner
from ingress.models import Delivery, EventState, EventTransition, InboundEvent, QuarantineReceipt
from ingress.selectors import source_config
from ingress.services import EVENT_COLUMNS, ingest, observations_accept, source_update
from replies.models import ReplyAction, ReplyTransition
from tests.reconcile.conftest import body, item

NOW = datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=timezone.utc)
NEXT_SECRET = "whsec_" + base64.b64encode(b"synthetic-next-secret-for-tests!").decode()
LEDGER_TABLES = (
    "reply_action_transitions",
    "reply_actions",
    "inbound_event_transitions",
    "inbound_events",
    "ingress_deliveries",
    "quarantine_transitions",
    "quarantine_receipts",
)


def _accept(source, raw: bytes, delivery_id: str):
    parsed = get_adapter("sandbox-social").parse_delivery(body=raw, config=source_config(source))
    result = observations_accept(
        source=source,
        parsed=parsed,
        delivery_id=delivery_id,
        body_hash=f"{hash(raw) & 0xFFFFFFFF:064x}",
        body_bytes=len(raw),
        now=NOW,
    )
    return [(r.index, r.result, r.event_key, r.reason_code, bool(r.receipt_id)) for r in result.results]


def _scenario(source) -> dict:
    """New events (one not matching the trigger), the same delivery again, a body mixing a duplicate
    and a new event, an event key sent with another payload, a delivery id sent with another body."""
    first = body(item(1), item(2), item(3, text="hello"))
    answers = [
        _accept(source, first, "msg_test_one"),
        _accept(source, first, "msg_test_one"),
        _accept(source, body(item(2), item(4)), "msg_test_two"),
        _accept(source, body(item(5), item(1, text="CHECKLIST changed")), "msg_test_three"),
        _accept(source, body(item(6)), "msg_test_one"),
    ]
    return {
        "answers": answers,
        "deliveries": sorted(
            Delivery.objects.values_list(
                "source_id",
                "delivery_id",
                "body_hash",
                "event_keys",
                "seen_count",
                "first_received_at",
                "last_received_at",
            ),
            key=repr,
        ),
        "events": sorted(InboundEvent.objects.values_list(*EVENT_COLUMNS), key=repr),
        "event_history": sorted(
            EventTransition.objects.values_list(
                "event__event_key",
                "ledger",
                "prior_state",
                "next_state",
                "at",
                "actor",
                "reason_code",
                "refused",
            ),
            key=repr,
        ),
        "actions": sorted(
            ReplyAction.objects.values_list(
                "reply_key",
                "event_id",
                "purpose",
                "delivery_state",
                "approval_state",
                "canary",
                "created_at",
                "reply_deadline",
            ),
            key=repr,
        ),
        "action_history": sorted(
            ReplyTransition.objects.values_list(
                "action__reply_key",
                "ledger",
                "prior_state",
                "next_state",
                "at",
                "actor",
                "reason_code",
                "refused",
            ),
            key=repr,
        ),
        "receipts": sorted(
            QuarantineReceipt.objects.values_list(
                "reason_code", "event_index", "event_key", "invalid_members", "delivery_id"
            ),
            key=repr,
        ),
    }


def _both_paths(source, monkeypatch) -> tuple[dict, dict]:
    one = _scenario(source)
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {', '.join(LEDGER_TABLES)} CASCADE")
    with monkeypatch.context() as patched:
        patched.setattr(ingest, "_events_write_at_once", lambda **kwargs: None)  # statement by statement
        several = _scenario(source)
    return one, several


@pytest.mark.django_db(transaction=True)
def test_one_statement_writes_what_the_statement_by_statement_path_writes(sandbox_source, monkeypatch):
    """Outside a transaction (the webhook's way on PostgreSQL) each body is one statement; the same
    bodies statement by statement leave the very same rows and answers."""
    one, several = _both_paths(sandbox_source, monkeypatch)
    assert one["answers"][0] == [
        (0, "accepted", one["answers"][0][0][2], "", False),
        (1, "accepted", one["answers"][0][1][2], "", False),
        (2, "accepted", one["answers"][0][2][2], "", False),
    ]
    assert [a[1] for a in one["answers"][3]] == ["rolled_back", "quarantined"]  # the identity conflict
    assert one["answers"][4][0][3] == "delivery_conflict"
    assert len(one["events"]) == 4 and len(one["actions"]) == 6 and len(one["receipts"]) == 2
    assert one == several


@pytest.mark.django_db(transaction=True)
def test_positive_control_parity_sees_a_statement_that_writes_history_for_a_duplicate(
    sandbox_source, monkeypatch
):
    """Break the statement on purpose (it writes history for events seen before too): parity fails."""
    real = writes._statement

    def broken(*args):
        sql, fields = real(*args)
        return sql.replace(
            'JOIN e ON e."event_key" = r.e->>0\n  WHERE e.seen_count = 1',
            'JOIN e ON e."event_key" = r.e->>0\n  WHERE e.seen_count >= 1',
        ), fields

    assert "WHERE e.seen_count >= 1" in broken(tuple(EVENT_COLUMNS), reply_planner())[0]
    monkeypatch.setattr(writes, "_statement", broken)
    one, several = _both_paths(sandbox_source, monkeypatch)
    assert one["event_history"] != several["event_history"]


@pytest.fixture(autouse=True)
def _no_source_cached_by_an_earlier_test():
    # A control below trusts the cache blindly: it must not meet a source an earlier test left there.
    selectors._READ.clear()


def _trust_the_cache_blindly(monkeypatch):
    """The guard taken away: a cached source is used as if it had just been read."""
    real = views.source_by_name

    def blind(name, *, cached=False):
        source = real(name, cached=cached)
        if source is not None:
            source.from_cache = False
        return source

    monkeypatch.setattr(views, "source_by_name", blind)


@pytest.mark.parametrize("guard", [True, False], ids=["guarded", "positive_control_guard_removed"])
@pytest.mark.django_db(transaction=True)
def test_a_cached_source_changed_since_is_read_afresh_before_anything_is_written(
    sandbox_source, deliver, monkeypatch, guard
):
    """The trigger keywords change after this process cached the source: the next delivery is
    decided under the new rule (its statement saw the source's row had changed and wrote nothing)."""
    if not guard:
        _trust_the_cache_blindly(monkeypatch)
    assert deliver(body(item(1))).status_code == 200  # caches the source
    source_update(source_id=sandbox_source.pk, changes={"trigger_keywords": ["SOMETHING ELSE"]})
    assert deliver(body(item(2))).status_code == 200
    second = InboundEvent.objects.get(source_event_id="evt_test_000002")
    decided = (second.event_state, second.trigger_rule_version, ReplyAction.objects.count())
    if guard:
        assert decided == (EventState.CLOSED_NO_REPLY, 2, 2)
    else:
        assert decided == (EventState.RECORD_READY, 1, 4)


@pytest.mark.parametrize("guard", [True, False], ids=["guarded", "positive_control_guard_removed"])
@pytest.mark.django_db(transaction=True)
def test_a_proof_failure_under_a_cached_source_is_decided_on_the_source_read_afresh(
    sandbox_source, deliver, monkeypatch, guard
):
    """The source moved to another secret after this process cached it: a delivery signed with the
    new secret is accepted, not quarantined as forged."""
    if not guard:
        _trust_the_cache_blindly(monkeypatch)
    assert deliver(body(item(1))).status_code == 200  # caches the source
    monkeypatch.setenv("CONDUIT_SOURCE_TEST_SANDBOX_SECRET_NEXT", NEXT_SECRET)
    source_update(
        source_id=sandbox_source.pk, changes={"secret_env": "CONDUIT_SOURCE_TEST_SANDBOX_SECRET_NEXT"}
    )
    response = deliver(body(item(2)), secret=NEXT_SECRET)
    if guard:
        assert (response.status_code, QuarantineReceipt.objects.count()) == (200, 0)
    else:
        assert (response.status_code, QuarantineReceipt.objects.count()) == (401, 1)


@pytest.mark.parametrize("guard", [True, False], ids=["guarded", "positive_control_guard_removed"])
@pytest.mark.django_db(transaction=True)
def test_a_member_refused_under_a_cached_source_is_decided_on_the_source_read_afresh(
    sandbox_source, deliver, monkeypatch, guard
):
    """An event type allowlisted after this process cached the source: its event is accepted, not
    quarantined under the allowlist as the cache had it."""
    if not guard:
        _trust_the_cache_blindly(monkeypatch)
    assert deliver(body(item(1))).status_code == 200  # caches the source
    source_update(source_id=sandbox_source.pk, changes={"event_types": ["comment.created", "comment.edited"]})
    response = deliver(body(item(2, type="comment.edited")))
    assert response.status_code == (200 if guard else 202), response.json()


@pytest.fixture
def statement_built_afresh():
    writes._statement.cache_clear()
    yield
    writes._statement.cache_clear()  # no statement built under a control outlives its test


@pytest.mark.parametrize("casts", ["as_built", "positive_control_text_cast_again"])
@pytest.mark.django_db(transaction=True)
def test_the_body_statement_is_converted_for_psycopg_once_not_per_body(
    sandbox_source, monkeypatch, statement_built_afresh, casts
):
    """psycopg turns a statement's %s placeholders into $n and caches that only for a statement
    of at most MAX_CACHED_STATEMENT_LENGTH characters; ingest's one statement stays under it, so
    no body after the first pays for the conversion (the control casts text values again, as the
    statement once did, and every body is converted anew)."""
    if casts != "as_built":
        monkeypatch.setattr(
            sql, "_json_cast", lambda db_type, value: f"({value})::{re.sub(r'[(].*', '', db_type)}"
        )
    uncached = []
    convert = psycopg_queries._query2pg_nocache

    def counted(query, *args):
        uncached.append(query)
        return convert(query, *args)

    monkeypatch.setattr(psycopg_queries, "_query2pg_nocache", counted)
    assert _accept(sandbox_source, body(item(1)), "msg_test_one")[0][1] == "accepted"
    assert _accept(sandbox_source, body(item(2)), "msg_test_two")[0][1] == "accepted"
    converted_each_time = [q for q in uncached if b'INSERT INTO "inbound_events"' in q]
    if casts == "as_built":
        assert converted_each_time == []
    else:
        assert len(converted_each_time) == 2
