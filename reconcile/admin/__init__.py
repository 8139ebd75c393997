"""Reconciliation in the admin: scan state, kept reports, retry candidates, replay decisions, and
the acceptance record.

Each module registers its own model admins; importing them here is the registration. The front
page and the site's configuration are the console's (console/admin.py)."""

from reconcile.admin.acceptance import AcceptanceRunAdmin
from reconcile.admin.decisions import UnknownSendDecisionAdmin
from reconcile.admin.findings import (
    FindingAdmin,
    QueueFilter,
    RetryCandidateQueueAdmin,
    unexpected_receipts_url,
)
from reconcile.admin.reports import (
    COUNTER_GROUPS,
    COUNTER_WORDS,
    FOUND_BEFORE_REPLAYS_COUNTED,
    REPORT_PAGE_FINDINGS,
    CanaryReportAdmin,
    ReconcileReportAdmin,
    ReportPageAdmin,
    counter_groups,
    plain,
    when,
)
from reconcile.admin.scans import FailingScanFilter, ScanStateAdmin

__all__ = [
    "AcceptanceRunAdmin",
    "COUNTER_GROUPS",
    "COUNTER_WORDS",
    "FOUND_BEFORE_REPLAYS_COUNTED",
    "REPORT_PAGE_FINDINGS",
    "CanaryReportAdmin",
    "FailingScanFilter",
    "FindingAdmin",
    "QueueFilter",
    "ReconcileReportAdmin",
    "ReportPageAdmin",
    "RetryCandidateQueueAdmin",
    "ScanStateAdmin",
    "UnknownSendDecisionAdmin",
    "counter_groups",
    "plain",
    "unexpected_receipts_url",
    "when",
]
