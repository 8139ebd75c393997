"""Scan leases under real concurrency, a killed scan, failed pages and the bounded fair poll."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection

from ingress.models import InboundEvent
from reconcile import clock, poll
from reconcile.lease import LeaseBusy
from reconcile.models import ReconcileReport, ReconcileRun, ScanState, StagedEvent
from reconcile.poll import reconcile_due
from reconcile.scan import commit as scan_commit
from reconcile.scan import page as scan_page
from reconcile.scan import reconcile_page
from replies.models import ReplyAction
from tests.conftest import subprocess_env
from tests.reconcile.conftest import item

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.django_db(transaction=True)
def test_two_workers_race_one_publishes_the_stale_holder_publishes_nothing(source_side, settings):
    """Worker A's page call outlives its lease; B takes over and publishes; A gets lease_lost."""
    state, source = source_side
    state.hold_events(item(1), item(2))
    settings.CONDUIT_RECONCILE_LEASE_SECONDS = 1
    settings.CONDUIT_RECONCILE_PAGE_TIMEOUT_SECONDS = 5
    with state.lock:
        state.latency = 1.6  # a's page call outlives its lease
    outcomes = {}

    def worker(name: str, delay: float) -> None:
        time.sleep(delay)
        try:
            outcomes[name] = reconcile_page(source=source).state
        except LeaseBusy:
            outcomes[name] = "busy"
        finally:
            connection.close()

    a = threading.Thread(target=worker, args=("a", 0))
    b = threading.Thread(target=worker, args=("b", 0.2))  # lease still live: busy, no call
    c = threading.Thread(target=worker, args=("c", 1.2))  # lease expired: takes over
    a.start()
    time.sleep(0.1)
    with state.lock:
        state.latency = 0  # a's call is already sleeping; later calls are quick
    b.start()
    c.start()
    for t in (a, b, c):
        t.join(20)
    assert outcomes == {"a": "lease_lost", "b": "busy", "c": "published"}
    assert ReconcileReport.objects.count() == 1
    assert InboundEvent.objects.count() == 2
    assert ReplyAction.objects.count() == 4
    assert state.page_calls == 2  # a's and c's; b made none


