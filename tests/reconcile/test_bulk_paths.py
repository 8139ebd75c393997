"""Reconciliation's set-based paths (PostgreSQL: COPY, arrays, one statement a set) against the portable ones."""

from __future__ import annotations

import dataclasses

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from conduit.providers.base import ProviderReceipt
from ingress.models import EventTransition, InboundEvent
from reconcile import repairs, staging
from reconcile.lease import lease_acquire
from reconcile.models import (
    Finding,
    ReconcileReport,
    ReconcileRun,
    StagedEvent,
    StagedReceipt,
)
from reconcile.scan import reconcile_page
from replies.models import ReplyAction, ReplyTransition
from tests.conftest import account_campaign
from tests.reconcile.test_scan_protocol import observations, page, scripted

pytestmark = pytest.mark.django_db

AT = timezone.now()


@pytest.fixture(params=["set_based", "portable"])
def path(request, monkeypatch):
    """Each test runs on the PostgreSQL set-based path and on the portable one (SQLite's)."""
    if request.param == "portable":
        monkeypatch.setattr(staging, "fast_sql", lambda: False)
        monkeypatch.setattr(repairs, "fast_sql", lambda: False)
    else:
        assert connection.vendor == "postgresql"
    return request.param


def _with_text(source, n: int, text: str):
    """Observation n carrying another payload (a different text, so another payload hash)."""
    (o,) = observations(source, n)
    return dataclasses.replace(o, text=text, payload_hash="f" * 64)


# -- staging ------------------------------------------------------------------


def test_an_event_repeated_with_its_payload_is_staged_once(source_side, monkeypatch, path):
    """docs/concepts/reconciliation.md#generations (staging): an event an earlier page (or the same page) staged with the same
    payload is one event; the page counts only what was new."""
    _, source = source_side
    first = page(source, 1, 2, cursor="A")
    second = page(source, 2, 3, 3, cursor="B")
    scripted(monkeypatch, [first, second])
    assert reconcile_page(source=source).staged_events == 2
    assert reconcile_page(source=source).staged_events == 3
    assert StagedEvent.objects.count() == 3
    assert ReconcileRun.objects.get().staged_events == 3


def test_an_earlier_event_with_another_payload_fails_the_page_and_stages_none_of_it(
    source_side, monkeypatch, path
):
    """docs/concepts/reconciliation.md#page-protocol: a page whose event was staged earlier with another payload fails
    (`page_conflicting_duplicate`); its transaction takes back everything it staged."""
    _, source = source_side
    first = page(source, 1, cursor="A")
    changed = page(source, 4, cursor="B")
    changed = dataclasses.replace(
        changed, observations=[*changed.observations, _with_text(source, 1, "other")]
    )
    scripted(monkeypatch, [first, changed])
    assert reconcile_page(source=source).state == "staged"
    outcome = reconcile_page(source=source)
    assert (outcome.state, outcome.error.code) == ("failed", "page_conflicting_duplicate")
    assert StagedEvent.objects.count() == 1  # event 4 was taken back with the page
    assert ReconcileRun.objects.get().staged_events == 1


def test_one_page_with_two_payloads_under_a_key_fails(source_side, monkeypatch, path):
    _, source = source_side
    twice = page(source, 1, 2, cursor="A")
    twice = dataclasses.replace(twice, observations=[*twice.observations, _with_text(source, 2, "other")])
    scripted(monkeypatch, [twice])
    outcome = reconcile_page(source=source)
    assert (outcome.state, outcome.error.code) == ("failed", "page_conflicting_duplicate")
    assert StagedEvent.objects.count() == 0


def test_a_receipt_staged_again_keeps_the_first(source_side, monkeypatch, path):
    """As ON CONFLICT DO NOTHING row by row: a receipt already staged stays as first staged."""
    _, source = source_side
    first = dataclasses.replace(
        page(source, 1, cursor="A"), receipts=[ProviderReceipt("a" * 64, "msg_test_1", "k1")]
    )
    again = dataclasses.replace(
        page(source, 2, cursor="B"),
        receipts=[
            ProviderReceipt("a" * 64, "msg_test_2", "k1"),
            ProviderReceipt("b" * 64, "msg_test_3", "k2"),
            ProviderReceipt("b" * 64, "msg_test_4", "k2"),
        ],
    )
    scripted(monkeypatch, [first, again])
    reconcile_page(source=source)
    reconcile_page(source=source)
    assert dict(StagedReceipt.objects.values_list("reply_key", "provider_reply_id")) == {
        "a" * 64: "msg_test_1",
        "b" * 64: "msg_test_3",
    }
    # The repeated receipt sent page 2 down the careful path: its new event is staged all the same.
    assert (ReconcileRun.objects.get().staged_receipts, ReconcileRun.objects.get().staged_events) == (2, 2)
    assert StagedEvent.objects.count() == 2


def _staging_sql(monkeypatch, source) -> list[str]:
    scripted(monkeypatch, [page(source, *range(1, 1001), cursor="A")])
    with CaptureQueriesContext(connection) as queries:
        assert reconcile_page(source=source).staged_events == 1000
    return [q["sql"] for q in queries.captured_queries if "reconcile_stagedevent" in q["sql"]]


