"""The faster reconcile paths (docs/internals.md#staging) keep the guarantees of the paths they
replace."""

from __future__ import annotations

import json

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from hypothesis import given, settings
from hypothesis import strategies as st

from conduit import canonical
from conduit.canonical import canonical_json, payload_hash
from reconcile import staging
from reconcile.models import ReconcileRun, StagedEvent
from reconcile.scan import reconcile_page
from tests.conftest import actions_cloned
from tests.reconcile.test_scan_protocol import page, scripted

# -- canonical JSON: the same bytes from the encoder built once ------------------------------


def _reference(value) -> bytes:
    """Canonical JSON as json.dumps writes it with the canonical arguments (the former implementation)."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_canonical_json_writes_the_bytes_json_dumps_writes(value):
    """Hashes are stored and compared with webhook-ingested rows: the encoder kept once must
    write, for any JSON value, exactly the bytes json.dumps writes with the same arguments."""
    assert canonical_json(value) == _reference(value)


def test_canonical_hash_of_a_known_payload_is_unchanged():
    """A digest computed by the implementation before this change (json.dumps per call)."""
    value = {"b": [1, 2.5, None, True], "a": "é\u2028x", "c": {"z": '"', "y": -0.0}}
    assert payload_hash(value) == "6d101289d9aa2658d8c8804814b028d209d58fc02bd2112bc6ad419a79b1302b"


@pytest.mark.parametrize(
    "value, error",
    [(float("nan"), ValueError), ({"a": float("inf")}, ValueError), ("\ud800", UnicodeEncodeError)],
)
def test_canonical_json_refuses_what_json_dumps_refuses(value, error):
    """The adapters turn these errors into rejections: the same value must raise the same class."""
    with pytest.raises(error):
        _reference(value)
    with pytest.raises(error):
        canonical_json(value)


def test_positive_control_an_encoder_without_sorted_keys_is_caught(monkeypatch):
    """The property above can fail: an encoder that keeps insertion order writes other bytes."""
    monkeypatch.setattr(
        canonical, "_CANONICAL", json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    )
    assert canonical_json({"b": 1, "a": 2}) != _reference({"b": 1, "a": 2})


# -- staging: a page that repeats nothing is COPYed straight into the staged tables -----------


def _staged_by_temporary_table(queries) -> bool:
    return any("CREATE TEMPORARY TABLE" in q["sql"] for q in queries.captured_queries)


@pytest.mark.django_db
def test_a_new_page_goes_straight_in_and_a_repeat_takes_the_careful_path(source_side, monkeypatch):
    """docs/concepts/reconciliation.md#generations (staging): an event an earlier page staged with the same payload is one event.
    The direct COPY relies on the unique constraint to refuse the repeat; its savepoint takes
    the COPY back and the page is staged row by row (ON CONFLICT DO NOTHING)."""
    _, source = source_side
    scripted(monkeypatch, [page(source, 1, 2, cursor="A"), page(source, 2, 3, cursor="B")])
    with CaptureQueriesContext(connection) as first:
        assert reconcile_page(source=source).staged_events == 2
    assert not _staged_by_temporary_table(first)  # nothing repeated: straight in
    with CaptureQueriesContext(connection) as second:
        assert reconcile_page(source=source).staged_events == 3
    assert _staged_by_temporary_table(second)  # event 2 again: the careful path
    keys = list(StagedEvent.objects.values_list("event_key", flat=True))
    assert len(keys) == len(set(keys)) == 3
    assert ReconcileRun.objects.get().staged_events == 3


@pytest.mark.django_db(transaction=True)
def test_positive_control_without_the_unique_constraint_a_repeat_is_staged_twice(source_side, monkeypatch):
    """The direct COPY has no guard of its own: drop staged_event_unique and the repeated event
    is staged twice (so the test above would fail). The constraint is put back afterwards."""
    _, source = source_side
    table = StagedEvent._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {table} DROP CONSTRAINT staged_event_unique")
    try:
        scripted(monkeypatch, [page(source, 1, 2, cursor="A"), page(source, 2, 3, cursor="B")])
        reconcile_page(source=source)
        reconcile_page(source=source)
        keys = list(StagedEvent.objects.values_list("event_key", flat=True))
        assert len(keys) == 4 and len(set(keys)) == 3
    finally:
        StagedEvent.objects.all().delete()
        with connection.cursor() as cursor:
            cursor.execute(
                f"ALTER TABLE {table} ADD CONSTRAINT staged_event_unique UNIQUE (run_id, event_key)"
            )


# -- the whole-generation statements' session settings ------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_bulk_settings_hold_for_their_transaction_only():
    """JIT off and the larger work_mem apply to the reconcile transaction that asks, then end."""
    with connection.cursor() as cursor:
        cursor.execute("SHOW jit")
        default_jit = cursor.fetchone()[0]
        cursor.execute("SHOW work_mem")
        default_mem = cursor.fetchone()[0]
        with transaction.atomic():
            staging.bulk_session()
            cursor.execute("SHOW jit")
            assert cursor.fetchone()[0] == "off"
            cursor.execute("SHOW work_mem")
            assert cursor.fetchone()[0] == "64MB"
        cursor.execute("SHOW jit")
        assert cursor.fetchone()[0] == default_jit
        cursor.execute("SHOW work_mem")
        assert cursor.fetchone()[0] == default_mem


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("events", "receipts", "hashed"),
    [(9, 0, False), (0, 9, False), (10, 0, True), (3, 10, True)],
)
def test_reply_findings_are_hashed_for_a_generation_of_a_quarter_of_the_ledger(
    wire, planned, events, receipts, hashed
):
    """40 actions in the ledger: a generation of 10 staged rows or more is hashed, one of 9 is left
    to the planner (one source of many probes less than it would hash)."""
    wire()
    actions_cloned(planned, 38)  # and the planned pair: 40
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE reply_actions")  # the planner's estimate, which the rule reads
    run = ReconcileRun(staged_events=events, staged_receipts=receipts)
    with transaction.atomic(), staging.hashed_joins(run), connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('enable_nestloop'), current_setting('enable_mergejoin')")
        assert cursor.fetchone() == (("off", "off") if hashed else ("on", "on"))


# -- the event ledger and the findings keep room on their pages: reconcile rewrites rows in place --


def _events(source, n: int) -> None:
    """n events of `source`, as ingest leaves them (UNRECONCILED), written in one statement."""
    from django.utils import timezone

    from ingress.models import InboundEvent

    now = timezone.now()
    InboundEvent.objects.bulk_create(
        [
            InboundEvent(
                event_key=f"sandbox-social:{source.account_ref}:comment.created:evt_test_hot_{i:05d}",
                source=source,
                source_system="sandbox-social",
                source_account_ref=source.account_ref,
                source_event_id=f"evt_test_hot_{i:05d}",
                event_type="comment.created",
                conversation_ref=f"post_test_{i % 7}",
                message_ref=f"msg_test_hot_{i:05d}",
                sender_ref=f"person_test_{i % 13}",
                occurred_at=now,
                occurred_at_original=now.isoformat(),
                payload_hash=f"{i:064x}",
                contract_version="event-v1",
                canary=False,
                trigger_rule_version=1,
                trigger_match=True,
                event_state="RECORD_READY",
                reconcile_status="UNRECONCILED",
                first_received_at=now,
                last_received_at=now,
                seen_count=1,
                message_text="CHECKLIST " * 8,
            )
            for i in range(n)
        ]
    )


def _updated_in_place(table: str, update) -> tuple[int, int]:
    """(rows `update()` updated in `table`, of which HOT), from this transaction's own statistics
    (pg_stat_xact_user_tables)."""

    def counts() -> tuple[int, int]:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables WHERE relname = %s", [table]
            )
            return cursor.fetchone()

    before = counts()
    update()
    after = counts()
    return after[0] - before[0], after[1] - before[1]


def _events_marked(source, n: int) -> tuple[int, int]:
    """The evidence mark moves the source's n new events to MATCHED (status and reconciled_at)."""
    from django.utils import timezone

    from ingress.models import InboundEvent
    from reconcile.repairs import events_mark_set

    _events(source, n)
    return _updated_in_place(
        InboundEvent._meta.db_table,
        lambda: events_mark_set(
            events=InboundEvent.objects.filter(source=source),
            to="MATCHED",
            actor="tester",
            reason_code="source_shows_same_payload",
            at=timezone.now(),
        ),
    )


