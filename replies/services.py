"""Replies writes: planning at ingest, approval, closing, copy versions, routes, and a person's
resolution of stranded and unknown sends. Every state change goes through REPLY_TABLE."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from typing import Callable, Sequence

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from conduit.providers.base import Ambiguous, Observation
from conduit.providers.registry import TRANSPORTS, get_adapter
from conduit.sql import insert_rows
from conduit.statemachine import Outcome, TransitionTable, creation_rows, record_created
from ingress.models import InboundEvent, Source
from replies import sender
from replies.contract import REPLY_TABLE, reply_key
from replies.ledger import reply_action_transition
from replies.models import (
    ApprovalState,
    ReplyAction,
    ReplyCopy,
    ReplyRoute,
    ReplyTransition,
    SendBudget,
)
from replies.models import DeliveryState as S
from replies.selectors import (
    action_route,
    approved_copy,
    copy_current,
    no_copy_reason,
    no_route_reason,
    outbound_reply,
)
from replies.transports import LiveSendDisabled, route_url_refusal, transport_for

__all__ = [
    "Result", "RouteConflict", "reply_action_transition", "reply_actions_plan", "reply_approve",
    "reply_close", "reply_copy_create", "reply_deadlines_fill",
    "reply_route_declare", "reply_route_update", "reply_windows_expire",
    "send_budget_set", "stranded_retry_now", "unknown_authorize_retry", "unknown_confirm_sent",
]

logger = logging.getLogger("conduit.replies")


@dataclass(frozen=True)
class Result:
    """What a person-facing operation did, in words fit for an admin message."""

    ok: bool
    message: str


def _refused(outcome: Outcome) -> Result:
    return Result(False, outcome.message)


def _enqueue_on_commit(action_id: int) -> None:
    # Looked up on the sender module at commit time: the one hand-off to the send queue.
    transaction.on_commit(lambda: sender.enqueue_send(action_id))


def reply_actions_plan(
    *, observations: Sequence[Observation], adapter: str, purposes: list[str], actor: str, at: datetime,
    purposes_of: Callable[[Observation], Sequence[str]] | None = None,
) -> list[int]:
    """Create one REVIEW_PENDING action per declared purpose for each newly inserted event.

    Called only inside the ingest transaction that inserted the events, so each
    event's own unique key already guarantees this runs once per event_key; the
    unique reply_key constraint guards it a second time. One INSERT for the
    actions and one for their history, whatever the number of events. Returns
    the new ids, event by event in purpose order.
    """
    rows, fill_later = reply_action_rows(observations=observations, adapter=adapter, purposes=purposes, at=at,
                                         purposes_of=purposes_of)
    ids = insert_rows(ReplyAction, PLANNED.columns, rows)
    record_created(
        table=REPLY_TABLE,
        history=ReplyTransition,
        owner_field="action",
        owner_ids=ids,
        path=PLANNED.path,
        actor=actor,
        reason_codes=PLANNED.reasons,
        at=at,
    )
    reply_deadline_reads_queue(action_ids=[ids[position] for position in fill_later])
    return ids


@dataclass(frozen=True)
class ActionPlan:
    """How planned actions are written, for ingest to write them in its own statement
    (ingress.writes): their model and history, reply_action_rows' columns, and the creation
    path with its reason codes as the reply table declares it."""

    model: type
    history: type
    columns: tuple[str, ...]
    table: TransitionTable
    path: tuple[str, ...]
    reasons: tuple[str, ...]

    def history_row(self, *, actor: str, at: datetime) -> tuple:
        """The one history row each planned action gets, its owner left blank (None)."""
        (row,) = creation_rows(table=self.table, records=[(None, self.path, self.reasons)], actor=actor, at=at)
        return row


PLANNED = ActionPlan(
    model=ReplyAction, history=ReplyTransition,
    columns=("reply_key", "event", "purpose", "delivery_state", "approval_state", "canary", "created_at",
             "reply_deadline"),
    table=REPLY_TABLE, path=(S.REVIEW_PENDING,), reasons=("planned_on_first_receipt",),
)


def purposes_answering(*, source: Source) -> Callable[[str], tuple[str, ...]]:
    """Event type -> the source's purposes planned for an event of that type.

    None for a family that answers nothing (an edit, a hide, a removal: one comment is one raised
    hand, however often it changes); otherwise the declared purposes whose route's transport can
    answer the family (a DM only through a route that answers a message, never a comment reply
    or a private reply, which answer comments). A purpose with no route yet is planned only for a
    family every transport answers (its route, declared later, decides where it goes). Routes are
    read only where some transport could not answer.
    """
    adapter = get_adapter(source.adapter)
    declared = tuple(source.purposes)
    routes: dict[str, str] = {}

    @functools.cache
    def for_type(event_type: str) -> tuple[str, ...]:
        answers = adapter.family(event_type).answers
        if not answers:
            return ()
        if all(answers in cls.answers for cls in TRANSPORTS.values()):
            return declared
        if not routes:
            routes.update(ReplyRoute.objects.filter(source_id=source.pk).values_list("purpose", "transport_name"))
            routes.setdefault("", "")  # read once, even when the source has no route
        # A purpose with no route yet is planned only where every transport could answer (above).
        return tuple(p for p in declared if routes.get(p) in TRANSPORTS and answers in TRANSPORTS[routes[p]].answers)

    return for_type


def reply_action_rows(
    *, observations: Sequence[Observation], adapter: str, purposes: list[str], at: datetime,
    purposes_of: Callable[[Observation], Sequence[str]] | None = None,
) -> tuple[list[tuple], list[int]]:
    """The planned actions' rows (PLANNED.columns order), event by event in purpose order, and the
    positions of those whose deadline needs the comment's real time (read after commit).
    `purposes_of` narrows the purposes per event (ingest passes what purposes_answering allows)."""
    rows = []
    fill_later = []
    for observation in observations:
        for purpose in (purposes if purposes_of is None else purposes_of(observation)):
            deadline, later = _private_deadline(observation, adapter, purpose)
            if later:
                fill_later.append(len(rows))
            rows.append((reply_key(observation.event_key, purpose), observation.event_key, purpose,
                         S.REVIEW_PENDING, ApprovalState.REVIEW_PENDING, observation.canary, at, deadline))
    return rows, fill_later


def reply_deadline_reads_queue(*, action_ids: Sequence[int]) -> None:
    """Queue the read of each comment's real time once the actions are committed (at once outside a transaction)."""
    for action_id in action_ids:
        transaction.on_commit(functools.partial(_enqueue_deadline_fill, action_id))


