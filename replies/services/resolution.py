"""Closing and a person's resolution of stranded and unknown sends, a receipt looked up first."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from conduit.providers.base import Ambiguous
from conduit.statemachine import Outcome
from replies.ledger import reply_action_transition
from replies.models import DeliveryState as S
from replies.models import ReplyAction, ReplyCopy
from replies.selectors import action_route, approved_copy, no_route_reason, outbound_reply
from replies.services.approval import _enqueue_on_commit
from replies.services.results import Result, _refused
from replies.signals import person_resolved
from replies.transports import LiveSendDisabled, transport_for


def _resolved(outcome: Outcome, *, action_id: int, how: str, actor: str, reason: str, done: str) -> Result:
    """A person's resolution as its move ended: refused, or applied and told to the apps built on
    replies (`person_resolved`, in the caller's transaction: reconciliation records it on the
    action's open findings)."""
    if not outcome.applied:
        return _refused(outcome)
    person_resolved.send(
        sender=ReplyAction, action_id=action_id, how=how, actor=actor, reason=reason, result=done
    )
    return Result(True, done)


def reply_close(
    *,
    action_id: int,
    actor: str,
    reason_code: str = "closed_without_reply",
    expected: str | None = None,
    reason: str = "",
) -> Result:
    """Close without reply, from any state REPLY_TABLE lets close (not SENDING or SENT).

    `expected`: close only from that state (a queue closes only what it shows). `reason`: the
    person's words, kept with the decision (`person_resolved`); the reason code stands in when none.

    An unknown send may have been applied: where its transport can look the receipt up, it
    is looked up first, and a receipt found refuses the close (the reply went out: mark it
    SENT instead); a lookup that cannot answer refuses it too, since closing would bury a
    reply the provider may hold. A transport without a lookup closes as before: the person
    verified the conversation by hand (docs/concepts/ledgers.md#recovery).
    """
    action = ReplyAction.objects.select_related("event__source").filter(pk=action_id).first()
    if (
        action is not None
        and action.delivery_state == S.SEND_STATUS_UNKNOWN
        and expected in (None, S.SEND_STATUS_UNKNOWN)
    ):
        lookup = _receipt_lookup(action)
        if lookup.receipt is not None:
            return Result(
                False,
                f"not closed: the provider holds this reply (receipt {lookup.receipt}), so "
                'it was delivered. Use "Look up the receipt, then authorize a retry" to '
                "mark it SENT (nothing is resent)",
            )
        if lookup.refusal and lookup.can_look_up is not False:
            return Result(False, f"not closed: {lookup.refusal}")
    with transaction.atomic():
        outcome = reply_action_transition(
            action_id=action_id,
            to=S.CLOSED_NO_REPLY,
            actor=actor,
            reason_code=reason_code,
            expected=expected,
            extra={"next_attempt_at": None},
        )
        return _resolved(
            outcome,
            action_id=action_id,
            how="close",
            actor=actor,
            reason=reason or f"closed without reply by a person ({reason_code})",
            done="closed without reply",
        )


# --- a person resolves stranded and unknown sends ------------------------------------------


@dataclass(frozen=True)
class Lookup:
    """A receipt lookup for an unknown send: the receipt id found, or why there is no answer.

    `can_look_up` is False when the action's transport cannot look receipts up at all (no
    route, a transport that cannot be built, or one without the capability), None when its
    capabilities could not be discovered, True when it looked.
    """

    receipt: str | None = None
    refusal: str = ""
    can_look_up: bool | None = True


def _receipt_lookup(action: ReplyAction) -> Lookup:
    """Ask the transport of the action's own route for its receipt
    (docs/concepts/ledgers.md#recovery: reconcile first)."""
    route = action_route(action)
    if route is None:
        return Lookup(refusal=f"the transport is unavailable: {no_route_reason(action)}", can_look_up=False)
    try:
        transport = transport_for(route)
    except (LiveSendDisabled, KeyError, ValueError) as exc:
        return Lookup(refusal=f"the transport is unavailable: {exc}", can_look_up=False)
    if not transport.discovered:
        return Lookup(
            refusal="the provider's capabilities could not be discovered (is it running?): "
            "try again when it answers",
            can_look_up=None,
        )
    if not transport.capabilities.receipt_lookup:
        return Lookup(
            refusal="this transport has no receipt lookup, so nothing can show the reply "
            "was not applied: verify the conversation by hand, then confirm sent or close",
            can_look_up=False,
        )
    try:
        # What was sent under the key: a platform without keys finds a reply by target and text.
        reply = outbound_reply(
            action,
            approved_copy(
                source_id=action.event.source_id, purpose=action.purpose, copy_version=action.copy_version
            ),
        )
    except ReplyCopy.DoesNotExist:
        reply = None
    try:
        receipt = transport.lookup(action.reply_key, reply)
    except (Ambiguous, OSError) as exc:
        return Lookup(
            refusal=f"the receipt lookup failed ({getattr(exc, 'code', type(exc).__name__)}); try again"
        )
    return Lookup(receipt=receipt.provider_reply_id if receipt is not None else None)


def stranded_retry_now(*, action_id: int, actor: str, reason: str = "") -> Result:
    """A person's "retry now": FAILED_BEFORE_SEND -> APPROVED under the same reply key, sent at once."""
    with transaction.atomic():
        outcome = reply_action_transition(
            action_id=action_id,
            to=S.APPROVED,
            actor=actor,
            reason_code="retry_now_by_operator",
            expected=S.FAILED_BEFORE_SEND,
            extra={"next_attempt_at": None},
        )
        if outcome.applied:
            _enqueue_on_commit(action_id)
        return _resolved(
            outcome,
            action_id=action_id,
            how="retry_now",
            actor=actor,
            reason=reason or "retry now asked by a person",
            done="retry queued under the same reply key",
        )


def unknown_confirm_sent(*, action_id: int, actor: str, provider_reply_id: str, reason: str = "") -> Result:
    """A person verified the provider has the reply: store its receipt, then SENT."""
    provider_reply_id = provider_reply_id.strip()
    if not provider_reply_id:
        return Result(False, "give the provider's receipt id you verified")
    with transaction.atomic():
        outcome = reply_action_transition(
            action_id=action_id,
            to=S.SENT,
            actor=actor,
            reason_code="confirmed_sent_by_operator",
            expected=S.SEND_STATUS_UNKNOWN,
            extra={"provider_reply_id": provider_reply_id[:200], "last_error_code": ""},
        )
        return _resolved(
            outcome,
            action_id=action_id,
            how="confirm_sent",
            actor=actor,
            reason=reason or f"confirmed sent by a person who verified receipt {provider_reply_id[:200]}",
            done="marked SENT with the receipt you gave",
        )


def unknown_authorize_retry(*, action_id: int, actor: str, reason: str = "") -> Result:
    """docs/concepts/ledgers.md#recovery: reconcile first, retry only if the lookup shows no send.

    Idempotency key plus receipt lookup, or receipt lookup alone: look the
    receipt up; found -> attach it and mark SENT; absent -> APPROVED under the
    same reply_key. Without a receipt lookup (idempotency key alone included,
    conservatively) nothing can show that the reply was not applied: refused.
    The lookup asks the transport of the action's own route.
    """
    action = ReplyAction.objects.select_related("event__source").get(pk=action_id)
    if action.delivery_state != S.SEND_STATUS_UNKNOWN:
        return Result(False, f"only SEND_STATUS_UNKNOWN can be retried; this one is {action.delivery_state}")
    lookup = _receipt_lookup(action)
    if lookup.refusal:
        return Result(False, lookup.refusal)
    receipt = lookup.receipt
    with transaction.atomic():
        if receipt is not None:
            outcome = reply_action_transition(
                action_id=action_id,
                to=S.SENT,
                actor=actor,
                reason_code="receipt_found_on_lookup",
                expected=S.SEND_STATUS_UNKNOWN,
                extra={"provider_reply_id": receipt, "last_error_code": ""},
            )
            message = "the lookup found the provider's receipt: marked SENT, nothing resent"
        else:
            outcome = reply_action_transition(
                action_id=action_id,
                to=S.APPROVED,
                actor=actor,
                reason_code="retry_authorized_after_lookup",
                expected=S.SEND_STATUS_UNKNOWN,
            )
            message = "the lookup shows no send: retry authorized under the same reply key"
            if outcome.applied:
                _enqueue_on_commit(action_id)
        return _resolved(
            outcome,
            action_id=action_id,
            how="authorize_retry",
            actor=actor,
            reason=reason or "retry authorized by a person, the receipt looked up first",
            done=message,
        )