def _findings_applied(source, n: int) -> tuple[int, int]:
    """A replay batch's n planned findings get their outcome (repair_outcome)."""
    from django.utils import timezone

    from reconcile.models import Finding, ReconcileReport, RepairOutcome
    from reconcile.repairs import _findings_outcome

    now = timezone.now()
    run = ReconcileRun.objects.create(
        source=source, trigger="command", requested_by="tester", until=now, created_at=now
    )
    report = ReconcileReport.objects.create(run=run, source=source, created_at=now, summary={})
    Finding.objects.bulk_create(
        [
            Finding(
                report=report,
                kind="MISSING_LOCAL",
                event_key=f"sandbox-social:acct:comment.created:evt_test_{i}",
                repair="replayed_through_ingest",
                repair_outcome=RepairOutcome.PLANNED,
                detail="the source has it and Conduit did not: replayed through ingest, replies held for review",
            )
            for i in range(n)
        ]
    )
    planned = Finding.objects.filter(report=report, repair_outcome=RepairOutcome.PLANNED)
    ids = list(planned.values_list("id", flat=True))
    return _updated_in_place(Finding._meta.db_table, lambda: _findings_outcome(ids, RepairOutcome.APPLIED))


ROOMY = [("inbound_events", _events_marked), ("reconcile_finding", _findings_applied)]


