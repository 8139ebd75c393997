"""Fixtures for the sender: an in-process sandbox provider and a source wired to it."""

from __future__ import annotations

import pytest

from tests.conftest import fixture_body

COPY = "The sample checklist is ready in the test fixture."


@pytest.fixture
def provider():
    """Start sandbox providers on free loopback ports: provider(idempotency_key=..., receipt_lookup=...)."""
    from replies.sandbox_provider import serve
    from replies.transports.sandbox import _discovered

    servers = []

    def start(*, idempotency_key: bool = True, receipt_lookup: bool = True, hang_seconds: float = 2.0):
        _discovered.cache_clear()
        server, state = serve(port=0, idempotency_key=idempotency_key,
                              receipt_lookup=receipt_lookup, hang_seconds=hang_seconds)
        servers.append(server)
        state.url = f"http://127.0.0.1:{server.server_address[1]}"
        return state

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def fail_next(state, mode: str, count: int = 1) -> None:
    with state.lock:
        state.mode, state.remaining = mode, count


def provider_calls(state) -> int:
    with state.lock:
        return sum(state.applied.values())


@pytest.fixture
def wire(sandbox_source):
    """Point the sandbox source at a provider and give both purposes approved copy."""
    from ingress.services import source_update
    from replies.sender import reply_copy_create

    def _wire(state=None, *, copies: bool = True, **changes):
        source = source_update(
            source_id=sandbox_source.pk,
            changes={"transport_url": state.url if state else "http://127.0.0.1:9", **changes},
        )
        if copies:
            for purpose in source.purposes:
                reply_copy_create(source_id=source.pk, purpose=purpose, channel=purpose, text=COPY,
                                  actor="tester")
        return source

    return _wire


@pytest.fixture
def planned(deliver):
    """Deliver the Northstar fixture: one event, two REVIEW_PENDING actions (public_ack first)."""
    from replies.models import ReplyAction

    def _planned(fixture: str = "comment__northstar"):
        assert deliver(fixture_body(fixture)).status_code == 200
        return list(ReplyAction.objects.order_by("purpose").reverse())  # public_ack, private_delivery

    return _planned


@pytest.fixture(autouse=True)
def _short_timeouts(settings):
    settings.CONDUIT_TRANSPORT_TIMEOUT_SECONDS = 0.5
