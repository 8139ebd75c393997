"""The report counts the missing events it recovered, not those it found.

docs/concepts/reconciliation.md#reports: "The reconciliation report records the source cursor,
contract version, events compared, missing records recovered, ..."; docs/concepts/reconciliation.md#steps:
"Write a report before applying any repair".
The report is written before the replay, so what the comparison found (`missing_found`) and what
the replay did (`missing_recovered`, `missing_replay_refused`, `missing_replay_failed`) are
counted apart: the first with the report, the rest when the repairs have run.
"""

from __future__ import annotations

import json

import pytest
from django.db import DatabaseError

from ingress.models import InboundEvent
from reconcile import repairs
from reconcile.models import ReconcileReport, ReconcileRun
from reconcile.publication import REPORT_COUNTS
from reconcile.scan import reconcile_page
from tests.reconcile.conftest import body, item

pytestmark = pytest.mark.django_db


def _conflict_arrives_before_the_replay(monkeypatch, deliver, n: int) -> None:
    """Between the report and its repairs, a webhook delivers event `n` with another text: the
    replay of the event as the source showed it meets an identity conflict, and ingest refuses
    its batch (docs/concepts/event-contract.md#batches: "Any invalid member rolls back the entire
    batch")."""
    real = repairs.missing_replay

    def replay_after_a_webhook(*args, **kwargs):
        assert deliver(body(item(n, text="CHECKLIST changed meanwhile"))).status_code == 200
        return real(*args, **kwargs)

    monkeypatch.setattr(repairs, "missing_replay", replay_after_a_webhook)


def test_a_refused_replay_is_not_counted_as_recovered(source_side, deliver, scan, monkeypatch):
    """Two events missed by the webhook; the replay of one is refused. The "missing records
    recovered" of docs/concepts/reconciliation.md#missing-counts is the one replay ingest accepted; the refused one is counted apart, with its code."""
    state, source = source_side
    state.hold_events(item(1), item(2), item(3))
    assert deliver(body(item(1))).status_code == 200  # items 2 and 3: no webhook came
    monkeypatch.setattr(repairs, "REPLAY_BATCH", 1)  # one event a batch: one refusal refuses one
    _conflict_arrives_before_the_replay(monkeypatch, deliver, 2)
    outcome = scan(source)
    assert outcome.state == "published"
    report = ReconcileReport.objects.get(pk=outcome.report_id)
    counts = report.summary["counts"]
    assert sorted(counts) == sorted(REPORT_COUNTS)
    assert (
        counts["missing_found"],
        counts["missing_recovered"],
        counts["missing_replay_refused"],
        counts["missing_replay_failed"],
    ) == (2, 1, 1, 0)
    assert report.summary["missing_replay_codes"] == {"replay_refused": 1}
    outcomes = dict(report.findings.filter(kind="MISSING_LOCAL").values_list("event_key", "repair_outcome"))
    assert sorted(outcomes.values()) == ["applied", "refused"]
    # The count says what the ledger holds: the recovered event is there as the source showed it.
    recovered = next(key for key, outcome in outcomes.items() if outcome == "applied")
    assert InboundEvent.objects.get(event_key=recovered).source_event_id == "evt_test_000003"


def test_the_report_written_before_the_repairs_does_not_claim_them(source_side, deliver, scan, monkeypatch):
    """The report is committed before any repair: until the replay has run it says what it found and
    leaves what was recovered unknown (null), never the found count under the recovered name."""
    state, source = source_side
    state.hold_events(item(1), item(2))
    deliver(body(item(1)))
    real = repairs.missing_replay

    def crash(*args, **kwargs):
        raise KeyboardInterrupt  # the process dies after the report, before its repairs

    monkeypatch.setattr(repairs, "missing_replay", crash)
    with pytest.raises(KeyboardInterrupt):
        scan(source)
    report = ReconcileReport.objects.get(run=ReconcileRun.objects.get())
    counts = report.summary["counts"]
    assert counts["missing_found"] == 1
    assert (
        counts["missing_recovered"],
        counts["missing_replay_refused"],
        counts["missing_replay_failed"],
    ) == (None, None, None)
    monkeypatch.setattr(repairs, "missing_replay", real)
    assert reconcile_page(source=source).state == "published"  # the next page call finishes the run
    report.refresh_from_db()
    counts = report.summary["counts"]
    assert (counts["missing_found"], counts["missing_recovered"], counts["missing_replay_refused"]) == (
        1,
        1,
        0,
    )
    assert report.summary["missing_replay_codes"] == {}


def test_a_failed_replay_is_counted_as_failed_with_its_code(source_side, deliver, scan, monkeypatch):
    state, source = source_side
    state.hold_events(item(1), item(2))

    def unavailable(**kwargs):
        raise DatabaseError("planted: the store went away")

    monkeypatch.setattr(repairs, "observations_accept", unavailable)
    outcome = scan(source)
    report = ReconcileReport.objects.get(pk=outcome.report_id)
    counts = report.summary["counts"]
    assert (
        counts["missing_found"],
        counts["missing_recovered"],
        counts["missing_replay_refused"],
        counts["missing_replay_failed"],
    ) == (2, 0, 0, 2)
    assert report.summary["missing_replay_codes"] == {"database_error": 2}
    assert not InboundEvent.objects.exists()


def test_the_report_page_and_export_show_refused_replays_apart(
    admin_client, source_side, deliver, scan, monkeypatch
):
    state, source = source_side
    state.hold_events(item(1), item(2))
    monkeypatch.setattr(repairs, "REPLAY_BATCH", 1)
    _conflict_arrives_before_the_replay(monkeypatch, deliver, 2)
    outcome = scan(source)
    report = ReconcileReport.objects.get(pk=outcome.report_id)
    page = admin_client.get(f"/admin/reconcile/reconcilereport/{report.pk}/change/").content.decode()
    for name, value in (("missing_found", 2), ("missing_recovered", 1), ("missing_replay_refused", 1)):
        row = page.split(f'id="counter-{name}"', 1)[1].split("</tr>", 1)[0]
        assert f"<td>{value}</td>" in row, (name, row)
    assert (
        "Replays refused" in page
        and '<span title="replay_refused">ingest refused the replayed batch</span>: 1' in page
    )
    listing = admin_client.get("/admin/reconcile/reconcilereport/").content.decode()
    assert 'class="field-replays_refused">1<' in listing and 'class="field-recovered">1<' in listing
    export = admin_client.get(f"/admin/reconcile/reconcilereport/{report.pk}/export/")
    document = json.loads(b"".join(export.streaming_content))
    assert (document["counts"]["missing_recovered"], document["counts"]["missing_replay_refused"]) == (1, 1)
    assert document["missing_replay_codes"] == {"replay_refused": 1}


def test_a_report_from_before_replays_were_counted_is_not_shown_as_recovered(admin_client, source_side, scan):
    """A kept report written before this change has `missing_recovered` (then: found) and no
    `missing_found`: the page names its count for what it was."""
    state, source = source_side
    state.hold_events(item(1))
    report = ReconcileReport.objects.get(pk=scan(source).report_id)
    counts = {k: v for k, v in report.summary["counts"].items() if not k.startswith("missing_")}
    report.summary = {**report.summary, "counts": {**counts, "missing_recovered": 1}}
    report.save(update_fields=["summary"])
    page = admin_client.get(f"/admin/reconcile/reconcilereport/{report.pk}/change/").content.decode()
    row = page.split('id="counter-missing_recovered"', 1)[1].split("</tr>", 1)[0]
    assert "Missed webhooks found" in row and "Missed webhooks recovered" not in row
