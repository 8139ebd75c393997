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
from reconcile.proof.platforms import acceptance_rows


def core_harness() -> Any:
    """The harness the core rows act through: the one a platform registered."""
    from reconcile.proof.platforms import acceptance_harness

    return acceptance_harness()()


@dataclass(frozen=True)
class Row:
    name: str
    evidence: str
    check: Callable[..., list[str]]
    # What the check acts through (built per run and closed after), or None.
    harness: Callable[[], Any] | None = core_harness

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
]
# Instrument integrity: the four named controls of docs/concepts/acceptance.md#controls. Each
# platform package appends its own rows and controls (reconcile.proof.platforms).
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
]

# Each platform's own rows and controls, after the core ones (what its package registered).
_platform_rows, _platform_controls = acceptance_rows()
ROWS += _platform_rows
CONTROLS += _platform_controls


def row(name: str) -> Row:
    return next(r for r in ROWS if r.name == name)
