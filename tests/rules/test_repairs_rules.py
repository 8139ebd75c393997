"""The repair table (docs/concepts/reconciliation.md#repairs), rule by rule, on findings written directly: outcome, code and scope."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

import pytest
from django.db import DatabaseError
from django.utils import timezone

from ingress.models import InboundEvent
from reconcile import repairs
from reconcile.lease import lease_acquire
from reconcile.models import (
    Finding,
    ReconcileReport,
    ReconcileRun,
    StagedEvent,
    StagedReceipt,
)
from reconcile.repairs import actions_repair, evidence_mark, missing_replay, repair_code
from replies.models import ReplyAction, ReplyTransition
from tests.rules.runs import other_source, run_and_report

pytestmark = pytest.mark.django_db


@dataclass
class Ctx:
    source: object
    token: str
    run: ReconcileRun
    report: ReconcileReport

    def finding(
        self,
        kind: str,
        *,
        action: ReplyAction | None = None,
        repair: str = "none",
        outcome: str = "planned",
        report: ReconcileReport | None = None,
        **fields,
    ) -> Finding:
        if action is not None:
            fields = {
                "action": action,
                "action_state": action.delivery_state,
                "reply_key": action.reply_key,
                "event_key": action.event_id,
                **fields,
            }
        return Finding.objects.create(
            report=report or self.report, kind=kind, repair=repair, repair_outcome=outcome, **fields
        )

    def attach(self, **kw) -> None:
        actions_repair(
            self.source,
            self.token,
            self.run,
            self.report,
            kind="RECEIPT_ATTACHED",
            to="SENT",
            reason="receipt_found_at_reconcile",
            **kw,
        )

    def mark_unknown(self) -> None:
        actions_repair(
            self.source,
            self.token,
            self.run,
            self.report,
            kind="RECEIPT_MISSING",
            to="SEND_STATUS_UNKNOWN",
            reason="receipt_missing_at_reconcile",
        )


class RepairLoopStuck(BaseException):
    """Not an Exception: no repair step may catch it and record it as a repair failure."""


@pytest.fixture(autouse=True)
def repairs_end(monkeypatch):
    """Each repair step renews the lease once a batch and acts only on findings still planned,
    so it ends: a step that renews 100 times in one test is stuck on findings it never marks."""
    real, calls = repairs.lease_renew, []

    def renew(source_id, token):
        calls.append(token)
        if len(calls) > 100:
            raise RepairLoopStuck(f"{len(calls)} lease renewals: a repair loop is not progressing")
        return real(source_id, token)

    monkeypatch.setattr(repairs, "lease_renew", renew)


@pytest.fixture
def ctx(sandbox_source) -> Ctx:
    """A run of the sandbox source in REPAIRING with its (empty) report, and the scan lease held."""
    run, report = run_and_report(sandbox_source)
    return Ctx(sandbox_source, lease_acquire(sandbox_source), run, report)


def _other_report(ctx: Ctx) -> ReconcileReport:
    """An earlier, published run's report of the same source (one active run per source)."""
    return run_and_report(ctx.source, state="PUBLISHED")[1]


@dataclass
class Path:
    name: str
    one_row: list[int]  # the actions that went through the one-row path, in order

    def took(self, *, batch: list, one_row: list) -> list[int]:
        """The actions the one-row path should have taken: on the batch path only those it left."""
        return [a.pk for a in (batch if self.name == "batch" else one_row)]


@pytest.fixture(params=["one_row", "batch", "batch_failed"])
def path(request, monkeypatch) -> Path:
    """Every way a reply-ledger repair applies: one savepoint a row through
    `reply_action_transition`; on PostgreSQL a chunk of BATCH_MIN_ROWS or more in one
    compare-and-set statement (lowered to 1 here, so that a test's few rows take it); and a chunk
    whose statement failed, taken back and gone row by row. The same outcome every way;
    `one_row` names the rows the one-row path took."""
    monkeypatch.setattr(repairs, "BATCH_MIN_ROWS", 10**6 if request.param == "one_row" else 1)
    if request.param == "batch_failed":
        real_batch = repairs._actions_move_set

        def failing(*args, **kwargs):
            real_batch(*args, **kwargs)  # the statements run, then fail: the savepoint takes them back
            raise DatabaseError("planted")

        monkeypatch.setattr(repairs, "_actions_move_set", failing)
    taken, real = [], repairs._action_repair_one

    def one_row(finding_id, action_id, *args, **kwargs):
        taken.append(action_id)
        return real(finding_id, action_id, *args, **kwargs)

    monkeypatch.setattr(repairs, "_action_repair_one", one_row)
    return Path(request.param, taken)


def outcome_of(finding: Finding) -> tuple[str, str]:
    finding.refresh_from_db()
    return finding.repair_outcome, finding.repair_code


# -- receipts: "Provider receipt exists for SENDING or SEND_STATUS_UNKNOWN: Attach the receipt and mark SENT"


@pytest.mark.parametrize("prior", ["SENDING", "SEND_STATUS_UNKNOWN"])
def test_a_staged_receipt_is_attached_and_the_action_marked_sent(ctx, make_action, prior, path):
    """docs/concepts/reconciliation.md#repairs: "Provider receipt exists for SENDING or
    SEND_STATUS_UNKNOWN | Attach the receipt
    and mark SENT". The receipt is this run's staged one; the error the unknown send carried is
    cleared, the finding says `applied` with no code."""
    action = make_action(prior, last_error_code="timeout_after_request", sending_since=timezone.now())
    StagedReceipt.objects.create(
        run=ctx.run, reply_key=action.reply_key, provider_reply_id="msg_test_7", event_key=action.event_id
    )
    finding = ctx.finding("RECEIPT_ATTACHED", action=action, repair="receipt_attached_marked_sent")
    ctx.attach()
    action.refresh_from_db()
    assert (
        action.delivery_state,
        action.provider_reply_id,
        action.last_error_code,
        action.sending_since,
    ) == ("SENT", "msg_test_7", "", None)
    assert outcome_of(finding) == ("applied", "")
    assert list(
        ReplyTransition.objects.filter(action=action).values_list(
            "prior_state", "next_state", "actor", "reason_code", "refused"
        )
    ) == [(prior, "SENT", "system:reconcile", "receipt_found_at_reconcile", False)]
    assert path.one_row == path.took(batch=[], one_row=[action])


def test_the_receipt_attached_is_this_runs_never_another_runs(ctx, make_action, path):
    """docs/concepts/reconciliation.md#steps: "Compare provider reply receipts with the reply-action
    ledger" (this
    generation's): a receipt staged by another run under the same key is not this run's evidence.
    With no receipt of its own staged, the action is still marked SENT by its planned finding,
    with no provider id borrowed from elsewhere."""
    action = make_action("SEND_STATUS_UNKNOWN")
    other_run = _other_report(ctx).run
    StagedReceipt.objects.create(
        run=other_run,
        reply_key=action.reply_key,
        provider_reply_id="msg_test_other",
        event_key=action.event_id,
    )
    mine = make_action("SENDING")
    StagedReceipt.objects.create(
        run=ctx.run, reply_key=mine.reply_key, provider_reply_id="msg_test_mine", event_key=mine.event_id
    )
    ctx.finding("RECEIPT_ATTACHED", action=action, repair="receipt_attached_marked_sent")
    ctx.finding("RECEIPT_ATTACHED", action=mine, repair="receipt_attached_marked_sent")
    ctx.attach()
    action.refresh_from_db()
    mine.refresh_from_db()
    assert (action.delivery_state, action.provider_reply_id) == ("SENT", "")
    assert (mine.delivery_state, mine.provider_reply_id) == ("SENT", "msg_test_mine")
    assert path.one_row == path.took(batch=[], one_row=[action, mine])


def test_a_receipt_repair_is_a_compare_and_set_on_the_state_the_report_saw(ctx, make_action, path):
    """docs/concepts/reconciliation.md#repairs: "A receipt repair is a compare-and-set on the state the report saw; if the sender
    moved the action meanwhile, the finding says `refused`." The report saw SENDING; the sweeper
    has since parked it SEND_STATUS_UNKNOWN (a move SENDING's repair would also allow): refused,
    `state_moved`, the action untouched."""
    action = make_action("SENDING")
    StagedReceipt.objects.create(
        run=ctx.run, reply_key=action.reply_key, provider_reply_id="msg_test_8", event_key=action.event_id
    )
    finding = ctx.finding("RECEIPT_ATTACHED", action=action, repair="receipt_attached_marked_sent")
    ReplyAction.objects.filter(pk=action.pk).update(delivery_state="SEND_STATUS_UNKNOWN")
    ctx.attach()
    action.refresh_from_db()
    assert (action.delivery_state, action.provider_reply_id) == ("SEND_STATUS_UNKNOWN", "")
    assert outcome_of(finding) == ("refused", "state_moved")
    # The batch leaves a row that moved on to the one-row path, which records the refusal.
    assert path.one_row == path.took(batch=[action], one_row=[action])


