"""Liveness (/healthz) and readiness (/readyz): small JSON answers that name checks, never settings."""

from __future__ import annotations

from datetime import timedelta
from typing import Callable

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

OK, FAILED, SKIPPED = "ok", "failed", "skipped"


@never_cache
@require_safe
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness: the process answers. Touches no database, cache or broker."""
    return JsonResponse({"status": "ok"})


def database_answers() -> bool:
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute("SELECT 1")
        return cursor.fetchone() == (1,)


def migrations_applied() -> bool:
    """Nothing left in the plan from the applied state to every app's latest migration."""
    connection = connections[DEFAULT_DB_ALIAS]
    executor = MigrationExecutor(connection)
    return not executor.migration_plan(executor.loader.graph.leaf_nodes())


def workers_heartbeat() -> bool:
    """A django-q2 worker finished a task within CONDUIT_READY_WORKER_SECONDS.

    django-q2 keeps a cluster's own heartbeat (its Stat) in Django's cache,
    which with the default per-process cache no web process can see. Every
    finished task is saved to the database whatever the broker (ORM or Redis),
    and the send, sweep and reconcile schedules each run a task every minute,
    so a recent `stopped` proves the whole path: scheduler, broker, worker,
    result saved. django-q2 keeps the last 250 successes (save_limit): the
    table stays small.
    """
    from django_q.models import Task

    last = Task.objects.order_by("-stopped").values_list("stopped", flat=True).first()
    window = timedelta(seconds=settings.CONDUIT_READY_WORKER_SECONDS)
    return last is not None and last >= timezone.now() - window


def workers_progress() -> bool:
    """No work has been due for the stall window with no task finished (conduit/watchdog.py).

    Beside `workers`: that one fails when nothing finished lately, this one names the worse case
    the watchdog restarts a cluster for, work waiting that no worker takes (a queued task, a late
    schedule, a scheduled run). The window is CONDUIT_WORKER_WATCHDOG_SECONDS, or with the watchdog
    off CONDUIT_READY_WORKER_SECONDS.
    """
    from conduit.watchdog import progress, stall_window

    return progress().stall_seconds < stall_window()


def _check(probe: Callable[[], bool]) -> str:
    # A probe that raises is a failed check; the exception's text (which may
    # name a host or a user) never reaches the answer.
    try:
        return OK if probe() else FAILED
    except Exception:
        return FAILED


def readiness_checks() -> dict[str, str]:
    """Each readiness check's result: ok, failed, or skipped (it needs the database, which failed)."""
    checks = {"database": _check(database_answers)}
    if checks["database"] == OK:
        checks["migrations"] = _check(migrations_applied)
        checks["workers"] = _check(workers_heartbeat)
        checks["worker_stall"] = _check(workers_progress)
    else:
        # Each reads the database: not checked, so not claimed either way.
        checks["migrations"] = checks["workers"] = checks["worker_stall"] = SKIPPED
    return checks


@never_cache
@require_safe
def readyz(request: HttpRequest) -> JsonResponse:
    """Readiness: 200 when the database answers, migrations are applied, workers beat and none stalls; else 503."""
    checks = readiness_checks()
    ready = all(value == OK for value in checks.values())
    return JsonResponse(
        {"status": "ok" if ready else "unavailable", "checks": checks}, status=200 if ready else 503
    )
