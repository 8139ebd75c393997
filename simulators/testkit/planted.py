"""The planted faults of docs/concepts/acceptance.md#controls (the instrument-integrity controls),
each a context manager that plants its fault for its block and takes it back after; the constraint-dropping one relies on the
caller's transaction."""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import replace
from typing import Iterator

from django.db import connection

from simulators.testkit.clients import patched, patched_item


@contextlib.contextmanager
def without_event_uniqueness() -> Iterator[None]:
    """The event uniqueness rule disabled, so the duplicate it would have stopped lands.

    The constraint is dropped (PostgreSQL DDL; the caller's transaction, rolled
    back, restores it; without one it stays dropped, so dropping it again is a
    no-op). Ingest's upsert names that constraint as its arbiter (`ON CONFLICT
    (event_key)`): with the rule gone PostgreSQL refuses the statement, every
    delivery is a 503 with nothing written, and the check never meets a
    duplicate. A writer with no rule to converge on inserts every sighting, as
    two deliveries racing through a check-then-insert writer both do (neither
    sees the other's uncommitted row); so the event insert loses its arbiter
    too, in both of ingest's writers, and a second sighting of an event lands
    as a second row. The reply ledger's own key still stands: an event that
    plans replies is refused there (an IntegrityError, a 500), so only an event
    that plans none shows the duplicate row.
    """
    if connection.vendor != "postgresql":
        raise NotImplementedError("dropping the constraint needs PostgreSQL's transactional DDL")
    from conduit import sql
    from ingress import writes
    from ingress.models import InboundEvent

    real = sql.upsert_sql

    def without_arbiter(model, *args, **kwargs):
        head, tail, fields = real(model, *args, **kwargs)
        if model is InboundEvent:
            if not tail.startswith("ON CONFLICT") or " RETURNING " not in tail:
                raise AssertionError(f"the event upsert no longer reads ON CONFLICT ... RETURNING: {tail!r}")
            tail = tail[tail.index("RETURNING") :]  # a plain INSERT ... RETURNING the same columns
        return head, tail, fields

    with connection.cursor() as cursor:
        # CASCADE: reply_actions.event_key references the unique key.
        cursor.execute(
            "ALTER TABLE inbound_events DROP CONSTRAINT IF EXISTS inbound_event_key_unique CASCADE"
        )
    writes._statement.cache_clear()  # the one-statement writer's text is built once: again, without
    try:
        with patched(sql, "upsert_sql", without_arbiter), patched(writes, "upsert_sql", without_arbiter):
            yield
    finally:
        writes._statement.cache_clear()


@contextlib.contextmanager
def reconcile_minting_reply_keys() -> Iterator[None]:
    """Reconciliation changed to mint a new reply key for what it replays."""
    from reconcile import repairs
    from replies.services import planning

    real_accept = repairs.observations_accept

    def minting_accept(**kwargs):
        with patched(planning, "reply_key", lambda event_key, purpose: uuid.uuid4().hex):
            return real_accept(**kwargs)

    with patched(repairs, "observations_accept", minting_accept):
        yield


@contextlib.contextmanager
def canary_aimed_at_live_transport() -> Iterator[None]:
    """The canary source pointed at a live transport (a registered fake that must never be called)."""
    from conduit.providers import registry
    from conduit.providers.base import Transport
    from reconcile.proof.canary import canary_source
    from replies.models import ReplyRoute

    class LiveProbe(Transport):
        name = "live-probe"

        def __init__(self, url, timeout) -> None:
            raise AssertionError("the live transport was built for a canary")

    with patched_item(registry.TRANSPORTS, "live-probe", LiveProbe):
        source = canary_source()
        ReplyRoute.objects.filter(source=source).update(transport_name="live-probe")
        yield


@contextlib.contextmanager
def canary_ids_fixed() -> Iterator[None]:
    """The canary's fixture posted as it is, its ids fixed for every run (as the canary once ran):
    a second run meets the first one's event, so its evidence is not its own."""
    from reconcile.proof import canary

    with patched(canary, "run_fixture", lambda platform, *, run_id, at: platform.fixture.read_bytes()):
        yield


