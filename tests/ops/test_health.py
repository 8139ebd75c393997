"""GET /healthz and GET /readyz: liveness without the database, readiness naming each failing check."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.db.utils import OperationalError
from django.utils import timezone

READY = {"status": "ok", "checks": {"database": "ok", "migrations": "ok", "workers": "ok"}}


def finished_task(seconds_ago: float) -> None:
    """A django-q2 task row as a worker saves it when the task ends."""
    from django_q.models import Task

    stopped = timezone.now() - timedelta(seconds=seconds_ago)
    Task.objects.create(
        id=f"test{seconds_ago:.0f}".ljust(32, "0"), name="test-heartbeat", func="replies.tasks.send_due",
        started=stopped - timedelta(seconds=1), stopped=stopped, success=True,
    )


def test_healthz_answers_ok_without_a_database_query(client, db, django_assert_num_queries):
    """Issue 16: "GET /healthz answers 200 {"status": "ok"} without touching the database"."""
    with django_assert_num_queries(0):
        response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert "no-cache" in response["Cache-Control"]


def test_healthz_answers_with_database_access_forbidden(client):
    # No db fixture: pytest-django makes any database access raise here.
    response = client.get("/healthz")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})


def test_healthz_and_readyz_refuse_writes(client, db):
    assert client.post("/healthz").status_code == 405
    assert client.post("/readyz").status_code == 405


@pytest.mark.django_db
def test_readyz_is_ready_with_a_recent_worker_heartbeat(client):
    finished_task(seconds_ago=30)
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == READY


@pytest.mark.django_db
def test_readyz_names_workers_when_no_task_finished_within_the_window(client, settings):
    """Issue 16: "a django-q2 cluster has shown a heartbeat within CONDUIT_READY_WORKER_SECONDS"."""
    settings.CONDUIT_READY_WORKER_SECONDS = 120
    finished_task(seconds_ago=150)
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {
        "status": "unavailable", "checks": {"database": "ok", "migrations": "ok", "workers": "failed"},
    }
    # The window is the setting's, not a constant: widened, the same heartbeat is recent enough.
    settings.CONDUIT_READY_WORKER_SECONDS = 200
    assert client.get("/readyz").status_code == 200


@pytest.mark.django_db
def test_readyz_names_workers_when_no_worker_ever_ran(client):
    response = client.get("/readyz")
    assert (response.status_code, response.json()["checks"]["workers"]) == (503, "failed")


@pytest.mark.django_db
def test_readyz_names_migrations_when_one_is_not_applied(client):
    finished_task(seconds_ago=1)
    assert client.get("/readyz").status_code == 200
    # Forget one applied migration (inside the test's transaction): the plan is no longer empty.
    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM django_migrations WHERE id = (SELECT max(id) FROM django_migrations WHERE app = %s)",
            ["reconcile"],
        )
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"] == {"database": "ok", "migrations": "failed", "workers": "ok"}


@pytest.mark.django_db
def test_readyz_names_the_database_and_leaks_nothing_when_it_does_not_answer(client, monkeypatch):
    secret_words = "host=db-primary.internal user=conduit_owner password=hunter2"

    def refused(*args, **kwargs):
        raise OperationalError(f"connection refused: {secret_words}")

    monkeypatch.setattr("conduit.health.database_answers", refused)
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {
        "status": "unavailable", "checks": {"database": "failed", "migrations": "skipped", "workers": "skipped"},
    }
    body = response.content.decode()
    for word in ("db-primary", "conduit_owner", "hunter2", "postgres", "SECRET"):
        assert word not in body
