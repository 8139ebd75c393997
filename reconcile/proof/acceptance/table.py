"""The acceptance table and its instrument-integrity controls: (row, the fault, a context manager
planting it)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable

from conduit.standins import testkit
from reconcile.proof.acceptance.boundary import data_boundary
from reconcile.proof.acceptance.checks import (
    ambiguous_send,
    approval_gate,
    canary,
    event_identity,
    reconciliation,
    reply_identity,
    required_fields,
    safe_retry,
    source_proof,
    state_model,
)
from reconcile.proof.acceptance.harness import Harness, MetaHarness
from reconcile.proof.acceptance.meta_checks import (
    meta_ambiguous_send,
    meta_approval_gate,
    meta_event_identity,
    meta_reconciliation,
    meta_safe_retry,
    meta_source_proof,
)


@dataclass(frozen=True)
class Row:
    name: str
    evidence: str
    check: Callable[..., list[str]]
    # What the check acts through (built per run and closed after), or None.
    harness: Callable[[], Any] | None = Harness

    @property
    def needs_harness(self) -> bool:
        return self.harness is not None


@dataclass(frozen=True)
class Control:
    row: str
    fault: str
    plant: Callable[[], contextlib.AbstractContextManager]


ROWS = [
    Row(
        "Event identity",
        "Two deliveries of the same fixture leave exactly one event row and seen_count of two",
        event_identity,
    ),
    Row("Reply identity", "Reprocessing leaves exactly one row for each declared reply_key", reply_identity),
    Row(
        "Source proof",
        "A fixture with invalid proof enters QUARANTINED and creates zero reply actions",
        source_proof,
    ),
    Row(
        "Required fields",
        "Removing one stable identity field routes the receipt to QUARANTINED and creates zero reply actions",
        required_fields,
    ),
    Row("Approval gate", "An action in REVIEW_PENDING produces zero transport calls", approval_gate),
    Row("Safe retry", "A failure before transport retries under the same keys", safe_retry),
    Row(
        "Ambiguous send",
        "A simulated lost receipt enters SEND_STATUS_UNKNOWN and produces no automatic retry",
        ambiguous_send,
    ),
    Row(
        "Reconciliation",
        "A missing local event re-enters through normal ingest and creates no duplicate action",
        reconciliation,
    ),
    Row(
        "Canary",
        "Two canary deliveries produce the exact expected rows and zero external calls",
        canary,
        harness=None,
    ),
    Row("State model", "An undeclared transition is rejected and recorded in its owning ledger", state_model),
    Row(
        "Data boundary",
        "Logs and reports contain no credential, real buyer payload, or actual field value",
        data_boundary,
        harness=None,
    ),
    # The same promises for Meta's platforms, through Meta's proof, field maps and Graph read-back.
    Row(
        "Meta source proof",
        "A Meta body with an invalid X-Hub-Signature-256 enters QUARANTINED and creates zero reply actions",
        meta_source_proof,
        harness=MetaHarness,
    ),
    Row(
        "Meta event identity",
        "The same Meta body twice, and a retry batched differently, leave one event row per comment",
        meta_event_identity,
        harness=MetaHarness,
    ),
    Row(
        "Meta reconciliation",
        "A comment whose webhook never came is recovered from the Graph API with one "
        "action per purpose, no identity conflict and no call off this host",
        meta_reconciliation,
        harness=MetaHarness,
    ),
    Row(
        "Meta approval gate",
        "An action in REVIEW_PENDING produces zero Graph writes through the Meta transports",
        meta_approval_gate,
        harness=MetaHarness,
    ),
    Row(
        "Meta safe retry",
        "Meta's throttling answer (not applied) then a success leaves one reply at the "
        "simulator under the same reply key",
        meta_safe_retry,
        harness=MetaHarness,
    ),
    Row(
        "Meta ambiguous send",
        "A reply the simulator applied without answering (apply_then_timeout) enters "
        "SEND_STATUS_UNKNOWN, is never retried automatically, and is applied exactly once",
        meta_ambiguous_send,
        harness=MetaHarness,
    ),
]
# Instrument integrity: the four named controls of docs/concepts/acceptance.md#controls.
CONTROLS = [
    Control("Event identity", "the event uniqueness rule disabled", testkit.without_event_uniqueness),
    Control(
        "Reconciliation",
        "reconciliation changed to mint a new reply key",
        testkit.reconcile_minting_reply_keys,
    ),
    Control(
        "Canary", "the canary action pointed at a live transport", testkit.canary_aimed_at_live_transport
    ),
    Control("Approval gate", "the approval check bypassed", testkit.approval_check_bypassed),
    Control("Meta source proof", "Meta's signature check bypassed", testkit.meta_signature_bypassed),
    Control("Meta event identity", "the event uniqueness rule disabled", testkit.without_event_uniqueness),
    Control(
        "Meta reconciliation",
        "reconciliation changed to mint a new reply key",
        testkit.reconcile_minting_reply_keys,
    ),
    Control("Meta approval gate", "the approval check bypassed", testkit.approval_check_bypassed),
    Control(
        "Meta safe retry",
        "Meta's throttling answer taken as ambiguous",
        testkit.meta_throttling_taken_as_ambiguous,
    ),
    Control(
        "Meta ambiguous send",
        "a timeout after the request taken as not sent",
        testkit.meta_timeout_taken_as_not_sent,
    ),
]


def row(name: str) -> Row:
    return next(r for r in ROWS if r.name == name)
