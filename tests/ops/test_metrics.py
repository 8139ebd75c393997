"""GET /metrics: who may read it, and a scrape over real ledger rows on PostgreSQL."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import fixture_body, sign

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "metrics-test-token-not-secret"


def scrape(client, **extra) -> dict[tuple[str, tuple], float]:
    response = client.get("/metrics", REMOTE_ADDR="127.0.0.1", **extra)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    return samples(response.content.decode())


def samples(text: str) -> dict[tuple[str, tuple], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(found: dict, name: str, **labels) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


# -- who may read it ------------------------------------------------------------------------------


@pytest.fixture
def no_token(settings):
    """No token, and the deployment's word that no proxy stands in front (CONDUIT_METRICS_LOOPBACK=on)."""
    settings.CONDUIT_METRICS_TOKEN = ""
    settings.CONDUIT_METRICS_LOOPBACK = True


@pytest.fixture
def no_token_no_word(settings):
    """No token, and the deployment said nothing about a proxy (the default)."""
    settings.CONDUIT_METRICS_TOKEN = ""
    settings.CONDUIT_METRICS_LOOPBACK = False


@pytest.fixture
def token(settings):
    settings.CONDUIT_METRICS_TOKEN = TOKEN


def status_from(client, address: str, **headers) -> int:
    return client.get("/metrics", REMOTE_ADDR=address, headers=headers).status_code


def refusal_code(response) -> str:
    return response.content.decode().split("\n", 1)[0]


@pytest.mark.django_db
@pytest.mark.usefixtures("no_token")
def test_without_a_token_only_loopback_connections_may_read(client):
    """docs/reference/http.md#metrics-access: no token, CONDUIT_METRICS_LOOPBACK=on: connections from
    this host only; loopback is the connection's, not the headers'."""
    assert status_from(client, "127.0.0.1") == 200
    assert status_from(client, "::1") == 200
    refused = client.get("/metrics", REMOTE_ADDR="10.0.0.5")
    assert (refused.status_code, refusal_code(refused)) == (403, "metrics_loopback_only")
    assert status_from(client, "192.0.2.7") == 403
    # The deployment said no proxy stands in front: headers change nothing either way.
    assert status_from(client, "127.0.0.1", **{"X-Forwarded-For": "203.0.113.9"}) == 200
    assert status_from(client, "10.0.0.5", **{"X-Forwarded-For": "127.0.0.1"}) == 403


@pytest.mark.django_db
@pytest.mark.usefixtures("no_token_no_word")
def test_without_a_token_or_the_loopback_word_nothing_is_served_and_the_body_says_why(client):
    """docs/reference/http.md#metrics-access: no token and no CONDUIT_METRICS_LOOPBACK=on: refused, even from loopback."""
    for address in ("127.0.0.1", "::1", "10.0.0.5"):
        refused = client.get("/metrics", REMOTE_ADDR=address)
        assert (refused.status_code, refusal_code(refused)) == (403, "metrics_loopback_off"), address
    text = refused.content.decode()
    assert "CONDUIT_METRICS_TOKEN" in text and "CONDUIT_METRICS_LOOPBACK=on" in text
    assert "conduit_" not in text  # no sample leaks with the refusal


@pytest.mark.django_db
@pytest.mark.usefixtures("no_token")
def test_positive_control_the_loopback_test_catches_a_guard_taken_away(client, monkeypatch):
    monkeypatch.setattr("conduit.metrics._loopback_connection", lambda request: True)
    # With the guard gone, the check the test above makes would see 200, not 403.
    assert status_from(client, "10.0.0.5") == 200


