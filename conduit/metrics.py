"""Prometheus metrics: counters counted where things happen, ledger gauges read at scrape time, /metrics.

Two sources, chosen by what each number is:

- Counters and the send histogram are counted in the process where the thing
  happens (a gunicorn worker, a django-q2 worker, the worker's watchdog) with prometheus_client. With
  PROMETHEUS_MULTIPROC_DIR set (the gunicorn configuration and the qcluster unit
  set it, one empty directory per host), every process writes its values to a
  file there and /metrics sums them, so a scrape of any gunicorn worker answers
  for all of them. Totals derived from the ledgers instead (events by result is
  a sum of seen_count over the whole event table) would grow with history.
- Gauges of what is waiting (quarantine, open reply actions, unknown sends,
  reconcile progress, the task queue) are read from the database at scrape
  time: the ledgers hold the truth, every node answers the same, and each count
  walks only the waiting rows (the open states' indexes), not the history.
"""

from __future__ import annotations

import functools
import hmac
import ipaddress
import logging
import os
import time
from datetime import datetime
from typing import Any, Callable, Iterable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector

logger = logging.getLogger("conduit.metrics")

# Counted where they happen. In multiprocess mode these write to
# PROMETHEUS_MULTIPROC_DIR; otherwise they live in this process's registry.
LOCAL_REGISTRY = CollectorRegistry(auto_describe=True)

WEBHOOK_REQUESTS = Counter(
    "conduit_webhook_requests",
    "Webhook requests answered, by source and HTTP status.",
    ["source", "status"],
    registry=LOCAL_REGISTRY,
)
EVENTS = Counter(
    "conduit_events",
    "Webhook events by outcome: accepted, duplicate or quarantined.",
    ["source", "result"],
    registry=LOCAL_REGISTRY,
)
SEND_SECONDS = Histogram(
    "conduit_send_seconds",
    "Time from a send's claim to its outcome, by transport and state reached.",
    ["transport", "outcome"],
    registry=LOCAL_REGISTRY,
    # The transport gives up after CONDUIT_TRANSPORT_TIMEOUT_SECONDS (10 s by default).
    buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 30.0, 60.0),
)
PAGE_FAILURES = Counter(
    "conduit_reconcile_page_failures",
    "Reconcile page calls that failed, by source and error class.",
    ["source", "class"],
    registry=LOCAL_REGISTRY,
)
# Counted by `manage.py worker`, the process that supervises the cluster (conduit/watchdog.py).
WATCHDOG_RESTARTS = Counter(
    "conduit_worker_watchdog_restarts",
    "django-q2 clusters the worker watchdog ended and started again: no task finished while work was due.",
    ["due"],
    registry=LOCAL_REGISTRY,
)

EVENT_RESULTS = ("accepted", "duplicate", "quarantined")
# Requests not attributed to a registered source: an unknown name, or refused before the lookup.
UNREGISTERED = "_unregistered"
# The classic text format, which every Prometheus reads; our names need none of 1.0.0's escaping.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
WEBHOOK_ROUTES = {"webhook", "webhook-no-slash", "webhook-meta", "webhook-meta-no-slash"}


# -- counting where it happens ------------------------------------------------------------------