# --- the private-reply window ---------------------------------------------------------------

PRIVATE_PURPOSE = "private_delivery"
# Meta allows one private reply per comment within 7 days of the comment (META.md "Sending").
PRIVATE_REPLY_WINDOW = timedelta(days=7)
META_ADAPTERS = ("meta-instagram", "meta-page")
APPROXIMATE = "approx:"  # an Instagram notification's entry time standing in for the comment's


def _private_deadline(observation: Observation, adapter: str, purpose: str) -> tuple[datetime | None, bool]:
    """A Meta comment's private reply gets its deadline as it is planned: (deadline, read later).

    A comment whose creation time is real gets it now; one whose time is
    approximate (Instagram notifications carry none) is read from the Graph
    after commit, by a queued task, never inside the webhook's transaction.
    """
    if purpose != PRIVATE_PURPOSE or observation.canary or adapter not in META_ADAPTERS \
            or not observation.event_type.startswith("comment."):
        return None, False
    if observation.occurred_at_original.startswith(APPROXIMATE):
        return None, True
    return observation.occurred_at + PRIVATE_REPLY_WINDOW, False


def _enqueue_deadline_fill(action_id: int) -> None:
    from django_q.tasks import async_task

    try:
        async_task("replies.tasks.fill_reply_deadline", action_id, group="deadline")
    except Exception:  # the queue is down: the review queue and approval fill it lazily
        logger.exception("deadline fill for action=%s not queued", action_id)


