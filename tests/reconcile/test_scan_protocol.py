"""The page protocol and default limits, the exhausted scan, and guarded restarts
(docs/concepts/reconciliation.md#page-protocol, #limits, #generations, #restart)."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction

from conduit.providers.base import SourcePage
from conduit.providers.sandbox.webhook import SandboxSocialAdapter
from ingress.selectors import source_config
from reconcile import clock, repairs, staging
from reconcile.models import (
    ReconcileRun,
    ReconcileRunTransition,
    ScanState,
    SeenCursor,
    StagedEvent,
)
from reconcile.scan import RestartRefused, reconcile_page, scan_restart
from tests.reconcile.conftest import body, item

pytestmark = pytest.mark.django_db


def observations(source, *numbers: int):
    found = []
    for i in range(0, len(numbers), 100):  # a webhook body carries a bounded batch
        parsed = SandboxSocialAdapter().parse(
            body=body(*[item(n) for n in numbers[i : i + 100]]), config=source_config(source)
        )
        assert not parsed.rejections
        found += parsed.observations
    return found


def page(
    source,
    *numbers: int,
    scan_id: str = "scan_test_1",
    cursor: str | None = None,
    complete: bool = False,
    size_bytes: int = 100,
) -> SourcePage:
    return SourcePage(
        scan_id=scan_id,
        observations=observations(source, *numbers),
        rejections=[],
        receipts=[],
        next_cursor=cursor,
        complete=complete,
        size_bytes=size_bytes,
    )


def scripted(monkeypatch, pages: list[SourcePage]) -> list[dict]:
    """The adapter answers these pages in order; returns the keyword arguments of each call."""
    calls: list[dict] = []

    def read_page(self, **kw):
        calls.append(kw)
        return pages[len(calls) - 1]

    monkeypatch.setattr(SandboxSocialAdapter, "read_page", read_page)
    return calls


def due_now():
    ScanState.objects.update(next_due_at=clock.now())


def test_an_immediately_repeated_cursor_fails_the_page(source_side, monkeypatch):
    """docs/concepts/reconciliation.md#page-protocol: "Returned pages must ... avoid repeated cursors"."""
    _, source = source_side
    scripted(monkeypatch, [page(source, 1, cursor="A"), page(source, 2, cursor="A")])
    assert reconcile_page(source=source).state == "staged"
    outcome = reconcile_page(source=source)
    assert (outcome.state, outcome.error.code) == ("failed", "page_repeated_cursor")
    run = ReconcileRun.objects.get()
    assert (run.pages, run.cursor, StagedEvent.objects.count()) == (1, "A", 1)  # progress kept


def test_a_cursor_cycle_fails_the_page(source_side, monkeypatch):
    """docs/concepts/reconciliation.md#page-protocol: "avoid repeated cursors": A -> B -> A repeats A, though never back to back."""
    _, source = source_side
    scripted(
        monkeypatch, [page(source, 1, cursor="A"), page(source, 2, cursor="B"), page(source, 3, cursor="A")]
    )
    assert reconcile_page(source=source).state == "staged"
    assert reconcile_page(source=source).state == "staged"
    outcome = reconcile_page(source=source)
    assert (outcome.state, outcome.error.code) == ("failed", "page_cursor_cycle")
    run = ReconcileRun.objects.get()
    assert (run.pages, run.cursor) == (2, "B")
    scan = ScanState.objects.get()
    assert (scan.last_error_class, scan.last_error_code, scan.failures) == (
        "protocol",
        "page_cursor_cycle",
        1,
    )


def _run_bytes(run_id: int) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_column_size(r.*) FROM reconcile_reconcilerun r WHERE r.id = %s", [run_id])
        return cursor.fetchone()[0]


