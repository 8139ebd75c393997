"""Reconcile runs and a second source, as the rule tests (tests/rules) set them up."""

from __future__ import annotations

from django.utils import timezone

from ingress.models import Source
from reconcile.models import ReconcileReport, ReconcileRun


def run_and_report(source: Source, *, state: str = "REPAIRING") -> tuple[ReconcileRun, ReconcileReport]:
    """A run of `source` in `state`, begun now by the command, and its empty report."""
    now = timezone.now()
    run = ReconcileRun.objects.create(
        source=source, state=state, trigger="command", requested_by="tester", created_at=now
    )
    return run, ReconcileReport.objects.create(run=run, source=source, created_at=now, summary={})


def other_source(source: Source) -> Source:
    """A second sandbox source of another account, signed with `source`'s secret."""
    from ingress.services import source_register

    other, _ = source_register(
        name="other_test",
        adapter="sandbox-social",
        account_ref="acct_test_02",
        event_types=["comment.created"],
        purposes=["public_ack"],
        trigger_keywords=["CHECKLIST"],
        secret_env=source.secret_env,
    )
    return other