@pytest.mark.django_db(transaction=True)
def test_a_killed_scan_publishes_nothing_and_the_next_run_resumes(source_side, settings):
    state, source = source_side
    state.hold_events(*[item(n) for n in range(1, 11)])
    env = {
        **subprocess_env(),
        "CONDUIT_RECONCILE_PAGE_SIZE": "3",
        "CONDUIT_RECONCILE_LEASE_SECONDS": "2",
        "CONDUIT_RECONCILE_PAGE_TIMEOUT_SECONDS": "1",
    }
    with state.lock:
        state.latency = 0.4
    process = subprocess.Popen(
        [sys.executable, "manage.py", "reconcile", source.name],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not ReconcileRun.objects.filter(pages__gte=2).exists():
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait(10)
    run = ReconcileRun.objects.get()
    assert run.state == "SCANNING" and 2 <= run.pages < 4
    assert not ReconcileReport.objects.exists()
    assert not InboundEvent.objects.exists()  # nothing half-published
    assert StagedEvent.objects.filter(run=run).count() == run.staged_events == 3 * run.pages
    pages_before = run.pages
    with state.lock:
        state.latency = 0
    time.sleep(2.1)  # the dead holder's lease expires
    settings.CONDUIT_RECONCILE_PAGE_SIZE = 3
    outcome = None
    for _ in range(10):
        outcome = reconcile_page(source=source)
        if outcome.state != "staged":
            break
    assert outcome.state == "published" and outcome.run_id == run.pk  # resumed, not restarted
    run.refresh_from_db()
    assert run.pages == 4 and run.pages > pages_before
    assert InboundEvent.objects.count() == 10
    assert ReplyAction.objects.count() == 20


@pytest.mark.django_db
def test_a_failed_page_keeps_safe_codes_backs_off_and_keeps_progress(source_side, settings):
    from tests.conftest import fail_next

    settings.CONDUIT_RECONCILE_PAGE_SIZE = 2
    state, source = source_side
    state.hold_events(*[item(n) for n in range(1, 5)])
    assert reconcile_page(source=source).state == "staged"
    fail_next(state, "page_error", 2)
    first = reconcile_page(source=source)
    assert first.state == "failed" and (first.error.error_class, first.error.code) == (
        "provider",
        "provider_overloaded",
    )
    scan = ScanState.objects.get(source=source)
    assert (scan.last_error_class, scan.last_error_code) == ("provider", "provider_overloaded")
    assert "raw-provider-detail" not in scan.last_error_message
    assert scan.last_error_message == "the provider answered HTTP 503"
    delays = [(scan.next_due_at - scan.last_error_at).total_seconds()]
    reconcile_page(source=source)
    scan.refresh_from_db()
    delays.append((scan.next_due_at - scan.last_error_at).total_seconds())
    assert [round(d) for d in delays] == [5, 10]
    run = ReconcileRun.objects.get()
    assert run.pages == 1 and run.page_calls == 3 and run.staged_events == 2  # progress kept
    assert reconcile_page(source=source).state == "published"
    scan.refresh_from_db()
    assert scan.last_error_code == "" and scan.failures == 0


@pytest.mark.django_db
def test_error_classes_are_conduits_own(source_side, settings):
    from tests.conftest import fail_next

    state, source = source_side
    settings.CONDUIT_RECONCILE_PAGE_TIMEOUT_SECONDS = 0.3
    state.hang_seconds = 1.0
    fail_next(state, "page_timeout")
    assert reconcile_page(source=source).error.error_class == "timeout"
    ScanState.objects.update(next_due_at=clock.now())
    fail_next(state, "page_malformed")
    assert reconcile_page(source=source).error.code == "malformed_page"
    from ingress.services import source_update

    source_update(source_id=source.pk, changes={"source_url": "http://127.0.0.1:9"})
    source.refresh_from_db()
    failure = reconcile_page(source=source).error
    assert (failure.error_class, failure.code) == ("transport", "connection_failed")


def _sources(provider, n: int, *, failing: int | None = None, prefix: str = "src", pages: int = 3):
    """n sources, each on its own provider holding `pages` pages of 2 events."""
    from ingress.services import source_register

    sources = []
    for i in range(n):
        state = provider()
        source, _ = source_register(
            name=f"{prefix}{i}",
            adapter="sandbox-social",
            account_ref=f"acct_test_{prefix}{i}",
            event_types=["comment.created"],
            purposes=[],
            trigger_keywords=[],
            secret_env="CONDUIT_SOURCE_TEST_SANDBOX_SECRET",
            source_url=state.url,
        )
        state.hold(source.account_ref, [item(number) for number in range(1, 2 * pages + 1)])
        if i == failing:
            state.fail_next("page_error", 10**6)
        sources.append((source, state))
    return sources


def _polls_until_complete(healthy, limit: int, max_polls: int = 50) -> int:
    for polls in range(1, max_polls + 1):
        reconcile_due(limit=limit)
        if all(ScanState.objects.get(source=s).last_completed_at for s in healthy):
            return polls
    raise AssertionError("healthy sources did not complete")


@pytest.mark.django_db
@pytest.mark.parametrize("limit", [4, 3, 2, 1])
def test_a_failing_source_does_not_starve_healthy_ones(provider, settings, monkeypatch, limit):
    """Under a clock held still between polls, three healthy sources of 3 pages each complete in
    the same number of polls whether or not a fourth source fails every page, when a poll may
    serve every source (limit 4). With fewer calls per poll than sources, the failing source
    costs the healthy ones its single call before it backs off, so at most one poll more."""
    settings.CONDUIT_RECONCILE_PAGE_SIZE = 2
    now = clock.now()
    monkeypatch.setattr(clock, "now", lambda: now)
    alone = _sources(provider, 3, prefix="alone")
    baseline = _polls_until_complete([s for s, _ in alone], limit)
    # The failing source sorts first, so the round robin meets it first.
    mixed = _sources(provider, 4, failing=0, prefix="mixed")
    with_failing = _polls_until_complete([s for s, _ in mixed[1:]], limit)
    assert with_failing == baseline if limit >= 4 else with_failing <= baseline + 1
    assert mixed[0][1].page_calls == 1  # backed off: one call under the still clock
    assert ScanState.objects.get(source=mixed[0][0]).last_error_code == "provider_overloaded"


@pytest.mark.django_db
def test_each_source_at_most_once_per_poll_and_the_limit_holds(provider, settings):
    settings.CONDUIT_RECONCILE_PAGE_SIZE = 2
    _sources(provider, 3)
    result = reconcile_due(limit=2)
    assert result.page_calls == 2
    assert sorted(o.source for o in result.outcomes) == ["src0", "src1"]
    result = reconcile_due(limit=200)
    assert sorted(o.source for o in result.outcomes) == ["src0", "src1", "src2"]  # once each
    with pytest.raises(ValueError):
        reconcile_due(limit=0)
    with pytest.raises(ValueError):
        reconcile_due(limit=201)


@pytest.mark.django_db
def test_an_operator_request_during_a_scan_keeps_the_source_due(source_side, settings):
    from reconcile.services import reconcile_request

    settings.CONDUIT_RECONCILE_PAGE_SIZE = 2
    state, source = source_side
    state.hold_events(*[item(n) for n in range(1, 4)])
    assert reconcile_page(source=source).state == "staged"
    time.sleep(0.01)
    reconcile_request(source=source, actor="operator_test")
    assert reconcile_page(source=source).state == "published"
    scan = ScanState.objects.get(source=source)
    assert scan.next_due_at <= clock.now() and scan.requested_at is not None  # still due
    for _ in range(3):
        if reconcile_page(source=source).state == "published":
            break
    scan.refresh_from_db()
    assert scan.requested_at is None
    assert scan.next_due_at - scan.last_completed_at == timedelta(seconds=scan.interval_seconds)


@pytest.mark.django_db
def test_protocol_violations_fail_the_page_without_poisoning_staging(source_side, settings, monkeypatch):
    from conduit.providers.sandbox.webhook import SandboxSocialAdapter

    settings.CONDUIT_RECONCILE_PAGE_SIZE = 2
    state, source = source_side
    state.hold_events(*[item(n) for n in range(1, 5)])
    assert reconcile_page(source=source).state == "staged"
    real = SandboxSocialAdapter.read_page

    def conflicting(self, **kw):
        page = real(self, **kw)
        changed = real(self, **{**kw, "cursor": None})  # page 1 again...
        import dataclasses

        tampered = [dataclasses.replace(o, payload_hash="0" * 64) for o in changed.observations]
        return dataclasses.replace(page, observations=page.observations + tampered)

    monkeypatch.setattr(SandboxSocialAdapter, "read_page", conflicting)
    outcome = reconcile_page(source=source)
    assert (outcome.state, outcome.error.code) == ("failed", "page_conflicting_duplicate")
    run = ReconcileRun.objects.get()
    assert run.pages == 1 and StagedEvent.objects.filter(run=run).count() == 2
    monkeypatch.setattr(SandboxSocialAdapter, "read_page", real)
    ScanState.objects.update(next_due_at=clock.now())
    assert reconcile_page(source=source).state == "published"
    assert InboundEvent.objects.count() == 4


@pytest.mark.django_db
def test_the_poll_skips_a_source_whose_lease_another_worker_holds(source_side):
    state, source = source_side
    from reconcile.lease import scan_state_for

    scan_state_for(source)
    ScanState.objects.filter(source=source).update(
        lease_token="f" * 64, lease_expires_at=clock.now() + timedelta(seconds=30)
    )
    result = reconcile_due(limit=5)
    assert (result.page_calls, result.skipped_busy) == (0, ["sandbox"])
    assert state.page_calls == 0
    ScanState.objects.filter(source=source).update(lease_expires_at=clock.now() - timedelta(seconds=1))
    assert reconcile_due(limit=5).page_calls == 1  # an expired lease is taken over


@pytest.mark.django_db
def test_backoff_is_capped_by_the_source_interval(source_side):
    from tests.conftest import fail_next

    state, source = source_side
    from reconcile.lease import scan_state_for

    scan_state_for(source)
    ScanState.objects.filter(source=source).update(interval_seconds=12, failures=5)
    fail_next(state, "page_error")
    reconcile_page(source=source)
    scan = ScanState.objects.get(source=source)
    assert (scan.next_due_at - scan.last_error_at).total_seconds() == pytest.approx(12, abs=0.5)


@pytest.mark.django_db
def test_the_schedule_runs_the_bounded_poll(source_side):
    from django_q.models import Schedule

    from reconcile.tasks import reconcile_poll

    assert Schedule.objects.filter(func="reconcile.tasks.reconcile_poll", minutes=1).exists()
    state, _ = source_side
    state.hold_events(item(1))
    assert reconcile_poll() == 1
    assert ReconcileReport.objects.count() == 1


@pytest.mark.django_db
def test_the_poll_leaves_canary_sources_to_the_canary(provider):
    from ingress.models import Source

    ((source, state),) = _sources(provider, 1)
    Source.objects.filter(pk=source.pk).update(canary=True)
    assert reconcile_due(limit=5).page_calls == 0 and state.page_calls == 0


def _pages_after_two_polls_of_one_call(provider) -> list[int]:
    """Two sources of three pages each, two polls of one page call each, the clock held still."""
    sources = _sources(provider, 2, prefix="rr")
    for _ in range(2):
        reconcile_due(limit=1)
    return [getattr(ReconcileRun.objects.filter(source=s).first(), "pages", 0) for s, _ in sources]


@pytest.mark.django_db
def test_the_round_robin_cursor_shares_a_tight_budget(provider, settings, monkeypatch):
    settings.CONDUIT_RECONCILE_PAGE_SIZE = 2
    now = clock.now()
    monkeypatch.setattr(clock, "now", lambda: now)
    assert _pages_after_two_polls_of_one_call(provider) == [1, 1]


@pytest.mark.django_db
def test_control_without_the_durable_cursor_one_source_takes_every_poll(provider, settings, monkeypatch):
    """Positive control: a cursor that never advances lets the first source hold the budget."""
    from types import SimpleNamespace

    settings.CONDUIT_RECONCILE_PAGE_SIZE = 2
    now = clock.now()
    monkeypatch.setattr(clock, "now", lambda: now)

    class Stuck:
        class objects:
            get_or_create = staticmethod(lambda **kw: (SimpleNamespace(pk=0, last_source_name=""), False))
            filter = staticmethod(lambda **kw: SimpleNamespace(update=lambda **kw: 0))

    monkeypatch.setattr(poll, "SchedulerCursor", Stuck)
    assert _pages_after_two_polls_of_one_call(provider) == [2, 0]


@pytest.mark.django_db
@pytest.mark.parametrize("where", ["read", "commit", "lease"])
def test_any_error_of_one_source_is_its_recorded_failure_and_the_poll_goes_on(
    provider, settings, monkeypatch, where
):
    """docs/concepts/reconciliation.md#scheduling: "An invalid/unavailable source cannot consume an unbounded number of page calls
    or starve independent sources." An arbitrary exception raised for one source, wherever in its
    page call, becomes that source's page failure (class, code, backoff, shown by doctor); the
    round-robin cursor moves past it and the healthy source beside it is served in the same poll."""
    from django.db import OperationalError

    from conduit.providers.sandbox.webhook import SandboxSocialAdapter
    from reconcile.models import SchedulerCursor
    from reconcile.selectors import needs_a_person, source_health

    settings.CONDUIT_RECONCILE_PAGE_SIZE = 2
    (bad, _), (good, good_state) = _sources(provider, 2, prefix="any", pages=1)
    real_read, real_check, real_lease = (
        SandboxSocialAdapter.read_page,
        scan_commit.page_check,
        scan_page.lease_acquire,
    )

    def read(self, **kw):
        if kw["config"].name == bad.name:
            raise ZeroDivisionError("secret provider text")
        return real_read(self, **kw)

    def check(run, page):
        if run.source_id == bad.pk:
            raise KeyError("secret")
        return real_check(run, page)

    def lease(source):
        if source.pk == bad.pk:
            raise OperationalError("secret")
        return real_lease(source)

    monkeypatch.setattr(
        *{
            "read": (SandboxSocialAdapter, "read_page", read),
            "commit": (scan_commit, "page_check", check),
            "lease": (scan_page, "lease_acquire", lease),
        }[where]
    )
    result = reconcile_due(limit=5)
    assert [o.source for o in result.outcomes] == [bad.name, good.name]
    assert result.outcomes[0].state == "failed" and result.outcomes[1].state == "published"
    assert SchedulerCursor.objects.get().last_source_name == good.name
    scan = ScanState.objects.get(source=bad)
    code = "database_error" if where == "lease" else "unexpected_error"
    assert (scan.last_error_class, scan.last_error_code, scan.failures) == ("unauthored", code, 1)
    assert "secret" not in scan.last_error_message
    assert (scan.next_due_at - scan.last_error_at).total_seconds() == pytest.approx(5, abs=0.5)
    row = next(r for r in source_health() if r["source"] == bad.name)
    assert f"last page failed (unauthored/{code})" in needs_a_person(row)
    # the failure streak is visible: a poll that keeps failing
    ScanState.objects.filter(source=bad).update(next_due_at=clock.now())
    reconcile_due(limit=5)
    row = next(r for r in source_health() if r["source"] == bad.name)
    assert f"last page failed (unauthored/{code}, 2 failure(s) in a row)" in needs_a_person(row)
