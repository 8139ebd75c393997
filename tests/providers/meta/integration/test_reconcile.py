"""Meta reconciliation end to end: webhooks from the Graph simulator, then scans reading it back.

The simulator posts signed notifications to the live test server; a comment
made with `notify: false` is a webhook that never came. Every connection the
test makes is checked to stay on this host.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time

import pytest

from ingress.models import InboundEvent, QuarantineReceipt, SelfAuthoredItem, Source
from reconcile.models import Finding
from reconcile.scan import reconcile_page, scan_until_done
from replies.models import ReplyAction
from simulators.meta import serve
from tests.conftest import subprocess_env
from tests.providers.meta.integration.conftest import (
    APP_ID,
    APP_SECRET,
    IG_ACCOUNT,
    PAGE_ACCOUNT,
    SECRET_ENV,
    TOKEN_ENV,
    VERIFY_ENV,
    register_meta,
)

BUYER = "17841400000000901"
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch):
    """Refuse, and fail the test on, any connection off this host."""
    attempted: list[str] = []
    real = socket.create_connection

    def guarded(address, *args, **kwargs):
        attempted.append(address[0])
        if address[0] not in ("127.0.0.1", "localhost", "::1"):
            raise OSError(f"test refused a connection to {address[0]}")
        return real(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", guarded)
    yield attempted
    assert [h for h in attempted if h not in ("127.0.0.1", "localhost", "::1")] == []


@pytest.fixture
def graph(live_server):
    simulator = serve(
        callback=f"{live_server.url}/webhooks/meta/{APP_ID}/", app_id=APP_ID, app_secret=APP_SECRET
    )
    yield simulator
    simulator.close()


def sim(graph, path: str, body: dict | None = None, method: str = "POST") -> dict:
    return graph.control(path, body, method=method)


def instagram(graph):
    sim(graph, "/_sim/accounts", {"id": IG_ACCOUNT, "object": "instagram", "app_id": APP_ID})
    return register_meta("ig-test", "meta-instagram", IG_ACCOUNT, graph_url=graph.instagram_url)


def page(graph):
    sim(graph, "/_sim/accounts", {"id": PAGE_ACCOUNT, "object": "page", "app_id": APP_ID})
    return register_meta("page-test", "meta-page", PAGE_ACCOUNT, graph_url=graph.url)


def scan(source):
    return scan_until_done(source=source, trigger="command", actor="tester")


def comment(graph, account: str, where: dict, text: str, *, notify: bool, sender: str = BUYER) -> str:
    return sim(
        graph,
        "/_sim/comments",
        {"account": account, **where, "text": text, "from_id": sender, "notify": notify},
    )["id"]


@pytest.mark.parametrize("platform", ["instagram", "page"])
def test_a_missed_webhook_is_recovered_and_the_delivered_ones_match(graph, platform):
    source = instagram(graph) if platform == "instagram" else page(graph)
    account = source.account_ref
    where = {"media_id": "18000000000000001"} if platform == "instagram" else {"post_id": f"{account}_1"}
    delivered = comment(graph, account, where, "what is the price?", notify=True)
    missed = comment(graph, account, where, "price for two please", notify=False)
    own = comment(
        graph, account, {**where, "parent_id": delivered}, "details sent", notify=True, sender=account
    )
    assert InboundEvent.objects.count() == 1  # the webhook for the delivered one came

    outcome = scan(source)
    assert outcome.state == "published"
    events = {e.message_ref: e for e in InboundEvent.objects.all()}
    assert set(events) == {delivered, missed}
    assert {e.reconcile_status for e in events.values()} == {"MATCHED"}
    # No false identity conflict between the webhook's and the read's normalization.
    assert not QuarantineReceipt.objects.exists()
    assert not Finding.objects.filter(kind__icontains="conflict").exists()
    # The recovered comment is planned for review once, like a webhook's.
    assert ReplyAction.objects.filter(event=events[missed], delivery_state="REVIEW_PENDING").count() == 1
    assert ReplyAction.objects.count() == 2
    # The account's own reply is evidence, never an event.
    assert SelfAuthoredItem.objects.filter(provider_id=own).exists()
    if platform == "instagram":
        # The notification's stand-in time is corrected from the comment's timestamp.
        assert not events[delivered].occurred_at_original.startswith("approx:")
    # A second scan changes nothing.
    assert scan(source).state == "published"
    assert InboundEvent.objects.count() == 2 and ReplyAction.objects.count() == 2


def test_an_expired_cursor_mid_scan_loses_nothing(graph, settings):
    settings.CONDUIT_RECONCILE_PAGE_SIZE = 10
    source = instagram(graph)
    made = [
        comment(graph, IG_ACCOUNT, {"media_id": f"1800000000000000{m}"}, f"price {i}", notify=False)
        for m in range(3)
        for i in range(30)
    ]
    pages = 0
    while True:
        outcome = reconcile_page(source=source, trigger="command", actor="tester")
        pages += 1
        if outcome.state != "staged":
            break
        if pages in (2, 5):
            sim(graph, "/_sim/faults", {"mode": "expire_cursors"})  # every cursor issued so far dies
    assert outcome.state == "published" and pages > 5
    assert sorted(InboundEvent.objects.values_list("message_ref", flat=True)) == sorted(made)


def test_history_before_connection_fills_the_ledger_not_the_queue(graph):
    source = instagram(graph)
    comment(graph, IG_ACCOUNT, {"media_id": "18000000000000001"}, "price?", notify=False)
    Source.objects.filter(pk=source.pk).update(connected_at="2999-01-01T00:00:00Z")
    assert scan(Source.objects.get(pk=source.pk)).state == "published"
    event = InboundEvent.objects.get()
    assert event.event_state == "CLOSED_NO_REPLY" and not ReplyAction.objects.exists()


def test_a_token_meta_refuses_is_a_credentials_failure(graph):
    source = instagram(graph)
    sim(graph, "/_sim/faults", {"mode": "error", "code": 190, "subcode": 460, "status": 400, "count": 5})
    outcome = reconcile_page(source=source, trigger="command", actor="tester")
    assert outcome.state == "failed"
    assert (outcome.error.error_class, outcome.error.code) == ("credentials", "graph_token_invalid")


def test_throttling_waits_as_long_as_meta_says(graph):
    from reconcile.models import ScanState

    source = instagram(graph)
    sim(graph, "/_sim/faults", {"mode": "error", "code": 80002, "status": 400, "retry_minutes": 30})
    before = time.time()
    outcome = reconcile_page(source=source, trigger="command", actor="tester")
    assert outcome.error.code == "graph_throttled"
    due = ScanState.objects.get(source=source).next_due_at.timestamp()
    assert due - before >= 30 * 60 - 5


def test_a_killed_scan_resumes_where_it_stopped(graph, settings, monkeypatch):
    """A reconcile process killed mid-scan (SIGKILL, between pages) leaves its committed pages; the
    next run continues the same generation and loses nothing."""
    settings.CONDUIT_RECONCILE_PAGE_SIZE = 10
    source = instagram(graph)
    made = [
        comment(graph, IG_ACCOUNT, {"media_id": f"1800000000000000{m}"}, f"price {i}", notify=False)
        for m in range(4)
        for i in range(20)
    ]
    env = {
        **subprocess_env(),
        SECRET_ENV: APP_SECRET,
        VERIFY_ENV: "v",
        TOKEN_ENV: "graph-token-test-only",
        "CONDUIT_RECONCILE_PAGE_SIZE": "10",
    }
    # Every Graph call takes 300 ms, so the scan is still running when it is killed.
    sim(graph, "/_sim/faults", {"mode": "latency", "latency_ms": 300, "count": 1000})
    process = subprocess.Popen(
        [sys.executable, "manage.py", "reconcile", "ig-test", "--wait", "0"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 60
        from reconcile.models import ReconcileRun

        while (
            time.time() < deadline and not ReconcileRun.objects.filter(source=source, pages__gte=1).exists()
        ):
            time.sleep(0.2)
            if process.poll() is not None:
                break
        assert ReconcileRun.objects.filter(source=source, pages__gte=1).exists(), "no page was committed"
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
    run = ReconcileRun.objects.get(source=source)
    assert run.state == "SCANNING" and run.cursor, "the scan finished before it was killed"
    sim(graph, "/_sim/faults", {"mode": "clear"})
    from reconcile.models import ScanState

    # The dead holder's lease runs out (here at once, rather than in CONDUIT_RECONCILE_LEASE_SECONDS).
    ScanState.objects.filter(source=source).update(lease_expires_at="2000-01-01T00:00:00Z")
    outcome = scan(source)
    assert outcome.state == "published" and outcome.run_id == run.pk
    assert sorted(InboundEvent.objects.values_list("message_ref", flat=True)) == sorted(made)


def test_doctor_names_a_refused_token_and_a_lost_subscription(graph, capsys):
    from django.core.management import call_command

    source = instagram(graph)
    sim(
        graph,
        "/_sim/faults",
        {"mode": "error", "code": 190, "subcode": 463, "status": 400, "path_contains": "/media"},
    )
    reconcile_page(source=source, trigger="command", actor="tester")
    with pytest.raises(SystemExit) as exited:
        call_command("doctor")
    out = capsys.readouterr().out
    assert exited.value.code == 1
    assert "ig-test" in out and "access token was refused (graph_token_invalid)" in out
    assert "subscription      ok" in out
    # Meta unsubscribes silently: doctor reads subscribed_apps and says so.
    sim(graph, "/_sim/subscriptions", {"account": IG_ACCOUNT, "app_id": APP_ID, "fields": []})
    with pytest.raises(SystemExit):
        call_command("doctor")
    out = capsys.readouterr().out
    assert f"app {APP_ID} is not subscribed to account {IG_ACCOUNT}" in out
    assert Source.objects.get(pk=source.pk).subscription_problem


def test_the_daily_check_records_missing_fields(graph):
    from reconcile.tasks import subscriptions_check

    source = instagram(graph)
    assert subscriptions_check() == 0
    sim(graph, "/_sim/subscriptions", {"account": IG_ACCOUNT, "app_id": APP_ID, "fields": ["live_comments"]})
    assert subscriptions_check() == 1
    assert Source.objects.get(pk=source.pk).subscription_problem.endswith("comments, messages")


def test_doctor_warns_a_week_before_a_token_expires(graph):
    """docs/platforms/meta.md#token-health: doctor warns when a token's expiry (the debug-token read, where the token type
    allows) is within 7 days; a Page token that never expires (0) raises nothing."""
    from datetime import timedelta

    from django.utils import timezone

    from reconcile.tasks import subscriptions_check

    source = page(graph)
    assert subscriptions_check() == 0  # expires_at 0: never
    sim(graph, "/_sim/token", {"expires_at": int((timezone.now() + timedelta(days=30)).timestamp())})
    assert subscriptions_check() == 0
    sim(graph, "/_sim/token", {"expires_at": int((timezone.now() + timedelta(days=3)).timestamp())})
    assert subscriptions_check() == 1
    assert "the access token expires" in Source.objects.get(pk=source.pk).subscription_problem
    sim(graph, "/_sim/token", {"expires_at": 0, "is_valid": False})
    assert subscriptions_check() == 1
    assert "no longer valid" in Source.objects.get(pk=source.pk).subscription_problem


def test_an_instagram_login_token_has_no_expiry_read(graph):
    """graph.instagram.com has no debug_token: the check reads nothing there and warns nothing."""
    from datetime import timedelta

    from django.utils import timezone

    from reconcile.tasks import subscriptions_check

    instagram(graph)
    sim(graph, "/_sim/token", {"expires_at": int((timezone.now() + timedelta(days=1)).timestamp())})
    assert subscriptions_check() == 0
