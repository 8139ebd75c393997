"""The ledgers' gauges for /metrics, read at scrape time: what waits, and how reconciliation keeps up.

Registered with conduit.metrics when the app is ready (conduit imports no app).
Every node answers the same, and each count walks only the waiting rows (the
open states' indexes), never the event history.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Iterable

from django.db import connection
from django.db.models import Count, Q
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily

logger = logging.getLogger("conduit.metrics")

# Reply states that drain; the terminal ones (SENT, SUPPRESSED_TEST,
# CLOSED_NO_REPLY) only grow, and their rate is conduit_send_seconds_count.
OPEN_REPLY_STATES = ("REVIEW_PENDING", "APPROVED", "SENDING", "FAILED_BEFORE_SEND", "SEND_STATUS_UNKNOWN")


def _ts(value: datetime | None) -> float | None:
    return value.timestamp() if value is not None else None


class LedgerCollector:
    """Gauges of what waits in the ledgers, each count over an open state's rows only."""

    def collect(self) -> Iterable[GaugeMetricFamily]:
        from conduit.health import OK, readiness_checks

        ready = GaugeMetricFamily(
            "conduit_ready",
            "1 when /readyz's check passes (database, migrations, workers, worker_stall).",
            labels=["check"],
        )
        for check, result in readiness_checks().items():
            ready.add_metric([check], 1 if result == OK else 0)
        yield ready
        up = GaugeMetricFamily("conduit_ledger_up", "1 when the ledgers answered this scrape.")
        try:
            families = list(self._families(timezone.now()))
        except Exception:
            logger.exception("ledger metrics unavailable")
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from families

    def _families(self, now: datetime) -> Iterable[GaugeMetricFamily]:
        from ingress.models import QuarantineReceipt, QuarantineState, Source
        from reconcile.models import ScanState
        from replies.models import ReplyAction

        names = dict(Source.objects.values_list("pk", "name"))

        waiting = GaugeMetricFamily(
            "conduit_quarantine_waiting", "Quarantine receipts waiting for review.", labels=["source"]
        )
        counts = dict(
            QuarantineReceipt.objects.filter(state=QuarantineState.QUARANTINED)
            .order_by()
            .values_list("source")
            .annotate(n=Count("id"))
        )
        for pk, name in sorted(names.items(), key=lambda item: item[1]):
            waiting.add_metric([name], counts.get(pk, 0))
        yield waiting

        actions = GaugeMetricFamily(
            "conduit_reply_actions", "Reply actions in each open (not yet final) state.", labels=["state"]
        )
        by_state = dict(
            ReplyAction.objects.filter(delivery_state__in=OPEN_REPLY_STATES)
            .order_by()
            .values_list("delivery_state")
            .annotate(n=Count("id"))
        )
        for state in OPEN_REPLY_STATES:
            actions.add_metric([state], by_state.get(state, 0))
        yield actions

        unknown, oldest_unknown = self._unknown_sends(now)
        yield GaugeMetricFamily(
            "conduit_unknown_sends_waiting", "Reply actions in SEND_STATUS_UNKNOWN.", value=unknown
        )
        yield GaugeMetricFamily(
            "conduit_unknown_send_oldest_age_seconds",
            "Seconds since the oldest waiting unknown send became unknown (0 when none).",
            value=oldest_unknown,
        )

        due = (
            ReplyAction.objects.filter(
                Q(delivery_state="APPROVED")
                | Q(delivery_state="FAILED_BEFORE_SEND", next_attempt_at__lte=now)
            )
            .order_by("id")
            .values_list("approved_at", "next_attempt_at", "delivery_state")[:1]
        )
        due_age = 0.0
        for approved_at, next_attempt_at, state in due:
            since = next_attempt_at if state == "FAILED_BEFORE_SEND" else approved_at
            due_age = max(0.0, (now - since).total_seconds()) if since else 0.0
        yield GaugeMetricFamily(
            "conduit_send_due_oldest_age_seconds",
            "Seconds the lowest-id send due now has been due (0 when none): a queue that drains stays low.",
            value=due_age,
        )

        last_complete = GaugeMetricFamily(
            "conduit_reconcile_last_complete_timestamp_seconds",
            "When the source's last complete scan published (absent before the first).",
            labels=["source"],
        )
        lag = GaugeMetricFamily(
            "conduit_reconcile_lag_seconds",
            "Seconds since the last complete scan (since registration before the first).",
            labels=["source"],
        )
        interval = GaugeMetricFamily(
            "conduit_reconcile_interval_seconds",
            "The source's interval between complete scans.",
            labels=["source"],
        )
        streak = GaugeMetricFamily(
            "conduit_reconcile_failure_streak",
            "Consecutive failed page calls of the source's scan.",
            labels=["source"],
        )
        reauth: set[int] = set()
        states = ScanState.objects.values_list(
            "source",
            "last_completed_at",
            "interval_seconds",
            "failures",
            "last_error_class",
            "source__created_at",
        )
        for source_id, completed, every, failures, error_class, created in states:
            name = names.get(source_id)
            if name is None:
                continue
            if completed is not None:
                last_complete.add_metric([name], completed.timestamp())
            lag.add_metric([name], max(0.0, (now - (completed or created)).total_seconds()))
            interval.add_metric([name], every)
            streak.add_metric([name], failures)
            if error_class == "credentials":
                reauth.add(source_id)
        yield from (last_complete, lag, interval, streak)
        reauth |= set(Source.objects.filter(needs_reauth=True).values_list("pk", flat=True))
        yield GaugeMetricFamily(
            "conduit_sources_needing_reauth",
            "Sources whose access token Meta refused (a page, a send or the token refresh): a person "
            "must reconnect them.",
            value=len(reauth),
        )
        from ingress.services.credentials import credentials_expiring

        yield GaugeMetricFamily(
            "conduit_access_tokens_expiring",
            "Stored access tokens that expire within 7 days (or already did).",
            value=credentials_expiring(now).count(),
        )

        yield GaugeMetricFamily(
            "conduit_queue_depth",
            "Tasks waiting in the django-q2 queue (not yet handed to a worker).",
            value=_queue_depth(),
        )

    @staticmethod
    def _unknown_sends(now: datetime) -> tuple[int, float]:
        from replies.models import ReplyAction, ReplyTransition

        unknown = ReplyAction.objects.filter(delivery_state="SEND_STATUS_UNKNOWN")
        count = unknown.count()
        if not count:
            return 0, 0.0
        # When each waiting action last became unknown (sending_since is cleared
        # then); the oldest of those. Walks only the waiting actions' history.
        qn = connection.ops.quote_name
        sql = (
            f"SELECT MIN(became) FROM (SELECT MAX(t.{qn('at')}) AS became "
            f"FROM {qn(ReplyTransition._meta.db_table)} t JOIN {qn(ReplyAction._meta.db_table)} a "
            f"ON a.{qn('id')} = t.{qn('action_id')} "
            f"WHERE a.{qn('delivery_state')} = %s AND t.{qn('next_state')} = %s AND NOT t.{qn('refused')} "
            f"GROUP BY t.{qn('action_id')}) AS waiting"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, ["SEND_STATUS_UNKNOWN", "SEND_STATUS_UNKNOWN"])
            (became,) = cursor.fetchone()
        return count, max(0.0, (now - became).total_seconds()) if became else 0.0


def _queue_depth() -> int:
    from django_q.brokers import get_broker

    return int(get_broker().queue_size() or 0)
