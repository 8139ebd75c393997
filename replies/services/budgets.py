"""Shared send budgets: an account's configured limit per purpose."""

from __future__ import annotations

from replies.models import SendBudget

# --- shared send budgets -------------------------------------------------------------------


def send_budget_set(*, source_id: int, purpose: str, limit: int | None, window_seconds: int) -> SendBudget:
    """Configure one account's budget for one purpose: at most `limit` sends in any
    `window_seconds` (None: no count, pauses only), shared by every worker."""
    if window_seconds < 1 or (limit is not None and limit < 1):
        raise ValueError("a budget needs a window of at least 1 second and a limit of at least 1")
    budget, _ = SendBudget.objects.update_or_create(
        source_id=source_id, purpose=purpose, defaults={"limit": limit, "window_seconds": window_seconds}
    )
    return budget
