"""The acceptance table (docs/concepts/acceptance.md#checks): one test per row, named after it, and the instrument-integrity controls.

The checks live in `reconcile/proof/acceptance/` (their planted faults in
`simulators/testkit/`, reached through conduit.standins), so `manage.py acceptance`
runs the very same functions against a configured database.
"""

from __future__ import annotations

import uuid

import pytest

from platforms.meta import checks as meta_checks
from platforms.meta.acceptance import MetaHarness
from platforms.meta.field_maps import meta_field_maps
from platforms.sandbox.acceptance import Harness
from platforms.whatsapp import checks as whatsapp_checks
from platforms.whatsapp.acceptance import WhatsAppHarness
from reconcile.proof import acceptance
from reconcile.proof.acceptance import CONTROLS
from simulators import testkit

REAL_HTTP = pytest.mark.django_db(transaction=True)  # the canary serves its webhook over real HTTP


@pytest.fixture
def harness(db):
    h = Harness()
    yield h
    h.close()


def test_event_identity(harness):
    assert acceptance.event_identity(harness) == []


def test_reply_identity(harness):
    assert acceptance.reply_identity(harness) == []


def test_source_proof(harness):
    assert acceptance.source_proof(harness) == []


def test_required_fields(harness):
    assert acceptance.required_fields(harness) == []


def test_approval_gate(harness):
    assert acceptance.approval_gate(harness) == []


def test_safe_retry(harness):
    assert acceptance.safe_retry(harness) == []


def test_ambiguous_send(harness):
    assert acceptance.ambiguous_send(harness) == []


def test_reconciliation(harness):
    assert acceptance.reconciliation(harness) == []


@REAL_HTTP
def test_canary():
    assert acceptance.canary() == []


def test_state_model(harness):
    assert acceptance.state_model(harness) == []


@pytest.fixture
def meta_harness(db):
    h = MetaHarness()
    yield h
    h.close()


def test_meta_source_proof(meta_harness):
    assert meta_checks.meta_source_proof(meta_harness) == []


def test_meta_event_identity(meta_harness):
    assert meta_checks.meta_event_identity(meta_harness) == []


def test_meta_reconciliation(meta_harness):
    assert meta_checks.meta_reconciliation(meta_harness) == []


def test_meta_approval_gate(meta_harness):
    """docs/concepts/acceptance.md#checks: "An action in REVIEW_PENDING produces zero transport calls" (through the Meta transports)."""
    assert meta_checks.meta_approval_gate(meta_harness) == []


def test_meta_safe_retry(meta_harness):
    """docs/concepts/acceptance.md#checks: "A failure before transport retries under the same keys";
    docs/platforms/meta.md#error-meanings: throttled and not applied -> FAILED_BEFORE_SEND, retried
    automatically."""
    assert meta_checks.meta_safe_retry(meta_harness) == []


def test_meta_ambiguous_send(meta_harness):
    """docs/concepts/acceptance.md#checks: "A simulated lost receipt enters SEND_STATUS_UNKNOWN and
    produces no automatic retry"."""
    assert meta_checks.meta_ambiguous_send(meta_harness) == []


def test_the_meta_send_rows_go_through_the_meta_transports(meta_harness):
    from replies.models import ReplyRoute

    routes = dict(
        ReplyRoute.objects.filter(source=meta_harness.source).values_list("purpose", "transport_name")
    )
    assert routes == {"public_ack": "meta-comment-reply", "private_delivery": "meta-private-reply"}
    assert set(
        ReplyRoute.objects.filter(source=meta_harness.source).values_list("target_url", flat=True)
    ) == {meta_harness.graph.instagram_url}


def test_meta_safe_retry_control_names_the_parked_send(meta_harness):
    with testkit.meta_throttling_taken_as_ambiguous():
        failures = meta_checks.meta_safe_retry(meta_harness)
    assert any("got SEND_STATUS_UNKNOWN then not_claimed" in f for f in failures), failures


def test_meta_ambiguous_send_control_names_the_wrong_state(meta_harness):
    with testkit.meta_timeout_taken_as_not_sent():
        failures = meta_checks.meta_ambiguous_send(meta_harness)
    assert any("reached FAILED_BEFORE_SEND" in f for f in failures), failures


