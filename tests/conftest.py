"""Shared test fixtures: a registered sandbox source and signed deliveries of fixture files."""

from __future__ import annotations

import base64
import os
import threading
import uuid
from datetime import datetime, timezone
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

# The tests never read a developer's .demo.env (make demo writes one beside manage.py): the
# settings, and every process a test starts, see only what the test sets.
os.environ["CONDUIT_ENV_FILE"] = os.devnull

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
# A test-only signing secret, generated for the suite; it signs nothing real.
TEST_SECRET = "whsec_" + base64.b64encode(b"conduit-test-only-signing-key-01").decode()
SECRET_ENV = "CONDUIT_SOURCE_TEST_SANDBOX_SECRET"


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
    body: bytes,
    *,
    delivery_id: str | None = None,
    at: datetime | None = None,
    secret: str = TEST_SECRET,
) -> dict[str, str]:
    from conduit.providers.registry import get_adapter

    return get_adapter("sandbox-social").sign(
        body=body,
        secret=secret,
        delivery_id=delivery_id or f"msg_test_{uuid.uuid4().hex}",
        at=at or datetime.now(timezone.utc),
    )


@pytest.fixture(autouse=True)
def _test_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, TEST_SECRET)


@pytest.fixture
def sandbox_source(db):
    """The sandbox source, each purpose routed to the sandbox transport (no URL until `wire`)."""
    from ingress.services import source_register
    from replies.services import reply_route_declare

    source, _ = source_register(
        name="sandbox",
        adapter="sandbox-social",
        account_ref="acct_test_01",
        event_types=["comment.created"],
        purposes=["public_ack", "private_delivery"],
        trigger_keywords=["CHECKLIST"],
        secret_env=SECRET_ENV,
    )
    for purpose in source.purposes:
        reply_route_declare(source_id=source.pk, purpose=purpose, transport_name="sandbox")
    return source


def account_campaign(source):
    """The source's every-post campaign (its keyword list's), made if it has none: what a reply
    action made directly in a test belongs to."""
    from replies.services.campaigns import _account_default_made

    return _account_default_made(source, "test")


def acceptance_passed(*, ran_by: str = "acceptance_tester") -> None:
    """Record a passing `manage.py acceptance` run on the code version running now, through
    reconcile's service: what a live route's enabling requires of the deployment."""
    from django.utils import timezone

    from reconcile.services import acceptance_run_record

    now = timezone.now()
    acceptance_run_record(ran_by=ran_by, started_at=now, finished_at=now)


@pytest.fixture
def live_ready(sandbox_source):
    """What enabling a live route requires (docs/concepts/acceptance.md#live): a passing acceptance
    run on this code version and the sandbox source's account connection authorised by a person."""
    from ingress.services import source_connection_authorize

    acceptance_passed()
    return source_connection_authorize(source_id=sandbox_source.pk, actor="owner_test")


@pytest.fixture
def deliver(client):
    """POST a body to /webhooks/<source>/ through the Django test client, signed unless told."""

    def _deliver(body: bytes, *, source: str = "sandbox", headers: dict | None = None, **sign_kw):
        return client.post(
            f"/webhooks/{source}/",
            data=body,
            content_type="application/json",
            headers=sign(body, **sign_kw) if headers is None else headers,
        )

    return _deliver


def loopback_server(handler: type) -> ThreadingHTTPServer:
    """An HTTP server for `handler` on a free loopback port, serving from a daemon thread; the
    caller shuts it down (`shutdown()` then `server_close()`)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def loopback():
    """`loopback(handler)` starts a loopback_server for the test; every one is shut down after it."""
    servers: list[ThreadingHTTPServer] = []

    def start(handler: type) -> ThreadingHTTPServer:
        servers.append(loopback_server(handler))
        return servers[-1]

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def free_port() -> int:
    """A free TCP port on loopback."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_started(port: int, server) -> None:
    """Wait (30 s at most) until the child process `server` listens on loopback `port`."""
    import socket
    import time

    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert server.poll() is None, server.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.1)


def shell_with(variable: str, value: str | None, code: str):
    """`manage.py shell -c code` in a child process on this test's database, with the environment
    `variable` set to `value` (None: unset); its CompletedProcess, output as text."""
    import subprocess
    import sys

    env = subprocess_env()
    env.pop(variable, None)
    if value is not None:
        env[variable] = value
    return subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=FIXTURES.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def subprocess_env() -> dict[str, str]:
    """The environment for a child process that must use this test's database."""
    from django.db import connection

    s = connection.settings_dict
    url = f"postgres://{s['USER']}@{s['HOST']}:{s['PORT']}/{s['NAME']}"
    return {**os.environ, "DATABASE_URL": url}


# The sender's fixtures: an in-process sandbox provider and a source wired to it.

COPY = "The sample checklist is ready in the test fixture."