def _comment_created_at(event: InboundEvent) -> datetime:
    """The comment's real creation time: read once from the Graph (`GET /{comment}?fields=timestamp`)."""
    from conduit.providers.meta.graph import graph_request
    from ingress.selectors import source_config

    source = event.source
    response = graph_request(
        method="GET", base_url=source.source_url.rstrip("/"), path=event.message_ref,
        params={"fields": "id,timestamp"}, timeout=10.0,
        access_token=source_config(source, with_token=True).access_token,
    )
    value = response.document.get("timestamp") or response.document.get("created_time")
    if not isinstance(value, str):
        raise ValueError("the comment's read carries no timestamp")
    created = datetime.fromisoformat(value)
    if created.tzinfo is None:
        raise ValueError("the comment's timestamp has no offset")
    return created


def reply_deadline_fill(*, action_id: int) -> datetime | None:
    """Give a Meta private_delivery action its deadline (the comment's creation + 7 days) if it has
    none yet. Returns the deadline, or None when the action needs none. Raises when the Graph read
    fails (the caller decides: a task retries, approval refuses)."""
    action = ReplyAction.objects.select_related("event__source").get(pk=action_id)
    event = action.event
    if action.reply_deadline is not None:
        return action.reply_deadline
    if action.purpose != PRIVATE_PURPOSE or event.source.adapter not in META_ADAPTERS \
            or not event.event_type.startswith("comment.") or action.canary:
        return None
    created = (event.occurred_at if not event.occurred_at_original.startswith(APPROXIMATE)
               else _comment_created_at(event))
    deadline = created + PRIVATE_REPLY_WINDOW
    ReplyAction.objects.filter(pk=action_id, reply_deadline__isnull=True).update(reply_deadline=deadline)
    return deadline


def reply_deadlines_fill(*, limit: int = 200) -> int:
    """Fill the deadline of every pending Meta private reply still without one (the review queue's
    lazy path and the schedule's safety net). Returns how many were filled; failures are logged."""
    pending = ReplyAction.objects.filter(
        purpose=PRIVATE_PURPOSE, reply_deadline__isnull=True, canary=False,
        delivery_state=S.REVIEW_PENDING, event__source__adapter__in=META_ADAPTERS,
    ).order_by("id").values_list("id", flat=True)[:limit]
    filled = 0
    for action_id in pending:
        try:
            filled += reply_deadline_fill(action_id=action_id) is not None
        except Exception as exc:
            logger.warning("deadline of action=%s not read: %s", action_id, type(exc).__name__)
    return filled


WINDOW_CLOSER = "system:window"
# What an expired window closes: nothing of it can be sent any more.
WINDOW_CLOSABLE = (S.REVIEW_PENDING, S.APPROVED, S.FAILED_BEFORE_SEND)


def reply_windows_expire(*, now: datetime | None = None) -> int:
    """Close every action whose private-reply window has passed while it waited: CLOSED_NO_REPLY,
    reason `window_expired` (the schedule runs this every minute)."""
    now = now or timezone.now()
    closed = 0
    expired = ReplyAction.objects.filter(reply_deadline__lt=now, delivery_state__in=WINDOW_CLOSABLE)
    for action_id, state in expired.order_by("id").values_list("id", "delivery_state"):
        with transaction.atomic():
            outcome = reply_action_transition(
                action_id=action_id, to=S.CLOSED_NO_REPLY, actor=WINDOW_CLOSER, reason_code="window_expired",
                expected=state, where={"reply_deadline__lt": now}, record_lost_race=False,
                extra={"next_attempt_at": None, "last_error_code": "window_expired"},
            )
        closed += outcome.applied
    return closed


# --- approved copy -------------------------------------------------------------------------