@pytest.fixture
def whatsapp_harness(db):
    h = WhatsAppHarness()
    yield h
    h.close()


def test_whatsapp_source_proof(whatsapp_harness):
    assert whatsapp_checks.whatsapp_source_proof(whatsapp_harness) == []


def test_whatsapp_event_identity(whatsapp_harness):
    assert whatsapp_checks.whatsapp_event_identity(whatsapp_harness) == []


def test_whatsapp_approval_gate(whatsapp_harness):
    assert whatsapp_checks.whatsapp_approval_gate(whatsapp_harness) == []


def test_whatsapp_safe_retry(whatsapp_harness):
    """docs/platforms/whatsapp.md#error-meanings: 130429, not applied, retried after the pause."""
    assert whatsapp_checks.whatsapp_safe_retry(whatsapp_harness) == []


def test_whatsapp_ambiguous_send(whatsapp_harness):
    """docs/platforms/whatsapp.md#statuses: a status carrying the reply key of a SEND_STATUS_UNKNOWN
    action settles it as SENT, by system:status; nothing is resent."""
    assert whatsapp_checks.whatsapp_ambiguous_send(whatsapp_harness) == []


def test_the_whatsapp_rows_send_through_the_whatsapp_transport(whatsapp_harness):
    from replies.models import ReplyRoute

    routes = list(
        ReplyRoute.objects.filter(source=whatsapp_harness.source).values_list(
            "purpose", "transport_name", "target_url"
        )
    )
    assert routes == [("private_delivery", "meta-whatsapp-message", whatsapp_harness.graph.url)]


def test_whatsapp_safe_retry_control_names_the_parked_send(whatsapp_harness):
    with testkit.whatsapp_throttling_taken_as_ambiguous():
        failures = whatsapp_checks.whatsapp_safe_retry(whatsapp_harness)
    assert any("got SEND_STATUS_UNKNOWN then not_claimed" in f for f in failures), failures


def test_whatsapp_ambiguous_send_controls_name_what_they_broke(whatsapp_harness):
    with testkit.meta_timeout_taken_as_not_sent():
        failures = whatsapp_checks.whatsapp_ambiguous_send(whatsapp_harness)
    assert any("reached FAILED_BEFORE_SEND" in f for f in failures), failures


def test_whatsapp_ambiguous_send_control_unheard_statuses_leave_it_unknown(whatsapp_harness):
    with testkit.whatsapp_statuses_unheard():
        failures = whatsapp_checks.whatsapp_ambiguous_send(whatsapp_harness)
    assert failures == [
        "the statuses carrying the reply key left the send SEND_STATUS_UNKNOWN, expected SENT"
    ], failures


def test_instrument_integrity_whatsapp_event_identity_counts_the_planted_duplicate(whatsapp_harness):
    """The WhatsApp row's uniqueness control: the message that plans no reply lands twice, and the
    check says so (not a refused delivery)."""
    with testkit.without_event_uniqueness():
        failures = whatsapp_checks.whatsapp_event_identity(whatsapp_harness)
    assert any(f.endswith("expected exactly one event row, found 2") for f in failures), failures
    assert not any("503" in f for f in failures), failures


def test_every_row_has_a_test_and_every_platform_row_a_control():
    tested = {name[len("test_") :] for name in globals() if name.startswith("test_")}
    rows = {r.name.lower().replace(" ", "_") for r in acceptance.ROWS}
    assert rows <= tested, rows - tested
    platform_rows = {r.name for r in acceptance.ROWS if r.name.startswith(("Meta ", "WhatsApp "))}
    assert {c.row for c in CONTROLS} >= platform_rows


# Instrument integrity: each control plants its fault for one test, and the
# check it guards must report failure. A control that stays green fails here.


