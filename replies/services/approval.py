"""Approval: a person approves a pending action with the current copy; the send is queued on commit."""

from __future__ import annotations

from datetime import timezone as dt_timezone

from django.db import transaction
from django.utils import timezone

from conduit.providers.base import TEMPLATE
from replies import sender
from replies.ledger import reply_action_transition
from replies.models import ApprovalState, ReplyAction, ReplyCopy
from replies.models import DeliveryState as S
from replies.selectors import (
    action_route,
    approved_copy,
    copy_for,
    no_copy_reason,
    no_route_reason,
    outgoing_form,
)
from replies.services.results import Result, _refused
from replies.services.window import reply_deadline_fill


def _enqueue_on_commit(action_id: int) -> None:
    # Looked up on the sender module at commit time: the one hand-off to the send queue.
    transaction.on_commit(lambda: sender.enqueue_send(action_id))


def _same_copy(action: ReplyAction, shown_version: str, copy: ReplyCopy) -> bool:
    """Whether the copy version a person was shown goes out as the same text on the same channel,
    with the same template (past a free-form window the template is what goes out)."""
    if shown_version == copy.copy_version:
        return True
    try:
        shown = approved_copy(
            source_id=action.event.source_id, purpose=action.purpose, copy_version=shown_version
        )
    except ReplyCopy.DoesNotExist:
        return False
    return (shown.text, shown.channel, shown.template) == (copy.text, copy.channel, copy.template)


# --- approval and closing ------------------------------------------------------------------


def reply_approve(
    *,
    action_id: int,
    actor: str,
    reason_code: str = "approved_by_reviewer",
    shown_copy_version: str | None = None,
) -> Result:
    """REVIEW_PENDING -> APPROVED with the current approved copy; enqueue the send on commit.

    The copy is the variant the action's reply key picks from its campaign's current copy set
    (replies.selectors.copy_for). `shown_copy_version`: the copy version the person was shown
    when deciding (the admin's confirmation page). A newer copy since whose text, channel or
    template differs refuses the approval: the text that would go out is not the text they read (the same
    text under a newer version is approved as that version). None where no person was shown a
    text (the canary).

    A Meta private reply is refused after its deadline (the comment's creation + 7 days), the
    deadline named; one whose deadline is not known yet is read first (outside any transaction).
    """
    try:
        deadline = reply_deadline_fill(action_id=action_id)
    except Exception as exc:
        return Result(
            False,
            "cannot approve: the comment's creation time could not be read from Meta "
            f"({type(exc).__name__}), so its 7-day private-reply window is unknown; try again",
        )
    with transaction.atomic():
        action = ReplyAction.objects.select_related("event__source", "campaign").get(pk=action_id)
        if deadline is not None and action.delivery_state == S.REVIEW_PENDING and timezone.now() >= deadline:
            return Result(
                False,
                f"cannot approve: the private-reply window closed at "
                f"{deadline.astimezone(dt_timezone.utc):%Y-%m-%d %H:%M:%S} UTC (the comment's "
                "creation + 7 days); Meta refuses a private reply after it",
            )
        if action.delivery_state == S.REVIEW_PENDING:
            copy = copy_for(action)
            if copy is None:
                return Result(False, f"cannot approve: {no_copy_reason(action)}")
            if shown_copy_version is not None and not _same_copy(action, shown_copy_version, copy):
                return Result(
                    False,
                    f"the copy changed: review again (you were shown copy "
                    f"{shown_copy_version or '(none)'}; the newest is {copy.copy_version})",
                )
            if action_route(action) is None:
                return Result(False, f"cannot approve: {no_route_reason(action)}")
            form, until = outgoing_form(action, copy)
            if not form:
                return Result(False, f"cannot approve: {_window_closed(until, copy)}")
            extra = {
                "approval_state": ApprovalState.APPROVED,
                "approved_by": actor,
                "approved_at": timezone.now(),
                "copy_version": copy.copy_version,
                "channel": copy.channel,
            }
        else:
            extra, form = {}, ""
        outcome = reply_action_transition(
            action_id=action_id,
            to=S.APPROVED,
            actor=actor,
            reason_code=reason_code,
            expected=S.REVIEW_PENDING,
            extra=extra,
        )
        if not outcome.applied:
            return _refused(outcome)
        _enqueue_on_commit(action_id)
    sent_as = (
        f" (as template {copy.template['name']}: the free-form window has closed)" if form == TEMPLATE else ""
    )
    return Result(True, f"approved with copy {extra['copy_version']}; the send is queued{sent_as}")


def _window_closed(until, copy: ReplyCopy) -> str:
    return (
        f"free-form text may answer this buyer only until "
        f"{until.astimezone(dt_timezone.utc):%Y-%m-%d %H:%M:%S} UTC (the platform's window after their "
        f"last message), and copy {copy.copy_version} has no template to send instead; add an approved "
        "template to the copy (Replies > Reply copies) or wait for the buyer to write again"
    )