@contextlib.contextmanager
def approval_check_bypassed() -> Iterator[None]:
    """The approval check bypassed: REVIEW_PENDING becomes claimable and the move allowed."""
    from conduit.statemachine import TransitionTable
    from replies import sender

    allows = TransitionTable.allows
    with (
        patched_item(sender.CLAIMABLE, "REVIEW_PENDING", lambda now: {}),
        patched(
            TransitionTable,
            "allows",
            lambda self, p, n: allows(self, p, n) or (p, n) == ("REVIEW_PENDING", "SENDING"),
        ),
    ):
        yield


@contextlib.contextmanager
def meta_signature_bypassed() -> Iterator[None]:
    """Meta's signature check bypassed: every body passes as authentic."""
    from conduit.canonical import sha256_hex
    from conduit.providers.base import Proof
    from conduit.providers.meta.webhook import MetaWebhookAdapter

    with patched(
        MetaWebhookAdapter,
        "verify",
        lambda self, *, body, **kw: Proof(delivery_id="sha256:" + sha256_hex(body)),
    ):
        yield


@contextlib.contextmanager
def meta_throttling_taken_as_ambiguous() -> Iterator[None]:
    """Meta's throttling answers (80002 and the other throttling codes) read as ambiguous, as if the
    error table did not know them: a throttled send is parked instead of retried."""
    from conduit.providers.meta import errors

    ambiguous = errors.Meaning(errors.AMBIGUOUS, "throttling_taken_as_ambiguous", "planted fault")
    with contextlib.ExitStack() as stack:
        for key, row in list(errors._BY_CODE.items()):
            if row.meaning.reason == "throttled":
                stack.enter_context(patched_item(errors._BY_CODE, key, errors.Row(*key, None, ambiguous)))
        yield


@contextlib.contextmanager
def meta_timeout_taken_as_not_sent() -> Iterator[None]:
    """A Meta write that timed out after the request left taken as not sent (safe to retry)."""
    from conduit.providers.meta import transport

    cls = transport._MetaReplyTransport
    # The staticmethod object itself (getattr would return its plain function, and putting that
    # back would turn it into an instance method).
    original = vars(cls)["_no_answer"]
    real = original.__func__

    def no_answer(failure):
        if failure.sent and failure.kind == "timeout":
            return transport.MetaNotSent("timeout_taken_as_not_sent", retryable=True)
        return real(failure)

    cls._no_answer = staticmethod(no_answer)
    try:
        yield
    finally:
        cls._no_answer = original


@contextlib.contextmanager
def whatsapp_throttling_taken_as_ambiguous() -> Iterator[None]:
    """WhatsApp's throttling answers (130429, 131056 and the rate limits) read as ambiguous, as if
    its error table did not know them: a throttled send is parked instead of retried."""
    from conduit.providers.meta.errors import AMBIGUOUS, Meaning
    from conduit.providers.whatsapp import errors

    ambiguous = Meaning(AMBIGUOUS, "throttling_taken_as_ambiguous", "planted fault")
    with contextlib.ExitStack() as stack:
        for code, row in list(errors._BY_CODE.items()):
            if row.meaning.reason == "throttled":
                stack.enter_context(patched_item(errors._BY_CODE, code, replace(row, meaning=ambiguous)))
        yield


@contextlib.contextmanager
def whatsapp_statuses_unheard() -> Iterator[None]:
    """Replies no longer listening for message statuses: a status webhook is recorded in the
    ingress ledger and settles no send."""
    from ingress.signals import message_statuses_seen
    from replies.apps import _message_statuses_seen

    uid = "replies.message_statuses_seen"
    if not message_statuses_seen.disconnect(dispatch_uid=uid):
        raise AssertionError("replies' status receiver is no longer connected under its dispatch_uid")
    try:
        yield
    finally:
        message_statuses_seen.connect(_message_statuses_seen, dispatch_uid=uid)
