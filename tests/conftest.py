"""Shared test fixtures: a registered sandbox source and signed deliveries of fixture files."""

from __future__ import annotations

import base64
import os
import uuid
from datetime import datetime, timezone
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
# A test-only signing secret, generated for the suite; it signs nothing real.
TEST_SECRET = "whsec_" + base64.b64encode(b"conduit-test-only-signing-key-01").decode()
SECRET_ENV = "CONDUIT_TEST_SANDBOX_SECRET"


def pytest_configure(config: pytest.Config) -> None:
    # Django's development server listens with a backlog of 10; the concurrency
    # tests open 32 connections at once, so give the live server a deeper queue.
    from django.core.servers import basehttp

    basehttp.WSGIServer.request_queue_size = 128
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        raise pytest.UsageError(
            "The suite runs on PostgreSQL: use `make test`, which starts a throwaway cluster "
            "(or set DATABASE_URL to a PostgreSQL server you may create databases on)."
        )


def fixture_body(name: str, source_dir: str = "sandbox_social") -> bytes:
    return (FIXTURES / source_dir / f"{name}.json").read_bytes()


def sign(
    body: bytes, *, delivery_id: str | None = None, at: datetime | None = None,
    secret: str = TEST_SECRET,
) -> dict[str, str]:
    from ingress.sources import get_adapter

    return get_adapter("sandbox-social").sign(
        body=body, secret=secret, delivery_id=delivery_id or f"msg_test_{uuid.uuid4().hex}",
        at=at or datetime.now(timezone.utc),
    )


@pytest.fixture(autouse=True)
def _test_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, TEST_SECRET)


@pytest.fixture
def sandbox_source(db):
    from ingress.services import source_register

    source, _ = source_register(
        name="sandbox", adapter="sandbox-social", account_ref="acct_test_01",
        event_types=["comment.created"], purposes=["public_ack", "private_delivery"],
        trigger_keywords=["CHECKLIST"], secret_env=SECRET_ENV,
    )
    return source


@pytest.fixture
def deliver(client):
    """POST a body to /webhooks/<source>/ through the Django test client, signed unless told."""

    def _deliver(body: bytes, *, source: str = "sandbox", headers: dict | None = None, **sign_kw):
        return client.post(
            f"/webhooks/{source}/", data=body, content_type="application/json",
            headers=sign(body, **sign_kw) if headers is None else headers,
        )

    return _deliver


def subprocess_env() -> dict[str, str]:
    """The environment for a child process that must use this test's database."""
    from django.db import connection

    s = connection.settings_dict
    url = f"postgres://{s['USER']}@{s['HOST']}:{s['PORT']}/{s['NAME']}"
    return {**os.environ, "DATABASE_URL": url}
