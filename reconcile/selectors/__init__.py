"""Reconciliation's reads: replay-decision requests from the reply ledger, source health, reports.

By what they read: reconcile.selectors.findings (the findings a person closes),
.decision_requests (the reply ledger, as replay-decision requests), .health (sources and their
scan state), .inspection (a health row in words), .reports (one report's decisions and export)
and .acceptance (the acceptance record live sending waits for).
"""

from reconcile.selectors.acceptance import acceptance_refusal, latest_acceptance_run, live_route_gate
from reconcile.selectors.decision_requests import (
    MAX_REQUEST_ATTEMPTS,
    declared_dedupe,
    reply_decision_request,
    reply_decision_request_declared,
    reply_digest,
    with_decision_inputs,
)
from reconcile.selectors.findings import (
    PERSON_KINDS,
    RECEIPT_KINDS,
    UNEXPECTED_RECEIPTS_QUEUE,
    open_retry_candidates,
    open_unexpected_receipts,
)
from reconcile.selectors.health import refused_settings, source_declarations, source_health
from reconcile.selectors.inspection import (
    age_words,
    cursor_words,
    failure_words,
    live_routes_words,
    needs_a_person,
    source_inspection,
)
from reconcile.selectors.reports import (
    DECISION_FIELDS,
    repair_outcomes,
    report_decisions,
    report_json_chunks,
    report_later_decisions,
)

__all__ = [
    "DECISION_FIELDS",
    "MAX_REQUEST_ATTEMPTS",
    "PERSON_KINDS",
    "RECEIPT_KINDS",
    "UNEXPECTED_RECEIPTS_QUEUE",
    "acceptance_refusal",
    "age_words",
    "cursor_words",
    "declared_dedupe",
    "failure_words",
    "latest_acceptance_run",
    "live_route_gate",
    "live_routes_words",
    "needs_a_person",
    "open_retry_candidates",
    "open_unexpected_receipts",
    "refused_settings",
    "reply_decision_request",
    "reply_decision_request_declared",
    "reply_digest",
    "repair_outcomes",
    "report_decisions",
    "report_json_chunks",
    "report_later_decisions",
    "source_declarations",
    "source_health",
    "source_inspection",
    "with_decision_inputs",
]
