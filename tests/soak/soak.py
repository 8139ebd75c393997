"""make soak: Conduit on several nodes, killed and restarted under signed traffic, then checked.

Starts, all on loopback in a temporary directory: a PostgreSQL primary and a streaming hot standby
made with `pg_basebackup -R` (DATABASE_REPLICA_URL), redis-server (CONDUIT_Q_BROKER), the
`manage.py sandbox_provider` (idempotency keys off: it applies every POST it gets, so its counts
show every send Conduit made), `deploy/entrypoint.sh migrate`, three `deploy/entrypoint.sh web`
gunicorn nodes and two `deploy/entrypoint.sh worker` qcluster nodes. Client threads then post
signed deliveries spread round-robin over the web nodes: about a third re-send an earlier
delivery (same id, same body, signed anew), some are first sent with the response dropped (the
client closes its socket before reading) and then sent again; a request that fails or gets a 503
is retried on the next node, and only a 200 acknowledges. A reviewer thread approves every
planned reply as it appears. Mid-run one web node and one worker node are killed with SIGKILL
(their whole process group) and restarted. Then it waits for the replies to finish and checks
(tests/soak/checks.py), printing PASS or FAIL per check, the figures, and exits 1 on any FAIL.

Two settings differ from production, both to keep the drain bounded: CONDUIT_SEND_LEASE_SECONDS
is 20 (a send cut by the killed worker is parked SEND_STATUS_UNKNOWN after 20 s, not 120), and
with --quick the driver queues the schedules' own tasks (send_due, sweep_sending) on Redis every
few seconds while it waits, as django-q2's scheduler does once a minute; the full soak waits for
the real schedules. Reconciliation is out of scope: the soak source's first scan is put a day
ahead (the provider holds none of its comments).

    scripts/soak [--quick] [--seconds N] [--clients N] [--break duplicate-send]
"""

from __future__ import annotations

import argparse
import base64
import http.client
import itertools
import json
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.soak import checks  # noqa: E402 (after the sys.path entry above)

ACCOUNT = "acct_test_soak"
SOURCE = "soak"
PURPOSES = ["public_ack", "private_delivery"]
SECRET_ENV = "CONDUIT_SOURCE_SOAK_SECRET"
# A signing secret made for this run only; it signs nothing real.
SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
OPEN_STATES = ("REVIEW_PENDING", "APPROVED", "SENDING", "FAILED_BEFORE_SEND")
QUEUE_KEY = "django_q:conduit:q"  # django-q2's Redis list for the cluster named "conduit"