def test_each_cursor_handed_is_a_row_and_the_run_does_not_grow_with_its_pages(source_side, monkeypatch):
    """Seed 004: entries are "per item/version rather than an ever-growing serialized source blob".
    Each page's cursor is one SeenCursor row (its SHA-256), the run's own row keeps its size from
    the first page to the last, and the rows go with the staging when the scan publishes."""
    _, source = source_side
    cursors = ["A" * 40, "B" * 40, "C" * 40, "D" * 40]
    scripted(
        monkeypatch,
        [*(page(source, n + 1, cursor=c) for n, c in enumerate(cursors)), page(source, 9, complete=True)],
    )
    sizes = []
    for _ in cursors:
        assert reconcile_page(source=source).state == "staged"
        sizes.append(_run_bytes(ReconcileRun.objects.get().pk))
    run = ReconcileRun.objects.get()
    digests = sorted(hashlib.sha256(c.encode()).hexdigest() for c in cursors)
    assert sorted(SeenCursor.objects.filter(run=run).values_list("digest", flat=True)) == digests
    assert len(set(sizes)) == 1, sizes
    assert reconcile_page(source=source).state == "published"
    assert not SeenCursor.objects.exists()


def test_the_database_holds_a_cursor_once_per_run(source_side, monkeypatch):
    _, source = source_side
    scripted(monkeypatch, [page(source, 1, cursor="A")])
    reconcile_page(source=source)
    run = ReconcileRun.objects.get()
    with pytest.raises(IntegrityError, match="seen_cursor_once_per_run"), transaction.atomic():
        SeenCursor.objects.create(run=run, digest=hashlib.sha256(b"A").hexdigest())


def test_completion_with_a_cursor_fails_the_page(source_side, monkeypatch):
    """docs/concepts/reconciliation.md#page-protocol: pages "cannot claim completion while providing
    another cursor"."""
    _, source = source_side
    scripted(monkeypatch, [page(source, 1, cursor="A", complete=True)])
    outcome = reconcile_page(source=source)
    assert (outcome.state, outcome.error.code) == ("failed", "page_complete_with_cursor")
    assert StagedEvent.objects.count() == 0 and ReconcileRun.objects.get().state == "SCANNING"


def test_a_changed_scan_id_fails_the_page(source_side, monkeypatch):
    """docs/concepts/reconciliation.md#page-protocol: "Returned pages must retain one nonempty ScanID"."""
    _, source = source_side
    scripted(
        monkeypatch,
        [
            page(source, 1, cursor="A"),
            page(source, 2, cursor="B", scan_id="scan_test_2"),
            page(source, 2, scan_id="", complete=True),
        ],
    )
    reconcile_page(source=source)
    assert reconcile_page(source=source).error.code == "page_scan_changed"
    due_now()
    assert reconcile_page(source=source).error.code == "page_scan_id_missing"
    assert ReconcileRun.objects.get().scan_id == "scan_test_1"


def test_an_over_long_scan_id_is_refused_not_truncated(source_side, monkeypatch):
    """docs/concepts/reconciliation.md#limits: "ScanID, cursor, checkpoint ... tokens are bounded to 4 KiB"."""
    _, source = source_side
    scripted(
        monkeypatch,
        [
            page(source, 1, scan_id="s" * 4097, complete=True),
            page(source, 1, scan_id="s" * 4096, complete=True),
        ],
    )
    outcome = reconcile_page(source=source)
    assert (outcome.state, outcome.error.code) == ("failed", "page_scan_id_too_long")
    due_now()
    assert reconcile_page(source=source).state == "published"  # 4 KiB exactly is kept whole
    assert ScanState.objects.get().checkpoint_scan_id == "s" * 4096


def test_an_exhausted_partial_scan_discards_only_its_staging(source_side, scan, monkeypatch):
    """docs/concepts/reconciliation.md#generations: "An exhausted partial scan (Complete=false, no next cursor) discards only its
    staging and retries later; the previous complete snapshot/checkpoint remain authoritative." """
    state, source = source_side
    state.hold_events(item(1))
    scan(source)
    checkpoint = ScanState.objects.get().checkpoint_until
    scripted(monkeypatch, [page(source, 1, cursor="A"), page(source, 2)])
    due_now()
    reconcile_page(source=source)
    outcome = reconcile_page(source=source)
    assert outcome.state == "discarded"
    run = ReconcileRun.objects.first()
    assert (run.state, run.discard_reason) == ("DISCARDED", "exhausted_without_completion")
    assert StagedEvent.objects.count() == 0
    scan_state = ScanState.objects.get()
    assert scan_state.checkpoint_until == checkpoint and scan_state.active_run is None
    assert scan_state.failures == 1 and scan_state.next_due_at > clock.now()  # retried later
    moves = list(ReconcileRunTransition.objects.filter(run=run).values_list("prior_state", "next_state"))
    assert moves == [(None, "SCANNING"), ("SCANNING", "DISCARDED")]