def test_a_move_the_table_does_not_declare_is_refused_and_the_rest_of_the_chunk_still_moves(
    ctx, make_action, path
):
    """docs/concepts/ledgers.md#refused-transitions: an undeclared move is refused and recorded. A
    receipt planned for an action the report saw APPROVED (APPROVED -> SENT is not declared)
    is refused, its refusal in the history; the declared move beside it in the same chunk is
    applied, on the batch path in its one statement."""
    approved, sending = make_action("APPROVED"), make_action("SENDING")
    refused = ctx.finding("RECEIPT_ATTACHED", action=approved, repair="receipt_attached_marked_sent")
    applied = ctx.finding("RECEIPT_ATTACHED", action=sending, repair="receipt_attached_marked_sent")
    ctx.attach()
    assert [ReplyAction.objects.get(pk=a.pk).delivery_state for a in (approved, sending)] == [
        "APPROVED",
        "SENT",
    ]
    assert outcome_of(refused)[0] == "refused"
    assert outcome_of(applied) == ("applied", "")
    assert list(
        ReplyTransition.objects.filter(action=approved).values_list("prior_state", "next_state", "refused")
    ) == [("APPROVED", "SENT", True)]
    assert path.one_row == path.took(batch=[approved], one_row=[approved, sending])


def test_a_finding_whose_action_is_gone_is_refused_as_action_gone(ctx, make_action):
    """docs/concepts/reconciliation.md#repair-outcomes: the outcome is `refused` with `action_gone` when the action no longer exists."""
    finding = ctx.finding(
        "RECEIPT_ATTACHED", repair="receipt_attached_marked_sent", reply_key="0" * 64, action_state="SENDING"
    )
    ctx.attach()
    assert outcome_of(finding) == ("refused", "action_gone")


# -- "Local action says SENT and provider receipt is missing: Mark SEND_STATUS_UNKNOWN. Preserve and stop"


def test_sent_without_a_receipt_is_marked_unknown_with_the_reason_as_its_error(ctx, make_action, path):
    """docs/concepts/reconciliation.md#repairs: "Local action says SENT and provider receipt is missing | Mark
    SEND_STATUS_UNKNOWN. Preserve the action and stop." The provider id it had is kept."""
    action = make_action("SENT", provider_reply_id="msg_test_9")
    finding = ctx.finding("RECEIPT_MISSING", action=action, repair="marked_send_status_unknown")
    ctx.mark_unknown()
    action.refresh_from_db()
    assert (action.delivery_state, action.last_error_code, action.provider_reply_id) == (
        "SEND_STATUS_UNKNOWN",
        "receipt_missing_at_reconcile",
        "msg_test_9",
    )
    assert outcome_of(finding) == ("applied", "")
    assert list(
        ReplyTransition.objects.filter(action=action).values_list(
            "prior_state", "next_state", "actor", "reason_code", "refused"
        )
    ) == [("SENT", "SEND_STATUS_UNKNOWN", "system:reconcile", "receipt_missing_at_reconcile", False)]
    assert path.one_row == path.took(batch=[], one_row=[action])


def test_reply_repairs_renew_the_lease_a_chunk_at_a_time(ctx, make_action, path, monkeypatch):
    """A long repair keeps the scan lease by renewing it once a chunk: five planned moves in
    chunks of two renew it three times, and all five move."""
    monkeypatch.setattr(repairs, "CHUNK", 2)
    renewed, real = [], repairs.lease_renew

    def renew(source_id, token):
        renewed.append(token)
        return real(source_id, token)

    monkeypatch.setattr(repairs, "lease_renew", renew)
    actions = [make_action("SENT", provider_reply_id=f"msg_test_{n}") for n in range(5)]
    findings = [
        ctx.finding("RECEIPT_MISSING", action=a, repair="marked_send_status_unknown") for a in actions
    ]
    ctx.mark_unknown()
    assert len(renewed) == 3
    assert [outcome_of(f) for f in findings] == [("applied", "")] * 5


def test_a_repair_acts_only_on_its_own_reports_planned_findings_of_its_kind(ctx, make_action, path):
    """Every repair acts only on findings still `planned` (so a resumed run applies each once),
    of its own report and kind: another report's planned finding on the same action waits for
    that report."""
    action = make_action("SENT")
    theirs = ctx.finding(
        "RECEIPT_MISSING", action=action, repair="marked_send_status_unknown", report=_other_report(ctx)
    )
    done = ctx.finding(
        "RECEIPT_MISSING",
        action=action,
        repair="marked_send_status_unknown",
        outcome="failed",
        repair_code="database_error",
    )
    other_kind = ctx.finding("RECEIPT_ATTACHED", action=action, repair="receipt_attached_marked_sent")
    ctx.mark_unknown()
    action.refresh_from_db()
    assert action.delivery_state == "SENT"
    assert outcome_of(theirs) == ("planned", "")
    assert outcome_of(done) == ("failed", "database_error")
    assert outcome_of(other_kind) == ("planned", "")


@pytest.mark.parametrize(
    "exc, code",
    [
        (DatabaseError("boom: secret text"), "database_error"),
        (RuntimeError("boom: secret text"), "unexpected_error"),
    ],
)
def test_a_repair_that_raises_fails_with_a_stable_code_and_the_others_still_apply(
    ctx, make_action, monkeypatch, caplog, exc, code
):
    """docs/concepts/reconciliation.md#repair-outcomes: "`failed` (`database_error`, `unexpected_error`; the error's text is never kept). A
    failed repair leaves the report, its findings and every other repair in place." The log line
    names the action and the error's type, never its text."""
    broken, fine = make_action("SENT"), make_action("SENT")
    broken_finding = ctx.finding("RECEIPT_MISSING", action=broken, repair="marked_send_status_unknown")
    fine_finding = ctx.finding("RECEIPT_MISSING", action=fine, repair="marked_send_status_unknown")
    real = repairs.reply_action_transition

    def transition(**kw):
        if kw["action_id"] == broken.pk:
            raise exc
        return real(**kw)

    monkeypatch.setattr(repairs, "reply_action_transition", transition)
    with caplog.at_level(logging.WARNING, logger="conduit.reconcile"):
        ctx.mark_unknown()
    assert outcome_of(broken_finding) == ("failed", code)
    assert outcome_of(fine_finding) == ("applied", "")
    assert ReplyAction.objects.get(pk=broken.pk).delivery_state == "SENT"
    assert ReplyAction.objects.get(pk=fine.pk).delivery_state == "SEND_STATUS_UNKNOWN"
    assert caplog.messages == [f"reconcile repair action={broken.pk} failed type={type(exc).__name__}"]
    assert "secret" not in caplog.text


def test_a_chunk_whose_statement_fails_goes_row_by_row_and_logs_the_errors_type(
    ctx, make_action, monkeypatch, caplog
):
    """A failure of the chunk's one statement takes its savepoint back (its moves, history rows and
    outcomes) and every row of the chunk goes through the one-row path: the repairs still apply,
    once each. The log line names the source, the run and the error's type, never its text."""
    monkeypatch.setattr(repairs, "BATCH_MIN_ROWS", 1)
    actions = [make_action("SENT"), make_action("SENT")]
    findings = [
        ctx.finding("RECEIPT_MISSING", action=a, repair="marked_send_status_unknown") for a in actions
    ]
    real = repairs._actions_move_set

    def failing(*args, **kwargs):
        real(*args, **kwargs)  # the statements run, then fail: the savepoint must take them back
        raise DatabaseError("boom: secret text")

    monkeypatch.setattr(repairs, "_actions_move_set", failing)
    with caplog.at_level(logging.WARNING, logger="conduit.reconcile"):
        ctx.mark_unknown()
    assert [outcome_of(f) for f in findings] == [("applied", "")] * 2
    assert [ReplyAction.objects.get(pk=a.pk).delivery_state for a in actions] == ["SEND_STATUS_UNKNOWN"] * 2
    assert ReplyTransition.objects.filter(action__in=actions).count() == 2
    assert caplog.messages == [
        f"reconcile repair batch source={ctx.source.name} run={ctx.run.pk} failed type=DatabaseError; row by row"
    ]
    assert "secret" not in caplog.text


def test_repair_code_names_the_class_of_error_only():
    assert repair_code(DatabaseError("x")) == "database_error"
    assert repair_code(ValueError("x")) == "unexpected_error"


# -- events: replay what is missing, mark what the source shows and what it does not


def _observations(source, *events):
    """The events as `source`'s adapter reads them from a body of its account."""
    from conduit.providers.registry import get_adapter
    from ingress.selectors import source_config

    document = json.dumps({"account": source.account_ref, "events": list(events)}).encode()
    parsed = get_adapter(source.adapter).parse(body=document, config=source_config(source))
    assert not parsed.rejections
    return parsed.observations