def test_a_page_is_staged_by_copy_not_rendered_into_sql(source_side, monkeypatch):
    """The set-based path streams a page's rows by COPY: no staging statement carries the
    rows (the portable path renders every value into its INSERTs, 500 rows a statement)."""
    _, source = source_side
    statements = _staging_sql(monkeypatch, source)
    assert len(statements) <= 3 and sum(map(len, statements)) < 2000, statements


def test_positive_control_the_portable_path_renders_the_rows(source_side, monkeypatch):
    _, source = source_side
    monkeypatch.setattr(staging, "fast_sql", lambda: False)
    assert sum(map(len, _staging_sql(monkeypatch, source))) > 100_000


# -- the evidence marks ------------------------------------------------------------


def _event(source, n: int, status: str) -> InboundEvent:
    return InboundEvent.objects.create(
        event_key=f"evt_test_bulk_{n}",
        source=source,
        source_system="sandbox_social",
        source_account_ref="acct_test_01",
        source_event_id=f"evt_test_bulk_{n}",
        event_type="comment.created",
        conversation_ref="post_test",
        message_ref=f"msg_test_bulk_{n}",
        sender_ref="person_test",
        occurred_at=AT,
        occurred_at_original="2026-01-02T03:04:05Z",
        payload_hash="0" * 64,
        contract_version="1",
        canary=False,
        trigger_rule_version=1,
        trigger_match=False,
        event_state="RECORD_READY",
        reconcile_status=status,
        first_received_at=AT,
        last_received_at=AT,
    )


@pytest.mark.parametrize("to", ["MATCHED", "SOURCE_UNVERIFIED"])
def test_the_evidence_mark_moves_records_and_times_each_event(sandbox_source, path, to):
    """The reconcile-status transition function's contract, on either path: an event already in
    `to` only gets `reconciled_at`; every other one moves (RECONCILE_TABLE declares these priors)
    with one history row each."""
    events = {
        s: _event(sandbox_source, i, s)
        for i, s in enumerate(["UNRECONCILED", "MATCHED", "SOURCE_UNVERIFIED"])
    }
    moved = repairs.events_reconcile_mark(
        events=InboundEvent.objects.filter(source=sandbox_source),
        to=to,
        actor="system:reconcile",
        reason_code="test_reason",
        at=AT,
    )
    assert moved == 2
    assert set(InboundEvent.objects.values_list("reconcile_status", flat=True)) == {to}
    assert set(InboundEvent.objects.values_list("reconciled_at", flat=True)) == {AT}
    history = sorted(
        EventTransition.objects.values_list(
            "event_id", "prior_state", "next_state", "actor", "reason_code", "refused"
        )
    )
    assert history == sorted(
        (e.pk, prior, to, "system:reconcile", "test_reason", False)
        for prior, e in events.items()
        if prior != to
    )


def test_an_undeclared_prior_stays_and_its_refusal_is_recorded(sandbox_source, path):
    """transition_many's rule: "a row whose prior the table does not declare stays as it is and
    its refusal is recorded" (MATCHED is never a way back to UNRECONCILED)."""
    event = _event(sandbox_source, 1, "MATCHED")
    moved = repairs.events_reconcile_mark(
        events=InboundEvent.objects.all(),
        to="UNRECONCILED",
        actor="system:reconcile",
        reason_code="test_reason",
        at=AT,
    )
    event.refresh_from_db()
    assert (moved, event.reconcile_status, event.reconciled_at) == (0, "MATCHED", None)
    assert list(EventTransition.objects.values_list("prior_state", "next_state", "refused")) == [
        ("MATCHED", "UNRECONCILED", True)
    ]


# -- the reply ledger's repairs -----------------------------------------------------


@pytest.fixture
def repairing(sandbox_source):
    now = timezone.now()
    run = ReconcileRun.objects.create(
        source=sandbox_source, state="REPAIRING", trigger="command", requested_by="tester", created_at=now
    )
    report = ReconcileReport.objects.create(run=run, source=sandbox_source, created_at=now, summary={})
    return sandbox_source, lease_acquire(sandbox_source), run, report


def _unknown_sends(source, run, report, count: int) -> list[tuple[ReplyAction, Finding]]:
    made = []
    for n in range(count):
        event = _event(source, n, "UNRECONCILED")
        action = ReplyAction.objects.create(
            reply_key=f"{n:064d}",
            event=event,
            purpose="public_ack",
            campaign=account_campaign(source),
            campaign_version=1,
            delivery_state="SEND_STATUS_UNKNOWN",
            created_at=AT,
            last_error_code="timeout_after_request",
        )
        StagedReceipt.objects.create(
            run=run, reply_key=action.reply_key, provider_reply_id=f"msg_test_{n}", event_key=event.event_key
        )
        made.append(
            (
                action,
                Finding.objects.create(
                    report=report,
                    kind="RECEIPT_ATTACHED",
                    action=action,
                    action_state="SEND_STATUS_UNKNOWN",
                    reply_key=action.reply_key,
                    event_key=event.event_key,
                    repair="receipt_attached_marked_sent",
                    repair_outcome="planned",
                ),
            )
        )
    return made


