"""Delivery: a claimed action through the transport boundary, and its finish with the attempt's evidence."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from conduit.credentials import CredentialUndecryptable
from conduit.metrics import observe_send
from conduit.providers.base import RECIPIENT_THROTTLED, THROTTLED, Ambiguous, NotSent
from conduit.sql import update_rows
from replies.contract import backoff_seconds, failure_is_incurable
from replies.evidence import reply_evidence_resolve
from replies.ledger import reply_action_finish, reply_action_transition
from replies.models import AttemptTransport, CanarySinkRecord, ReplyAction, ReplyCopy, SendAttempt
from replies.models import DeliveryState as S
from replies.selectors import approved_copy, outbound_reply
from replies.sender.budgets import (
    MAX_HELD_PER_CALL,
    THROTTLE_PAUSE_SECONDS,
    _budget_use,
    _held,
    account_pause,
    source_token_refused,
)
from replies.sender.claim import (
    SENDER,
    _claim,
    _claim_in_one_statement,
    _lock_next,
    _route_of,
    _transport_name,
)
from replies.transports import LiveSendDisabled, is_live, transport_for

logger = logging.getLogger("conduit.replies")


def _finish(action: ReplyAction, *, to: str, reason: str, attempt: dict, extra: dict) -> str:
    """Record the attempt's evidence and move SENDING -> `to`, together (one statement on PostgreSQL).

    If the sweeper already parked the action (this worker outlived its lease),
    a receipt still lands: SEND_STATUS_UNKNOWN -> SENT; any other outcome
    leaves it parked for a person.
    """
    # One statement, atomic by itself: the attempt's evidence, the move and its history
    # (PostgreSQL); elsewhere, or for what it does not take, the same writes in a transaction.
    outcome = reply_action_finish(
        action_id=action.pk,
        attempt_number=action.attempt_count,
        to=to,
        actor=SENDER,
        reason_code=reason,
        extra={"sending_since": None, **extra},
        attempt=attempt,
    )
    if outcome is None:
        with transaction.atomic():
            if attempt:
                update_rows(
                    SendAttempt,
                    assign=attempt,
                    where={"action": action.pk, "attempt_number": action.attempt_count},
                )
            outcome = reply_action_transition(
                action_id=action.pk,
                to=to,
                actor=SENDER,
                reason_code=reason,
                expected=S.SENDING,
                extra={"sending_since": None, **extra},
                record_lost_race=False,
            )
    if not outcome.applied and outcome.prior == S.SEND_STATUS_UNKNOWN and to == S.SENT:
        with transaction.atomic():
            outcome = reply_action_transition(
                action_id=action.pk,
                to=S.SENT,
                actor=SENDER,
                reason_code="receipt_after_lease_expired",
                expected=S.SEND_STATUS_UNKNOWN,
                extra=extra,
            )
    state = to if outcome.applied else outcome.prior
    logger.info("send action=%s reply_key=%s state=%s code=%s", action.pk, action.reply_key, state, reason)
    return state


def reply_send(*, action_id: int) -> str:
    """Claim one action and take it through the transport boundary. Returns the state reached.

    Safe to call any number of times for the same id: only a successful claim
    reaches the transport, and only APPROVED or due FAILED_BEFORE_SEND can be claimed.
    """
    now = timezone.now()
    claimed, action = _claim_in_one_statement(now, action_id=action_id)
    if claimed is not None:
        return _deliver(claimed, now)
    if action is None:  # not due (or not PostgreSQL): read it to say why
        action = ReplyAction.objects.select_related("event__source").get(pk=action_id)
    with transaction.atomic():
        held = _held(action, now)
        if held:
            return held
        if not _claim(action, now):
            return "not_claimed"
        _budget_use(action)
    return _deliver(action, now)


def reply_send_next() -> tuple[int, str] | None:
    """Claim the oldest due action no other worker holds, and send it. None when none is due.

    The row is locked with SELECT ... FOR NO KEY UPDATE SKIP LOCKED, ordered by
    id, and claimed by the same compare-and-set as reply_send, so workers
    draining together never wait on or contend for the same row.
    """
    now = timezone.now()
    claimed, _ = _claim_in_one_statement(now)
    if claimed is not None:
        return claimed.pk, _deliver(claimed, now)
    # An action held back by its account's budget pauses that account (in the same transaction),
    # so the next lock skips it and finds another account's work; a few tries at most.
    for _ in range(MAX_HELD_PER_CALL):
        with transaction.atomic():
            action = _lock_next(now)
            if action is None:
                return None
            if _held(action, now):
                continue
            if not _claim(action, now, locked=True):
                return None
            _budget_use(action)
        return action.pk, _deliver(action, now)
    return None


@observe_send(transport_of=_transport_name)
def _deliver(action: ReplyAction, now: datetime) -> str:
    """The transport boundary for a claimed action (state SENDING), through the action's route."""
    source = action.event.source
    route = _route_of(action)

    # The transport boundary. The canary guard comes first, before any transport code:
    # is the route this action would go out through live?
    if action.canary:
        if route is not None and is_live(route.transport_name):
            logger.error(
                "canary action=%s aimed at live transport %s: refused", action.pk, route.transport_name
            )
            return _finish(
                action,
                to=S.SUPPRESSED_TEST,
                reason="canary_aimed_at_live_transport",
                attempt={},
                extra={"last_error_code": "canary_aimed_at_live_transport"},
            )
        with transaction.atomic():
            CanarySinkRecord.objects.create(
                action=action,
                reply_key=action.reply_key,
                purpose=action.purpose,
                channel=action.channel,
                copy_version=action.copy_version,
                transport_name=_transport_name(action),
                at=now,
            )
            return _finish(action, to=S.SUPPRESSED_TEST, reason="canary_suppressed", attempt={}, extra={})

    def not_sent(
        code: str, *, http_status: int | None = None, reached: bool = False, retryable: bool = True
    ) -> str:
        # docs/replies.md#stranded: FAILED_BEFORE_SEND -> "Retry under the same keys". Past
        # MAX_AUTOMATIC_ATTEMPTS the backoff stays at its cap; only a failure
        # retrying cannot cure (the contract's, or the transport's own word) stops
        # the automatic attempts (a person decides).
        automatic = retryable and not failure_is_incurable(code)
        return _finish(
            action,
            to=S.FAILED_BEFORE_SEND,
            reason=code,
            attempt={
                "transport": AttemptTransport.RESPONSE_RECEIVED if reached else AttemptTransport.NOT_SENT,
                "http_status": http_status,
                "evidence": code,
            },
            extra={
                "last_error_code": code,
                "next_attempt_at": now + timedelta(seconds=backoff_seconds(action.attempt_count))
                if automatic
                else None,
            },
        )

    if route is None:
        logger.warning("send action=%s: no reply route for purpose %s", action.pk, action.purpose)
        return not_sent("transport_misconfigured")
    try:
        transport = transport_for(route)
        copy = approved_copy(source_id=source.pk, purpose=action.purpose, copy_version=action.copy_version)
    except LiveSendDisabled:
        return not_sent("live_send_disabled")
    except CredentialUndecryptable:  # logged where it was found; never a send without the token
        return not_sent("credential_undecryptable")
    except (KeyError, ValueError):  # an unknown transport name or an address it refuses
        return not_sent("transport_misconfigured")
    except ReplyCopy.DoesNotExist:
        return not_sent("approved_copy_missing")
    except Exception:  # building a transport or reading copy never sends a reply
        logger.exception("send action=%s: transport or copy unavailable", action.pk)
        return not_sent("transport_or_copy_unavailable")
    reply = outbound_reply(action, copy)
    try:
        receipt = transport.send(reply)
    except NotSent as exc:
        if getattr(exc, "stop_source", False):
            # A dead token: nothing was applied. The source stops at the next claim; this action
            # waits with it (due again, not stranded) and goes out once a person re-authorises.
            with transaction.atomic():
                source_token_refused(source_id=source.pk, code=exc.code)
                state = _finish(
                    action,
                    to=S.FAILED_BEFORE_SEND,
                    reason=exc.code,
                    attempt={
                        "transport": AttemptTransport.RESPONSE_RECEIVED
                        if exc.reached
                        else AttemptTransport.NOT_SENT,
                        "http_status": exc.http_status,
                        "evidence": exc.code,
                    },
                    extra={"last_error_code": exc.code, "next_attempt_at": now},
                )
            return state
        retry_after = getattr(exc, "retry_after", None)
        # One person's pacing holds back only this reply (due again after its backoff); any
        # other throttling, or a wait the provider announced, pauses the whole account.
        if exc.code != RECIPIENT_THROTTLED and (retry_after is not None or exc.code == THROTTLED):
            pause = timedelta(seconds=retry_after if retry_after is not None else THROTTLE_PAUSE_SECONDS)
            account_pause(source_id=source.pk, until=timezone.now() + pause, reason=exc.code)
        return not_sent(exc.code, http_status=exc.http_status, reached=exc.reached, retryable=exc.retryable)
    except Ambiguous as exc:
        state = _finish(
            action,
            to=S.SEND_STATUS_UNKNOWN,
            reason=exc.code,
            attempt={
                "transport": AttemptTransport.RESPONSE_RECEIVED if exc.response else AttemptTransport.SENT,
                "http_status": exc.http_status,
                "evidence": exc.code,
            },
            extra={"last_error_code": exc.code},
        )
        return _evidence_already_seen(action) or state
    except Exception:  # anything else: the request may have left; never guess
        logger.exception("send action=%s ended in an unexpected error", action.pk)
        state = _finish(
            action,
            to=S.SEND_STATUS_UNKNOWN,
            reason="unexpected_error",
            attempt={"evidence": "unexpected_error"},
            extra={"last_error_code": "unexpected_error"},
        )
        return _evidence_already_seen(action) or state
    usage_pause = getattr(receipt, "retry_after", None)
    if usage_pause:
        # The answer's usage header says the account is near its limit: wait as Meta estimates.
        account_pause(
            source_id=source.pk,
            until=timezone.now() + timedelta(seconds=usage_pause),
            reason="usage_near_limit",
        )
    return _finish(
        action,
        to=S.SENT,
        reason="receipt_stored",
        attempt={
            "transport": AttemptTransport.RESPONSE_RECEIVED,
            "http_status": receipt.http_status,
            "evidence": "receipt",
        },
        extra={"provider_reply_id": receipt.provider_reply_id, "last_error_code": ""},
    )


def _evidence_already_seen(action: ReplyAction) -> str:
    """An echo (or the account's own comment) may have arrived while this send was still SENDING,
    when it could not resolve it: look once more now that the action is SEND_STATUS_UNKNOWN.
    Returns the state reached when it resolved the action, else ""."""
    resolved = reply_evidence_resolve(action_id=action.pk)
    return S.SENT if resolved else ""