@pytest.mark.django_db
@pytest.mark.parametrize("table, rewrite", ROOMY, ids=[table for table, _ in ROOMY])
def test_each_row_is_rewritten_on_its_own_page(source_side, table, rewrite):
    """Reconcile rewrites every event it compares (status and reconciled_at) and every finding
    it repairs (its outcome); none of those columns is indexed. The tables keep half of each
    page free (ingress migration 0010, reconcile 0012: fillfactor 50), so each rewrite is a HOT
    update: the new row version stays on its page and no index gets an entry."""
    _, source = source_side
    updated, hot = rewrite(source, 400)
    assert updated == 400
    assert hot >= 0.95 * updated, f"{hot} of {updated} rewrites were HOT"


@pytest.mark.django_db
@pytest.mark.parametrize("table, rewrite", ROOMY, ids=[table for table, _ in ROOMY])
def test_positive_control_packed_pages_force_every_rewrite_into_the_indexes(source_side, table, rewrite):
    """With packed pages (fillfactor 100, PostgreSQL's default; rolled back with the test's
    transaction) the same rewrites move their rows off the page, so the test above would fail."""
    _, source = source_side
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {table} SET (fillfactor = 100)")
    updated, hot = rewrite(source, 400)
    assert updated == 400
    assert hot < 0.5 * updated, f"{hot} of {updated} rewrites were HOT"


# -- a generation in many small pieces: the evidence mark by key ranges, repairs streamed --------


@pytest.mark.parametrize("pieces", ["whole", "small"])
def test_a_generation_repaired_in_small_pieces_ends_as_in_one(
    source_side, deliver, scan, monkeypatch, pieces
):
    """The evidence mark takes a range of staged keys a statement and the replay and the receipt
    repairs stream their planned findings a batch at a time: with ranges and batches of two, every
    event is MATCHED once, every missing one replayed once, every applied reply attached once."""
    from ingress.models import EventTransition, InboundEvent
    from reconcile import repairs
    from replies.models import ReplyAction
    from tests.reconcile.conftest import approved_and_sent, body, item

    if pieces == "small":
        monkeypatch.setattr(repairs, "EVIDENCE_CHUNK", 2)
        monkeypatch.setattr(repairs, "REPLAY_BATCH", 2)
        monkeypatch.setattr(repairs, "CHUNK", 2)
        monkeypatch.setattr(repairs, "BATCH_MIN_ROWS", 1)
    state, source = source_side
    held = [item(n) for n in range(1, 10)]
    state.hold_events(*held)
    for event in held[:5]:  # events 6 to 9 never came by webhook
        assert deliver(body(event)).status_code == 200
    unknown = list(ReplyAction.objects.filter(purpose="public_ack").order_by("event_id")[:3])
    for action in unknown:  # applied by the provider, its answer lost
        assert approved_and_sent(state, action, "drop_after_accept") == "SEND_STATUS_UNKNOWN"

    scan(source)

    events = InboundEvent.objects.filter(source=source)
    assert events.count() == 9
    assert set(events.values_list("reconcile_status", flat=True)) == {"MATCHED"}
    matched = EventTransition.objects.filter(ledger="event_reconcile", next_state="MATCHED", refused=False)
    assert sorted(matched.values_list("event__source_event_id", flat=True)) == [
        f"evt_test_{n:06d}" for n in range(1, 10)
    ]
    assert {a.delivery_state for a in ReplyAction.objects.filter(pk__in=[a.pk for a in unknown])} == {"SENT"}
    assert state.applied_count() == 3  # nothing was sent again
