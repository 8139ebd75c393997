"""A complete generation's publication: compare, report, repair, then checkpoint and publish.

The final page's transaction compares the staged generation with both ledgers
and writes the report and its findings (docs/concepts/reconciliation.md#steps: "write a
report before any repair"); the run moves to REPAIRING. Repairs then run in their own
transactions (reconcile.repairs); a last transaction counts on the report what
the replay of the missing events did (REPLAY_COUNTS), drops the staging,
advances the checkpoint and publishes the run. A crash in between leaves the
run REPAIRING: the next page call finishes it (`run_publish`) before anything else.

One module per step (compare, report, findings, publish); the names callers use are re-exported
here."""

from __future__ import annotations

from reconcile.publication.compare import (
    UNCONFIRMED,
    Comparison,
    compared_purposes,
    generation_compare,
    recoverable,
)
from reconcile.publication.findings import (
    EVENT_FINDINGS,
    already_recorded,
    event_findings_write,
    findings_write,
    reply_findings_write,
)
from reconcile.publication.publish import checkpoint_advance, run_publish
from reconcile.publication.report import (
    REPLAY_COUNTS,
    REPORT_COUNTS,
    attention_summary,
    replay_counts,
    replay_counts_record,
    report_counts,
    report_summary,
    report_write,
)

__all__ = [
    "EVENT_FINDINGS",
    "REPLAY_COUNTS",
    "REPORT_COUNTS",
    "UNCONFIRMED",
    "Comparison",
    "already_recorded",
    "attention_summary",
    "checkpoint_advance",
    "compared_purposes",
    "event_findings_write",
    "findings_write",
    "generation_compare",
    "recoverable",
    "replay_counts",
    "replay_counts_record",
    "reply_findings_write",
    "report_counts",
    "report_summary",
    "report_write",
    "run_publish",
]