def reply_copy_create(*, source_id: int, purpose: str, channel: str, text: str, actor: str) -> tuple[ReplyCopy, bool]:
    """Record approved copy; an identical current text changes nothing. Returns (copy, created)."""
    text, channel = text.strip(), channel.strip()
    if not text or not channel:
        raise ValueError("approved copy needs a channel and a text")
    with transaction.atomic():
        source = Source.objects.select_for_update().get(pk=source_id)  # serializes versions
        if purpose not in source.purposes:
            raise ValueError(f"{purpose!r} is not a declared purpose of source {source.name!r}")
        current = copy_current(source_id=source_id, purpose=purpose)
        if current and (current.text, current.channel) == (text, channel):
            return current, False
        count = ReplyCopy.objects.filter(source_id=source_id, purpose=purpose).count()
        return ReplyCopy.objects.create(
            source=source, purpose=purpose, channel=channel, text=text,
            copy_version=f"v{count + 1}", created_by=actor,
        ), True


# --- reply routes --------------------------------------------------------------------------


class RouteConflict(Exception):
    """A declaration that would silently change an existing route."""


# What a declaration names; the live flag is the owner's, set only by reply_route_update.
ROUTE_FIELDS = ("transport_name", "target_url")


def _route_validated(route: ReplyRoute, source: Source) -> ReplyRoute:
    errors = {}
    if route.purpose not in source.purposes:
        errors["purpose"] = f"{route.purpose!r} is not a declared purpose of source {source.name!r}"
    if route.transport_name not in TRANSPORTS:
        errors["transport_name"] = f"unknown transport; known: {', '.join(sorted(TRANSPORTS))}"
    else:
        refusal = route_url_refusal(route.transport_name, route.target_url)
        if refusal:
            errors["target_url"] = refusal
    if errors:
        raise ValidationError(errors)
    route.full_clean(exclude=["source"], validate_unique=False, validate_constraints=False)
    return route


def reply_route_declare(
    *, source_id: int, purpose: str, transport_name: str, target_url: str = ""
) -> tuple[ReplyRoute, bool]:
    """Create a purpose's route, or confirm an identical one. Returns (route, created).

    Different values for an existing route are refused with RouteConflict
    naming each; edits are deliberate (reply_route_update, the admin).
    """
    with transaction.atomic():
        source = Source.objects.select_for_update().get(pk=source_id)  # serializes declarations
        wanted = _route_validated(
            ReplyRoute(source=source, purpose=purpose, transport_name=transport_name, target_url=target_url),
            source,
        )
        existing = ReplyRoute.objects.filter(source=source, purpose=purpose).first()
        if existing is None:
            wanted.save()
            return wanted, True
    differences = [f"{f}: routed {getattr(existing, f)!r}, given {getattr(wanted, f)!r}"
                   for f in ROUTE_FIELDS if getattr(existing, f) != getattr(wanted, f)]
    if differences:
        raise RouteConflict(
            f"purpose {purpose!r} of source {source.name!r} is already routed otherwise; change the "
            "route in the admin if that is intended. " + "; ".join(differences)
        )
    return existing, False


def reply_route_update(*, route_id: int, changes: dict) -> ReplyRoute:
    """Apply a person's edit to a route (transport, target, or the owner's live flag)."""
    allowed = {*ROUTE_FIELDS, "live_send_enabled"}
    unknown = set(changes) - allowed
    if unknown:
        raise ValueError(f"a route's {', '.join(sorted(unknown))} cannot be changed")
    with transaction.atomic():
        route = ReplyRoute.objects.select_for_update().select_related("source").get(pk=route_id)
        for name, value in changes.items():
            setattr(route, name, value)
        _route_validated(route, route.source)
        route.save()
    return route


# --- approval and closing ------------------------------------------------------------------