def test_the_loopback_word_and_a_tls_proxy_are_refused_together():
    """CONDUIT_METRICS_LOOPBACK=on says no proxy is in front; CONDUIT_BEHIND_TLS_PROXY=on that one is."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "conduit.settings",
        "PYTHONPATH": str(ROOT),
        "CONDUIT_METRICS_LOOPBACK": "on",
        "CONDUIT_BEHIND_TLS_PROXY": "on",
    }
    started = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert started.returncode != 0
    assert "CONDUIT_METRICS_LOOPBACK=on" in started.stderr and "CONDUIT_METRICS_TOKEN" in started.stderr


@pytest.mark.django_db
@pytest.mark.usefixtures("token")
def test_with_a_token_a_bearer_must_present_it_from_anywhere(client, settings):
    assert status_from(client, "10.0.0.5", Authorization=f"Bearer {TOKEN}") == 200
    missing = client.get("/metrics", REMOTE_ADDR="10.0.0.5")
    assert missing.status_code == 401
    assert missing["WWW-Authenticate"].startswith("Bearer")
    assert status_from(client, "10.0.0.5", Authorization="Bearer wrong") == 403
    assert status_from(client, "10.0.0.5", Authorization=f"Basic {TOKEN}") == 401
    # Loopback is no exemption once a token is set, whatever the deployment says of proxies.
    assert status_from(client, "127.0.0.1") == 401
    settings.CONDUIT_METRICS_LOOPBACK = True
    assert status_from(client, "127.0.0.1") == 401
    refused = client.get("/metrics", REMOTE_ADDR="10.0.0.5", headers={"Authorization": "Bearer wrong"})
    assert TOKEN not in refused.content.decode()


@pytest.mark.django_db
@pytest.mark.usefixtures("token")
def test_positive_control_the_token_test_catches_a_comparison_taken_away(client, monkeypatch):
    monkeypatch.setattr("conduit.metrics.hmac.compare_digest", lambda a, b: True)
    assert status_from(client, "10.0.0.5", Authorization="Bearer wrong") == 200


# -- what it says ---------------------------------------------------------------------------------


@pytest.fixture
def rows(sandbox_source, client):
    """Real rows: webhook deliveries (accepted, duplicate, quarantined) and ledger states set up."""
    from django_q.models import OrmQ, Task

    from reconcile.lease import scan_state_for
    from replies.models import ReplyAction, ReplyTransition

    def post(body: bytes, **sign_kw):
        return client.post(
            "/webhooks/sandbox/", data=body, content_type="application/json", headers=sign(body, **sign_kw)
        )

    assert post(fixture_body("comment__northstar"), delivery_id="msg_test_m1").status_code == 200
    assert post(fixture_body("comment__northstar"), delivery_id="msg_test_m1").status_code == 200
    assert post(fixture_body("comment__northstar"), secret="whsec_" + "A" * 44).status_code == 401
    assert (
        client.post("/webhooks/made-up-name/", data=b"{}", content_type="application/json").status_code == 404
    )

    now = timezone.now()
    first, second = ReplyAction.objects.order_by("id")
    ReplyAction.objects.filter(pk=first.pk).update(delivery_state="SEND_STATUS_UNKNOWN")
    ReplyTransition.objects.create(
        action=first,
        ledger="reply_action",
        prior_state="SENDING",
        next_state="SEND_STATUS_UNKNOWN",
        at=now - timedelta(hours=2),
        actor="test",
        reason_code="test",
    )
    ReplyAction.objects.filter(pk=second.pk).update(
        delivery_state="APPROVED", approved_at=now - timedelta(minutes=20)
    )

    state = scan_state_for(sandbox_source)
    state.last_completed_at = now - timedelta(hours=3)
    state.interval_seconds = 3600
    state.failures = 4
    state.last_error_class = "credentials"
    state.save()
    OrmQ.objects.create(key="conduit", payload="x", lock=now - timedelta(seconds=5))
    Task.objects.create(
        id="t" * 32, name="hb", func="replies.tasks.send_due", started=now, stopped=now, success=True
    )
    return {"now": now, "completed": state.last_completed_at}


@pytest.fixture
def before(client, sandbox_source, no_token):
    return scrape(client)


def test_scrape_with_real_rows_shows_the_right_values(client, before, rows):
    found = scrape(client)

    def delta(name, **labels):
        return value(found, name, **labels) - value(before, name, **labels)

    assert delta("conduit_webhook_requests_total", source="sandbox", status="200") == 2
    assert delta("conduit_webhook_requests_total", source="sandbox", status="401") == 1
    # A name nobody registered never becomes a label of its own.
    assert delta("conduit_webhook_requests_total", source="_unregistered", status="404") == 1
    assert not any(labels and ("source", "made-up-name") in labels for _, labels in found)
    assert delta("conduit_events_total", source="sandbox", result="accepted") == 1
    assert delta("conduit_events_total", source="sandbox", result="duplicate") == 1

    assert value(found, "conduit_quarantine_waiting", source="sandbox") == 1
    assert value(found, "conduit_reply_actions", state="SEND_STATUS_UNKNOWN") == 1
    assert value(found, "conduit_reply_actions", state="APPROVED") == 1
    assert value(found, "conduit_reply_actions", state="REVIEW_PENDING") == 0
    assert value(found, "conduit_unknown_sends_waiting") == 1
    assert 7200 <= value(found, "conduit_unknown_send_oldest_age_seconds") < 7260
    assert 1200 <= value(found, "conduit_send_due_oldest_age_seconds") < 1260
    completed = rows["completed"].timestamp()
    assert value(
        found, "conduit_reconcile_last_complete_timestamp_seconds", source="sandbox"
    ) == pytest.approx(completed)
    assert 10800 <= value(found, "conduit_reconcile_lag_seconds", source="sandbox") < 10860
    assert value(found, "conduit_reconcile_interval_seconds", source="sandbox") == 3600
    assert value(found, "conduit_reconcile_failure_streak", source="sandbox") == 4
    assert value(found, "conduit_sources_needing_reauth") == 1
    assert value(found, "conduit_queue_depth") == 1
    assert value(found, "conduit_ledger_up") == 1
    for check in ("database", "migrations", "workers", "worker_stall"):
        assert value(found, "conduit_ready", check=check) == 1
    # A task waits in the queue, and one finished since: no stall (the gauge counts from that finish).
    assert ("conduit_worker_stall_seconds", ()) in found
    assert value(found, "conduit_worker_stall_seconds") < 5


@pytest.mark.usefixtures("no_token")
def test_the_stall_gauge_counts_work_due_with_no_task_finished(client, db):
    """docs/operations.md#watchdog: seconds since work became due, while no task finished since."""
    from django_q.conf import Conf
    from django_q.models import OrmQ, Schedule, Task
    from django_q.signing import SignedPackage

    Schedule.objects.all().delete()
    now = timezone.now()
    Task.objects.create(
        id="s" * 32,
        name="old",
        func="replies.tasks.send_due",
        started=now - timedelta(seconds=400),
        stopped=now - timedelta(seconds=400),
        success=True,
    )
    OrmQ.objects.create(
        key=Conf.CLUSTER_NAME,
        lock=now + timedelta(seconds=60),
        payload=SignedPackage.dumps(
            {"func": "replies.tasks.send_reply", "started": now - timedelta(seconds=300)}
        ),
    )
    assert 300 <= value(scrape(client), "conduit_worker_stall_seconds") < 360