def say(message: str) -> None:
    print(f"soak: {message}", flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pg_bin() -> Path:
    found = os.environ.get("PGBIN") or max(
        (str(p.parent) for p in Path("/usr/lib/postgresql").glob("*/bin/pg_basebackup")), default=""
    )
    if not found or not (Path(found) / "initdb").exists():
        raise SystemExit(
            "soak: FAIL: PostgreSQL server binaries not found (Debian: apt-get install postgresql)"
        )
    return Path(found)


class Nodes:
    """Every process the soak starts, each in its own session so a kill takes its whole tree."""

    def __init__(self, work: Path):
        self.work = work
        self.logs = work / "logs"
        self.logs.mkdir()
        self.procs: dict[str, subprocess.Popen] = {}
        self.specs: dict[str, tuple[list[str], dict]] = {}
        self.starts: Counter[str] = Counter()

    def start(self, name: str, argv: list[str], env: dict) -> subprocess.Popen:
        self.specs[name] = (argv, env)
        self.starts[name] += 1
        log = open(self.logs / f"{name}.{self.starts[name]}.log", "wb")
        proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()
        self.procs[name] = proc
        return proc

    def restart(self, name: str) -> subprocess.Popen:
        return self.start(name, *self.specs[name])

    def kill9(self, name: str) -> None:
        """SIGKILL the node's whole process group (its session), as if its host died."""
        proc = self.procs[name]
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()

    def alive(self, name: str) -> bool:
        return self.procs[name].poll() is None

    def log_tail(self, name: str, chars: int = 1500) -> str:
        path = self.logs / f"{name}.{self.starts[name]}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def stop_all(self) -> None:
        """SIGTERM each group once, then SIGKILL whatever is left after 5 s."""
        for proc in self.procs.values():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 5
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            try:  # the group may outlive its leader (a qcluster's children)
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()


class Postgres:
    """A primary and its streaming hot standby (pg_basebackup -R), as tests/replica makes one."""

    def __init__(self, work: Path, options: str):
        self.bin = pg_bin()
        self.work = work / "pg"
        self.work.mkdir()
        self.runas: list[str] = []
        if os.geteuid() == 0:
            # PostgreSQL refuses to run as root: run it as the unprivileged postgres user.
            if subprocess.run(["id", "postgres"], capture_output=True, check=False).returncode:
                subprocess.run(["useradd", "--system", "--no-create-home", "postgres"], check=True)
            shutil.chown(self.work, "postgres")
            self.runas = ["runuser", "-u", "postgres", "--"]
        self.options = options
        self.primary_port = free_port()
        self.standby_port = free_port()
        self.started: list[Path] = []

    def _run(self, *argv: str, timeout: float = 120) -> None:
        try:
            subprocess.run([*self.runas, *argv], check=True, capture_output=True, text=True, timeout=timeout)
        except subprocess.CalledProcessError as exc:
            raise SystemExit(f"soak: FAIL: {Path(argv[0]).name}: {exc.stderr[-1500:]}") from None

    def start(self) -> None:
        primary, standby = self.work / "primary", self.work / "standby"
        self._run(
            str(self.bin / "initdb"),
            "-D",
            str(primary),
            "-U",
            "conduit",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-locale",
        )
        self._run(
            str(self.bin / "pg_ctl"),
            "-D",
            str(primary),
            "-l",
            str(self.work / "primary.log"),
            "-w",
            "-o",
            f"-p {self.primary_port} -k {self.work} -c listen_addresses=127.0.0.1 "
            f"-c max_connections=200 {self.options}",
            "start",
        )
        self.started.append(primary)
        self._run(
            str(self.bin / "createdb"),
            "-h",
            "127.0.0.1",
            "-p",
            str(self.primary_port),
            "-U",
            "conduit",
            "conduit",
        )
        # wal_level replica and loopback replication connections are initdb's defaults.
        self._run(
            str(self.bin / "pg_basebackup"),
            "-h",
            "127.0.0.1",
            "-p",
            str(self.primary_port),
            "-U",
            "conduit",
            "-D",
            str(standby),
            "-R",
            "-X",
            "stream",
            "-c",
            "fast",
        )
        self._run(
            str(self.bin / "pg_ctl"),
            "-D",
            str(standby),
            "-l",
            str(self.work / "standby.log"),
            "-w",
            "-o",
            f"-p {self.standby_port} -k {self.work} -c listen_addresses=127.0.0.1 -c hot_standby=on "
            f"-c max_connections=200 {self.options}",
            "start",
        )
        self.started.append(standby)

    def url(self, port: int) -> str:
        return f"postgres://conduit@127.0.0.1:{port}/conduit"

    def dsn(self, port: int) -> str:
        return f"host=127.0.0.1 port={port} user=conduit dbname=conduit"

    def stop(self) -> None:
        for data in reversed(self.started):
            subprocess.run(
                [*self.runas, str(self.bin / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                capture_output=True,
                timeout=60,
                check=False,
            )


def start_redis(nodes: Nodes) -> str:
    server = shutil.which("redis-server")
    if server is None:
        raise SystemExit(
            "soak: FAIL: redis-server not found (Debian: apt-get install redis-server; .ci/run installs it)"
        )
    port = free_port()
    (nodes.work / "redis").mkdir()
    nodes.start(
        "redis",
        [
            server,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(nodes.work / "redis"),
            "--save",
            "",
            "--appendonly",
            "no",
        ],
        dict(os.environ),
    )
    deadline = time.monotonic() + 20
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return f"redis://127.0.0.1:{port}/0"
        except OSError:
            pass
        if time.monotonic() > deadline or not nodes.alive("redis"):
            raise SystemExit(f"soak: FAIL: redis-server did not answer PING: {nodes.log_tail('redis')}")
        time.sleep(0.05)


def http_get(port: int, path: str, timeout: float = 5) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path, headers={"Host": "127.0.0.1"})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def wait_http(nodes: Nodes, name: str, port: int, path: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            if http_get(port, path)[0] == 200:
                return
        except OSError:
            pass
        if not nodes.alive(name):
            raise SystemExit(f"soak: FAIL: {name} exited: {nodes.log_tail(name)}")
        if time.monotonic() > deadline:
            raise SystemExit(f"soak: FAIL: {name} did not answer {path} within {seconds:.0f} s")
        time.sleep(0.2)


def wait_worker(nodes: Nodes, name: str, redis_client, before: set, seconds: float = 60) -> None:
    """A qcluster is up when a new cluster's stat key appears in Redis."""
    deadline = time.monotonic() + seconds
    while set(redis_client.keys("django_q:conduit:cluster*")) <= before:
        if not nodes.alive(name):
            raise SystemExit(f"soak: FAIL: {name} exited: {nodes.log_tail(name)}")
        if time.monotonic() > deadline:
            raise SystemExit(f"soak: FAIL: {name} did not start within {seconds:.0f} s")
        time.sleep(0.2)


class Ledger:
    """What the clients sent and saw, shared by their threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.deliveries: list[checks.SentDelivery] = []
        self.acked: list[checks.SentDelivery] = []
        self.latencies: list[float] = []
        self.statuses: Counter = Counter()
        self.counts: Counter = Counter()
        self.event_numbers = itertools.count(1)
        self.node_turn = itertools.count()


class Driver:
    """Client threads posting signed deliveries over the web nodes, retrying on another node."""

    def __init__(self, ports: list[int], ledger: Ledger, seed: int):
        self.ports = ports
        self.ledger = ledger
        self.seed = seed
        from conduit.providers.sandbox import standard_webhooks

        self.webhooks = standard_webhooks
        self.key = standard_webhooks.secret_key(SECRET)

    def headers(self, delivery: checks.SentDelivery, body: bytes) -> dict[str, str]:
        # A provider signs every attempt anew (its timestamp is the attempt's), same id, same body.
        timestamp = str(int(time.time()))
        return {
            "Content-Type": "application/json",
            "Host": "127.0.0.1",
            "webhook-id": delivery.delivery_id,
            "webhook-timestamp": timestamp,
            "webhook-signature": self.webhooks.signature(
                key=self.key, delivery_id=delivery.delivery_id, timestamp=timestamp, body=body
            ),
        }

    def new_delivery(self, rng: random.Random) -> tuple[checks.SentDelivery, bytes]:
        events = []
        for _ in range(rng.randint(1, 3)):
            n = next(self.ledger.event_numbers)
            events.append(
                {
                    "id": f"evt_test_soak_{n:06d}",
                    "type": "comment.created",
                    "post_id": "post_test_soak",
                    "comment_id": f"msg_test_soak_{n:06d}",
                    "from_id": f"person_test_{n % 97:03d}",
                    "created_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    # Half the comments ask for the checklist: two replies planned for each.
                    "text": "please send the CHECKLIST" if n % 2 else "nice post",
                }
            )
        body = json.dumps({"account": ACCOUNT, "events": events}).encode()
        delivery = checks.SentDelivery(
            f"msg_test_soak_{uuid.uuid4().hex}", [e["id"] for e in events], body=body
        )
        with self.ledger.lock:
            self.ledger.deliveries.append(delivery)
        return delivery, body

    def send_dropped(self, delivery: checks.SentDelivery, body: bytes, port: int) -> None:
        """Write the whole request, then close the socket without reading the answer."""
        head = "".join(f"{k}: {v}\r\n" for k, v in self.headers(delivery, body).items())
        request = (
            f"POST /webhooks/{SOURCE}/ HTTP/1.1\r\n{head}Content-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n"
        ).encode() + body
        with self.ledger.lock:
            delivery.attempts += 1
            self.ledger.counts["dropped responses"] += 1
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(request)
        except OSError:
            pass

    def deliver(
        self, delivery: checks.SentDelivery, body: bytes, node: int, give_up_after: float = 90
    ) -> bool:
        """POST until a 200, moving to the next node after a failure or a 503."""
        deadline = time.monotonic() + give_up_after
        for attempt in itertools.count():
            port = self.ports[(node + attempt) % len(self.ports)]
            with self.ledger.lock:
                delivery.attempts += 1
                if attempt:
                    self.ledger.counts["retries on another node"] += 1
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            started = time.perf_counter()
            try:
                conn.request("POST", f"/webhooks/{SOURCE}/", body=body, headers=self.headers(delivery, body))
                response = conn.getresponse()
                answer = response.read()
                elapsed = time.perf_counter() - started
                status = response.status
            except (OSError, http.client.HTTPException):
                status = None
            finally:
                conn.close()
            with self.ledger.lock:
                if status is None:
                    self.ledger.counts["requests failed (connection)"] += 1
                else:
                    self.ledger.statuses[status] += 1
                if status == 200:
                    delivery.acks += 1
                    self.ledger.latencies.append(elapsed)
                    for result in json.loads(answer)["results"]:
                        delivery.event_keys[delivery.event_ids[result["index"]]] = result["event_key"]
                    return True
            if time.monotonic() > deadline:
                with self.ledger.lock:
                    self.ledger.counts["deliveries given up"] += 1
                return False
            time.sleep(min(1.0, 0.05 * (attempt + 1)))
        return False

    def client(self, index: int, stop: threading.Event, drop_fraction: float, interval: float) -> None:
        """Post until stopped; with an interval, at most one delivery per interval (a paced client)."""
        rng = random.Random(self.seed * 1000 + index)
        next_at = time.monotonic() + rng.random() * interval
        while not stop.is_set():
            if interval:
                time.sleep(max(0.0, next_at - time.monotonic()))
                next_at = max(next_at + interval, time.monotonic() - 1)
            with self.ledger.lock:
                node = next(self.ledger.node_turn) % len(self.ports)
                pool = list(self.ledger.acked[-500:])
            if pool and rng.random() < 1 / 3:
                # A provider's redelivery of an earlier delivery: same id, same body.
                delivery = rng.choice(pool)
                with self.ledger.lock:
                    self.ledger.counts["duplicate deliveries"] += 1
                self.deliver(delivery, delivery.body, node)
                continue
            delivery, body = self.new_delivery(rng)
            if rng.random() < drop_fraction:
                self.send_dropped(delivery, body, self.ports[node])
                node += 1
            if self.deliver(delivery, body, node):
                with self.ledger.lock:
                    self.ledger.acked.append(delivery)


def setup_django(env: dict) -> None:
    os.environ.update(env)
    import django

    django.setup()


def register_source(provider_url: str) -> None:
    from django.utils import timezone as dj_timezone

    from ingress.services import source_register, source_update
    from reconcile.lease import scan_state_for
    from reconcile.models import ScanState
    from replies.services import reply_copy_create, reply_route_declare

    source, _ = source_register(
        name=SOURCE,
        adapter="sandbox-social",
        account_ref=ACCOUNT,
        event_types=["comment.created"],
        purposes=PURPOSES,
        trigger_keywords=["CHECKLIST"],
        secret_env=SECRET_ENV,
    )
    source = source_update(source_id=source.pk, changes={"source_url": provider_url})
    for purpose in PURPOSES:
        reply_route_declare(
            source_id=source.pk, purpose=purpose, transport_name="sandbox", target_url=provider_url
        )
        reply_copy_create(
            source_id=source.pk,
            purpose=purpose,
            channel=purpose,
            text="The synthetic checklist for the soak.",
            actor="soak",
        )
    # Reconciliation is not what the soak exercises: its first scan is a day ahead.
    scan_state_for(source)
    ScanState.objects.filter(source=source).update(next_due_at=dj_timezone.now() + timedelta(days=1))


REVIEWERS = 4


def approver(index: int, stop: threading.Event, counts: Counter, lock: threading.Lock) -> None:
    """One of REVIEWERS reviewers approving every planned reply as it appears (each its share of
    the ids), until told to stop and nothing of its share is pending."""
    from django.db import connection
    from django.db.models import F

    from replies.models import ReplyAction
    from replies.services import reply_approve

    try:
        while True:
            pending = list(
                ReplyAction.objects.filter(delivery_state="REVIEW_PENDING")
                .alias(share=F("id") % REVIEWERS)
                .filter(share=index)
                .order_by("id")
                .values_list("id", flat=True)[:200]
            )
            for action_id in pending:
                result = reply_approve(action_id=action_id, actor="soak_reviewer")
                with lock:
                    counts["approvals" if result.ok else "approvals refused"] += 1
            if not pending:
                if stop.is_set():
                    return
                time.sleep(0.3)
    finally:
        connection.close()


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def enqueue_schedules() -> None:
    """Queue the send and sweep schedules' own tasks on the broker, as django-q2's scheduler does."""
    from django_q.tasks import async_task

    async_task("replies.tasks.send_due", group="soak")
    async_task("replies.tasks.sweep_sending", group="soak")


def drain(redis_client, seconds: float, nudge: float) -> bool:
    """Wait until no reply is open and the queue is empty, printing progress; True if it drained."""
    from django.db import connection

    from replies.models import ReplyAction

    started = time.monotonic()
    last_print = last_nudge = 0.0
    while True:
        states = Counter(ReplyAction.objects.values_list("delivery_state", flat=True))
        queued = redis_client.llen(QUEUE_KEY)
        waiting = sum(states[s] for s in OPEN_STATES)
        now = time.monotonic() - started
        if waiting == 0 and queued == 0:
            say(f"drained in {now:.1f} s")
            connection.close()
            return True
        if now - last_print >= 3:
            last_print = now
            say(
                f"draining ({now:.0f} s): "
                + ", ".join(f"{s} {n}" for s, n in sorted(states.items()))
                + f"; {queued} tasks queued"
            )
        # Only with the queue empty: send_due queues every approved reply again, and more copies of
        # a queued send are no-ops (the claim) that only slow the drain.
        if nudge and queued == 0 and now - last_nudge >= nudge:
            last_nudge = now
            enqueue_schedules()
        if now > seconds:
            say(f"did not drain within {seconds:.0f} s")
            connection.close()
            return False
        time.sleep(0.5)


def stored_state(source_name: str):
    from ingress.models import Delivery, InboundEvent
    from replies.models import ReplyAction

    events = [
        checks.StoredEvent(*row)
        for row in InboundEvent.objects.filter(source__name=source_name).values_list(
            "event_key", "source_event_id", "seen_count", "trigger_match"
        )
    ]
    deliveries = [
        checks.StoredDelivery(*row)
        for row in Delivery.objects.filter(source__name=source_name).values_list(
            "delivery_id", "seen_count", "event_keys"
        )
    ]
    actions = [
        checks.StoredAction(*row)
        for row in ReplyAction.objects.filter(event__source__name=source_name).values_list(
            "reply_key", "event_id", "purpose", "delivery_state", "approval_state"
        )
    ]
    return events, deliveries, actions


def replica_check(pg: Postgres) -> checks.Check:
    """The standby, once it replayed everything the primary wrote, holds the same rows."""
    import psycopg

    query = (
        "SELECT (SELECT count(*) FROM inbound_events), (SELECT coalesce(sum(seen_count), 0) FROM "
        "inbound_events), (SELECT count(*) FROM reply_actions WHERE delivery_state = 'SENT')"
    )
    with (
        psycopg.connect(pg.dsn(pg.primary_port), autocommit=True) as primary,
        psycopg.connect(pg.dsn(pg.standby_port), autocommit=True) as standby,
    ):
        target = primary.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
        want = primary.execute(query).fetchone()
        deadline = time.monotonic() + 30
        while not standby.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [target]).fetchone()[0]:
            if time.monotonic() > deadline:
                return checks.Check(
                    "the replica holds what the primary holds", False, "it did not catch up in 30 s"
                )
            time.sleep(0.1)
        got = standby.execute(query).fetchone()
        recovering = standby.execute("SELECT pg_is_in_recovery()").fetchone()[0]
    detail = f"primary (events, receipts, sent) {tuple(want)}, replica {tuple(got)}, replica in recovery: {recovering}"
    return checks.Check(
        "the replica holds what the primary holds", tuple(want) == tuple(got) and recovering, detail
    )


def readiness_check(ports: list[int]) -> checks.Check:
    answers = []
    for port in ports:
        try:
            status, body = http_get(port, "/readyz")
            answers.append(status if status == 200 else f"{status} {body.decode(errors='replace')[:200]}")
        except OSError as exc:
            answers.append(type(exc).__name__)
    return checks.Check(
        "every web node ready", all(a == 200 for a in answers), "/readyz: " + ", ".join(map(str, answers))
    )


def provider_applied(port: int) -> dict[str, int]:
    status, body = http_get(port, "/applied", timeout=30)
    assert status == 200, status
    return json.loads(body)


def duplicate_send(port: int, actions: list[checks.StoredAction]) -> None:
    """--break duplicate-send: post one SENT reply to the provider a second time, as a double send would."""
    key = next(a.reply_key for a in actions if a.delivery_state == "SENT")
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    body = json.dumps({"reply_key": key, "text": "the same reply again"})
    conn.request("POST", "/replies", body=body, headers={"Content-Type": "application/json"})
    assert conn.getresponse().status == 201
    conn.close()
    say(f"--break duplicate-send: reply {key[:12]} posted to the provider a second time")


def kill_and_restart(nodes: Nodes, web_ports: list[int], redis_client, at, drive_started: float) -> None:
    """SIGKILL web1 at a quarter of the run and worker0 at half of it; restart each 2 s later."""
    at(0.25)
    nodes.kill9("web1")
    say(f"killed web1 (SIGKILL, whole process group) at {time.monotonic() - drive_started:.1f} s")
    time.sleep(2)
    nodes.restart("web1")
    wait_http(nodes, "web1", web_ports[1], "/healthz")
    say(f"web1 restarted and healthy at {time.monotonic() - drive_started:.1f} s")
    at(0.5)
    nodes.kill9("worker0")
    say(f"killed worker0 (SIGKILL, whole process group) at {time.monotonic() - drive_started:.1f} s")
    time.sleep(2)
    before = set(redis_client.keys("django_q:conduit:cluster*"))
    nodes.restart("worker0")
    wait_worker(nodes, "worker0", redis_client, before)
    say(f"worker0 restarted at {time.monotonic() - drive_started:.1f} s")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="the small run make test uses (about a minute)")
    parser.add_argument("--seconds", type=float, help="how long the clients post (quick 20, full 120)")
    parser.add_argument("--clients", type=int, help="client threads (quick 4, full 8)")
    parser.add_argument(
        "--rate",
        type=float,
        help="deliveries per second from all clients together, 0 for as fast as answered (quick 40, full 50)",
    )
    parser.add_argument(
        "--drop-fraction",
        type=float,
        default=0.1,
        help="share of new deliveries first sent with the response dropped",
    )
    parser.add_argument("--drain-seconds", type=float, help="longest wait for the replies to finish")
    parser.add_argument(
        "--break",
        dest="breakage",
        choices=["duplicate-send"],
        help="a positive control: spoil the run on purpose; the checks must then fail",
    )
    parser.add_argument("--no-kills", action="store_true", help="kill no node (for a short control run)")
    parser.add_argument("--seed", type=int, default=16)
    args = parser.parse_args(argv)
    args.seconds = args.seconds or (20.0 if args.quick else 120.0)
    args.clients = args.clients or (4 if args.quick else 8)
    args.rate = (40.0 if args.quick else 50.0) if args.rate is None else args.rate
    args.drain_seconds = args.drain_seconds or (90.0 if args.quick else 300.0)
    # The quick run queues the schedules' tasks itself while it waits; the full run waits for them.
    args.nudge = 3.0 if args.quick else 0.0
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # SIGTERM ends the run like Ctrl-C: the finally below stops every node it started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    begun = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="conduit-soak."))
    os.chmod(work, 0o755)
    nodes = Nodes(work)
    pg = Postgres(work, "-c fsync=off" if args.quick else "")
    stop = threading.Event()
    try:
        pg.start()
        redis_url = start_redis(nodes)
        say(f"PostgreSQL primary :{pg.primary_port}, streaming standby :{pg.standby_port}, Redis {redis_url}")
        empty_env_file = work / "empty.env"
        empty_env_file.write_text("")
        env = {
            **{k: v for k, v in os.environ.items() if k not in ("PROMETHEUS_MULTIPROC_DIR",)},
            "DATABASE_URL": pg.url(pg.primary_port),
            "DATABASE_REPLICA_URL": pg.url(pg.standby_port),
            "CONDUIT_Q_BROKER": redis_url,
            SECRET_ENV: SECRET,
            "SECRET_KEY": os.environ.get("SECRET_KEY") or "soak-only-not-secret",
            "DJANGO_SETTINGS_MODULE": "conduit.settings",
            "CONDUIT_ENV_FILE": str(empty_env_file),
            "CONDUIT_PYTHON": sys.executable,
            "CONDUIT_LOG_LEVEL": "WARNING",
            "CONDUIT_SEND_LEASE_SECONDS": "20",
            "CONDUIT_TRANSPORT_TIMEOUT_SECONDS": "5",
        }
        entry = ["bash", str(ROOT / "deploy" / "entrypoint.sh")]
        migrate = subprocess.run(
            [*entry, "migrate"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
        )
        if migrate.returncode:
            raise SystemExit(
                f"soak: FAIL: entrypoint.sh migrate: {migrate.stdout[-800:]} {migrate.stderr[-800:]}"
            )

        provider_port = free_port()
        nodes.start(
            "provider",
            [
                sys.executable,
                "manage.py",
                "sandbox_provider",
                "--port",
                str(provider_port),
                "--no-idempotency",
                "--state",
                str(work / "provider.sqlite3"),
            ],
            env,
        )
        wait_http(nodes, "provider", provider_port, "/capabilities")
        setup_django(env)
        register_source(f"http://127.0.0.1:{provider_port}")

        import redis

        redis_client = redis.from_url(redis_url)
        web_ports = [free_port() for _ in range(3)]
        for i, port in enumerate(web_ports):
            (work / "prom" / f"web{i}").mkdir(parents=True)
            nodes.start(
                f"web{i}",
                [*entry, "web"],
                {
                    **env,
                    "CONDUIT_BIND": f"127.0.0.1:{port}",
                    "GUNICORN_WORKERS": "2",
                    "GUNICORN_THREADS": "4",
                    "PROMETHEUS_MULTIPROC_DIR": str(work / "prom" / f"web{i}"),
                },
            )
        for i in range(2):
            (work / "prom" / f"worker{i}").mkdir(parents=True)
            before = set(redis_client.keys("django_q:conduit:cluster*"))
            nodes.start(
                f"worker{i}",
                [*entry, "worker"],
                {
                    **env,
                    "CONDUIT_Q_WORKERS": "2",
                    "PROMETHEUS_MULTIPROC_DIR": str(work / "prom" / f"worker{i}"),
                },
            )
            wait_worker(nodes, f"worker{i}", redis_client, before)
        for i, port in enumerate(web_ports):
            wait_http(nodes, f"web{i}", port, "/healthz")
        say(
            f"3 web nodes {web_ports}, 2 worker nodes, sandbox provider :{provider_port}; "
            f"ready after {time.monotonic() - begun:.1f} s"
        )

        ledger = Ledger()
        driver = Driver(web_ports, ledger, args.seed)
        approvals: Counter = Counter()
        approvals_lock = threading.Lock()
        review_stop = threading.Event()
        reviewers = [
            threading.Thread(target=approver, args=(i, review_stop, approvals, approvals_lock), daemon=True)
            for i in range(REVIEWERS)
        ]
        for thread in reviewers:
            thread.start()
        interval = args.clients / args.rate if args.rate else 0.0
        clients = [
            threading.Thread(target=driver.client, args=(i, stop, args.drop_fraction, interval), daemon=True)
            for i in range(args.clients)
        ]
        pace = f"at most {args.rate:.0f} deliveries/s" if args.rate else "as fast as they are answered"
        say(f"driving {args.clients} clients for {args.seconds:.0f} s, {pace}")
        drive_started = time.monotonic()
        for thread in clients:
            thread.start()

        def at(fraction: float) -> None:
            time.sleep(max(0.0, drive_started + args.seconds * fraction - time.monotonic()))

        # Mid-run: a web node's host dies and comes back, then a worker node's.
        if not args.no_kills:
            kill_and_restart(nodes, web_ports, redis_client, at, drive_started)
        at(1.0)
        stop.set()
        for thread in clients:
            thread.join()
        driven = time.monotonic() - drive_started
        say(f"clients stopped after {driven:.1f} s; waiting for every reply to be approved and finished")
        review_stop.set()
        review_deadline = time.monotonic() + args.drain_seconds
        for thread in reviewers:
            thread.join(timeout=max(0.1, review_deadline - time.monotonic()))
        say(f"every planned reply approved at {time.monotonic() - drive_started:.1f} s")
        drain(redis_client, args.drain_seconds, args.nudge)

        from django.db import connection

        say(f"checking ({time.monotonic() - begun:.0f} s since start)")
        events, deliveries, actions = stored_state(SOURCE)
        connection.close()
        if args.breakage == "duplicate-send":
            duplicate_send(provider_port, actions)
        applied = provider_applied(provider_port)
        results = [
            checks.check_acked_events_present_once(ledger.deliveries, events),
            checks.check_nothing_lost(ledger.deliveries, events),
            checks.check_seen_count(ledger.deliveries, events, deliveries),
            checks.check_replies_planned_once(events, actions, PURPOSES),
            checks.check_approved_finished(actions),
            checks.check_applied_at_most_once(actions, applied),
            checks.check_answers(ledger.statuses),
            replica_check(pg),
            readiness_check(web_ports),
        ]
        receipts = sum(len(d.event_ids) * d.acks for d in ledger.deliveries)
        acks = len(ledger.latencies)
        print("\nsoak figures", flush=True)
        print(
            f"  driving: {driven:.1f} s, {args.clients} clients, 3 web nodes (2 workers x 4 threads each), "
            f"2 worker nodes (2 each)"
        )
        print(
            f"  events/s: {receipts / driven:.0f} event receipts acknowledged per second "
            f"({len(events) / driven:.0f} distinct events/s); deliveries acknowledged/s: {acks / driven:.0f}"
        )
        print(
            f"  acknowledgement latency: p50 {percentile(ledger.latencies, 0.5) * 1000:.1f} ms, "
            f"p99 {percentile(ledger.latencies, 0.99) * 1000:.1f} ms, max {max(ledger.latencies) * 1000:.1f} ms"
        )
        print(
            f"  deliveries: {len(ledger.deliveries)} distinct, {acks} acknowledged (200s), "
            + ", ".join(f"{k} {v}" for k, v in sorted(ledger.counts.items()))
        )
        print(
            f"  events: {len(events)} stored, {receipts} receipts acknowledged, "
            f"{sum(e.seen_count for e in events)} receipts recorded (seen_count total)"
        )
        print(
            f"  replies: {len(actions)} planned, {approvals['approvals']} approved by the reviewer "
            f"({approvals['approvals refused']} refused), "
            + ", ".join(f"{s} {n}" for s, n in sorted(Counter(a.delivery_state for a in actions).items()))
            + f"; provider applications {sum(applied.values())}"
        )
        print(
            f"  kills: {'none (--no-kills)' if args.no_kills else 'web1 and worker0 with SIGKILL, each restarted'}; "
            f"total wall time "
            f"{time.monotonic() - begun:.0f} s\n",
            flush=True,
        )
        for check in results:
            print(check.line(), flush=True)
        failed = [c for c in results if not c.ok]
        print(
            f"\nsoak: {'FAILED: ' + str(len(failed)) + ' check(s)' if failed else 'all checks PASS'}",
            flush=True,
        )
        return 1 if failed else 0
    except SystemExit as exc:
        if isinstance(exc.code, int):  # SIGTERM
            return exc.code
        print(exc, file=sys.stderr, flush=True)
        return 2
    finally:
        stop.set()
        if "django.db" in sys.modules:  # imported only once Django was set up
            from django.db import connections

            connections.close_all()
        nodes.stop_all()
        pg.stop()
        if os.environ.get("SOAK_KEEP"):
            say(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
