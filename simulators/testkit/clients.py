"""Test-only instruments: Django's test client, environment and attribute patches, captured logs."""

from __future__ import annotations

import contextlib
import io
import logging
import os
from typing import Callable, Iterator

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
    named = {
        x
        for name in ("django-q", "django.server")
        for x in logging.getLogger(name).handlers
        if type(x) is logging.StreamHandler
    }
    buffer = io.StringIO()
    handlers = [*console, *(x for x in named if x not in console)]
    streams = [handler.setStream(buffer) for handler in handlers]
    try:
        yield buffer
    finally:
        for handler, stream in zip(handlers, streams):
            handler.setStream(stream)