@pytest.mark.usefixtures("no_token")
def test_scrape_cost_does_not_grow_with_the_ledgers(client, before, rows, django_assert_max_num_queries):
    """docs/benchmarks.md#scrape: "Scrape cost stays flat as tables grow": the same statements whatever the rows."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as with_rows:
        scrape(client)
    from ingress.models import InboundEvent

    template = InboundEvent.objects.get()
    for n in range(40):
        template.pk = None
        template.event_key = f"evt_test_extra_{n}"
        template.save()
    with CaptureQueriesContext(connection) as with_more:
        scrape(client)
    assert len(with_more.captured_queries) == len(with_rows.captured_queries)
    # No statement reads the event history (the table that grows fastest).
    assert not any("inbound_events" in q["sql"] for q in with_more.captured_queries)


def test_the_sender_hook_observes_seconds_by_transport_and_outcome():
    from conduit.metrics import LOCAL_REGISTRY, observe_send

    def count() -> float:
        return (
            LOCAL_REGISTRY.get_sample_value(
                "conduit_send_seconds_count", {"transport": "sandbox", "outcome": "SENT"}
            )
            or 0.0
        )

    class Action:
        route = "sandbox"

    @observe_send(transport_of=lambda action: action.route)
    def deliver(action, now):
        return "SENT"

    start = count()
    assert deliver(Action(), timezone.now()) == "SENT"
    assert count() == start + 1


def test_the_reconcile_hook_counts_page_failures_by_source_and_class():
    from conduit.metrics import LOCAL_REGISTRY, page_failure_counted

    def count() -> float:
        return (
            LOCAL_REGISTRY.get_sample_value(
                "conduit_reconcile_page_failures_total", {"source": "graph", "class": "credentials"}
            )
            or 0.0
        )

    start = count()
    page_failure_counted(source="graph", error_class="credentials")
    assert count() == start + 1


WORKER = """
import sys
from conduit.metrics import EVENTS, SEND_SECONDS, WEBHOOK_REQUESTS
WEBHOOK_REQUESTS.labels(source="sandbox", status="200").inc(int(sys.argv[1]))
EVENTS.labels(source="sandbox", result="accepted").inc()
SEND_SECONDS.labels(transport="sandbox", outcome="SENT").observe(0.3)
"""

SUPERVISOR = """
from conduit.metrics import WATCHDOG_RESTARTS
WATCHDOG_RESTARTS.labels(due="queued_task").inc()
"""

SCRAPER = """
import django
django.setup()
from conduit.metrics import exposition
sys_out = exposition().decode()
print(sys_out)
"""


def test_multiprocess_mode_sums_every_process(tmp_path):
    """docs/operations.md#metrics: "correct across gunicorn workers": three processes count, a fourth scrapes the sum."""
    env = {
        **os.environ,
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path),
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "conduit.settings",
        "CONDUIT_METRICS_TOKEN": "",
        # The scraping process reads no ledger here: a database nobody listens on.
        "DATABASE_URL": "postgres://nobody@127.0.0.1:9/none",
    }
    for n in (1, 2, 4):
        subprocess.run([sys.executable, "-c", WORKER, str(n)], env=env, check=True, cwd=ROOT, timeout=60)
    # The worker node's supervisor counts its restarts in the same directory.
    subprocess.run([sys.executable, "-c", SUPERVISOR], env=env, check=True, cwd=ROOT, timeout=60)
    assert len(list(tmp_path.glob("*.db"))) >= 3  # one file per process and kind
    out = subprocess.run(
        [sys.executable, "-c", SCRAPER],
        env=env,
        check=True,
        cwd=ROOT,
        timeout=60,
        capture_output=True,
        text=True,
    ).stdout
    found = samples(out)
    assert value(found, "conduit_webhook_requests_total", source="sandbox", status="200") == 7
    assert value(found, "conduit_events_total", source="sandbox", result="accepted") == 3
    assert value(found, "conduit_send_seconds_count", transport="sandbox", outcome="SENT") == 3
    assert value(found, "conduit_send_seconds_bucket", transport="sandbox", outcome="SENT", le="0.5") == 3
    assert value(found, "conduit_worker_watchdog_restarts_total", due="queued_task") == 1
    # The ledgers did not answer: said so, and readiness shows it, without failing the scrape.
    assert value(found, "conduit_ledger_up") == 0
    assert value(found, "conduit_ready", check="database") == 0


