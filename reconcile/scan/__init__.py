"""The scan: one source page call at a time under the lease, committed in one transaction.

`reconcile_page` (reconcile.scan.page) makes exactly one page call and commits what it returned
(reconcile.scan.commit; reconcile.staging checks and stages it); the final page writes the report
and publishes (reconcile.publication). `scan_until_done` (reconcile.scan.loop) repeats page calls
until the scan leaves `staged`: the one loop the command, the canary and the tests use.
`scan_restart` (reconcile.scan.restart) discards an active scan's staging.
"""

from reconcile.scan.evidence import edits_seen, page_evidence
from reconcile.scan.loop import scan_until_done
from reconcile.scan.outcome import PageOutcome, ScanConflict, unauthored_failure
from reconcile.scan.page import CANCELLATIONS, reconcile_page
from reconcile.scan.restart import RestartRefused, scan_restart

__all__ = [
    "CANCELLATIONS",
    "PageOutcome",
    "RestartRefused",
    "ScanConflict",
    "edits_seen",
    "page_evidence",
    "reconcile_page",
    "scan_restart",
    "scan_until_done",
    "unauthored_failure",
]
