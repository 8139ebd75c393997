"""CONDUIT_DB_PREPARE_THRESHOLD: statements a connection runs often are prepared (docs/internals.md#prepared); Django
turns psycopg's preparing off unless told."""

from __future__ import annotations

import pytest
from django.db import connection

from tests.conftest import shell_with

SHOW = "from django.conf import settings; print(settings.DATABASES['default']['OPTIONS'].get('prepare_threshold'))"


def threshold(value: str | None):
    return shell_with("CONDUIT_DB_PREPARE_THRESHOLD", value, SHOW)


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