# -- the demo, which runs with no proxy in front -------------------------------------------------


def run_demo_setup(env_file: Path) -> subprocess.CompletedProcess:
    """scripts/demo up to its first step, migrate, which fails on a database nobody listens on:
    the env file is written (or completed) by then, and nothing was started."""
    env = {
        **os.environ,
        "DEMO_ENV_FILE": str(env_file),
        "DEMO_DATABASE_URL": "postgres://nobody@127.0.0.1:9/none",
    }
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "demo")],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode != 0 and "FAILED: migrate the database" in done.stderr, done.stdout + done.stderr
    return done


def loopback_lines(env_file: Path) -> list[str]:
    return [
        line for line in env_file.read_text().splitlines() if line.startswith("CONDUIT_METRICS_LOOPBACK=")
    ]


def test_the_demo_says_no_proxy_stands_in_front_in_the_env_it_writes_and_in_an_older_one(tmp_path):
    fresh = tmp_path / "fresh.env"
    run_demo_setup(fresh)
    assert loopback_lines(fresh) == ["CONDUIT_METRICS_LOOPBACK=on"]
    # A .demo.env an older demo wrote lacks the line: it is added once, and never twice.
    older = tmp_path / "older.env"
    older.write_text("SECRET_KEY=demo-only-not-secret-older-file\n")
    assert "added CONDUIT_METRICS_LOOPBACK=on" in run_demo_setup(older).stdout
    run_demo_setup(older)
    assert loopback_lines(older) == ["CONDUIT_METRICS_LOOPBACK=on"]
    # An operator's own choice stays.
    chosen = tmp_path / "chosen.env"
    chosen.write_text("SECRET_KEY=demo-only-not-secret-chosen\nCONDUIT_METRICS_LOOPBACK=off\n")
    run_demo_setup(chosen)
    assert loopback_lines(chosen) == ["CONDUIT_METRICS_LOOPBACK=off"]
