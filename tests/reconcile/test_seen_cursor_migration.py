"""The migration that moves a scan's handed cursors from a list on its run to a row each."""

from __future__ import annotations

import hashlib

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from tests.replies.test_route_migration import _migrate

BEFORE = [("reconcile", "0022_whatsapp")]
AFTER = [("reconcile", "0023_seen_cursors_per_row")]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.django_db(transaction=True)
def test_a_reading_scans_cursors_become_rows_and_come_back_on_reversal():
    """A scan still reading keeps every cursor it was handed, so a cycle back to one is still
    caught after the upgrade; a finished run's list is not carried (nothing checks it)."""
    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes()
    try:
        old = _migrate(BEFORE)
        source = old.get_model("ingress", "Source").objects.create(
            name="shop",
            adapter="sandbox-social",
            source_system="sandbox-social",
            account_ref="acct_test_c1",
            event_types=["comment.created"],
            purposes=["public_ack"],
            secret_env="X",
        )
        Run = old.get_model("reconcile", "ReconcileRun")
        reading = [_digest("A"), _digest("B"), _digest("C")]
        common = dict(source=source, trigger="command", requested_by="tester", created_at=timezone.now())
        scanning = Run.objects.create(state="SCANNING", cursors_seen=reading, **common)
        finished = Run.objects.create(state="PUBLISHED", cursors_seen=[_digest("Z")], **common)

        new = _migrate(AFTER)
        Seen = new.get_model("reconcile", "SeenCursor")
        assert sorted(Seen.objects.filter(run_id=scanning.pk).values_list("digest", flat=True)) == sorted(
            reading
        )
        assert not Seen.objects.filter(run_id=finished.pk).exists()

        back = _migrate(BEFORE)
        assert sorted(
            back.get_model("reconcile", "ReconcileRun").objects.get(pk=scanning.pk).cursors_seen
        ) == sorted(reading)
    finally:
        _migrate(leaves)
