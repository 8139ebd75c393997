"""Each rule once: the staged event's field list, the scan-until-done loop,
ISO formatting, and the canary's signing secret kept out of the process environment."""

from __future__ import annotations

import os
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest
from django.utils import timezone as dj_timezone

from conduit.process_secrets import secret_held, secret_read
from conduit.providers.registry import get_adapter
from conduit.sql import insert_rows
from conduit.timefmt import iso_z
from ingress.selectors import source_config
from reconcile import staging
from reconcile.lease import LeaseBusy, lease_acquire, lease_release
from reconcile.models import ReconcileRun, ScanState, StagedEvent
from reconcile.scan import scan_until_done
from tests.reconcile.conftest import body, item

# -- the event field list -----------------------------------------------------------


def _observations(source):
    parsed = get_adapter(source.adapter).parse(
        body=body(item(1), item(2, text="no trigger here")), config=source_config(source)
    )
    assert len(parsed.observations) == 2 and not parsed.rejections
    return parsed.observations


def _stage(source, observations) -> ReconcileRun:
    run = ReconcileRun.objects.create(
        source=source, trigger="command", requested_by="tester", created_at=dj_timezone.now()
    )
    insert_rows(
        StagedEvent, staging.STAGED_EVENT_COLUMNS, [staging.staged_row(run.pk, o) for o in observations]
    )
    return run


@pytest.mark.django_db
def test_a_staged_event_rebuilds_the_observation_it_was_staged_from(sandbox_source):
    """What staging writes and replay reads is one list: the replayed observation equals the one the
    page carried, field for field (text included: the trigger reads it)."""
    observations = _observations(sandbox_source)
    run = _stage(sandbox_source, observations)
    rebuilt = staging.staged_observations(sandbox_source, run, [o.event_key for o in observations])
    original = sorted(observations, key=lambda o: o.event_key)
    assert [(o.event_key, o.text) for o in rebuilt] == [(o.event_key, o.text) for o in original]
    assert [o.__dict__ | {"index": 0} for o in rebuilt] == [o.__dict__ | {"index": 0} for o in original]


def test_the_field_list_is_the_contract_and_every_field_has_a_staged_column():
    from conduit.providers.base import Observation

    columns = {f.name for f in StagedEvent._meta.get_fields()}
    assert set(staging.OBSERVED_FIELDS) <= columns
    assert set(staging.OBSERVED_FIELDS) | set(staging.FROM_SOURCE) == set(Observation.__dataclass_fields__)


@pytest.mark.django_db
def test_control_a_field_left_out_of_the_list_breaks_the_rebuild(sandbox_source, monkeypatch):
    """Positive control: a list that forgets one contract field cannot rebuild the observation."""
    observations = _observations(sandbox_source)
    run = _stage(sandbox_source, observations)
    monkeypatch.setattr(
        staging, "OBSERVED_FIELDS", tuple(f for f in staging.OBSERVED_FIELDS if f != "sender_ref")
    )
    with pytest.raises(TypeError, match="sender_ref"):
        staging.staged_observations(sandbox_source, run, [o.event_key for o in observations])


# -- the scan loop ------------------------------------------------------------------------


@pytest.mark.django_db
def test_scan_until_done_reports_each_staged_page_and_returns_the_last_outcome(source_side, settings):
    settings.CONDUIT_RECONCILE_PAGE_SIZE = 2
    state, source = source_side
    state.hold_events(*[item(n) for n in range(1, 6)])
    staged = []
    outcome = scan_until_done(source=source, actor="tester", on_page=staged.append)
    assert [(o.state, o.pages) for o in staged] == [("staged", 1), ("staged", 2)]
    assert (outcome.state, outcome.pages, outcome.staged_events) == ("published", 3, 5)


@pytest.mark.django_db
def test_scan_until_done_waits_for_a_busy_lease_then_gives_up(sandbox_source):
    token = lease_acquire(sandbox_source)
    try:
        began = time.monotonic()
        with pytest.raises(LeaseBusy):
            scan_until_done(source=sandbox_source, wait_seconds=0.3, retry_every=0.05)
        assert time.monotonic() - began >= 0.3
    finally:
        lease_release(sandbox_source.pk, token)


@pytest.mark.django_db(transaction=True)
def test_scan_until_done_takes_the_lease_when_it_is_freed(source_side):
    state, source = source_side
    state.hold_events(item(1))
    token = lease_acquire(source)
    timer = threading.Timer(0.3, lease_release, args=(source.pk, token))
    timer.start()
    try:
        outcome = scan_until_done(source=source, wait_seconds=5, retry_every=0.05)
    finally:
        timer.join()
    assert outcome.state == "published"
    assert ScanState.objects.get(source=source).lease_token == ""


@pytest.mark.django_db
def test_scan_until_done_stops_after_max_pages_calls_without_an_end(source_side, settings):
    """A scan passes MAX_PAGES only by being discarded; `max_pages` guards the loop against
    anything else (here: a three-page scan allowed one call)."""
    settings.CONDUIT_RECONCILE_PAGE_SIZE = 2
    state, source = source_side
    state.hold_events(*[item(n) for n in range(1, 6)])
    with pytest.raises(RuntimeError, match="did not finish in 1 page calls"):
        scan_until_done(source=source, max_pages=1)


# -- ISO formatting ---------------------------------------------------------------------


def test_iso_z_writes_utc_with_a_z_and_keeps_other_offsets():
    assert iso_z(datetime(2026, 1, 15, 14, 0, tzinfo=timezone.utc)) == "2026-01-15T14:00:00Z"
    assert (
        iso_z(datetime(2026, 1, 15, 14, 0, tzinfo=timezone(timedelta(hours=2))))
        == "2026-01-15T14:00:00+02:00"
    )
    assert iso_z(None) is None


# -- the canary's secret --------------------------------------------------------------------


def test_a_held_secret_is_read_before_the_environment_and_only_while_held(monkeypatch):
    monkeypatch.setenv("CONDUIT_SOURCE_TEST_HELD", "from-env")
    with secret_held("CONDUIT_SOURCE_TEST_HELD", "held-outer"):
        with secret_held("CONDUIT_SOURCE_TEST_HELD", "held-inner"):
            assert secret_read("CONDUIT_SOURCE_TEST_HELD") == "held-inner"
        assert secret_read("CONDUIT_SOURCE_TEST_HELD") == "held-outer"
        assert os.environ["CONDUIT_SOURCE_TEST_HELD"] == "from-env"  # the environment is not touched
    assert secret_read("CONDUIT_SOURCE_TEST_HELD") == "from-env"
    monkeypatch.delenv("CONDUIT_SOURCE_TEST_HELD")
    assert secret_read("CONDUIT_SOURCE_TEST_HELD") == ""


@pytest.mark.django_db(transaction=True)  # the canary serves its webhook over real HTTP
def test_the_canary_leaves_no_secret_in_the_process_environment(monkeypatch):
    """The canary never writes the key it makes into os.environ, where it would stay for the rest
    of the process's life (and every child process's)."""
    from platforms.sandbox.canary import CANARY
    from reconcile.proof.canary import canary_run

    monkeypatch.delenv(CANARY["secret_env"], raising=False)
    result = canary_run(actor="operator_test")
    assert result.report.ok, [e.as_dict() for e in result.expectations if not e.ok]
    assert CANARY["secret_env"] not in os.environ
    assert secret_read(CANARY["secret_env"]) == ""