class WebhookMetricsMiddleware:
    """Counts each webhook request by source and status, and its events by result.

    Outermost in MIDDLEWARE, so refusals made by other middleware count too.
    The events come from the acknowledgement the view already wrote (its
    `results`, one row per event), so ingress code stays unaware of metrics.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        if match is not None and match.url_name in WEBHOOK_ROUTES:
            try:
                webhook_counted(request, response)
            except Exception:  # a metric never costs a provider its acknowledgement
                logger.exception("webhook metrics not counted")
        return response


# The views name the source (or Meta app) a request was for, once they found it registered:
# only such names become labels, so a sender cannot add series by making names up.
SOURCE_ATTRIBUTE = "conduit_source"


def webhook_counted(request: HttpRequest, response: HttpResponse) -> None:
    source = getattr(request, SOURCE_ATTRIBUTE, None) or UNREGISTERED
    WEBHOOK_REQUESTS.labels(source=source, status=str(response.status_code)).inc()
    data = getattr(response, "data", None)
    rows = data.get("results") if isinstance(data, dict) else None
    for row in rows if isinstance(rows, list) else ():
        result = row.get("result") if isinstance(row, dict) else None
        if result in EVENT_RESULTS:
            # A Meta delivery routes entries to several sources; each row names its own.
            row_source = row.get("source")
            label = row_source if isinstance(row_source, str) else source
            EVENTS.labels(source=label, result=result).inc()


def observe_send(*, transport_of: Callable[[Any], str]) -> Callable:
    """Decorates the sender's deliver step `(action, now) -> state reached`: observes its seconds.

    The hook the sender carries: `@observe_send(transport_of=_transport_name)`
    above `def _deliver` in replies/sender/deliver.py.
    """

    def decorate(deliver: Callable[..., str]) -> Callable[..., str]:
        @functools.wraps(deliver)
        def timed(action: Any, now: datetime, *args: Any, **kwargs: Any) -> str:
            started = time.monotonic()
            state = deliver(action, now, *args, **kwargs)
            try:
                SEND_SECONDS.labels(transport=transport_of(action), outcome=str(state)).observe(
                    time.monotonic() - started
                )
            except Exception:
                logger.exception("send seconds not observed")
            return state

        return timed

    return decorate


def page_failure_counted(*, source: str, error_class: str) -> None:
    """One failed reconcile page call (the hook in reconcile/schedule.py's schedule_after_failure)."""
    PAGE_FAILURES.labels(source=source, **{"class": error_class or "unknown"}).inc()


# -- read from the ledgers at scrape time --------------------------------------------------------


# Gauges read from the ledgers at scrape time. The ledgers are the apps' (the console registers
# its collector here when it is ready): this layer imports no app.
LEDGER_COLLECTORS: list[Any] = []


class WorkerStallCollector:
    """How long work has been due with no django-q2 task finished, from the task tables (conduit/watchdog.py)."""

    def collect(self) -> Iterable[GaugeMetricFamily]:
        from conduit.watchdog import progress

        try:
            seconds = progress().stall_seconds
        except Exception:
            logger.exception("worker stall not measured")
            return
        yield GaugeMetricFamily(
            "conduit_worker_stall_seconds",
            "Seconds work has been due (a queued task, a late or a running schedule) with no task finished; "
            "0 when none is.",
            value=seconds,
        )


# -- /metrics -----------------------------------------------------------------------------------


def multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


def exposition() -> bytes:
    """The whole text exposition: counters (all processes in multiprocess mode) and ledger gauges."""
    registry = CollectorRegistry(auto_describe=False)
    if multiprocess_dir():
        MultiProcessCollector(registry)
    else:
        for collector in (WEBHOOK_REQUESTS, EVENTS, SEND_SECONDS, PAGE_FAILURES, WATCHDOG_RESTARTS):
            registry.register(collector)
    registry.register(WorkerStallCollector())
    for collector in LEDGER_COLLECTORS:
        registry.register(collector)
    return generate_latest(registry)


def _loopback_connection(request: HttpRequest) -> bool:
    """The connection came from this host. Headers are not asked: any client can send any of
    them, and a proxy on this host connects from loopback whatever it forwards."""
    try:
        return ipaddress.ip_address(request.META.get("REMOTE_ADDR", "")).is_loopback
    except ValueError:
        return False


# What each refusal tells the operator, after its code (the first line of the body).
REFUSALS = {
    "metrics_token_required": "Send Authorization: Bearer <CONDUIT_METRICS_TOKEN>.",
    "metrics_token_refused": "The bearer token is not CONDUIT_METRICS_TOKEN.",
    "metrics_loopback_off": (
        "No CONDUIT_METRICS_TOKEN is set, and without one /metrics answers only when "
        "CONDUIT_METRICS_LOOPBACK=on says no proxy stands in front of this server. Set "
        "CONDUIT_METRICS_TOKEN (behind a proxy), or CONDUIT_METRICS_LOOPBACK=on when none is in front."
    ),
    "metrics_loopback_only": (
        "No CONDUIT_METRICS_TOKEN is set: /metrics answers only connections from this host. "
        "Scrape from this host, or set CONDUIT_METRICS_TOKEN."
    ),
}


def _refusal(status: int, code: str) -> HttpResponse:
    response = HttpResponse(
        f"{code}\n{REFUSALS[code]}\n", status=status, content_type="text/plain; charset=utf-8"
    )
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
    return response


def metrics_allowed(request: HttpRequest) -> HttpResponse | None:
    """None when the request may read /metrics, else the refusal naming why.

    With CONDUIT_METRICS_TOKEN: a bearer presenting it, from anywhere (401 without, 403 wrong).
    Without: only while CONDUIT_METRICS_LOOPBACK=on (the deployment's word that no proxy stands in
    front of this server) and only connections from this host, whatever headers they carry. A
    proxy connects from its own address, often loopback, and no list of forwarding headers is
    complete (X-Forwarded-Proto, Via, True-Client-IP, CF-Connecting-IP...), so only the
    deployment can say none is there.
    """
    token = settings.CONDUIT_METRICS_TOKEN
    if not token:
        if not settings.CONDUIT_METRICS_LOOPBACK:
            return _refusal(403, "metrics_loopback_off")
        return None if _loopback_connection(request) else _refusal(403, "metrics_loopback_only")
    scheme, _, given = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    if scheme.lower() != "bearer" or not given:
        return _refusal(401, "metrics_token_required")
    if not hmac.compare_digest(given.strip().encode(), token.encode()):
        return _refusal(403, "metrics_token_refused")
    return None


@never_cache
@require_safe
def metrics_view(request: HttpRequest) -> HttpResponse:
    refusal = metrics_allowed(request)
    if refusal is not None:
        return refusal
    return HttpResponse(exposition(), content_type=CONTENT_TYPE)