@pytest.fixture
def provider():
    """Start sandbox providers on free loopback ports: provider(idempotency_key=..., receipt_lookup=...)."""
    from conduit.providers.sandbox.transport import _discovered
    from simulators.sandbox import serve

    servers = []

    def start(*, idempotency_key: bool = True, receipt_lookup: bool = True, hang_seconds: float = 2.0):
        _discovered.cache_clear()
        server, state = serve(
            port=0, idempotency_key=idempotency_key, receipt_lookup=receipt_lookup, hang_seconds=hang_seconds
        )
        servers.append(server)
        state.url = f"http://127.0.0.1:{server.server_address[1]}"
        return state

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def fail_next(state, mode: str, count: int = 1) -> None:
    """Fail the provider's next `count` sends, or source page reads for page_* modes."""
    state.fail_next(mode, count)


def provider_calls(state) -> int:
    return state.applied_count()


@pytest.fixture
def wire(sandbox_source):
    """Point the sandbox source (read side) and every route at a provider; give both purposes copy.

    `route_changes` (transport_name, live_send_enabled, target_url) apply to every route.
    """
    from ingress.services import source_update
    from replies.models import ReplyRoute
    from replies.services import reply_copy_create, reply_route_update

    def _wire(state=None, *, copies: bool = True, **route_changes):
        url = state.url if state else "http://127.0.0.1:9"
        source = source_update(source_id=sandbox_source.pk, changes={"source_url": url})
        for route in ReplyRoute.objects.filter(source=source):
            reply_route_update(route_id=route.pk, changes={"target_url": url, **route_changes})
        if copies:
            for purpose in source.purposes:
                reply_copy_create(
                    source_id=source.pk, purpose=purpose, channel=purpose, text=COPY, actor="tester"
                )
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


def actions_cloned(planned, n: int, **state) -> list:
    """n reply actions on n events of the sandbox source, cloned from one planned event (the
    planned pair stays too): a ledger of n + 2 actions."""
    from django.utils import timezone

    from replies.contract import reply_key
    from replies.models import ReplyAction

    first, _ = planned()
    event = first.event
    actions = []
    for i in range(n):
        event.pk, event.event_key = None, f"sandbox-social:evt_test_q{i:03}"
        event.save()
        actions.append(
            ReplyAction.objects.create(
                reply_key=reply_key(event.event_key, "public_ack"),
                event=event,
                purpose="public_ack",
                campaign=first.campaign,
                campaign_version=1,
                created_at=timezone.now(),
                **state,
            )
        )
    return actions


# The role groups as the migrations left them; a transactional test's flush forgets them, and
# `migrated_roles` puts them back.
_ROLES_AS_MIGRATED: dict[str, list[tuple[str, str]]] = {}


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    from django.contrib.auth.models import Group

    with django_db_blocker.unblock():
        for group in Group.objects.prefetch_related("permissions__content_type"):
            _ROLES_AS_MIGRATED[group.name] = [
                (p.content_type.app_label, p.codename) for p in group.permissions.all()
            ]


@pytest.fixture
def migrated_roles(transactional_db):
    """The owners, reviewers and operators groups with the permissions the migrations gave
    (a permission no model declares any more is not recreated by a flush, and grants nothing)."""
    from django.contrib.auth.models import Group, Permission

    for name, permissions in _ROLES_AS_MIGRATED.items():
        group, created = Group.objects.get_or_create(name=name)
        if created:
            for app_label, codename in permissions:
                group.permissions.add(
                    *Permission.objects.filter(content_type__app_label=app_label, codename=codename)
                )


@pytest.fixture(autouse=True)
def _short_timeouts(settings):
    settings.CONDUIT_TRANSPORT_TIMEOUT_SECONDS = 0.5


@pytest.fixture(autouse=True)
def _fresh_process_caches():
    """Ids restart between test databases; process caches keyed by id must not carry over."""
    from conduit.providers.sandbox.transport import _discovered
    from replies.matching import _RULES
    from replies.selectors import approved_copy

    approved_copy.cache_clear()
    _RULES.clear()
    _discovered.cache_clear()
    yield


@pytest.fixture
def api(db):
    """A DRF client authenticated with a token of a plain (non-staff) user holding the read API's
    view permissions (a token acts with its user's permissions)."""
    from django.contrib.auth.models import Permission, User
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    user = User.objects.create_user("token_user_test")
    user.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="ingress", codename__in=["view_inboundevent", "view_quarantinereceipt"]
        )
    )
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


@pytest.fixture
def source_side(provider, wire):
    """(state, source): a provider wired as the sandbox source's transport and read side."""
    state = provider()
    source = wire(state)

    state.hold_events = lambda *events: state.hold(source.account_ref, list(events))
    return state, source


@pytest.fixture
def scan(db):
    """Run one complete scan of a source in the foreground: pages until published.

    The same loop the reconcile command runs (reconcile.scan.scan_until_done).
    """
    from reconcile.scan import scan_until_done

    def _scan(source, *, max_pages: int = 1000, **window):
        return scan_until_done(
            source=source, trigger="command", actor="tester", max_pages=max_pages, **window
        )

    return _scan