def _stage(ctx: Ctx, *events, run: ReconcileRun | None = None):
    """Stage source events as a page of `run` (this run by default) stages them."""
    from conduit.sql import insert_rows
    from reconcile.staging import STAGED_EVENT_COLUMNS, staged_row

    observations = _observations(ctx.source, *events)
    insert_rows(
        StagedEvent, list(STAGED_EVENT_COLUMNS), [staged_row((run or ctx.run).pk, o) for o in observations]
    )
    return observations


def _accept(ctx: Ctx, *events, delivery: str = ""):
    """Deliver events as the webhook does (same ingest function)."""
    from conduit.providers.base import Parsed
    from ingress.services import observations_accept

    observations = _observations(ctx.source, *events)
    observations_accept(
        source=ctx.source,
        parsed=Parsed(observations, []),
        delivery_id=delivery or f"d_test_{events[0]['id']}",
        body_hash="1" * 64,
        body_bytes=1,
        now=timezone.now(),
        actor="tester",
    )
    return observations


def test_missing_events_are_replayed_through_ingest_in_batches_with_replies_held(ctx, monkeypatch):
    """docs/concepts/reconciliation.md#repairs: "Source event exists and local event is missing |
    Replay it through the normal idempotent ingest path. Hold any reply at human review." The same
    page: a delivery
    `reconcile:<run>:<batch digest>`, one a batch."""
    from conduit.canonical import payload_hash
    from ingress.models import Delivery
    from tests.reconcile.conftest import item

    monkeypatch.setattr(repairs, "REPLAY_BATCH", 2)
    observations = _stage(ctx, item(1), item(2), item(3))
    findings = [
        ctx.finding("MISSING_LOCAL", event_key=o.event_key, repair="replayed_through_ingest")
        for o in observations
    ]
    missing_replay(ctx.source, ctx.token, ctx.run, ctx.report)
    assert [outcome_of(f) for f in findings] == [("applied", "")] * 3
    events = InboundEvent.objects.filter(source=ctx.source)
    assert sorted(events.values_list("event_key", flat=True)) == sorted(o.event_key for o in observations)
    assert set(ReplyAction.objects.values_list("delivery_state", flat=True)) == {"REVIEW_PENDING"}
    batches = [
        sorted(observations, key=lambda o: o.event_key)[:2],
        sorted(observations, key=lambda o: o.event_key)[2:],
    ]
    expected = {
        f"reconcile:{ctx.run.pk}:{payload_hash(sorted([o.event_key, o.payload_hash] for o in b))[:32]}"
        for b in batches
    }
    assert set(Delivery.objects.values_list("delivery_id", flat=True)) == expected
    for delivery in Delivery.objects.all():  # the batch's digest stands for its body
        assert delivery.body_hash.startswith(delivery.delivery_id.rsplit(":", 1)[1])
    assert sorted(len(d.event_keys) for d in Delivery.objects.all()) == [1, 2]
    assert set(events.values_list("transitions__actor", flat=True)) == {"system:reconcile"}


@pytest.mark.parametrize("outcome", ["applied", "failed", "refused"])
def test_a_replay_takes_only_the_findings_still_planned(ctx, outcome):
    """A finding this report's replay already settled (a resumed run's earlier batch: applied,
    failed or refused) is not replayed again: its event stays unwritten here, its outcome
    unchanged; the planned one beside it is replayed."""
    from tests.reconcile.conftest import item

    settled, planned = _stage(ctx, item(1), item(2))
    done = ctx.finding(
        "MISSING_LOCAL", event_key=settled.event_key, repair="replayed_through_ingest", outcome=outcome
    )
    todo = ctx.finding("MISSING_LOCAL", event_key=planned.event_key, repair="replayed_through_ingest")
    missing_replay(ctx.source, ctx.token, ctx.run, ctx.report)
    assert list(InboundEvent.objects.values_list("event_key", flat=True)) == [planned.event_key]
    assert (outcome_of(done)[0], outcome_of(todo)[0]) == (outcome, "applied")


def test_a_replay_that_raises_fails_with_a_stable_code_and_logs_no_text(ctx, monkeypatch, caplog):
    """docs/concepts/reconciliation.md#repair-outcomes: `failed` with `database_error` or `unexpected_error`, the error's text never kept;
    the replay's findings of other reports stay planned."""
    from tests.reconcile.conftest import item

    (observation,) = _stage(ctx, item(1))
    finding = ctx.finding("MISSING_LOCAL", event_key=observation.event_key, repair="replayed_through_ingest")
    theirs = ctx.finding(
        "MISSING_LOCAL",
        event_key=observation.event_key,
        repair="replayed_through_ingest",
        report=_other_report(ctx),
    )

    def failing(**kw):
        raise DatabaseError("secret text")

    monkeypatch.setattr(repairs, "observations_accept", failing)
    with caplog.at_level(logging.WARNING, logger="conduit.reconcile"):
        missing_replay(ctx.source, ctx.token, ctx.run, ctx.report)
    assert outcome_of(finding) == ("failed", "database_error")
    assert outcome_of(theirs) == ("planned", "")
    assert caplog.messages == [
        f"reconcile repair replay source=sandbox run={ctx.run.pk} failed type=DatabaseError"
    ]
    assert not InboundEvent.objects.exists()


def test_events_the_source_shows_with_the_same_payload_are_matched_and_unverified_ones_marked(ctx):
    """docs/concepts/reconciliation.md#repairs: "Source and local event both exist | Update
    reconciliation evidence. Create no
    new action"; "Local event has no matching source evidence | Set reconcile_status to
    SOURCE_UNVERIFIED. Preserve the record for review". Only this run's staging is evidence, only
    with the same payload, and only the report's planned SOURCE_UNVERIFIED findings are marked."""
    from tests.reconcile.conftest import item

    same, changed, other_run, unverified, not_planned = _accept(
        ctx, item(1), item(2), item(3), item(4), item(5)
    )
    _stage(ctx, item(1), item(2, text="CHECKLIST edited"))
    _stage(ctx, item(3), run=_other_report(ctx).run)
    finding = ctx.finding(
        "SOURCE_UNVERIFIED", event_key=unverified.event_key, repair="marked_source_unverified"
    )
    theirs = ctx.finding(
        "SOURCE_UNVERIFIED",
        event_key=not_planned.event_key,
        repair="marked_source_unverified",
        report=_other_report(ctx),
    )
    actions_before = ReplyAction.objects.count()
    evidence_mark(ctx.source, ctx.token, ctx.run, ctx.report)
    status = dict(InboundEvent.objects.values_list("event_key", "reconcile_status"))
    assert status == {
        same.event_key: "MATCHED",
        changed.event_key: "UNRECONCILED",
        other_run.event_key: "UNRECONCILED",
        unverified.event_key: "SOURCE_UNVERIFIED",
        not_planned.event_key: "UNRECONCILED",
    }
    reasons = dict(
        InboundEvent.objects.filter(transitions__ledger="event_reconcile").values_list(
            "event_key", "transitions__reason_code"
        )
    )
    assert reasons == {
        same.event_key: "source_shows_same_payload",
        unverified.event_key: "no_source_evidence",
    }
    assert set(
        InboundEvent.objects.filter(transitions__ledger="event_reconcile").values_list(
            "transitions__actor", flat=True
        )
    ) == {"system:reconcile"}
    assert outcome_of(finding) == ("applied", "")
    assert outcome_of(theirs) == ("planned", "")
    assert ReplyAction.objects.count() == actions_before
    marked = InboundEvent.objects.filter(event_key__in=[same.event_key, unverified.event_key])
    assert None not in marked.values_list("reconciled_at", flat=True)


def test_evidence_in_one_sources_staging_never_marks_another_sources_event(ctx):
    """Only the scanned source's events are marked: a staged key naming another source's event
    (its key, staged by this run) is no evidence for that event."""
    from tests.reconcile.conftest import item

    other = other_source(ctx.source)
    theirs = _accept(Ctx(other, "", ctx.run, ctx.report), item(7))[0]
    mine = _accept(ctx, item(8))[0]
    _stage(Ctx(other, "", ctx.run, ctx.report), item(7))  # into this run's staging
    _stage(ctx, item(8))
    evidence_mark(ctx.source, ctx.token, ctx.run, ctx.report)
    status = dict(InboundEvent.objects.values_list("event_key", "reconcile_status"))
    assert status == {theirs.event_key: "UNRECONCILED", mine.event_key: "MATCHED"}


def test_evidence_marks_that_raise_fail_with_a_stable_code(ctx, monkeypatch, caplog):
    from tests.reconcile.conftest import item

    (event,) = _accept(ctx, item(1))
    finding = ctx.finding("SOURCE_UNVERIFIED", event_key=event.event_key, repair="marked_source_unverified")

    def failing(**kw):
        raise DatabaseError("secret text")

    monkeypatch.setattr(repairs, "events_reconcile_mark", failing)
    with caplog.at_level(logging.WARNING, logger="conduit.reconcile"):
        evidence_mark(ctx.source, ctx.token, ctx.run, ctx.report)
    assert outcome_of(finding) == ("failed", "database_error")
    assert caplog.messages == [
        f"reconcile repair evidence source=sandbox run={ctx.run.pk} failed type=DatabaseError"
    ]


