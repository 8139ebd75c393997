"""Error reports to Sentry (SENTRY_DSN), every event and breadcrumb scrubbed by the data boundary."""

from __future__ import annotations

from typing import Any

import sentry_sdk
from sentry_sdk.integrations.django import DjangoIntegration
from sentry_sdk.integrations.logging import LoggingIntegration

from conduit.logging import boundary_scrub


def scrub(value: Any) -> Any:
    """The boundary applied to a Sentry event or breadcrumb (conduit/logging.py's one detection)."""
    return boundary_scrub(value)


def before_send(event: dict[str, Any], hint: dict[str, Any]) -> dict[str, Any]:
    # The exception's type, the stack's file and function names and the request's path stay;
    # any string that carries a credential or a message body becomes a marker.
    return scrub(event)


def before_breadcrumb(crumb: dict[str, Any], hint: dict[str, Any]) -> dict[str, Any]:
    # Sentry's logging integration records a breadcrumb from every log record, including
    # records that reached no handler and so no BoundaryFilter: judge it with the same detection.
    return scrub(crumb)


def sentry_init(*, dsn: str, environment: str) -> None:
    """Turn on sentry-sdk for the web (Django) and the worker (django-q2's error reporter)."""
    sentry_sdk.init(
        dsn=dsn,
        environment=environment,
        integrations=[DjangoIntegration(), LoggingIntegration()],
        # No user, cookies, client address or request body leaves the process.
        send_default_pii=False,
        max_request_body_size="never",
        # Frame locals are where payloads and message text live during ingest: not sent at all.
        include_local_variables=False,
        # Errors only: tracing is Prometheus's job here.
        traces_sample_rate=0.0,
        before_send=lambda event, hint: before_send(event, hint),
        before_breadcrumb=lambda crumb, hint: before_breadcrumb(crumb, hint),
    )


class TaskErrorReporter:
    """django-q2's error-reporter hook (entry point conduit_sentry): a failing task to Sentry.

    sentry-sdk has no django-q2 integration; django-q2 calls `report()` from inside the
    failing task's `except` block, so the exception in hand is the task's own.
    """

    def __init__(self, **options: Any) -> None:
        self.options = options

    def report(self) -> None:
        with sentry_sdk.new_scope() as scope:
            scope.set_tag("conduit.origin", "django-q2-task")
            sentry_sdk.capture_exception()
