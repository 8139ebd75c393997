"""The scan lease: one worker at a time reads and commits a source's pages
(docs/concepts/reconciliation.md#leases).

A page call takes the lease with an unpredictable token; each commit re-checks
the token against a fresh clock inside its own transaction, so a holder that
lost its lease publishes nothing.
"""

from __future__ import annotations

import secrets
from datetime import timedelta

from django.conf import settings
from django.db.models import Q

from ingress.models import Source
from reconcile import clock
from reconcile.models import ScanState


class LeaseBusy(Exception):
    """Another worker holds this source's live scan lease: skip it."""


class LeaseLost(Exception):
    """This worker's lease expired or was taken over before it could commit."""


def scan_state_for(source: Source) -> ScanState:
    """The source's scan state, created (due now) on first use."""
    state, _ = ScanState.objects.get_or_create(
        source=source,
        defaults={
            "next_due_at": clock.now(),
            "interval_seconds": settings.CONDUIT_RECONCILE_INTERVAL_SECONDS,
        },
    )
    return state


def lease_acquire(source: Source) -> str:
    """Take the source's scan lease (its scan state is created on first use); its token."""
    token = secrets.token_hex(32)
    for attempt in range(2):
        now = clock.now()
        taken = ScanState.objects.filter(
            Q(lease_token="") | Q(lease_expires_at__lte=now), source_id=source.pk
        ).update(
            lease_token=token,
            lease_expires_at=now + timedelta(seconds=settings.CONDUIT_RECONCILE_LEASE_SECONDS),
        )
        if taken:
            return token
        if attempt or ScanState.objects.filter(source_id=source.pk).exists():
            break
        scan_state_for(source)  # a source never scanned: one state row, then try again
    raise LeaseBusy(f"source {source.name}: another worker holds the scan lease")


def lease_check(source_id: int, token: str) -> ScanState:
    """Inside the commit's transaction: lock the state row, re-check the token on a fresh clock."""
    state = ScanState.objects.select_for_update(no_key=True).get(source_id=source_id)
    if state.lease_token != token or state.lease_expires_at is None or state.lease_expires_at <= clock.now():
        raise LeaseLost(f"source {source_id}: the scan lease expired or was taken over")
    return state


def lease_renew(source_id: int, token: str) -> None:
    """Check the lease and extend it (the row is locked): repairs may outlast one page's lease."""
    state = lease_check(source_id, token)
    state.lease_expires_at = clock.now() + timedelta(seconds=settings.CONDUIT_RECONCILE_LEASE_SECONDS)
    ScanState.objects.filter(pk=state.pk).update(lease_expires_at=state.lease_expires_at)


def lease_release(source_id: int, token: str) -> None:
    ScanState.objects.filter(source_id=source_id, lease_token=token).update(
        lease_token="", lease_expires_at=None
    )