@pytest.mark.parametrize("step", ["replay", "evidence", "actions"])
def test_a_lost_lease_stops_the_repairs_and_leaves_their_findings_planned(ctx, make_action, step):
    """docs/concepts/reconciliation.md#leases: a holder that lost its lease publishes nothing: LeaseLost is not a repair failure
    (no `failed` outcome); the findings stay planned for the lease's new holder."""
    from reconcile.lease import LeaseLost
    from tests.reconcile.conftest import item

    if step == "replay":
        (o,) = _stage(ctx, item(1))
        finding = ctx.finding("MISSING_LOCAL", event_key=o.event_key, repair="replayed_through_ingest")
        call = lambda token: missing_replay(ctx.source, token, ctx.run, ctx.report)  # noqa: E731
    elif step == "evidence":
        (o,) = _accept(ctx, item(1))
        finding = ctx.finding("SOURCE_UNVERIFIED", event_key=o.event_key, repair="marked_source_unverified")
        call = lambda token: evidence_mark(ctx.source, token, ctx.run, ctx.report)  # noqa: E731
    else:
        finding = ctx.finding(
            "RECEIPT_MISSING", action=make_action("SENT"), repair="marked_send_status_unknown"
        )
        call = lambda token: actions_repair(
            ctx.source,
            token,
            ctx.run,
            ctx.report,
            kind="RECEIPT_MISSING",  # noqa: E731
            to="SEND_STATUS_UNKNOWN",
            reason="receipt_missing_at_reconcile",
        )
    with pytest.raises(LeaseLost):
        call("0" * 64)
    assert outcome_of(finding) == ("planned", "")


# -- the comparison: which difference gets which finding and repair, and the report's counts


def test_the_comparison_gives_each_difference_its_finding_repair_and_count(ctx):
    """docs/concepts/reconciliation.md#steps: compare the source set with the event ledger and the
    provider's receipts with the reply-action ledger, then "Write a report before applying any
    repair", each finding with the repair of the table (docs/concepts/reconciliation.md#repairs). The window is [since, until): item 0 is in,
    item 10 and item 20 are not; receipts and findings are this run's only; actions are those of
    staged events."""
    from datetime import timedelta

    from ingress.models import QuarantineReceipt
    from reconcile.publication import findings_write, generation_compare, report_counts
    from tests.reconcile.conftest import BASE_TIME, item

    run = ctx.run
    run.since, run.until = BASE_TIME, BASE_TIME + timedelta(minutes=10)
    run.staged_events, run.page_calls, run.rejection_count = 8, 3, 1
    run.rejections = [{"page": 2, "index": 4, "code": "missing_field"}]
    run.save()
    matched, twice, conflict, unverified, first, in_flight, unknown_held, more_flight, more_sent = _accept(
        ctx, item(1), item(6), item(3), item(4), item(0), item(7), item(8), item(5), item(9)
    )
    _accept(ctx, item(6), delivery="d_test_again")  # a second delivery of item 6: one duplicate folded
    _accept(ctx, item(10), item(20), delivery="d_test_outside")  # outside the window
    staged = _stage(
        ctx, item(1), item(6), item(2), item(3, text="CHECKLIST edited"), item(7), item(8), item(5), item(9)
    )
    missing = staged[2]
    actions = {(a.event_id, a.purpose): a for a in ReplyAction.objects.all()}

    def act(event, purpose, state, receipt=None):
        action = actions[(event.event_key, purpose)]
        ReplyAction.objects.filter(pk=action.pk).update(delivery_state=state)
        if receipt:
            StagedReceipt.objects.create(
                run=run, reply_key=action.reply_key, provider_reply_id=receipt, event_key=event.event_key
            )
        return action

    attach_sending = act(matched, "public_ack", "SENDING", "msg_test_1")
    lost = act(matched, "private_delivery", "SENT")
    StagedReceipt.objects.create(
        run=_other_report(ctx).run,
        reply_key=lost.reply_key,
        provider_reply_id="msg_test_elsewhere",
        event_key=matched.event_key,
    )
    confirmed = act(twice, "public_ack", "SENT", "msg_test_2")
    suppressed = act(twice, "private_delivery", "SUPPRESSED_TEST")
    candidate = act(conflict, "public_ack", "SEND_STATUS_UNKNOWN")
    unexpected = act(conflict, "private_delivery", "REVIEW_PENDING", "msg_test_3")
    act(in_flight, "public_ack", "SENDING")
    act(in_flight, "private_delivery", "APPROVED")
    attach_unknown = act(unknown_held, "public_ack", "SEND_STATUS_UNKNOWN", "msg_test_4")
    act(unknown_held, "private_delivery", "CLOSED_NO_REPLY")
    act(unverified, "public_ack", "SENT")  # not a staged event: not compared
    act(more_flight, "public_ack", "SENDING")
    act(more_flight, "private_delivery", "APPROVED")
    confirmed_too = act(more_sent, "public_ack", "SENT", "msg_test_6")
    candidate_too = act(more_sent, "private_delivery", "SEND_STATUS_UNKNOWN")
    StagedReceipt.objects.create(
        run=run, reply_key="f" * 64, provider_reply_id="msg_test_5", event_key=matched.event_key
    )
    for at, state in (
        (BASE_TIME, "QUARANTINED"),
        (BASE_TIME - timedelta(seconds=1), "QUARANTINED"),
        (BASE_TIME + timedelta(minutes=1), "DISMISSED"),
    ):
        QuarantineReceipt.objects.create(
            source=ctx.source,
            reason_code="invalid_signature",
            state=state,
            authenticated=False,
            received_at=at,
            body_sha256="2" * 64,
            body_bytes=3,
        )

    QuarantineReceipt.objects.create(
        source=other_source(ctx.source),
        reason_code="invalid_signature",
        authenticated=False,
        received_at=BASE_TIME,
        body_sha256="2" * 64,
        body_bytes=3,
    )
    comparison = generation_compare(ctx.source, run)
    counts = report_counts(ctx.source, run, comparison)
    assert counts == {
        "events_compared": 8,
        "events_local": 9,
        "events_matched": 6,
        "missing_found": 1,
        # What the replay did is counted once the repairs have run: none yet.
        "missing_recovered": None,
        "missing_replay_refused": None,
        "missing_replay_failed": None,
        "identity_conflicts": 1,
        "source_unverified": 2,
        "duplicates_converged": 1,
        "actions_compared": 14,
        "replies_confirmed": 4,
        "receipts_attached": 2,
        "sent_without_receipt": 1,
        "retry_candidates": 2,
        "unknown_sends": 3,
        "sending_in_flight": 2,
        "suppressed_actions": 1,
        "unexpected_receipts": 1,
        "unknown_receipts": 1,
        "receipts_not_compared": 0,
        "invalid_source_items": 1,
        "quarantined_inputs": 1,
        "page_calls": 3,
        "external_calls": 0,
    }
    findings_write(ctx.report, run, comparison, counts)
    rows = set(
        Finding.objects.filter(report=ctx.report).values_list(
            "kind",
            "event_key",
            "reply_key",
            "action_id",
            "action_state",
            "repair",
            "repair_outcome",
            "detail",
        )
    )
    d = {
        "MISSING_LOCAL": "the source has it and Conduit did not: replayed through ingest, replies held for review",
        "IDENTITY_CONFLICT": "the source's payload differs from the one first accepted: the first stays",
        "SOURCE_UNVERIFIED": "no source evidence in this window: kept, marked SOURCE_UNVERIFIED",
        "RECEIPT_ATTACHED": "the provider shows this reply applied: receipt attached, SENT",
        "RECEIPT_MISSING": "SENT locally, but the provider shows no such reply: SEND_STATUS_UNKNOWN, nothing resent",
        "RETRY_CANDIDATE": "no receipt on the provider's thread: a person decides whether the same key may run again",
        "UNEXPECTED_RECEIPT": "the provider shows a reply for an action Conduit did not send",
        "UNKNOWN_RECEIPT": "the provider shows a reply under a key Conduit never planned",
    }

    def on(kind, action, state, repair, outcome):
        return (kind, action.event_id, action.reply_key, action.pk, state, repair, outcome, d[kind])

    assert rows == {
        (
            "MISSING_LOCAL",
            missing.event_key,
            "",
            None,
            "",
            "replayed_through_ingest",
            "planned",
            d["MISSING_LOCAL"],
        ),
        ("IDENTITY_CONFLICT", conflict.event_key, "", None, "", "none", "", d["IDENTITY_CONFLICT"]),
        (
            "SOURCE_UNVERIFIED",
            unverified.event_key,
            "",
            None,
            "",
            "marked_source_unverified",
            "planned",
            d["SOURCE_UNVERIFIED"],
        ),
        (
            "SOURCE_UNVERIFIED",
            first.event_key,
            "",
            None,
            "",
            "marked_source_unverified",
            "planned",
            d["SOURCE_UNVERIFIED"],
        ),
        on("RECEIPT_ATTACHED", attach_sending, "SENDING", "receipt_attached_marked_sent", "planned"),
        on(
            "RECEIPT_ATTACHED",
            attach_unknown,
            "SEND_STATUS_UNKNOWN",
            "receipt_attached_marked_sent",
            "planned",
        ),
        on("RECEIPT_MISSING", lost, "SENT", "marked_send_status_unknown", "planned"),
        on("RETRY_CANDIDATE", candidate, "SEND_STATUS_UNKNOWN", "none", ""),
        on("RETRY_CANDIDATE", candidate_too, "SEND_STATUS_UNKNOWN", "none", ""),
        on("UNEXPECTED_RECEIPT", unexpected, "REVIEW_PENDING", "none", ""),
        ("INVALID_SOURCE_ITEM", "", "", None, "", "none", "", "page 2 item 4: missing_field"),
        ("UNKNOWN_RECEIPT", matched.event_key, "f" * 64, None, "", "none", "", d["UNKNOWN_RECEIPT"]),
    }
    # confirmed and suppressed actions need nothing
    assert not {confirmed.pk, confirmed_too.pk, suppressed.pk} & {r[3] for r in rows}


