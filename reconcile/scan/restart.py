"""Restarting a scan: its staging discarded (never history or the checkpoint), the source due at once."""

from __future__ import annotations

import logging

from django.db import transaction

from ingress.models import Source
from reconcile import clock
from reconcile.lease import lease_acquire, lease_check, lease_release
from reconcile.staging import generation_discard

logger = logging.getLogger("conduit.reconcile")


class RestartRefused(Exception):
    """`--restart` named another generation than the active one, or one already reporting."""


def scan_restart(*, source: Source, actor: str, expected_run: int | None = None) -> int | None:
    """Discard the active scan's staging (never history or the checkpoint); due at once.

    Refused (LeaseBusy) while another worker's page call holds the lease;
    refused (RestartRefused) when `expected_run` is given and the active run
    is another one or none (the expected-generation guard,
    docs/concepts/reconciliation.md#restart), and when the active run has
    already written its report.
    Returns the discarded run's id, or None when no scan was active.
    """
    token = lease_acquire(source)
    refusal = ""
    try:
        with transaction.atomic():
            state = lease_check(source.pk, token)
            run = state.active_run
            if expected_run is not None and (run is None or run.pk != expected_run):
                refusal = (
                    f"the active scan of {source.name} is {f'run {run.pk}' if run else 'none'}, "
                    f"not run {expected_run}: nothing discarded"
                )
            elif run is not None and not generation_discard(state, run, "restarted_by_operator", actor):
                refusal = (
                    f"run {run.pk} has written its report and is applying its repairs; "
                    "it publishes on the next page call and cannot be discarded"
                )
            else:
                state.next_due_at = clock.now()
                state.save()
        if refusal:
            raise RestartRefused(refusal)
        logger.info("reconcile restart source=%s run=%s actor=%s", source.name, run and run.pk, actor)
        return run.pk if run else None
    finally:
        lease_release(source.pk, token)