@pytest.mark.parametrize(
    "control",
    [
        pytest.param(c, id=c.fault.replace(" ", "_"), marks=[REAL_HTTP] if c.row == "Canary" else [])
        for c in CONTROLS
    ],
)
def test_instrument_integrity(control, request):
    row = acceptance.row(control.row)
    if row.needs_harness:
        request.getfixturevalue("db")
        h = row.harness()
        try:
            with control.plant():
                failures = row.check(h)
        finally:
            h.close()
    else:
        with control.plant():
            failures = row.check()
    assert failures != [], f"{control.row} stayed green with {control.fault}"


def test_instrument_integrity_event_identity_counts_the_planted_duplicate(harness):
    """docs/concepts/acceptance.md#controls: "Disable the event uniqueness rule and confirm the duplicate assertion fails."

    With the rule disabled the duplicate it would have stopped lands, and the
    check fails because it counts it, not because a delivery was refused (503).
    """
    from ingress.models import InboundEvent

    with testkit.without_event_uniqueness():
        failures = acceptance.event_identity(harness)
    # The event that plans no reply: its key is the only guard, and the second sighting is a second row.
    assert "comment__no_trigger: expected exactly one event row, found 2" in failures, failures
    key = "sandbox-social:acct_test_01:comment.created:evt_test_0043"
    assert list(InboundEvent.objects.filter(event_key=key).values_list("seen_count", flat=True)) == [1, 1]
    # The event that plans replies: the reply ledger's own key refuses its second sighting (an
    # IntegrityError, a broken invariant, 500), so it stays one row seen once.
    assert "comment__northstar: deliveries answered [200, 500], expected [200, 200]" in failures, failures
    assert "comment__northstar: expected seen_count 2, found 1" in failures, failures
    assert not any("503" in failure for failure in failures), failures


def test_instrument_integrity_meta_event_identity_counts_the_planted_duplicate(meta_harness):
    """The Meta row's control, for the same reason: the comment that plans no reply lands twice."""
    from ingress.models import InboundEvent

    with testkit.without_event_uniqueness():
        failures = meta_checks.meta_event_identity(meta_harness)
    from collections import Counter

    (twice,) = [
        ref
        for ref, n in Counter(InboundEvent.objects.values_list("message_ref", flat=True)).items()
        if n == 2
    ]
    assert not InboundEvent.objects.filter(
        message_ref=twice, trigger_match=True
    ).exists()  # the quiet comment
    assert f"comment {twice}: expected exactly one event row, found 2" in failures, failures
    assert not any("503" in failure for failure in failures), failures


def test_the_uniqueness_control_takes_back_its_writer_after_its_block(db):
    """Only the DDL outlives the block (the caller's transaction takes it back): the writer's
    statement converges on event_key again."""
    from ingress import services, writes
    from ingress.hooks import reply_planner

    def statement() -> str:
        return writes._statement(tuple(services.EVENT_COLUMNS), reply_planner())[0]

    with testkit.without_event_uniqueness():
        assert 'ON CONFLICT ("event_key")' not in statement()
    assert 'ON CONFLICT ("event_key")' in statement()


@REAL_HTTP
def test_instrument_integrity_canary_fails_closed_before_transport():
    from conduit.providers.base import CALLS

    with testkit.canary_aimed_at_live_transport():
        before = sum(CALLS.values())
        failures = acceptance.canary()
    assert failures and "live transport 'live-probe'" in failures[0]
    assert sum(CALLS.values()) == before  # nothing was built or called


# Further controls for the other rows.


def test_control_reply_identity_fails_when_a_new_reply_key_is_minted(harness, monkeypatch):
    from replies.services import planning

    monkeypatch.setattr(planning, "reply_key", lambda event_key, purpose: uuid.uuid4().hex)
    assert acceptance.reply_identity(harness) != []


def test_control_reply_identity_fails_when_events_and_replies_are_not_unique(harness):
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE inbound_events DROP CONSTRAINT inbound_event_key_unique CASCADE")
        cursor.execute("ALTER TABLE reply_actions DROP CONSTRAINT reply_action_key_unique")
    failures = acceptance.reply_identity(harness)
    # Ingest's upsert converges on the event_key constraint by name (ON CONFLICT (event_key)):
    # without it no delivery is stored at all, so no reply row is found where one was expected.
    assert any("found 0" in f for f in failures), failures