def test_findings_are_written_inside_the_database_without_losing_any(ctx):
    """The findings are written by INSERT ... SELECT (no table held in memory): five unverified
    events are five findings, each once."""
    from reconcile.publication import findings_write, generation_compare
    from tests.reconcile.conftest import item

    events = _accept(ctx, *[item(n) for n in range(1, 6)])
    findings_write(ctx.report, ctx.run, generation_compare(ctx.source, ctx.run))
    assert sorted(Finding.objects.filter(report=ctx.report).values_list("event_key", flat=True)) == sorted(
        e.event_key for e in events
    )


def test_an_unknown_receipt_becomes_its_finding(ctx):
    """docs/concepts/reconciliation.md#repairs: "a receipt ... under a key Conduit never planned | none | UNKNOWN_RECEIPT".
    A regression: the receipt row was padded into the wrong columns (action_state NULL), so a
    staged receipt under an unknown key broke the final page's transaction and the scan never
    published."""
    from reconcile.publication import findings_write, generation_compare
    from tests.reconcile.conftest import item

    (o,) = _stage(ctx, item(1))
    StagedReceipt.objects.create(
        run=ctx.run, reply_key="f" * 64, provider_reply_id="msg_test_5", event_key=o.event_key
    )
    findings_write(ctx.report, ctx.run, generation_compare(ctx.source, ctx.run))
    assert list(
        Finding.objects.filter(report=ctx.report, kind="UNKNOWN_RECEIPT").values_list(
            "event_key", "reply_key", "action_id", "action_state", "repair", "repair_outcome", "detail"
        )
    ) == [
        (
            o.event_key,
            "f" * 64,
            None,
            "",
            "none",
            "",
            "the provider shows a reply under a key Conduit never planned",
        )
    ]


def test_without_a_window_every_local_event_is_compared_and_an_empty_comparison_counts_zero(ctx, monkeypatch):
    """No --since/--until: the run compares every event of the source, counts every receipt
    still QUARANTINED, and with nothing matched folds no duplicates (0, not a missing value). A
    live source's page calls are its external calls (docs/concepts/reconciliation.md#reports:
    "external_calls (page calls to a live source)"); the sandbox's are not."""
    from ingress.models import QuarantineReceipt
    from reconcile.publication import generation_compare, report_counts
    from reconcile.publication import report as publication
    from tests.reconcile.conftest import BASE_TIME, item

    ctx.run.page_calls = 2
    _accept(ctx, item(1), item(900))
    QuarantineReceipt.objects.create(
        source=ctx.source,
        reason_code="invalid_signature",
        authenticated=False,
        received_at=BASE_TIME.replace(year=2001),
        body_sha256="2" * 64,
        body_bytes=3,
    )
    counts = report_counts(ctx.source, ctx.run, generation_compare(ctx.source, ctx.run))
    assert {k: v for k, v in counts.items() if v} == {
        "events_local": 2,
        "source_unverified": 2,
        "quarantined_inputs": 1,
        "page_calls": 2,
    }
    monkeypatch.setattr(publication, "reads_off_host", lambda adapter, url: True)
    assert report_counts(ctx.source, ctx.run, generation_compare(ctx.source, ctx.run))["external_calls"] == 2


def test_repairs_apply_runs_every_planned_repair_once_in_table_order(ctx, make_action, path):
    """docs/concepts/reconciliation.md#repairs, in the table's order: replay, evidence, then the reply ledger; each
    step takes only its own kind of finding and only those still planned (a finding that failed
    in an earlier attempt keeps its outcome). The replayed event is then matched by the evidence
    step of the same run, because the replay comes first."""
    from reconcile.repairs import repairs_apply
    from tests.reconcile.conftest import item

    (missing,) = _stage(ctx, item(1))
    (unverified,) = _accept(ctx, item(2))
    replay = ctx.finding("MISSING_LOCAL", event_key=missing.event_key, repair="replayed_through_ingest")
    mark = ctx.finding("SOURCE_UNVERIFIED", event_key=unverified.event_key, repair="marked_source_unverified")
    earlier = ctx.finding(
        "SOURCE_UNVERIFIED",
        event_key=unverified.event_key,
        repair="marked_source_unverified",
        outcome="failed",
        repair_code="database_error",
    )
    sending, sent = make_action("SENDING"), make_action("SENT")
    StagedReceipt.objects.create(
        run=ctx.run, reply_key=sending.reply_key, provider_reply_id="msg_test_1", event_key=sending.event_id
    )
    attach = ctx.finding("RECEIPT_ATTACHED", action=sending, repair="receipt_attached_marked_sent")
    unknown = ctx.finding("RECEIPT_MISSING", action=sent, repair="marked_send_status_unknown")
    candidate = ctx.finding("RETRY_CANDIDATE", action=make_action("SEND_STATUS_UNKNOWN"), outcome="")
    repairs_apply(ctx.source, ctx.token, ctx.run, ctx.report)
    assert [outcome_of(f) for f in (replay, mark, earlier, attach, unknown, candidate)] == [
        ("applied", ""),
        ("applied", ""),
        ("failed", "database_error"),
        ("applied", ""),
        ("applied", ""),
        ("", ""),
    ]
    status = dict(
        InboundEvent.objects.filter(
            source=ctx.source, event_key__in=[missing.event_key, unverified.event_key]
        ).values_list("event_key", "reconcile_status")
    )
    assert status == {missing.event_key: "MATCHED", unverified.event_key: "SOURCE_UNVERIFIED"}
    moves = {
        a: list(
            ReplyTransition.objects.filter(action=a).values_list(
                "prior_state", "next_state", "actor", "reason_code"
            )
        )
        for a in (sending, sent)
    }
    assert moves == {
        sending: [("SENDING", "SENT", "system:reconcile", "receipt_found_at_reconcile")],
        sent: [("SENT", "SEND_STATUS_UNKNOWN", "system:reconcile", "receipt_missing_at_reconcile")],
    }
    assert ReplyAction.objects.get(pk=sending.pk).provider_reply_id == "msg_test_1"
    assert ReplyAction.objects.get(pk=sent.pk).last_error_code == "receipt_missing_at_reconcile"
    assert path.one_row == path.took(batch=[], one_row=[sending, sent])


def test_a_replay_that_meets_a_conflicting_event_is_quarantined_as_a_body_of_no_bytes(ctx):
    """The replay goes through the webhook's own ingest (docs/concepts/reconciliation.md#repairs), so a missing event that a
    webhook delivered meanwhile with another payload is refused as that ingest refuses it: a
    quarantine receipt for the replay's delivery, whose body is the batch digest and 0 bytes
    (a replay has no body of its own)."""
    from ingress.models import QuarantineReceipt
    from tests.reconcile.conftest import item

    (staged,) = _stage(ctx, item(1))
    finding = ctx.finding("MISSING_LOCAL", event_key=staged.event_key, repair="replayed_through_ingest")
    _accept(ctx, item(1, text="CHECKLIST changed meanwhile"))
    missing_replay(ctx.source, ctx.token, ctx.run, ctx.report)
    receipts = list(
        QuarantineReceipt.objects.filter(delivery_id__startswith=f"reconcile:{ctx.run.pk}:").values_list(
            "reason_code", "body_bytes"
        )
    )
    assert receipts and {r[1] for r in receipts} == {0}
    # Nothing was replayed: the finding says so (docs/concepts/reconciliation.md#repair-outcomes:
    # `refused`, `replay_refused`), never `applied`.
    assert outcome_of(finding) == ("refused", "replay_refused")


