"""Scenes the acceptance checks set, as a test would: rows moved in time, outside the ledgers'
services (a real clock would take a day or a backoff to get there)."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone


def action_due_now(action_id: int) -> None:
    """The reply action's backoff has run out: its next attempt is due a second ago."""
    from replies.models import ReplyAction

    ReplyAction.objects.filter(pk=action_id).update(next_attempt_at=timezone.now() - timedelta(seconds=1))


def send_budget_unpaused(source_id: int) -> None:
    """The source's send budgets are not paused (a pause a throttled answer left has run out)."""
    from replies.models import SendBudget

    SendBudget.objects.filter(source_id=source_id).update(paused_until=None)


def source_connected_ago(source_id: int, *, days: int) -> None:
    """The source was connected `days` ago, so what it shows since then counts as new work."""
    from ingress.models import Source

    Source.objects.filter(pk=source_id).update(connected_at=timezone.now() - timedelta(days=days))