def test_a_page_over_the_item_limit_fails(source_side, monkeypatch):
    """docs/concepts/reconciliation.md#limits: "Default limits are 1,000 observations/direct Events per page"."""
    _, source = source_side
    monkeypatch.setattr(staging, "MAX_PAGE_ITEMS", 2)
    monkeypatch.setattr(staging.settings, "CONDUIT_RECONCILE_PAGE_SIZE", 2)
    scripted(monkeypatch, [page(source, 1, 2, 3, complete=True)])
    outcome = reconcile_page(source=source)
    assert (outcome.state, outcome.error.code) == ("failed", "page_too_many_items")
    assert StagedEvent.objects.count() == 0


def test_the_default_item_limit_is_1000_a_page(source_side, monkeypatch):
    _, source = source_side
    monkeypatch.setattr(staging.settings, "CONDUIT_RECONCILE_PAGE_SIZE", 10)
    scripted(monkeypatch, [page(source, *range(1, 1002), complete=True)])
    outcome = reconcile_page(source=source)
    assert outcome.error is not None, outcome
    assert outcome.error.code == "page_too_many_items"


def test_a_page_over_8_mib_fails(source_side, monkeypatch):
    """docs/concepts/reconciliation.md#limits: "8 MiB encoded page/batch"."""
    _, source = source_side
    calls = scripted(monkeypatch, [page(source, 1, complete=True, size_bytes=8 * 1024 * 1024 + 1)])
    assert reconcile_page(source=source).error.code == "page_too_large"
    assert calls[0]["max_bytes"] == 8 * 1024 * 1024  # the adapter is told to stop reading there


@pytest.mark.parametrize(
    "limit, value, pages, code",
    [
        ("MAX_PAGES", 2, 3, "scan_too_many_pages"),
        ("MAX_STAGED_ITEMS", 2, 3, "scan_too_many_items"),
        ("MAX_STAGED_BYTES", 250, 3, "scan_too_large"),
    ],
)
def test_a_scan_over_a_staging_limit_is_discarded(source_side, monkeypatch, limit, value, pages, code):
    """docs/concepts/reconciliation.md#limits: "10,000 staged items, 1,000 pages ... 32 MiB staged
    observation bytes". A
    generation that would pass one is discarded (the checkpoint stays) and the source backs off."""
    _, source = source_side
    monkeypatch.setattr(staging, limit, value)
    scripted(monkeypatch, [page(source, n, cursor=f"c{n}") for n in range(1, pages + 1)])
    for _ in range(pages - 1):
        assert reconcile_page(source=source).state == "staged"
    outcome = reconcile_page(source=source)
    assert (outcome.state, outcome.error.code) == ("discarded", code)
    run = ReconcileRun.objects.get()
    assert (run.state, run.discard_reason, StagedEvent.objects.count()) == ("DISCARDED", code, 0)
    scan = ScanState.objects.get()
    assert (scan.last_error_code, scan.failures, scan.checkpoint_until) == (code, 1, None)


def test_the_default_scan_limits_are_the_documented_ones():
    assert (
        staging.MAX_PAGES,
        staging.MAX_STAGED_ITEMS,
        staging.MAX_STAGED_BYTES,
        staging.MAX_PAGE_BYTES,
        staging.MAX_TOKEN_BYTES,
        staging.MAX_PAGE_ITEMS,
    ) == (1000, 10_000, 32 * 2**20, 8 * 2**20, 4096, 1000)