def test_a_refused_replay_batch_refuses_every_finding_it_held_and_the_next_batch_goes_on(ctx, monkeypatch):
    """docs/concepts/event-contract.md#batches: "Any invalid member rolls back the entire batch": a batch with one event a
    webhook delivered meanwhile with another payload writes none of its events, so none of its
    findings is `applied`; the next batch is replayed as usual."""
    from tests.reconcile.conftest import item

    monkeypatch.setattr(repairs, "REPLAY_BATCH", 2)
    observations = sorted(_stage(ctx, item(1), item(2), item(3)), key=lambda o: o.event_key)
    findings = [
        ctx.finding("MISSING_LOCAL", event_key=o.event_key, repair="replayed_through_ingest")
        for o in observations
    ]
    conflicting = next(
        n for n in (1, 2, 3) if _observations(ctx.source, item(n))[0].event_key == observations[0].event_key
    )
    _accept(ctx, item(conflicting, text="CHECKLIST changed meanwhile"))
    missing_replay(ctx.source, ctx.token, ctx.run, ctx.report)
    assert [outcome_of(f) for f in findings] == [("refused", "replay_refused")] * 2 + [("applied", "")]
    assert not InboundEvent.objects.filter(event_key=observations[1].event_key).exists()
    assert InboundEvent.objects.filter(event_key=observations[2].event_key).exists()


def test_each_event_step_leaves_the_other_kinds_planned_findings_alone(ctx, make_action):
    """Each step acts only on its own kind: the replay does not take a SOURCE_UNVERIFIED or
    receipt finding for a missing event, the evidence step does not mark them."""
    from tests.reconcile.conftest import item

    (event,) = _accept(ctx, item(3))
    others = [
        ctx.finding("RECEIPT_MISSING", action=make_action("SENT"), repair="marked_send_status_unknown"),
        ctx.finding("SOURCE_UNVERIFIED", event_key=event.event_key, repair="marked_source_unverified"),
    ]
    missing_replay(ctx.source, ctx.token, ctx.run, ctx.report)
    assert [outcome_of(f) for f in others] == [("planned", "")] * 2
    evidence_mark(ctx.source, ctx.token, ctx.run, ctx.report)
    assert [outcome_of(f) for f in others] == [("planned", ""), ("applied", "")]


@pytest.mark.parametrize(
    "transports, compared",
    [(None, ["private_delivery", "public_ack"]), ({"sandbox"}, ["public_ack"]), ({"nowhere"}, [])],
    ids=["every_purpose", "one_purpose", "no_purpose"],
)
def test_only_purposes_whose_receipts_the_read_shows_are_compared(ctx, monkeypatch, transports, compared):
    """docs/concepts/reconciliation.md#steps: "no receipt" is a finding only for actions routed to a
    transport whose receipts the source's read shows whenever they exist (the reader's
    `receipt_transports`; None: every transport). The others, sent or parked, are counted as
    receipts not compared and get no finding; a receipt the read does show is compared whatever
    the route."""
    from conduit.providers.registry import get_adapter
    from reconcile.publication import findings_write, generation_compare, report_counts
    from reconcile.publication.compare import compared_purposes
    from replies.models import ReplyRoute
    from tests.reconcile.conftest import item

    adapter = type(get_adapter(ctx.source.adapter))
    monkeypatch.setattr(adapter, "receipt_transports", None if transports is None else frozenset(transports))
    ReplyRoute.objects.filter(source=ctx.source, purpose="private_delivery").update(
        transport_name="elsewhere"
    )
    ReplyRoute.objects.create(
        source=other_source(ctx.source), purpose="private_delivery", transport_name="sandbox"
    )
    sent, parked, attached = _accept(ctx, item(1), item(2), item(3))
    _stage(ctx, item(1), item(2), item(3))
    actions = {(a.event_id, a.purpose): a for a in ReplyAction.objects.all()}
    for purpose in ("public_ack", "private_delivery"):
        ReplyAction.objects.filter(pk=actions[(sent.event_key, purpose)].pk).update(delivery_state="SENT")
        ReplyAction.objects.filter(pk=actions[(parked.event_key, purpose)].pk).update(
            delivery_state="SEND_STATUS_UNKNOWN"
        )
        action = actions[(attached.event_key, purpose)]
        ReplyAction.objects.filter(pk=action.pk).update(delivery_state="SENDING")
        StagedReceipt.objects.create(
            run=ctx.run,
            reply_key=action.reply_key,
            provider_reply_id=f"msg_{purpose}",
            event_key=action.event_id,
        )
    assert compared_purposes(ctx.source) == (None if transports is None else compared)
    comparison = generation_compare(ctx.source, ctx.run)
    counts = report_counts(ctx.source, ctx.run, comparison)
    n = len(compared)
    assert {k: counts[k] for k in ("sent_without_receipt", "retry_candidates", "receipts_not_compared")} == {
        "sent_without_receipt": n,
        "retry_candidates": n,
        "receipts_not_compared": 2 * (2 - n),
    }
    assert counts["receipts_attached"] == 2
    findings_write(ctx.report, ctx.run, comparison, counts)
    found = set(Finding.objects.filter(report=ctx.report).values_list("kind", "action__purpose"))
    assert found == {
        ("RECEIPT_ATTACHED", "public_ack"),
        ("RECEIPT_ATTACHED", "private_delivery"),
        *{("RECEIPT_MISSING", p) for p in compared},
        *{("RETRY_CANDIDATE", p) for p in compared},
    }


def test_a_finding_a_person_closes_is_recorded_once_while_open_and_counted_again(ctx):
    """reconcile/publication/findings.py: a finding a person closes (a retry candidate, an
    unexpected or unknown receipt) is not written again while one is open for its reply; the scan
    counts it as found again. Once decided, a retry candidate found again is a new finding; a
    receipt stays acknowledged while its action stays in the state the person saw."""
    from reconcile.publication import findings_write, generation_compare
    from tests.reconcile.conftest import item

    (event,) = _accept(ctx, item(1))
    _stage(ctx, item(1))
    actions = {a.purpose: a for a in ReplyAction.objects.filter(event_id=event.event_key)}
    candidate, unexpected = actions["public_ack"], actions["private_delivery"]
    ReplyAction.objects.filter(pk=candidate.pk).update(delivery_state="SEND_STATUS_UNKNOWN")
    ReplyAction.objects.filter(pk=unexpected.pk).update(delivery_state="REVIEW_PENDING")
    for key, msg in ((unexpected.reply_key, "msg_test_u"), ("f" * 64, "msg_test_k")):
        StagedReceipt.objects.create(
            run=ctx.run, reply_key=key, provider_reply_id=msg, event_key=event.event_key
        )
    kinds = ("RETRY_CANDIDATE", "UNEXPECTED_RECEIPT", "UNKNOWN_RECEIPT")

    def scan() -> tuple[dict, list]:
        report = _other_report(ctx)
        carried = findings_write(report, ctx.run, generation_compare(ctx.source, ctx.run))
        written = sorted(Finding.objects.filter(report=report, kind__in=kinds).values_list("kind", flat=True))
        return {k: carried[k] for k in kinds}, written

    assert scan() == ({k: 0 for k in kinds}, sorted(kinds))
    assert scan() == ({k: 1 for k in kinds}, [])  # all three still open
    Finding.objects.filter(kind__in=kinds).update(
        decision="CLOSED", decided_at=timezone.now(), decided_by="tester", decision_reason="checked"
    )
    assert scan() == (
        {"RETRY_CANDIDATE": 0, "UNEXPECTED_RECEIPT": 1, "UNKNOWN_RECEIPT": 1},
        ["RETRY_CANDIDATE"],
    )
    ReplyAction.objects.filter(pk=unexpected.pk).update(delivery_state="APPROVED")
    assert scan() == (
        {"RETRY_CANDIDATE": 1, "UNEXPECTED_RECEIPT": 0, "UNKNOWN_RECEIPT": 1},
        ["UNEXPECTED_RECEIPT"],
    )


# -- the rules' remaining edges: families, the portable paths, person findings, the counts --------


@pytest.mark.parametrize("undeclared", ["complete", "none"])
def test_only_families_a_complete_read_shows_whole_can_be_unverified(ctx, monkeypatch, undeclared):
    """docs/concepts/reconciliation.md#families: an event is unverified by its absence only when its
    family is read back whole: a declared COMPLETE family, or an undeclared type where the
    platform reads every type whole; a LIMITED or unrecoverable family never."""
    from types import SimpleNamespace

    from conduit.providers.reading import COMPLETE, LIMITED, NOT_RECOVERABLE, Family
    from reconcile.publication import compare
    from tests.reconcile.conftest import item

    adapter = SimpleNamespace(
        families=(
            Family("comment.created", COMPLETE),
            Family("message.created", LIMITED, "the read shows the newest 20 only"),
            Family("comment.edited", NOT_RECOVERABLE, "never read back"),
        ),
        undeclared_family=lambda event_type: Family(
            event_type, undeclared, "" if undeclared == COMPLETE else "not declared"
        ),
    )
    monkeypatch.setattr(compare, "get_adapter", lambda name: adapter)
    events = _accept(ctx, item(1), item(2), item(3), item(4))
    for event, event_type in zip(events[1:], ("message.created", "comment.edited", "story.mention")):
        InboundEvent.objects.filter(event_key=event.event_key).update(event_type=event_type)
    kept = compare.recoverable(ctx.source, InboundEvent.objects.filter(source=ctx.source))
    expected = {"comment.created"} | ({"story.mention"} if undeclared == COMPLETE else set())
    assert set(kept.values_list("event_type", flat=True)) == expected