def test_control_source_proof_fails_when_verification_is_bypassed(harness, monkeypatch):
    from conduit.providers.base import Proof
    from conduit.providers.sandbox.webhook import SandboxSocialAdapter

    monkeypatch.setattr(
        SandboxSocialAdapter, "verify", lambda self, **kw: Proof(delivery_id=kw["headers"]["webhook-id"])
    )
    assert acceptance.source_proof(harness) != []


def test_control_required_fields_fails_when_an_identity_field_becomes_optional(harness, monkeypatch):
    from conduit.providers.sandbox import webhook as sandbox_social

    monkeypatch.setattr(sandbox_social, "REQUIRED", ("type", "comment_id", "from_id", "created_at"))
    monkeypatch.setattr(sandbox_social, "OPTIONAL", ("id", "post_id"))
    assert "without post_id: answered 200, expected 202" in acceptance.required_fields(harness)


def test_control_safe_retry_fails_when_a_retry_mints_a_new_key(harness, monkeypatch):
    import dataclasses

    from conduit.providers.sandbox.transport import SandboxTransport

    real_send = SandboxTransport.send
    monkeypatch.setattr(
        SandboxTransport,
        "send",
        lambda self, reply: real_send(self, dataclasses.replace(reply, reply_key=uuid.uuid4().hex)),
    )
    assert acceptance.safe_retry(harness) != []


def test_control_ambiguous_send_fails_when_unknown_sends_may_retry(harness, monkeypatch):
    from conduit.statemachine import TransitionTable
    from replies import sender

    monkeypatch.setitem(sender.CLAIMABLE, "SEND_STATUS_UNKNOWN", lambda now: {})
    allows = TransitionTable.allows
    monkeypatch.setattr(
        TransitionTable,
        "allows",
        lambda self, p, n: allows(self, p, n) or (p, n) == ("SEND_STATUS_UNKNOWN", "SENDING"),
    )
    assert "2 transport attempts, expected 1: the ambiguous send was retried" in acceptance.ambiguous_send(
        harness
    )


def test_control_state_model_fails_when_the_table_allows_everything(harness, monkeypatch):
    from conduit.statemachine import TransitionTable

    monkeypatch.setattr(TransitionTable, "allows", lambda self, prior, nxt: True)
    assert acceptance.state_model(harness) != []


@REAL_HTTP
def test_data_boundary():
    assert acceptance.data_boundary() == []


def _plant_log(monkeypatch, message: str, value) -> None:
    """Make ingest log `message % value(source, observation)` for every event it accepts."""
    from ingress.services import ingest

    real = ingest._body  # what every accepted body writes, whichever writer writes it

    def logging_body(*, source, first_of, **kwargs):
        for observation in first_of.values():
            ingest.logger.info(message, value(source, observation))
        return real(source=source, first_of=first_of, **kwargs)

    monkeypatch.setattr(ingest, "_body", logging_body)


@REAL_HTTP
def test_instrument_integrity_data_boundary_sees_a_planted_leak(monkeypatch):
    """Plant a leak (ingest logs the comment text as prose, which no filter can recognise):
    the data-boundary check must report it."""
    _plant_log(monkeypatch, "planted leak %s", lambda source, observation: observation.text)
    assert "the buyer text appears in the log output" in acceptance.data_boundary()


@REAL_HTTP
@pytest.mark.parametrize("filtered", [True, False], ids=["with_the_filter", "filter_removed"])
def test_the_log_filter_withholds_a_logged_secret(monkeypatch, filtered):
    """Ingest planted to log the source's secret: the filter withholds it; without the filter
    the data-boundary check reports it."""
    import logging
    import os

    from conduit.logging import BoundaryFilter

    _plant_log(monkeypatch, "planted secret %s", lambda source, observation: os.environ[source.secret_env])
    if not filtered:
        for handler in logging.getLogger().handlers:
            monkeypatch.setattr(
                handler, "filters", [f for f in handler.filters if not isinstance(f, BoundaryFilter)]
            )
    failures = acceptance.data_boundary()
    if filtered:
        assert failures == []
    else:
        assert "the planted secret appears in the log output" in failures