def reply_approve(
    *, action_id: int, actor: str, reason_code: str = "approved_by_reviewer", shown_copy_version: str | None = None,
) -> Result:
    """REVIEW_PENDING -> APPROVED with the current approved copy; enqueue the send on commit.

    `shown_copy_version`: the copy version the person was shown when deciding (the admin's
    confirmation page). A newer copy since refuses the approval: the text that would go out is
    not the text they read. None where no person was shown a text (the canary).

    A Meta private reply is refused after its deadline (the comment's creation + 7 days), the
    deadline named; one whose deadline is not known yet is read first (outside any transaction).
    """
    try:
        deadline = reply_deadline_fill(action_id=action_id)
    except Exception as exc:
        return Result(False, "cannot approve: the comment's creation time could not be read from Meta "
                             f"({type(exc).__name__}), so its 7-day private-reply window is unknown; try again")
    with transaction.atomic():
        action = ReplyAction.objects.select_related("event__source").get(pk=action_id)
        if deadline is not None and action.delivery_state == S.REVIEW_PENDING and timezone.now() >= deadline:
            return Result(False, f"cannot approve: the private-reply window closed at "
                                 f"{deadline.astimezone(dt_timezone.utc):%Y-%m-%d %H:%M:%S} UTC (the comment's "
                                 "creation + 7 days); Meta refuses a private reply after it")
        if action.delivery_state == S.REVIEW_PENDING:
            copy = copy_current(source_id=action.event.source_id, purpose=action.purpose)
            if copy is None:
                return Result(False, f"cannot approve: {no_copy_reason(action)}")
            if shown_copy_version is not None and shown_copy_version != copy.copy_version:
                return Result(False, f"the copy changed: review again (you were shown copy "
                                     f"{shown_copy_version or '(none)'}; the newest is {copy.copy_version})")
            if action_route(action) is None:
                return Result(False, f"cannot approve: {no_route_reason(action)}")
            extra = {
                "approval_state": ApprovalState.APPROVED, "approved_by": actor,
                "approved_at": timezone.now(), "copy_version": copy.copy_version,
                "channel": copy.channel,
            }
        else:
            extra = {}
        outcome = reply_action_transition(
            action_id=action_id, to=S.APPROVED, actor=actor, reason_code=reason_code,
            expected=S.REVIEW_PENDING, extra=extra,
        )
        if not outcome.applied:
            return _refused(outcome)
        _enqueue_on_commit(action_id)
    return Result(True, f"approved with copy {extra['copy_version']}; the send is queued")


def reply_close(
    *, action_id: int, actor: str, reason_code: str = "closed_without_reply", expected: str | None = None
) -> Result:
    """Close without reply, from any state REPLY_TABLE lets close (not SENDING or SENT).

    `expected`: close only from that state (a queue closes only what it shows).

    An unknown send may have been applied: where its transport can look the receipt up, it
    is looked up first, and a receipt found refuses the close (the reply went out: mark it
    SENT instead); a lookup that cannot answer refuses it too, since closing would bury a
    reply the provider may hold. A transport without a lookup closes as before: the person
    verified the conversation by hand (seed 000's recovery table).
    """
    action = ReplyAction.objects.select_related("event__source").filter(pk=action_id).first()
    if action is not None and action.delivery_state == S.SEND_STATUS_UNKNOWN and expected in (
            None, S.SEND_STATUS_UNKNOWN):
        lookup = _receipt_lookup(action)
        if lookup.receipt is not None:
            return Result(False, f"not closed: the provider holds this reply (receipt {lookup.receipt}), so "
                                 "it was delivered. Use \"Look up the receipt, then authorize a retry\" to "
                                 "mark it SENT (nothing is resent)")
        if lookup.refusal and lookup.can_look_up is not False:
            return Result(False, f"not closed: {lookup.refusal}")
    with transaction.atomic():
        outcome = reply_action_transition(
            action_id=action_id, to=S.CLOSED_NO_REPLY, actor=actor, reason_code=reason_code,
            expected=expected, extra={"next_attempt_at": None},
        )
    return Result(True, "closed without reply") if outcome.applied else _refused(outcome)


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
    """Ask the transport of the action's own route for its receipt (seed 000: reconcile first)."""
    route = action_route(action)
    if route is None:
        return Lookup(refusal=f"the transport is unavailable: {no_route_reason(action)}", can_look_up=False)
    try:
        transport = transport_for(route)
    except (LiveSendDisabled, KeyError, ValueError) as exc:
        return Lookup(refusal=f"the transport is unavailable: {exc}", can_look_up=False)
    if not transport.discovered:
        return Lookup(refusal="the provider's capabilities could not be discovered (is it running?): "
                              "try again when it answers", can_look_up=None)
    if not transport.capabilities.receipt_lookup:
        return Lookup(refusal="this transport has no receipt lookup, so nothing can show the reply "
                              "was not applied: verify the conversation by hand, then confirm sent or close",
                      can_look_up=False)
    try:
        # What was sent under the key: a platform without keys finds a reply by target and text.
        reply = outbound_reply(action, approved_copy(
            source_id=action.event.source_id, purpose=action.purpose, copy_version=action.copy_version))
    except ReplyCopy.DoesNotExist:
        reply = None
    try:
        receipt = transport.lookup(action.reply_key, reply)
    except (Ambiguous, OSError) as exc:
        return Lookup(refusal=f"the receipt lookup failed ({getattr(exc, 'code', type(exc).__name__)}); "
                              "try again")
    return Lookup(receipt=receipt.provider_reply_id if receipt is not None else None)