def test_with_no_family_read_whole_no_event_is_unverified_and_the_findings_still_write(ctx, monkeypatch):
    """A platform none of whose families a read shows whole (WhatsApp): no local event is
    unverified by its absence, and the comparison's findings are still written (an empty IN
    cannot be compiled into their INSERT ... SELECT)."""
    from types import SimpleNamespace

    from conduit.providers.reading import LIMITED, NOT_RECOVERABLE, Family
    from reconcile.publication import compare, findings_write, generation_compare
    from tests.reconcile.conftest import item

    adapter = SimpleNamespace(
        families=(Family("comment.created", LIMITED, "the read shows the newest 20 only"),),
        undeclared_family=lambda event_type: Family(event_type, NOT_RECOVERABLE, "not declared"),
        receipt_transports=None,
    )
    monkeypatch.setattr(compare, "get_adapter", lambda name: adapter)
    _accept(ctx, item(1), item(2))  # local, and absent from the (empty) staged read
    assert not compare.recoverable(ctx.source, InboundEvent.objects.filter(source=ctx.source)).exists()
    findings_write(ctx.report, ctx.run, generation_compare(ctx.source, ctx.run))
    assert not Finding.objects.filter(report=ctx.report, kind="SOURCE_UNVERIFIED").exists()


@pytest.mark.parametrize("fast", [True, False], ids=["set_statement", "portable"])
def test_a_reconcile_mark_moves_what_the_table_declares_and_leaves_what_is_already_there(
    ctx, monkeypatch, fast
):
    """Both paths of `events_reconcile_mark` (PostgreSQL's one statement, the portable one the
    demo's SQLite takes) move UNRECONCILED and SOURCE_UNVERIFIED events to MATCHED with one
    history row each, give an event already MATCHED its new `reconciled_at` only, and return how
    many moved."""
    from datetime import timedelta

    from ingress.models import EventTransition
    from tests.reconcile.conftest import item

    monkeypatch.setattr(repairs, "fast_sql", lambda: fast)
    fresh, unverified, matched = _accept(ctx, item(1), item(2), item(3))
    InboundEvent.objects.filter(event_key=unverified.event_key).update(reconcile_status="SOURCE_UNVERIFIED")
    InboundEvent.objects.filter(event_key=matched.event_key).update(reconcile_status="MATCHED")
    at = timezone.now() - timedelta(minutes=5)
    moved = repairs.events_reconcile_mark(
        events=InboundEvent.objects.filter(source=ctx.source),
        to="MATCHED",
        actor="system:reconcile",
        reason_code="source_shows_same_payload",
        at=at,
    )
    assert moved == 2
    rows = InboundEvent.objects.filter(source=ctx.source).values_list("reconcile_status", "reconciled_at")
    assert set(rows) == {("MATCHED", at)}
    history = EventTransition.objects.filter(ledger="event_reconcile").values_list(
        "event__event_key", "prior_state", "next_state", "actor", "reason_code", "refused", "at"
    )
    assert sorted(history) == sorted(
        (e.event_key, prior, "MATCHED", "system:reconcile", "source_shows_same_payload", False, at)
        for e, prior in ((fresh, "UNRECONCILED"), (unverified, "SOURCE_UNVERIFIED"))
    )


@pytest.mark.parametrize("fast", [True, False], ids=["array_parameter", "portable"])
def test_the_outcome_update_sets_only_the_named_planned_findings(ctx, monkeypatch, fast):
    """`_findings_outcome`, on PostgreSQL one UPDATE with the ids as one array parameter, and off
    it (the demo's SQLite) the ORM's: the outcome, code and quarantine receipt of the findings
    named and still planned; a finding not named, or no longer planned, keeps its own."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from ingress.models import QuarantineReceipt

    monkeypatch.setattr(repairs, "fast_sql", lambda: fast)
    receipt = QuarantineReceipt.objects.create(
        source=ctx.source,
        reason_code="identity_conflict",
        authenticated=True,
        received_at=timezone.now(),
        body_sha256="3" * 64,
        body_bytes=0,
    )
    named, other, done = (
        ctx.finding("MISSING_LOCAL", event_key=f"evt_test_{n}", repair="replayed_through_ingest")
        for n in (1, 2, 3)
    )
    Finding.objects.filter(pk=done.pk).update(repair_outcome="applied")
    with CaptureQueriesContext(connection) as queries:
        repairs._findings_outcome(
            [named.pk, done.pk], "refused", code="replay_refused", receipt=str(receipt.receipt_id)
        )
    (update,) = [q["sql"] for q in queries if q["sql"].startswith("UPDATE")]
    assert ("= ANY(" in update) is fast, update
    got = {
        f.pk: (f.repair_outcome, f.repair_code, f.quarantine_receipt)
        for f in Finding.objects.filter(pk__in=[named.pk, other.pk, done.pk])
    }
    assert got == {
        named.pk: ("refused", "replay_refused", receipt.receipt_id),
        other.pk: ("planned", "", None),
        done.pk: ("applied", "", None),
    }


def test_a_refused_replay_names_its_quarantine_receipt_on_each_finding_and_in_the_log(
    ctx, monkeypatch, caplog
):
    """The review of the receipt that refused a batch is those findings' decision
    (reconcile.services), so each finding names it; the log line says which source, run, how many
    events and which receipts, and no text of the events."""
    from ingress.models import QuarantineReceipt
    from tests.reconcile.conftest import item

    (observation,) = _stage(ctx, item(1))
    finding = ctx.finding("MISSING_LOCAL", event_key=observation.event_key, repair="replayed_through_ingest")
    _accept(ctx, item(1, text="CHECKLIST changed meanwhile"))
    with caplog.at_level(logging.WARNING, logger="conduit.reconcile"):
        missing_replay(ctx.source, ctx.token, ctx.run, ctx.report)
    (receipt,) = QuarantineReceipt.objects.filter(source=ctx.source)
    finding.refresh_from_db()
    assert (finding.repair_outcome, finding.repair_code, finding.quarantine_receipt) == (
        "refused",
        "replay_refused",
        receipt.receipt_id,
    )
    assert [r.getMessage() for r in caplog.records if r.name == "conduit.reconcile"] == [
        f"reconcile repair replay source={ctx.source.name} run={ctx.run.pk} refused events=1 receipt={receipt.receipt_id}"
    ]


def _scan(ctx, kinds=("RETRY_CANDIDATE", "UNEXPECTED_RECEIPT")):
    from reconcile.publication import findings_write, generation_compare

    report = _other_report(ctx)
    findings_write(report, ctx.run, generation_compare(ctx.source, ctx.run))
    return sorted(Finding.objects.filter(report=report, kind__in=kinds).values_list("kind", "reply_key"))


def test_an_open_finding_holds_back_only_its_own_kind_for_its_own_reply(ctx):
    """A finding a person closes is not written again while one is open "for its reply" and of
    its kind: an open UNEXPECTED_RECEIPT does not hold back that reply's RETRY_CANDIDATE, and an
    open RETRY_CANDIDATE of one reply does not hold back another reply's."""
    from tests.reconcile.conftest import item

    (event,) = _accept(ctx, item(1))
    _stage(ctx, item(1))
    first, second = ReplyAction.objects.filter(event_id=event.event_key).order_by("purpose")
    ReplyAction.objects.filter(pk__in=[first.pk, second.pk]).update(delivery_state="SEND_STATUS_UNKNOWN")
    earlier = _other_report(ctx)
    ctx.finding("UNEXPECTED_RECEIPT", action=first, action_state="FAILED", report=earlier)
    ctx.finding("RETRY_CANDIDATE", action=second, report=earlier)
    assert _scan(ctx) == [("RETRY_CANDIDATE", first.reply_key)]


def test_an_open_receipt_finding_holds_back_its_reply_whatever_state_it_was_seen_in(ctx):
    """An UNEXPECTED_RECEIPT left open when the action was FAILED still holds back a second one
    after the action moved on to another state a receipt is unexpected in: open means open (the
    database allows one open row per reply and kind)."""
    from tests.reconcile.conftest import item

    (event,) = _accept(ctx, item(1))
    _stage(ctx, item(1))
    action = ReplyAction.objects.filter(event_id=event.event_key, purpose="public_ack").get()
    ReplyAction.objects.filter(pk=action.pk).update(delivery_state="REVIEW_PENDING")
    StagedReceipt.objects.create(
        run=ctx.run, reply_key=action.reply_key, provider_reply_id="msg_test_u", event_key=event.event_key
    )
    ctx.finding("UNEXPECTED_RECEIPT", action=action, action_state="FAILED", report=_other_report(ctx))
    assert _scan(ctx) == []