def _attach(source, token, run, report) -> None:
    repairs.actions_repair(
        source, token, run, report, kind="RECEIPT_ATTACHED", to="SENT", reason="receipt_found_at_reconcile"
    )


def test_receipts_attach_compare_and_set_on_the_state_the_report_saw(repairing, monkeypatch, path):
    """docs/concepts/reconciliation.md#repairs: "Provider receipt exists for SENDING or
    SEND_STATUS_UNKNOWN | Attach the receipt and mark SENT". A repair is a compare-and-set on the state the report saw: an action that
    moved on since (here closed by a person) is `refused` / `state_moved`, never overwritten."""
    source, token, run, report = repairing
    monkeypatch.setattr(repairs, "BATCH_MIN_ROWS", 1)  # the set-based path for any chunk
    made = _unknown_sends(source, run, report, 4)
    moved_on, _ = made[3]
    ReplyAction.objects.filter(pk=moved_on.pk).update(delivery_state="CLOSED_NO_REPLY")
    _attach(source, token, run, report)
    for n, (action, finding) in enumerate(made[:3]):
        action.refresh_from_db()
        finding.refresh_from_db()
        assert (action.delivery_state, action.provider_reply_id, action.last_error_code) == (
            "SENT",
            f"msg_test_{n}",
            "",
        )
        assert (finding.repair_outcome, finding.repair_code) == ("applied", "")
        assert list(
            ReplyTransition.objects.filter(action=action).values_list(
                "prior_state", "next_state", "actor", "reason_code", "refused"
            )
        ) == [("SEND_STATUS_UNKNOWN", "SENT", "system:reconcile", "receipt_found_at_reconcile", False)]
    moved_on.refresh_from_db()
    assert (moved_on.delivery_state, moved_on.provider_reply_id) == ("CLOSED_NO_REPLY", "")
    assert (
        Finding.objects.get(action=moved_on).repair_outcome,
        Finding.objects.get(action=moved_on).repair_code,
    ) == ("refused", "state_moved")


def _action_updates(repairing) -> tuple[list[str], int]:
    source, token, run, report = repairing
    made = _unknown_sends(source, run, report, 150)
    with CaptureQueriesContext(connection) as queries:
        _attach(source, token, run, report)
    assert set(ReplyAction.objects.values_list("delivery_state", flat=True)) == {"SENT"}
    assert Finding.objects.filter(repair_outcome="applied").count() == len(made)
    return [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].lstrip().startswith(("UPDATE", "WITH")) and "reply_actions" in q["sql"].split("SET")[0]
    ], len(made)


def test_a_chunk_moves_in_one_statement(repairing):
    """The set-based path: a chunk of BATCH_MIN_ROWS (100) or more planned repairs moves in one UPDATE."""
    updates, _ = _action_updates(repairing)
    assert len(updates) == 1, updates


def test_positive_control_row_by_row_is_one_update_per_action(repairing, monkeypatch):
    monkeypatch.setattr(repairs, "BATCH_MIN_ROWS", 10**6)
    updates, made = _action_updates(repairing)
    assert len(updates) == made


def test_a_failed_chunk_statement_falls_back_to_row_by_row(repairing, monkeypatch):
    """A failure of the set statement takes its savepoint back and every row still goes through
    the ledger's transition function: one row's failure never costs the others their repair."""
    source, token, run, report = repairing
    monkeypatch.setattr(repairs, "BATCH_MIN_ROWS", 1)
    made = _unknown_sends(source, run, report, 3)
    real = repairs._actions_move_set

    def failing(*args, **kwargs):
        real(*args, **kwargs)  # the statements run, then fail: the savepoint must take them back
        raise DatabaseError("planted")

    monkeypatch.setattr(repairs, "_actions_move_set", failing)
    _attach(source, token, run, report)
    assert set(ReplyAction.objects.values_list("delivery_state", flat=True)) == {"SENT"}
    assert Finding.objects.filter(repair_outcome="applied").count() == len(made)
    # One history row per action: the batch's were taken back with its savepoint.
    assert ReplyTransition.objects.count() == len(made)


# -- the limits --------------------------------------------------------------------


def test_a_setting_adjusts_a_scan_limit_within_bounds(settings):
    """docs/concepts/reconciliation.md#limits: "Options permit explicit bounded adjustments"."""
    assert staging.scan_limit("items") == 10_000
    settings.CONDUIT_RECONCILE_MAX_STAGED_ITEMS = 2_000_000
    assert staging.scan_limit("items") == 2_000_000
    settings.CONDUIT_RECONCILE_MAX_STAGED_ITEMS = 0
    with pytest.raises(ImproperlyConfigured):
        staging.scan_limit("items")
    settings.CONDUIT_RECONCILE_MAX_PAGES = 10**9
    with pytest.raises(ImproperlyConfigured):
        staging.scan_limit("pages")
