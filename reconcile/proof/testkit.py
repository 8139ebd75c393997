"""The one seam to test-only machinery: planted faults, patched functions, DDL, Django's test
client, settings overrides and a captured log.

Only reconcile.proof.acceptance, the `acceptance` management command and the
tests import this module; production code never does (tests/reconcile/
test_proof_seam.py fails if any other module of the apps or conduit does).
Each fault is a context manager that plants it for its block and takes it
back after; the constraint-dropping one relies on the caller's transaction.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import uuid
from typing import Callable, Iterator

from django.db import connection
from django.test import Client
from django.test.utils import override_settings


def test_client(*, raise_errors: bool = False, **defaults) -> Client:
    """Django's test client; by default a server error is a response (a failed check), not raised."""
    return Client(raise_request_exception=raise_errors, **defaults)


def environ_set(name: str, value: str) -> Callable[[], None]:
    """Set an environment variable; the returned callable puts back what was there."""
    previous = os.environ.get(name)
    os.environ[name] = value

    def restore() -> None:
        if previous is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = previous

    return restore


@contextlib.contextmanager
def patched(target, name: str, value) -> Iterator[None]:
    """`target.name` replaced by `value` for the block."""
    original = getattr(target, name)
    setattr(target, name, value)
    try:
        yield
    finally:
        setattr(target, name, original)


@contextlib.contextmanager
def patched_item(mapping: dict, key: str, value) -> Iterator[None]:
    """`mapping[key]` set to `value` for the block (removed after if it was absent)."""
    missing = object()
    original = mapping.get(key, missing)
    mapping[key] = value
    try:
        yield
    finally:
        if original is missing:
            mapping.pop(key, None)
        else:
            mapping[key] = original


def transport_timeout(seconds: float) -> contextlib.AbstractContextManager:
    """Every transport built in the block times out after `seconds`."""
    return override_settings(CONDUIT_TRANSPORT_TIMEOUT_SECONDS=seconds)


def send_leases_expired() -> contextlib.AbstractContextManager:
    """Every send lease counts as expired, so the sweeper looks at every SENDING action."""
    return override_settings(CONDUIT_SEND_LEASE_SECONDS=0)


@contextlib.contextmanager
def nothing_queued() -> Iterator[None]:
    """Approval queues the send on commit; the checks send by hand, so nothing is queued."""
    from replies import sender

    with patched(sender, "enqueue_send", lambda action_id: None):
        yield


@contextlib.contextmanager
def captured_logs() -> Iterator[tuple[io.StringIO, bool]]:
    """Every console log line, at DEBUG and up, into the yielded buffer; with it, whether any
    console handler was there to capture (if not, a search of the buffer is blind)."""
    console = [x for x in logging.getLogger().handlers if type(x) is logging.StreamHandler]
    root, level = logging.getLogger(), logging.getLogger().level
    buffer = io.StringIO()
    streams = [handler.setStream(buffer) for handler in console]
    root.setLevel(logging.DEBUG)
    try:
        yield buffer, bool(console)
    finally:
        root.setLevel(level)
        for handler, stream in zip(console, streams):
            handler.setStream(stream)


@contextlib.contextmanager
def console_held() -> Iterator[io.StringIO]:
    """Every console log line of the block into the yielded buffer, at the configured levels:
    the planted faults' noise (tracebacks of deliberate 500s) stays out of the terminal."""
    console = [x for x in logging.getLogger().handlers if type(x) is logging.StreamHandler]
    named = {x for name in ("django-q", "django.server") for x in logging.getLogger(name).handlers
             if type(x) is logging.StreamHandler}
    buffer = io.StringIO()
    handlers = [*console, *(x for x in named if x not in console)]
    streams = [handler.setStream(buffer) for handler in handlers]
    try:
        yield buffer
    finally:
        for handler, stream in zip(handlers, streams):
            handler.setStream(stream)


# -- seed 000's planted faults (the instrument-integrity controls) --------------------

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
            tail = tail[tail.index("RETURNING"):]  # a plain INSERT ... RETURNING the same columns
        return head, tail, fields

    with connection.cursor() as cursor:
        # CASCADE: reply_actions.event_key references the unique key.
        cursor.execute("ALTER TABLE inbound_events DROP CONSTRAINT IF EXISTS inbound_event_key_unique CASCADE")
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
    from replies import services as reply_services

    real_accept = repairs.observations_accept

    def minting_accept(**kwargs):
        with patched(reply_services, "reply_key", lambda event_key, purpose: uuid.uuid4().hex):
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
    with patched_item(sender.CLAIMABLE, "REVIEW_PENDING", lambda now: {}), patched(
        TransitionTable, "allows",
        lambda self, p, n: allows(self, p, n) or (p, n) == ("REVIEW_PENDING", "SENDING"),
    ):
        yield


@contextlib.contextmanager
def meta_signature_bypassed() -> Iterator[None]:
    """Meta's signature check bypassed: every body passes as authentic."""
    from conduit.canonical import sha256_hex
    from conduit.providers.base import Proof
    from conduit.providers.meta.webhook import MetaWebhookAdapter

    with patched(MetaWebhookAdapter, "verify",
                 lambda self, *, body, **kw: Proof(delivery_id="sha256:" + sha256_hex(body))):
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