def test_the_report_counts_are_not_counted_again_when_the_findings_are_written(ctx):
    """reconcile/publication/findings.py: given the report's counts, writing the findings counts
    no set again (no COUNT statement), and what was found again still comes out right."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from reconcile.publication import findings_write, generation_compare, report_counts
    from tests.reconcile.conftest import item

    (event,) = _accept(ctx, item(1))
    _stage(ctx, item(1))
    action = ReplyAction.objects.filter(event_id=event.event_key, purpose="public_ack").get()
    ReplyAction.objects.filter(pk=action.pk).update(delivery_state="SEND_STATUS_UNKNOWN")
    StagedReceipt.objects.create(run=ctx.run, reply_key="f" * 64, provider_reply_id="msg_k", event_key="")
    comparison = generation_compare(ctx.source, ctx.run)
    counts = report_counts(ctx.source, ctx.run, comparison)
    assert findings_write(ctx.report, ctx.run, comparison, counts)["RETRY_CANDIDATE"] == 0
    again = _other_report(ctx)
    with CaptureQueriesContext(connection) as queries:
        carried = findings_write(again, ctx.run, comparison, counts)
    assert {k: carried[k] for k in ("RETRY_CANDIDATE", "UNKNOWN_RECEIPT", "UNEXPECTED_RECEIPT")} == {
        "RETRY_CANDIDATE": 1,
        "UNKNOWN_RECEIPT": 1,
        "UNEXPECTED_RECEIPT": 0,
    }
    assert [q["sql"] for q in queries if "COUNT(" in q["sql"].upper()] == []


def test_a_reply_repair_reads_staged_receipts_only_to_attach_them(ctx, make_action):
    """Marking SENT-without-receipt actions SEND_STATUS_UNKNOWN takes no receipt: the staged
    receipts are not read at all (the one-row path reads them only for a move to SENT)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    finding = ctx.finding("RECEIPT_MISSING", action=make_action("SENT"), repair="marked_send_status_unknown")
    with CaptureQueriesContext(connection) as queries:
        ctx.mark_unknown()
    assert outcome_of(finding) == ("applied", "")
    staged = StagedReceipt._meta.db_table
    assert [q["sql"] for q in queries if staged in q["sql"]] == []


def test_a_sent_reply_with_its_receipt_is_confirmed_not_counted_as_not_compared(ctx, monkeypatch):
    """ "receipts not compared" counts sent or parked actions without a receipt where the read
    cannot show every receipt; one whose receipt the read did show is confirmed, compared or not."""
    from conduit.providers.registry import get_adapter
    from reconcile.publication import generation_compare, report_counts
    from tests.reconcile.conftest import item

    monkeypatch.setattr(type(get_adapter(ctx.source.adapter)), "receipt_transports", frozenset())
    (event,) = _accept(ctx, item(1))
    _stage(ctx, item(1))
    shown, unseen = ReplyAction.objects.filter(event_id=event.event_key).order_by("purpose")
    ReplyAction.objects.filter(pk__in=[shown.pk, unseen.pk]).update(delivery_state="SENT")
    StagedReceipt.objects.create(
        run=ctx.run, reply_key=shown.reply_key, provider_reply_id="msg_test_s", event_key=event.event_key
    )
    counts = report_counts(ctx.source, ctx.run, generation_compare(ctx.source, ctx.run))
    assert (counts["receipts_not_compared"], counts["replies_confirmed"]) == (1, 1)


@pytest.mark.parametrize(
    "source_url, external", [("http://127.0.0.1:9/", 0), ("https://provider.example.invalid/", 2)]
)
def test_a_live_reader_on_this_host_makes_no_external_calls(ctx, monkeypatch, source_url, external):
    """docs/concepts/reconciliation.md#reports: external_calls are "page calls to a live source";
    a live reader pointed at a simulator on this host calls nothing outside it."""
    from conduit.providers.registry import get_adapter
    from reconcile.publication import generation_compare, report_counts

    monkeypatch.setattr(type(get_adapter(ctx.source.adapter)), "live", True)
    ctx.source.source_url = source_url
    ctx.run.page_calls = 2
    counts = report_counts(ctx.source, ctx.run, generation_compare(ctx.source, ctx.run))
    assert (counts["page_calls"], counts["external_calls"]) == (2, external)


def test_only_the_staged_event_of_the_same_key_is_evidence_for_a_local_event(ctx):
    """MATCHED needs the source to show this event: the same key with the same payload. Another
    event with an equal payload hash is no evidence (a Page comment hidden later hashes the same
    fields as the comment, under another key, and a read never shows a hide)."""
    from tests.reconcile.conftest import item

    (shown,) = _accept(ctx, item(1))
    _stage(ctx, item(1))
    hidden = InboundEvent.objects.get(event_key=shown.event_key)
    hidden.pk, hidden.event_key = None, f"{shown.event_key}@hidden"
    hidden.source_event_id, hidden.event_type = f"{hidden.source_event_id}@hidden", "comment.hidden"
    hidden.save()
    evidence_mark(ctx.source, ctx.token, ctx.run, ctx.report)
    status = dict(InboundEvent.objects.values_list("event_key", "reconcile_status"))
    assert status == {shown.event_key: "MATCHED", hidden.event_key: "UNRECONCILED"}


def test_planned_repairs_move_the_actions_in_the_ledgers_order(ctx, make_action, path, monkeypatch):
    """Findings are written in whatever order the comparison met them; their actions are repaired
    in the ledger's (the actions' ids), a chunk after another, whichever path a chunk takes."""
    monkeypatch.setattr(repairs, "CHUNK", 2)
    actions = [make_action("SENDING") for _ in range(5)]
    for action in reversed(actions):  # findings' ids against the ledger's order
        StagedReceipt.objects.create(
            run=ctx.run, reply_key=action.reply_key, provider_reply_id="m", event_key=action.event_id
        )
        ctx.finding("RECEIPT_ATTACHED", action=action, repair="receipt_attached_marked_sent")
    batched = []
    real_batch = repairs._actions_move_set

    def recorded(run, chunk, **kwargs):
        batched.extend(row[1] for row in chunk)
        return real_batch(run, chunk, **kwargs)

    monkeypatch.setattr(repairs, "_actions_move_set", recorded)
    ctx.attach()
    ids = [a.pk for a in actions]
    assert (path.one_row if path.name == "one_row" else batched) == ids
    assert ReplyAction.objects.filter(pk__in=ids, delivery_state="SENT").count() == 5


@pytest.mark.parametrize("staged", [0, 1, 3, 4, 6, 7, 11])
def test_the_staged_keys_are_cut_into_ranges_of_the_chunk_each_key_in_exactly_one(ctx, monkeypatch, staged):
    """The evidence marks' ranges (`_staged_key_ranges`): this run's staged keys in key order,
    EVIDENCE_CHUNK to a range and the rest in the last, which has no upper bound; each staged key
    in exactly one range. Up to one chunk, one range with no bounds at all. Another run's staged
    keys, interleaved with this run's, count for nothing."""
    from tests.reconcile.conftest import item

    monkeypatch.setattr(repairs, "EVIDENCE_CHUNK", 3)
    if staged:
        _stage(ctx, *(item(n) for n in range(1, 2 * staged + 1, 2)))
    other_run, _ = run_and_report(other_source(ctx.source), state="SCANNING")
    _stage(ctx, *(item(n) for n in range(0, 2 * staged + 2, 2)), run=other_run)
    keys = sorted(StagedEvent.objects.filter(run=ctx.run).values_list("event_key", flat=True))
    assert len(keys) == staged

    ranges = repairs._staged_key_ranges(ctx.run)

    if staged <= 3:
        assert ranges == [{}]
        return
    held = [
        [k for k in keys if r["event_key__gte"] <= k and ("event_key__lt" not in r or k < r["event_key__lt"])]
        for r in ranges
    ]
    assert held == [keys[i : i + 3] for i in range(0, staged, 3)]
    assert [set(r) for r in ranges] == [{"event_key__gte", "event_key__lt"}] * (len(ranges) - 1) + [
        {"event_key__gte"}
    ]
    assert [r["event_key__gte"] for r in ranges] == keys[::3]  # each starts at a staged key


def test_elsewhere_than_postgresql_one_range_holds_every_key(ctx, monkeypatch):
    from tests.reconcile.conftest import item

    monkeypatch.setattr(repairs, "EVIDENCE_CHUNK", 1)
    monkeypatch.setattr(repairs, "fast_sql", lambda: False)
    _stage(ctx, item(1), item(2), item(3))
    assert repairs._staged_key_ranges(ctx.run) == [{}]
