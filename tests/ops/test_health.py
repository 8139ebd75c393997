"""GET /healthz and GET /readyz: liveness without the database, readiness naming each failing check."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.db.utils import OperationalError
from django.utils import timezone

READY = {
    "status": "ok",
    "checks": {"database": "ok", "migrations": "ok", "workers": "ok", "worker_stall": "ok"},
}


def finished_task(seconds_ago: float) -> None:
    """A django-q2 task row as a worker saves it when the task ends."""
    from django_q.models import Task

    stopped = timezone.now() - timedelta(seconds=seconds_ago)
    Task.objects.create(
        id=f"test{seconds_ago:.0f}".ljust(32, "0"),
        name="test-heartbeat",
        func="replies.tasks.send_due",
        started=stopped - timedelta(seconds=1),
        stopped=stopped,
        success=True,
    )


def test_healthz_answers_ok_without_a_database_query(client, db, django_assert_num_queries):
    """docs/reference/http.md#health: "GET /healthz answers 200 {"status": "ok"} without touching the database"."""
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
    """docs/operations.md#readiness: "a django-q2 cluster has shown a heartbeat within CONDUIT_READY_WORKER_SECONDS"."""
    settings.CONDUIT_READY_WORKER_SECONDS = 120
    finished_task(seconds_ago=150)
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {
        "status": "unavailable",
        "checks": {"database": "ok", "migrations": "ok", "workers": "failed", "worker_stall": "ok"},
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
    assert response.json()["checks"] == {
        "database": "ok",
        "migrations": "failed",
        "workers": "ok",
        "worker_stall": "ok",
    }


@pytest.mark.django_db
def test_readyz_names_the_database_and_leaks_nothing_when_it_does_not_answer(client, monkeypatch):
    secret_words = "host=db-primary.internal user=conduit_owner password=hunter2"

    def refused(*args, **kwargs):
        raise OperationalError(f"connection refused: {secret_words}")

    monkeypatch.setattr("conduit.health.database_answers", refused)
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {
        "status": "unavailable",
        "checks": {
            "database": "failed",
            "migrations": "skipped",
            "workers": "skipped",
            "worker_stall": "skipped",
        },
    }
    body = response.content.decode()
    for word in ("db-primary", "conduit_owner", "hunter2", "postgres", "SECRET"):
        assert word not in body


# -- worker_stall: work due that no worker takes (docs/operations.md#watchdog) --------------------


@pytest.fixture
def queued_task():
    """A task waiting in the ORM broker's queue since `seconds_ago` (a pusher re-locked it since)."""
    from django_q.conf import Conf
    from django_q.models import OrmQ, Schedule
    from django_q.signing import SignedPackage

    Schedule.objects.all().delete()  # only the planted work is due

    def plant(seconds_ago: float) -> None:
        started = timezone.now() - timedelta(seconds=seconds_ago)
        OrmQ.objects.create(
            key=Conf.CLUSTER_NAME,
            lock=timezone.now() + timedelta(seconds=60),
            payload=SignedPackage.dumps({"func": "replies.tasks.send_reply", "started": started}),
        )

    return plant


@pytest.mark.django_db
def test_readyz_names_worker_stall_when_work_waited_the_watchdog_window_with_nothing_finished(
    client, settings, queued_task
):
    from django_q.models import OrmQ

    settings.CONDUIT_READY_WORKER_SECONDS = 900  # the heartbeat's window is wide: only the stall shows
    settings.CONDUIT_WORKER_WATCHDOG_SECONDS = 180
    finished_task(seconds_ago=400)
    queued_task(seconds_ago=170)
    assert client.get("/readyz").status_code == 200
    OrmQ.objects.all().delete()
    queued_task(seconds_ago=190)
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"] == {
        "database": "ok",
        "migrations": "ok",
        "workers": "ok",
        "worker_stall": "failed",
    }
    # With the watchdog off, readiness judges the stall by its own window.
    settings.CONDUIT_WORKER_WATCHDOG_SECONDS = 0
    assert client.get("/readyz").status_code == 200
    settings.CONDUIT_READY_WORKER_SECONDS = 150
    assert client.get("/readyz").json()["checks"]["worker_stall"] == "failed"


@pytest.mark.django_db
def test_readyz_worker_stall_is_ok_while_a_long_queue_drains(client, queued_task):
    """Old work waiting is no stall while tasks keep finishing."""
    finished_task(seconds_ago=2)
    queued_task(seconds_ago=3600)
    assert client.get("/readyz").json()["checks"]["worker_stall"] == "ok"


@pytest.mark.django_db
def test_readyz_worker_stall_is_ok_when_nothing_is_due(client):
    from django_q.models import Schedule

    Schedule.objects.all().delete()
    finished_task(seconds_ago=86400)
    checks = client.get("/readyz").json()["checks"]
    assert (checks["workers"], checks["worker_stall"]) == ("failed", "ok")
