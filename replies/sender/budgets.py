"""Token health and shared send budgets: holds, account pauses, documented limits."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.db.models import Q
from django.utils import timezone

from conduit.providers.registry import send_budget_default
from conduit.sql import insert_rows
from ingress.models import Source
from ingress.services import source_reauth_require
from replies.models import ReplyAction, ReplyRoute, SendBudget, SendBudgetUse
from replies.sender.claim import CLAIMABLE, _transport_name

logger = logging.getLogger("conduit.replies")


# --- token health and shared send budgets ---------------------------------------------------

# Tries reply_send_next makes past actions whose account turns out to be over budget.
MAX_HELD_PER_CALL = 8
# A use counts this long past its window: the claim is dated before the request reaches Meta, so
# without slack two requests a few milliseconds late could meet one window at the provider.
BUDGET_SLACK_SECONDS = 1
# How long a throttling answer without Meta's estimate pauses the account.
THROTTLE_PAUSE_SECONDS = 60


def budget_default(*, adapter: str, transport_name: str) -> tuple[int | None, int]:
    """The documented (limit, window seconds) for an account's sends through a transport: the
    adapter's `send_budgets` (conduit.providers), nothing counted where none is documented."""
    return send_budget_default(adapter=adapter, transport_name=transport_name)


def _budget_row(source: Source, purpose: str, transport_name: str) -> SendBudget:
    """The (source, purpose) budget row, created at its documented default on first use, locked."""
    limit, window = budget_default(adapter=source.adapter, transport_name=transport_name)
    insert_rows(
        SendBudget,
        ["source", "purpose", "limit", "window_seconds", "pause_reason"],
        [(source.pk, purpose, limit, window, "")],
        ignore_conflicts=True,
    )
    return SendBudget.objects.select_for_update().get(source_id=source.pk, purpose=purpose)


def _held(action: ReplyAction, now: datetime) -> str:
    """Why this action may not be claimed now ("" when it may). Runs in the claim's transaction.

    A source whose token Meta refused waits (no attempt consumed); an account whose budget is
    full or paused waits too, and is paused until its next free slot so other workers skip it.
    The budget row's lock serialises every worker's count for that account.
    """
    source = action.event.source
    if Source.objects.filter(pk=source.pk, needs_reauth=True).exists():
        return "waiting_reauth"
    if action.canary or action.delivery_state not in CLAIMABLE:
        return ""
    budget = _budget_row(source, action.purpose, _transport_name(action))
    action._budget = budget
    now = timezone.now()  # read under the lock: the last holder's use is dated before it
    if budget.paused_until is not None and budget.paused_until > now:
        return "deferred_budget"
    if budget.limit is None:
        return ""
    span = timedelta(seconds=budget.window_seconds + BUDGET_SLACK_SECONDS)
    in_window = list(
        SendBudgetUse.objects.filter(budget=budget, at__gt=now - span)
        .order_by("at")
        .values_list("at", flat=True)
    )
    if len(in_window) < budget.limit:
        return ""
    # Full: the account waits until enough uses leave the window for one more.
    free_at = in_window[len(in_window) - budget.limit] + span
    SendBudget.objects.filter(pk=budget.pk).update(paused_until=free_at, pause_reason="budget_full")
    logger.info(
        "send action=%s deferred: budget %s/%ss full until %s",
        action.pk,
        budget.limit,
        budget.window_seconds,
        free_at.isoformat(),
    )
    return "deferred_budget"


def _budget_use(action: ReplyAction) -> None:
    """Count a claimed send against its budget (same transaction as the claim); prune old uses."""
    budget = getattr(action, "_budget", None)
    if budget is None or budget.limit is None:
        return
    now = timezone.now()
    insert_rows(SendBudgetUse, ["budget", "at", "action_id"], [(budget.pk, now, action.pk)])
    span = timedelta(seconds=budget.window_seconds + BUDGET_SLACK_SECONDS)
    SendBudgetUse.objects.filter(budget=budget, at__lte=now - span).delete()


def account_pause(*, source_id: int, until: datetime, reason: str) -> None:
    """Pause every purpose of an account until `until` (Meta throttled it, or its usage is near the
    limit). A pause never shortens one already longer."""
    source = Source.objects.get(pk=source_id)
    purposes = list(
        dict.fromkeys(
            [
                *source.purposes,
                *ReplyRoute.objects.filter(source_id=source_id).values_list("purpose", flat=True),
            ]
        )
    )
    for purpose in purposes:
        route = ReplyRoute.objects.filter(source_id=source_id, purpose=purpose).first()
        limit, window = budget_default(
            adapter=source.adapter, transport_name=route.transport_name if route else ""
        )
        insert_rows(
            SendBudget,
            ["source", "purpose", "limit", "window_seconds", "pause_reason"],
            [(source_id, purpose, limit, window, "")],
            ignore_conflicts=True,
        )
    SendBudget.objects.filter(source_id=source_id).filter(
        Q(paused_until__isnull=True) | Q(paused_until__lt=until)
    ).update(paused_until=until, pause_reason=reason[:64])
    logger.warning("send account source=%s paused until %s (%s)", source_id, until.isoformat(), reason)


def source_token_refused(*, source_id: int, code: str) -> None:
    """Meta refused the source's token: mark it needs_reauth (ingress's, which owns sources) so its
    sends stop at the next claim."""
    if source_reauth_require(source_id=source_id):
        logger.error("source=%s needs re-authorisation (%s): its sends wait", source_id, code)