@pytest.mark.django_db
def test_manage_py_acceptance_runs_every_row_and_control_and_prints_the_report():
    """The operator's command, in its own process, on a throwaway database of the configured server."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from tests.conftest import subprocess_env

    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "manage.py", "acceptance", "--json", "--actor", "acceptance_subprocess_test"],
        cwd=root,
        env={**subprocess_env(), "CONDUIT_LOG_LEVEL": "WARNING"},
        capture_output=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    report = json.loads(result.stdout)
    assert [r["row"] for r in report["acceptance"]["rows"]] == [r.name for r in acceptance.ROWS]
    assert all(r["ok"] for r in report["acceptance"]["rows"])
    assert [(c["ran"], c["ok"]) for c in report["acceptance"]["instrument_integrity"]] == [
        (True, True)
    ] * len(CONTROLS)
    for section in (
        "event_contract",
        "field_map",
        "meta_field_maps",
        "storage_schema",
        "state_transitions",
        "synthetic_fixture",
        "canary_result",
        "reconciliation_report",
        "human_held_checklist",
    ):
        assert report[section], section
    assert (
        report["canary_result"]["ok"] and report["reconciliation_report"]["counts"]["missing_recovered"] == 1
    )
    # The outputs docs/concepts/acceptance.md#report lists, whole (their content: tests/acceptance/test_outputs.py).
    from reconcile.proof import outputs

    assert report["synthetic_fixture"]["body"] == outputs.synthetic_fixture()["body"]
    assert "evt_test_canary_" in report["synthetic_fixture"]["canary_run"]["body"]
    assert report["meta_field_maps"]["maps"] == meta_field_maps()["maps"]
    schema = {t["table"]: t for t in report["storage_schema"]}
    assert "inbound_event_key_unique" in {c["name"] for c in schema["inbound_events"]["constraints"]}
    assert {"event_key", "seen_count"} <= {c["name"] for c in schema["inbound_events"]["columns"]}
    assert report["human_held_checklist"] == outputs.HUMAN_HELD
    # The run is recorded in the configured database (this test's), its throwaway one gone.
    from conduit.code_version import code_version
    from reconcile.models import AcceptanceRun

    recorded = AcceptanceRun.objects.get(pk=report["recorded"]["run"])
    assert (recorded.ran_by, recorded.passed, recorded.failed_check, recorded.code_version) == (
        "acceptance_subprocess_test",
        True,
        "",
        code_version(),
    )
    # Each uniqueness control fails on the duplicate it planted, not on a refused delivery.
    uniqueness = [
        c
        for c in report["acceptance"]["instrument_integrity"]
        if c["fault"] == "the event uniqueness rule disabled"
    ]
    assert len(uniqueness) == 3  # the sandbox's, Meta's and WhatsApp's rows
    for control in uniqueness:
        assert any(
            f.endswith("expected exactly one event row, found 2") for f in control["check_reported"]
        ), control
        assert not any("503" in f or "raised" in f for f in control["check_reported"]), control
    # It passes quietly at the default log level, planted faults printing no traceback.
    plain = subprocess.run(
        [sys.executable, "manage.py", "acceptance"],
        cwd=root,
        env=subprocess_env(),
        capture_output=True,
        timeout=300,
    )
    assert plain.returncode == 0 and "Traceback" not in plain.stderr.decode(), plain.stderr.decode()[-2000:]
    assert "Traceback" not in plain.stdout.decode()
    text = plain.stdout.decode()
    for heading in (
        "1. Event contract",
        "2. Field map",
        "Meta field maps (meta-v1",
        "3. Storage schema",
        "4. State transition tables",
        "5. Synthetic fixture",
        "6. Canary result",
        "7. Reconciliation report",
        "8. Acceptance checks",
        "9. Human-held checklist",
        "fails as it must: Event identity",
        "the check reported: comment__no_trigger: expected exactly one event row, found 2",
        "unique inbound_event_key_unique: UNIQUE (event_key)",
        "[ ] Quarantine decisions:",
        "[ ] Account connection:",
        "Recorded as acceptance run ",
    ):
        assert heading in text, heading