def stranded_retry_now(*, action_id: int, actor: str) -> Result:
    """A person's "retry now": FAILED_BEFORE_SEND -> APPROVED under the same reply key, sent at once."""
    with transaction.atomic():
        outcome = reply_action_transition(
            action_id=action_id, to=S.APPROVED, actor=actor, reason_code="retry_now_by_operator",
            expected=S.FAILED_BEFORE_SEND, extra={"next_attempt_at": None},
        )
        if outcome.applied:
            _enqueue_on_commit(action_id)
    if not outcome.applied:
        return _refused(outcome)
    return Result(True, "retry queued under the same reply key")


def unknown_confirm_sent(*, action_id: int, actor: str, provider_reply_id: str) -> Result:
    """A person verified the provider has the reply: store its receipt, then SENT."""
    provider_reply_id = provider_reply_id.strip()
    if not provider_reply_id:
        return Result(False, "give the provider's receipt id you verified")
    with transaction.atomic():
        outcome = reply_action_transition(
            action_id=action_id, to=S.SENT, actor=actor, reason_code="confirmed_sent_by_operator",
            expected=S.SEND_STATUS_UNKNOWN,
            extra={"provider_reply_id": provider_reply_id[:200], "last_error_code": ""},
        )
    return Result(True, "marked SENT with the receipt you gave") if outcome.applied else _refused(outcome)


def unknown_authorize_retry(*, action_id: int, actor: str) -> Result:
    """Seed 000's recovery table: reconcile first, retry only if the lookup shows no send.

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
                action_id=action_id, to=S.SENT, actor=actor, reason_code="receipt_found_on_lookup",
                expected=S.SEND_STATUS_UNKNOWN,
                extra={"provider_reply_id": receipt, "last_error_code": ""},
            )
            message = "the lookup found the provider's receipt: marked SENT, nothing resent"
        else:
            outcome = reply_action_transition(
                action_id=action_id, to=S.APPROVED, actor=actor,
                reason_code="retry_authorized_after_lookup", expected=S.SEND_STATUS_UNKNOWN,
            )
            message = "the lookup shows no send: retry authorized under the same reply key"
            if outcome.applied:
                _enqueue_on_commit(action_id)
    return Result(True, message) if outcome.applied else _refused(outcome)


# --- shared send budgets -------------------------------------------------------------------


def send_budget_set(*, source_id: int, purpose: str, limit: int | None, window_seconds: int) -> SendBudget:
    """Configure one account's budget for one purpose: at most `limit` sends in any
    `window_seconds` (None: no count, pauses only), shared by every worker."""
    if window_seconds < 1 or (limit is not None and limit < 1):
        raise ValueError("a budget needs a window of at least 1 second and a limit of at least 1")
    budget, _ = SendBudget.objects.update_or_create(
        source_id=source_id, purpose=purpose, defaults={"limit": limit, "window_seconds": window_seconds})
    return budget
