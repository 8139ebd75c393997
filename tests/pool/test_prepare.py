"""CONDUIT_DB_PREPARE_THRESHOLD: statements a connection runs often are prepared (docs/internals.md#prepared); Django
turns psycopg's preparing off unless told."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from tests.conftest import subprocess_env

ROOT = Path(__file__).resolve().parents[2]
SHOW = "from django.conf import settings; print(settings.DATABASES['default']['OPTIONS'].get('prepare_threshold'))"


def threshold(value: str | None) -> subprocess.CompletedProcess:
    env = subprocess_env()
    env.pop("CONDUIT_DB_PREPARE_THRESHOLD", None)
    if value is not None:
        env["CONDUIT_DB_PREPARE_THRESHOLD"] = value
    return subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", SHOW],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.django_db
@pytest.mark.parametrize("value, shown", [(None, "5"), ("0", "0"), ("12", "12"), ("off", "None")])
def test_the_threshold_reaches_psycopg_as_configured(value, shown):
    run = threshold(value)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().splitlines()[-1] == shown


@pytest.mark.django_db
@pytest.mark.parametrize("value", ["five", "-1"])
def test_a_threshold_that_is_not_a_whole_number_or_off_is_refused_by_name(value):
    run = threshold(value)
    assert run.returncode != 0
    assert "CONDUIT_DB_PREPARE_THRESHOLD must be a whole number or off" in run.stderr


@pytest.mark.django_db
def test_a_statement_run_five_times_is_prepared_on_the_server():
    """The test settings are the defaults: a statement run five times is prepared on its next run."""
    with connection.cursor() as cursor:
        for _ in range(6):
            cursor.execute("SELECT %s::int + 40", [2])
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s", ["SELECT $1::int + 40%"]
        )
        assert cursor.fetchone()[0] == 1
