"""Meta sources for tests: one app with an Instagram account and a Page, and signed deliveries."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from conduit.providers.meta.webhook import signature_header
from tests.conftest import fixture_body

APP_ID = "900000000000001"
IG_ACCOUNT = "17841400000000001"
PAGE_ACCOUNT = "100000000000001"
# Test-only values generated for the suite; they sign nothing real.
APP_SECRET = "0123456789abcdef0123456789abcdef"
NEXT_SECRET = "fedcba9876543210fedcba9876543210"
VERIFY_TOKEN = "verify-token-test-only-01"
SECRET_ENV, NEXT_ENV, VERIFY_ENV, TOKEN_ENV = (
    "CONDUIT_SOURCE_TEST_META_SECRET",
    "CONDUIT_SOURCE_TEST_META_SECRET_NEXT",
    "CONDUIT_SOURCE_TEST_META_VERIFY",
    "CONDUIT_SOURCE_TEST_META_TOKEN",
)
# The fixtures' comments were written long after this, so they are new work.
CONNECTED = datetime(2025, 1, 1, tzinfo=timezone.utc)
EVENT_TYPES = [
    "comment.created",
    "comment.edited",
    "comment.removed",
    "comment.hidden",
    "comment.unhidden",
    "message.created",
]


def meta_body(name: str) -> bytes:
    adapter, _, fixture = name.partition("/")
    return fixture_body(fixture, adapter)


@pytest.fixture(autouse=True)
def _meta_env(monkeypatch):
    monkeypatch.setenv(SECRET_ENV, APP_SECRET)
    monkeypatch.setenv(VERIFY_ENV, VERIFY_TOKEN)
    monkeypatch.setenv(TOKEN_ENV, "graph-token-test-only")


def register_meta(
    name: str,
    adapter: str,
    account: str,
    *,
    graph_url: str = "http://127.0.0.1:9/v26.0",
    connected: datetime | None = CONNECTED,
    **overrides,
):
    from ingress.models import Source
    from ingress.services import source_register

    values = dict(
        name=name,
        adapter=adapter,
        account_ref=account,
        event_types=EVENT_TYPES,
        purposes=["public_ack"],
        trigger_keywords=["price"],
        secret_env=SECRET_ENV,
        app_id=APP_ID,
        verify_token_env=VERIFY_ENV,
        token_env=TOKEN_ENV,
        source_url=graph_url,
    )
    values.update(overrides)
    source, _ = source_register(**values)
    Source.objects.filter(pk=source.pk).update(connected_at=connected)
    source.refresh_from_db()
    return source


@pytest.fixture
def meta_sources(db):
    """An Instagram account and a Page of one app, both connected before the fixtures' times."""
    return {
        "instagram": register_meta("ig-test", "meta-instagram", IG_ACCOUNT),
        "page": register_meta("page-test", "meta-page", PAGE_ACCOUNT),
    }


@pytest.fixture
def post_meta(client):
    """POST a body to /webhooks/meta/<app>/, signed with the app secret unless told."""

    def _post(body: bytes, *, secret: str = APP_SECRET, headers: dict | None = None, app_id: str = APP_ID):
        if headers is None:
            headers = {"X-Hub-Signature-256": signature_header(body=body, secret=secret)}
        return client.post(
            f"/webhooks/meta/{app_id}/", data=body, content_type="application/json", headers=headers
        )

    return _post
