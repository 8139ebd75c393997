"""Every ranged setting is checked when Conduit starts, from one table (docs/configuration.md#ranges).

Unchecked, `CONDUIT_RECONCILE_INTERVAL_SECONDS=0` would make the first new source's scan state
refuse its insert (the scan_interval_range constraint) inside the poll, so no source is scanned. The ranges are
conduit/checks.py's SETTING_RANGES, held here against docs/configuration.md's table, the
settings module and the database constraint.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conduit.checks import CHECK_ID, SETTING_RANGES, settings_in_range

ROOT = Path(__file__).resolve().parents[2]
ENTRIES = list(SETTING_RANGES.values())


def _outside(entry) -> list:
    return [entry.low - 1, *([entry.high + 1] if entry.high is not None else [])]


def _inside(entry) -> list:
    return [entry.low, *([entry.high] if entry.high is not None else []), *([None] if entry.optional else [])]


@pytest.mark.parametrize(
    "entry, value",
    [(e, v) for e in ENTRIES for v in _outside(e)],
    ids=lambda p: getattr(p, "setting", repr(p)),
)
def test_each_setting_out_of_range_is_the_checks_error_naming_setting_range_and_value(settings, entry, value):
    setattr(settings, entry.setting, value)
    errors = settings_in_range()
    assert [e.id for e in errors] == [CHECK_ID]
    message = errors[0].msg
    assert entry.setting in message and entry.words in message and f"is {value!r}," in message
    bounds = f"{entry.low} or more" if entry.high is None else f"{entry.low} to {entry.high}"
    assert f"({bounds})" in message


@pytest.mark.parametrize(
    "entry, value",
    [(e, v) for e in ENTRIES for v in _inside(e)],
    ids=lambda p: getattr(p, "setting", repr(p)),
)
def test_each_setting_at_its_bounds_passes(settings, entry, value):
    setattr(settings, entry.setting, value)
    assert settings_in_range() == []


def test_a_value_that_is_not_a_whole_number_is_refused_too(settings):
    settings.CONDUIT_RECONCILE_POLL_LIMIT = True
    settings.CONDUIT_RECONCILE_MAX_PAGES = 2.5
    assert {e.msg.split(" ")[0] for e in settings_in_range()} == {
        "CONDUIT_RECONCILE_POLL_LIMIT",
        "CONDUIT_RECONCILE_MAX_PAGES",
    }


def test_the_check_is_registered_with_django():
    from django.core import checks

    assert settings_in_range in checks.registry.registry.get_checks()


def _manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "CONDUIT_ENV_FILE": "/nonexistent/.demo.env", **env}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_manage_py_check_passes_with_the_defaults():
    """Control for the refusals below: the same command, the same environment, no bad value."""
    done = _manage("check")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    "setting, value, words",
    [
        ("CONDUIT_RECONCILE_INTERVAL_SECONDS", "0", "1 s to 1 year (1 to 31536000)"),
        # Before: settings refused it without saying the value ("must be 1 to 200 page calls").
        ("CONDUIT_RECONCILE_POLL_LIMIT", "201", "1 to 200 (1 to 200)"),
        ("CONDUIT_RECONCILE_MAX_STAGED_ITEMS", "0", "1 to 20,000,000 (1 to 20000000)"),
    ],
)
def test_manage_py_check_refuses_to_start_naming_setting_range_and_value(setting, value, words):
    done = _manage("check", **{setting: value})
    assert done.returncode != 0
    assert f"({CHECK_ID}) {setting} is {value}, outside its range {words}" in done.stderr, done.stderr


def test_the_webs_ranged_setting_is_refused_when_the_settings_load():
    """gunicorn runs no system checks: CONDUIT_META_WEBHOOK_MAX_BYTES is refused by the settings
    themselves, from the same table and in the same words."""
    done = _manage("check", CONDUIT_META_WEBHOOK_MAX_BYTES="0")
    assert done.returncode != 0
    assert "CONDUIT_META_WEBHOOK_MAX_BYTES is 0, outside its range at least 1 byte (1 or more)" in done.stderr


def _readme_rows() -> dict[str, str]:
    """docs/configuration.md's table: variable -> its row."""
    section = (ROOT / "docs" / "configuration.md").read_text()
    return {
        m.group(1): line for line in section.splitlines() if (m := re.match(r"\| `([A-Z0-9_]+)` \|", line))
    }


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.setting)
def test_the_readme_row_states_the_tables_range(entry):
    rows = _readme_rows()
    assert entry.setting in rows
    assert entry.words in rows[entry.setting]


# How docs/configuration.md words a range: "1 to 200", "1 s to 1 year", "1 to 16 GiB", "at least 1 byte".
RANGE_WORDS = re.compile(r"\b\d[\d,]*( s)? to \d|\bat least \d")


def test_every_range_the_readme_states_is_in_the_table():
    stated = {name for name, row in _readme_rows().items() if RANGE_WORDS.search(row.split("|")[3])}
    assert stated == set(SETTING_RANGES)


def test_every_setting_of_the_table_is_read_by_the_settings_and_ranged_nowhere_else():
    from django.conf import settings

    text = (ROOT / "conduit" / "settings.py").read_text()
    for name in SETTING_RANGES:
        assert hasattr(settings, name)
        assert f'"{name}"' in text  # read from the environment under its own name
        # no second, hand-written range: a comparison against the setting
        assert not re.search(rf"\b{name}\s*(<|>|<=|>=)\s*\d|\d\s*(<|>|<=|>=)\s*{name}\b", text), name


def test_the_database_and_staging_hold_the_same_bounds():
    from reconcile.models import ScanState
    from reconcile.staging import LIMIT_SETTINGS

    constraint = next(c for c in ScanState._meta.constraints if c.name == "scan_interval_range")
    interval = SETTING_RANGES["CONDUIT_RECONCILE_INTERVAL_SECONDS"]
    assert dict(constraint.condition.children) == {
        "interval_seconds__gte": interval.low,
        "interval_seconds__lte": interval.high,
    }
    for setting, low, high in LIMIT_SETTINGS.values():
        assert (low, high) == (SETTING_RANGES[setting].low, SETTING_RANGES[setting].high)


@pytest.mark.django_db
def test_a_scan_state_the_database_refuses_does_not_stop_the_poll(source_side, settings):
    """Behind the check: were the interval refused anyway (set after start), the new source is left
    out with a warning and the source already scheduled is still scanned in the same poll."""
    from ingress.services import source_register
    from reconcile.lease import scan_state_for
    from reconcile.models import ScanState
    from reconcile.poll import reconcile_due
    from tests.conftest import SECRET_ENV

    state, source = source_side
    scan_state_for(source)
    settings.CONDUIT_RECONCILE_INTERVAL_SECONDS = 0
    source_register(
        name="later",
        adapter="sandbox-social",
        account_ref="acct_test_99",
        event_types=["comment.created"],
        purposes=["public_ack"],
        trigger_keywords=["CHECKLIST"],
        secret_env=SECRET_ENV,
    )
    result = reconcile_due(limit=5)
    assert [o.source for o in result.outcomes] == ["sandbox"]
    assert not ScanState.objects.filter(source__name="later").exists()