def test_restart_discards_staging_keeps_the_checkpoint_and_is_due_at_once(source_side, scan, monkeypatch):
    """docs/concepts/reconciliation.md#restart: RestartScan "discards only staging/cursors, preserves ... the complete
    snapshot/checkpoint, and makes a fresh scan due immediately"."""
    state, source = source_side
    state.hold_events(item(1))
    scan(source)
    checkpoint = ScanState.objects.get().checkpoint_until
    scripted(monkeypatch, [page(source, 2, cursor="A")])
    due_now()
    reconcile_page(source=source)
    active = ReconcileRun.objects.get(state="SCANNING")
    ScanState.objects.update(next_due_at=clock.now() + timedelta(hours=1))
    assert scan_restart(source=source, actor="operator_test", expected_run=active.pk) == active.pk
    active.refresh_from_db()
    assert (active.state, active.discard_reason) == ("DISCARDED", "restarted_by_operator")
    after = ScanState.objects.get()
    assert after.checkpoint_until == checkpoint and after.next_due_at <= clock.now()
    assert StagedEvent.objects.count() == 0
    assert ReconcileRunTransition.objects.filter(
        run=active, next_state="DISCARDED", actor="operator_test"
    ).exists()


def test_restart_with_a_stale_expected_run_is_refused(source_side, monkeypatch):
    """docs/concepts/reconciliation.md#restart: RestartScan "rejects a stale expected generation"."""
    _, source = source_side
    scripted(monkeypatch, [page(source, 1, cursor="A")])
    reconcile_page(source=source)
    active = ReconcileRun.objects.get()
    with pytest.raises(RestartRefused, match=f"run {active.pk}"):
        scan_restart(source=source, actor="operator_test", expected_run=active.pk + 1)
    active.refresh_from_db()
    assert active.state == "SCANNING" and StagedEvent.objects.count() == 1
    assert scan_restart(source=source, actor="operator_test", expected_run=active.pk) == active.pk
    with pytest.raises(RestartRefused, match="none"):  # nothing active any more
        scan_restart(source=source, actor="operator_test", expected_run=active.pk)


def test_restart_command_takes_the_guard(source_side, monkeypatch):
    from django.core.management import CommandError, call_command

    _, source = source_side
    scripted(monkeypatch, [page(source, 1, cursor="A")])
    reconcile_page(source=source)
    active = ReconcileRun.objects.get()
    with pytest.raises(CommandError, match="restart refused"):
        call_command("reconcile", "sandbox", "--restart", "--expect-run", str(active.pk + 5))
    with pytest.raises(CommandError, match="guards --restart"):
        call_command("reconcile", "sandbox", "--expect-run", str(active.pk))
    assert ReconcileRun.objects.get().state == "SCANNING"


def test_restart_never_discards_a_run_that_wrote_its_report(source_side, scan, monkeypatch):
    """The run table has no REPAIRING -> DISCARDED: the refusal is recorded in the run's history."""
    state, source = source_side
    state.hold_events(item(1))

    def crash(*args, **kwargs):
        raise KeyboardInterrupt  # the process dies after the report committed

    monkeypatch.setattr(repairs, "missing_replay", crash)
    with pytest.raises(KeyboardInterrupt):
        scan(source)
    run = ReconcileRun.objects.get()
    assert run.state == "REPAIRING"
    with pytest.raises(RestartRefused, match="written its report"):
        scan_restart(source=source, actor="operator_test")
    refused = ReconcileRunTransition.objects.get(run=run, refused=True)
    assert (refused.prior_state, refused.next_state, refused.actor) == (
        "REPAIRING",
        "DISCARDED",
        "operator_test",
    )
    assert ReconcileRun.objects.get().state == "REPAIRING"


def test_positive_control_a_repeated_cursor_check_alone_misses_the_cycle(source_side, monkeypatch):
    """Positive control: with the seen-cursor check removed, A -> B -> A is staged again."""
    _, source = source_side
    fresh = iter(range(10**6))
    monkeypatch.setattr(staging, "_cursor_digest", lambda cursor: f"never-seen-{next(fresh)}")
    scripted(
        monkeypatch, [page(source, 1, cursor="A"), page(source, 2, cursor="B"), page(source, 3, cursor="A")]
    )
    assert [reconcile_page(source=source).state for _ in range(3)] == ["staged"] * 3
