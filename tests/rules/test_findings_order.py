"""Findings are written in the order their indexes take them best (docs/internals.md#staging)."""

from __future__ import annotations

import hashlib

import pytest
from django.db import connection
from django.utils import timezone

from conduit.planner import planner_settings
from reconcile.models import Finding, ReconcileReport, ReconcileRun, Repair, StagedEvent, StagedReceipt
from reconcile.publication.findings import _findings_insert_select

pytestmark = pytest.mark.django_db

# Read by sequential scans, as a whole generation is: the rows come in the order they were staged.
SCANNED = dict(enable_indexscan="off", enable_bitmapscan="off", enable_indexonlyscan="off")


def _report(source) -> tuple[ReconcileRun, ReconcileReport]:
    now = timezone.now()
    run = ReconcileRun.objects.create(
        source=source, trigger="command", requested_by="tester", until=now, created_at=now
    )
    return run, ReconcileReport.objects.create(run=run, source=source, created_at=now, summary={})


def test_reply_findings_are_inserted_in_reply_key_order(sandbox_source):
    """The rows' ids follow their reply keys whatever order the comparison met them in: the
    (reply_key, kind) indexes take their entries leaf by leaf, not one random leaf each."""
    run, report = _report(sandbox_source)
    keys = [hashlib.sha256(f"reply_test_{i}".encode()).hexdigest() for i in range(40)]
    assert keys != sorted(keys)  # staged, and so scanned, out of key order
    StagedReceipt.objects.bulk_create(
        [
            StagedReceipt(run=run, reply_key=k, provider_reply_id=f"m{i}", event_key="e")
            for i, k in enumerate(keys)
        ]
    )
    rows = StagedReceipt.objects.filter(run=run)
    with planner_settings(connection, **SCANNED):
        written = _findings_insert_select(
            report, "UNKNOWN_RECEIPT", rows, ("event_key", "reply_key"), Repair.NONE, "d"
        )
    assert written == 40
    found = Finding.objects.filter(report=report).order_by("id").values_list("reply_key", flat=True)
    assert list(found) == sorted(keys)


def test_event_findings_have_no_reply_key_to_order_by_and_are_all_written(sandbox_source):
    """An event finding has no reply key to order by: the statement writes each row all the same."""
    run, report = _report(sandbox_source)
    keys = [f"sandbox-social:acct_test_01:comment.created:evt_test_{i}" for i in (3, 1, 2)]
    StagedEvent.objects.bulk_create(
        [
            StagedEvent(
                run=run,
                event_key=k,
                payload_hash="0" * 64,
                event_type="comment.created",
                conversation_ref="post_test",
                message_ref="m",
                sender_ref="s",
                occurred_at=timezone.now(),
                occurred_at_original="x",
            )
            for k in keys
        ]
    )
    with planner_settings(connection, **SCANNED):
        written = _findings_insert_select(
            report, "MISSING_LOCAL", StagedEvent.objects.filter(run=run), ("event_key",), Repair.REPLAYED, "d"
        )
    assert written == 3
    found = Finding.objects.filter(report=report).order_by("id").values_list("event_key", "reply_key")
    assert sorted(found) == sorted((k, "") for k in keys)
