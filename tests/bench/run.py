"""Ingest benchmark: the full HTTP path beside four baselines measured in the same run.

Run with `make bench` (it starts a throwaway PostgreSQL and exports DATABASE_URL).
Half of the deliveries are duplicates of an event the same client sent just before.
The baselines, on the same database:
- `raw`: a psycopg loop doing Conduit's transaction statement for statement (five to seven
  statements an event; for a batch, the leanest set-based SQL of the same rows);
- `floor`: the bare Django floor (tests/bench/floor.py), one view on the same gunicorn settings
  checking an HMAC and writing with one `INSERT ... ON CONFLICT`;
- `upsert`: raw psycopg, that one-statement upsert, a commit per body;
- `grouped`: Conduit itself with CONDUIT_GROUP_COMMIT=on, the bodies that reach a process while
  its commit is in flight sharing the next one (the default, off, commits each body alone).
Prints events/s, p50/p99 acknowledgement latency, and the CPU milliseconds an event took in the
app servers (gunicorn's processes) and in PostgreSQL, per path and concurrency level, and
Conduit's ratio to each baseline (events/s and p50), medians of per-round ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from datetime import datetime, timezone

import floor  # noqa: E402
import gunicorn  # noqa: E402  (tests/bench/floor.py: the bare Django floor and its upsert)
import psycopg  # noqa: E402
from common import BENCH_SECRET, ROOT, bench_source, cpu_seconds, raw_dsn  # noqa: I001  (sets Django up)
from django.db import connection  # noqa: E402
from workload import ACCOUNT, workload  # noqa: E402  (tests/bench/workload.py)

from conduit.canonical import payload_hash, sha256_hex  # noqa: E402
from conduit.providers.registry import get_adapter  # noqa: E402
from replies.contract import reply_key  # noqa: E402
from tests.conftest import free_port  # noqa: E402

ADAPTER = get_adapter("sandbox-social")


def run_clients(clients: int, seconds: float, one) -> tuple[int, list[float]]:
    """Run `one(client_index, doc)` in `clients` threads for `seconds`; return count, latencies."""
    stop = time.monotonic() + seconds
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors: list[str] = []
    barrier = threading.Barrier(clients)

    def loop(index: int) -> None:
        docs = workload(one.level, index, one.batch)
        barrier.wait()
        while time.monotonic() < stop:
            doc = next(docs)
            started = time.perf_counter()
            try:
                one(index, doc)
            except Exception as exc:  # a bench reports failures, it does not hide them
                errors.append(f"{type(exc).__name__}: {exc}")
                return
            latencies[index].append(time.perf_counter() - started)

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise SystemExit(f"bench: {len(errors)} client errors, first: {errors[0]}")
    flat = [x for per in latencies for x in per]
    return len(flat), flat


class HttpPath:
    """The full path: POST to gunicorn, Django, DRF, verification, ingest, commit, 200.

    Requests are signed and encoded before the clock starts and sent over one
    kept-alive socket per client with a minimal HTTP/1.1 reader (what wrk does
    in C): signing and header parsing are the provider's work, not Conduit's,
    and on a 2-core machine they would compete with the server being measured.
    A server that closes the connection after each answer (gunicorn's sync
    worker) is reconnected to before the next request, as a provider would.
    """

    PRESIGNED = 2500  # requests per client per round; beyond that they are signed on the fly

    def __init__(self, port: int, level: str, clients: int, batch: int = 1) -> None:
        self.port, self.level, self.batch = port, level, batch
        self.socks = [self._connect() for _ in range(clients)]
        self.buffers = [b""] * clients
        self.queues: list[list[bytes]] = []
        presigned = max(20, self.PRESIGNED // batch)
        for client in range(clients):
            docs = workload(level, client, batch)
            self.queues.append([self._request(next(docs)) for _ in range(presigned)][::-1])

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    @staticmethod
    def _request(docs: list[dict]) -> bytes:
        body = json.dumps({"account": ACCOUNT, "events": docs}).encode()
        headers = ADAPTER.sign(
            body=body,
            secret=BENCH_SECRET,
            delivery_id=f"msg_{uuid.uuid4().hex}",
            at=datetime.now(timezone.utc),
        )
        head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        return (
            f"POST /webhooks/bench/ HTTP/1.1\r\nHost: 127.0.0.1\r\n{head}"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode() + body

    def __call__(self, client: int, docs: list[dict]) -> None:
        # The queue holds this client's workload in order, so it matches `docs`.
        queue = self.queues[client]
        sock = self.socks[client]
        if sock is None:
            sock = self.socks[client] = self._connect()
        sock.sendall(queue.pop() if queue else self._request(docs))
        data = self.buffers[client]
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                raise RuntimeError("server closed the connection")
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        status = head[9:12]
        lowered = head.lower()
        length = int(lowered.split(b"content-length:")[1].split(b"\r\n")[0])
        while len(rest) < length:
            rest += sock.recv(65536)
        self.buffers[client] = rest[length:]
        if b"connection: close" in lowered:
            sock.close()
            self.socks[client] = None
            self.buffers[client] = b""
        if status != b"200":
            raise RuntimeError(f"HTTP {status.decode()}: {rest[:length][:200]!r}")

    def close(self) -> None:
        for sock in self.socks:
            if sock is not None:
                sock.close()


FLOOR_SECRET = "floor-" + uuid.uuid4().hex  # made for this run only; it signs nothing real


class FloorPath(HttpPath):
    """The bare Django floor over the same kind of connection: the same bodies, its own HMAC."""

    @staticmethod
    def _request(docs: list[dict]) -> bytes:
        return floor.request(ACCOUNT, docs, FLOOR_SECRET)


class UpsertPath:
    """Raw psycopg, the floor's one statement, a commit per body (autocommit): the raw floor."""

    def __init__(self, dsn: str, source_id: int, level: str, clients: int, batch: int = 1) -> None:
        self.level, self.batch = level, batch
        self.conns = [psycopg.connect(dsn, autocommit=True) for _ in range(clients)]

    def __call__(self, client: int, docs: list[dict]) -> None:
        with self.conns[client].cursor() as cursor:
            floor.upsert(cursor, docs)

    def close(self) -> None:
        for conn in self.conns:
            conn.close()


EVENT_INSERT = (
    "INSERT INTO inbound_events (event_key, source_id, source_system, source_account_ref, "
    "source_event_id, event_type, conversation_ref, message_ref, sender_ref, occurred_at, "
    "occurred_at_original, payload_hash, contract_version, canary, trigger_rule_version, "
    "trigger_match, event_state, reconcile_status, first_received_at, last_received_at, "
    "seen_count, message_text) VALUES "
)
EVENT_ROW = (
    "(%s,%s,'sandbox-social',%s,%s,'comment.created',%s,%s,%s,%s,%s,%s,'event-v1',false,1,true,"
    "'RECORD_READY','UNRECONCILED',%s,%s,1,%s)"
)


class RawPath:
    """The same transaction from a raw psycopg connection: one event per body statement for
    statement as Conduit ran it before set-based ingest; a batch with the leanest set-based SQL
    (one multi-row statement per table, duplicates counted by the upsert itself)."""

    def __init__(self, dsn: str, source_id: int, level: str, clients: int, batch: int = 1) -> None:
        self.source_id, self.level, self.batch = source_id, level, batch
        self.conns = [psycopg.connect(dsn) for _ in range(clients)]
        # The campaign the planned actions belong to, read once (Conduit reads it once per rules version).
        (self.campaign_id,) = (
            self.conns[0]
            .execute("SELECT id FROM reply_campaigns WHERE source_id = %s AND account_default", [source_id])
            .fetchone()
        )
        # That read opened a transaction: ended here, so that each body's `transaction()` on this
        # connection is a transaction of its own, committed, not a savepoint of this one.
        self.conns[0].commit()

    def __call__(self, client: int, docs: list[dict]) -> None:
        if self.batch == 1:
            self._one(self.conns[client], docs[0])
        else:
            self._many(self.conns[client], docs)

    @staticmethod
    def _key(doc: dict) -> str:
        return f"sandbox-social:{ACCOUNT}:comment.created:{doc['id']}"

    def _event_params(self, doc: dict, now: datetime) -> list:
        return [
            self._key(doc),
            self.source_id,
            ACCOUNT,
            doc["id"],
            doc["post_id"],
            doc["comment_id"],
            doc["from_id"],
            now,
            doc["created_at"],
            payload_hash(doc),
            now,
            now,
            doc["text"],
        ]

    def _delivery(self, conn, docs: list[dict], now: datetime) -> None:
        body_hash = sha256_hex(json.dumps({"account": ACCOUNT, "events": docs}))
        conn.execute(
            "INSERT INTO ingress_deliveries (source_id, delivery_id, body_hash, event_keys, "
            "first_received_at, last_received_at, seen_count) VALUES (%s,%s,%s,%s,%s,%s,1) "
            "ON CONFLICT DO NOTHING RETURNING id",
            [
                self.source_id,
                f"msg_{uuid.uuid4().hex}",
                body_hash,
                json.dumps(sorted(self._key(d) for d in docs)),
                now,
                now,
            ],
        )

    def _one(self, conn, doc: dict) -> None:
        now = datetime.now(timezone.utc)
        key = self._key(doc)
        with conn.transaction():
            self._delivery(conn, [doc], now)
            row = conn.execute(
                EVENT_INSERT + EVENT_ROW + " ON CONFLICT DO NOTHING RETURNING id",
                self._event_params(doc, now),
            ).fetchone()
            if row is None:
                conn.execute(
                    "UPDATE inbound_events SET seen_count = seen_count + 1, last_received_at = %s "
                    "WHERE event_key = %s AND payload_hash = %s",
                    [now, key, payload_hash(doc)],
                )
                return
            self._plan(conn, [(row[0], key)], now)

    def _many(self, conn, docs: list[dict]) -> None:
        now = datetime.now(timezone.utc)
        docs = sorted(docs, key=self._key)
        with conn.transaction():
            self._delivery(conn, docs, now)
            rows = conn.execute(
                EVENT_INSERT
                + ",".join([EVENT_ROW] * len(docs))
                + " ON CONFLICT (event_key) DO UPDATE SET seen_count = inbound_events.seen_count + 1, "
                "last_received_at = EXCLUDED.last_received_at "
                "WHERE inbound_events.payload_hash = EXCLUDED.payload_hash RETURNING id, event_key, seen_count",
                [p for doc in docs for p in self._event_params(doc, now)],
            ).fetchall()
            self._plan(conn, [(pk, key) for pk, key, seen in rows if seen == 1], now)

    def _plan(self, conn, new: list[tuple[int, str]], now: datetime) -> None:
        if not new:
            return
        conn.execute(
            "INSERT INTO inbound_event_transitions (event_id, ledger, prior_state, next_state, at, "
            "actor, reason_code, refused) VALUES "
            + ",".join(
                [
                    "(%s,'event',NULL,'RECEIVED',%s,'system:ingest','source_proof_passed',false),"
                    "(%s,'event','RECEIVED','RECORD_READY',%s,'system:ingest','reply_plan_created',false)"
                ]
                * len(new)
            ),
            [p for pk, _ in new for p in (pk, now, pk, now)],
        )
        ids = conn.execute(
            "INSERT INTO reply_actions (reply_key, event_key, purpose, campaign_id, campaign_version, "
            "delivery_state, approval_state, canary, created_at) VALUES "
            + ",".join(
                [
                    "(%s,%s,'public_ack',%s,1,'REVIEW_PENDING','REVIEW_PENDING',false,%s),"
                    "(%s,%s,'private_delivery',%s,1,'REVIEW_PENDING','REVIEW_PENDING',false,%s)"
                ]
                * len(new)
            )
            + " RETURNING id",
            [
                p
                for _, key in new
                for p in (
                    reply_key(key, "public_ack"),
                    key,
                    self.campaign_id,
                    now,
                    reply_key(key, "private_delivery"),
                    key,
                    self.campaign_id,
                    now,
                )
            ],
        ).fetchall()
        conn.execute(
            "INSERT INTO reply_action_transitions (action_id, ledger, prior_state, next_state, "
            "at, actor, reason_code, refused) VALUES "
            + ",".join(
                ["(%s,'reply',NULL,'REVIEW_PENDING',%s,'system:ingest','planned_on_first_receipt',false)"]
                * len(ids)
            ),
            [p for (pk,) in ids for p in (pk, now)],
        )

    def close(self) -> None:
        for conn in self.conns:
            conn.close()


def start_server(
    workers: int,
    threads: int,
    worker_class: str = "gthread",
    env_extra: dict | None = None,
    app: tuple[str, ...] = ("conduit.wsgi",),
) -> tuple[subprocess.Popen, int]:
    port = free_port()
    env = {**os.environ, "CONN_MAX_AGE": "600", **(env_extra or {})}
    threading_args = ["--threads", str(threads)] if worker_class == "gthread" else []
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            *app,
            "--workers",
            str(workers),
            "--worker-class",
            worker_class,
            *threading_args,
            "--keep-alive",
            "30",
            "--bind",
            f"127.0.0.1:{port}",
            "--log-level",
            "warning",
            "--backlog",
            "256",
            # gunicorn 27's control socket has one default path: two servers at once would clash.
            *(["--no-control-socket"] if gunicorn.version_info >= (27,) else []),
        ],
        cwd=ROOT,
        env=env,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return server, port
        except OSError:
            time.sleep(0.1)
    server.kill()
    raise SystemExit("bench: gunicorn did not start")


def stop_server(server: subprocess.Popen) -> None:
    server.send_signal(signal.SIGTERM)
    server.wait(timeout=30)


def measured(clients: int, seconds: float, path, batch: int) -> tuple[float, ...]:
    """(events/s, p50 ms, p99 ms, app CPU ms an event, PostgreSQL CPU ms an event) of one run.
    Paths are measured one at a time, so the servers idle meanwhile add next to nothing."""
    before = cpu_seconds()
    count, latencies = run_clients(clients, seconds, path)
    after = cpu_seconds()
    events = max(count * batch, 1)
    return (
        *summary(count, latencies, seconds, batch),
        *((after[name] - before[name]) * 1000 / events for name in ("gunicorn", "postgres")),
    )


def summary(count: int, latencies: list[float], seconds: float, batch: int = 1) -> tuple[float, float, float]:
    """(events/s, p50 ms, p99 ms): latencies are per body."""
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else float("nan")
    return count * batch / seconds, statistics.median(ordered) * 1000, p99 * 1000


def round_order(names: list[str], round_: int) -> list[str]:
    """The paths in the order round `round_` measures them: each round starts one path further on,
    so over as many rounds as paths each path takes each place in a round once."""
    start = round_ % len(names)
    return names[start:] + names[:start]


def settle(conn: psycopg.Connection) -> None:
    """Finish what the windows before left the database to do, so that no path's window pays for
    another's: VACUUM (ANALYZE) the database (the dead versions of counted repeats, the GIN
    pending lists, fresh statistics) and CHECKPOINT (so every window starts just after one, and
    logs the full image of each page it first changes, whichever path it is). `conn` stays open
    through the windows: a backend that ends while `cpu_seconds` reads /proc, neither a live child
    nor yet reaped, would be missing from one of the window's two readings.

    CHECKPOINT needs a superuser (or pg_checkpoint): `make bench`'s own database has one."""
    conn.execute("VACUUM (ANALYZE)")
    try:
        conn.execute("CHECKPOINT")
    except psycopg.errors.InsufficientPrivilege:
        raise SystemExit(
            "bench: settling the database needs CHECKPOINT (a superuser, or pg_checkpoint)"
        ) from None


def compare(paths: dict, clients: int, batch: int, rounds: int, seconds: float, tag: str, dsn: str) -> dict:
    """Rounds of every path at one level (after a warm-up of each), in turn, each round in
    `round_order` and each window after `settle`: name -> runs, in round order.

    `paths`: name -> a factory of the path for (level tag, clients, batch); "full" is Conduit."""
    for name, make in paths.items():
        warm = make(f"warm{name}{tag}", clients, batch)
        run_clients(clients, 1.0, warm)
        warm.close()
    runs: dict[str, list] = {name: [] for name in paths}
    with psycopg.connect(dsn, autocommit=True) as settling:
        for round_ in range(rounds):
            for name in round_order(list(paths), round_):
                path = paths[name](f"{name}{tag}r{round_}", clients, batch)
                settle(settling)
                runs[name].append(measured(clients, seconds, path, batch))
                path.close()
    return runs


def report(label: str, runs: dict) -> None:
    """A row per path; each baseline's row ends with Conduit's ratio to it (events/s, p50)."""
    full = runs["full"]
    for name, path_runs in runs.items():
        rate, p50, p99, app_cpu, pg_cpu = (statistics.median(col) for col in zip(*path_runs))
        extra = ""
        if name != "full":
            ratio = statistics.median(f[0] / r[0] for f, r in zip(full, path_runs))
            p50_ratio = statistics.median(f[1] / r[1] for f, r in zip(full, path_runs))
            extra = f"{ratio:>9.2f} {p50_ratio:>9.2f}"
        app = f"{app_cpu:>8.2f}" if app_cpu else f"{'-':>8}"
        print(
            f"{label:>16} {name:>7} {rate:>9.0f} {p50:>8.2f} {p99:>8.2f} {app} {pg_cpu:>8.2f} {extra}",
            flush=True,
        )
        label = ""


HEADER = (
    f"{'level':>16} {'path':>7} {'events/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'app cpu':>8} {'pg cpu':>8} "
    f"{'full/this':>9} {'p50 ratio':>9}"
)
SERVERS = {
    # name: (worker class, workers, threads, extra environment)
    "gthread-4x4": ("gthread", 4, 4, {}),
    "gthread-4x1": ("gthread", 4, 1, {}),
    "gthread-2x2": ("gthread", 2, 2, {}),
    "sync-4": ("sync", 4, 1, {}),
    "pool-4x4": ("gthread", 4, 4, {"CONDUIT_DB_POOL": "on", "CONDUIT_DB_POOL_MAX_SIZE": "4"}),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of one measurement")
    parser.add_argument(
        "--rounds", type=int, default=3, help="rounds of every path per level; medians reported"
    )
    parser.add_argument(
        "--clients", type=int, nargs="+", default=[1, 4, 16], help="levels of one event per body"
    )
    parser.add_argument("--workers", type=int, default=4, help="gunicorn worker processes")
    parser.add_argument("--threads", type=int, default=4, help="threads per gunicorn worker")
    parser.add_argument(
        "--batch", type=int, default=100, help="events per body of the batched level (0: none)"
    )
    parser.add_argument("--batch-clients", type=int, default=4)
    parser.add_argument(
        "--baselines",
        nargs="*",
        default=["raw", "floor", "upsert", "grouped"],
        choices=["raw", "floor", "upsert", "grouped"],
        help="the baselines measured beside Conduit at every level",
    )
    parser.add_argument(
        "--servers",
        nargs="*",
        default=["gthread-4x1", "sync-4", "pool-4x4"],
        choices=sorted(SERVERS),
        help="other server set-ups measured at --compare-clients beside the raw loop",
    )
    parser.add_argument("--compare-clients", type=int, default=4)
    args = parser.parse_args()

    source = bench_source("bench", ACCOUNT, floor_table=floor.CREATE)
    dsn = raw_dsn()
    connection.close()
    print(
        f"ingest benchmark: {args.rounds} rounds of {args.seconds:.0f} s per path and level, "
        f"gunicorn gthread {args.workers} workers x {args.threads} threads for Conduit and the floor, "
        f"{os.cpu_count()} cores;"
    )
    print("one event per body: half the deliveries duplicates; a batch: a third of its events duplicates;")
    print("paths: raw = Conduit's statements from psycopg, floor = a bare Django view (HMAC, one upsert),")
    print("upsert = that one statement from psycopg; grouped = Conduit with CONDUIT_GROUP_COMMIT=on (bodies")
    print("share a commit in flight); full = Conduit. app cpu and pg cpu: CPU ms an event in the gunicorn")
    print("processes and in PostgreSQL. Medians of the rounds; full/this and the p50 ratio are medians")
    print("of the per-round ratios of Conduit to that row's path\n")
    print(HEADER)
    server, port = start_server(args.workers, args.threads)
    floor_server = floor_port = None
    if "floor" in args.baselines:
        floor_server, floor_port = start_server(
            args.workers,
            args.threads,
            env_extra={"BENCH_FLOOR_SECRET": FLOOR_SECRET},
            app=("--pythonpath", str(ROOT / "tests" / "bench"), "floor:application"),
        )
    grouped_server = grouped_port = None
    if "grouped" in args.baselines:
        grouped_server, grouped_port = start_server(
            args.workers, args.threads, env_extra={"CONDUIT_GROUP_COMMIT": "on"}
        )
    baselines = {
        "grouped": lambda level, clients, batch: HttpPath(grouped_port, level, clients, batch),
        "raw": lambda level, clients, batch: RawPath(dsn, source.pk, level, clients, batch),
        "floor": lambda level, clients, batch: FloorPath(floor_port, level, clients, batch),
        "upsert": lambda level, clients, batch: UpsertPath(dsn, source.pk, level, clients, batch),
    }
    paths = {name: baselines[name] for name in args.baselines}
    paths["full"] = lambda level, clients, batch: HttpPath(port, level, clients, batch)
    try:
        for clients in args.clients:
            report(
                f"{clients} clients",
                compare(paths, clients, 1, args.rounds, args.seconds, f"c{clients}", dsn),
            )
        if args.batch > 1:
            report(
                f"{args.batch}/body {args.batch_clients}cl",
                compare(
                    paths, args.batch_clients, args.batch, args.rounds, args.seconds, f"b{args.batch}", dsn
                ),
            )
    finally:
        stop_server(server)
        for other in (floor_server, grouped_server):
            if other is not None:
                stop_server(other)
    if args.servers:
        print(
            f"\nserver set-ups at {args.compare_clients} clients, one event per body, beside the raw loop "
            f"(the default above is gthread-{args.workers}x{args.threads} with CONN_MAX_AGE=600):"
        )
        print(HEADER)
    for name in args.servers:
        worker_class, workers, threads, env_extra = SERVERS[name]
        server, port = start_server(workers, threads, worker_class, env_extra)
        try:
            pair = {
                "raw": baselines["raw"],
                "full": lambda level, clients, batch, port=port: HttpPath(port, level, clients, batch),
            }
            report(name, compare(pair, args.compare_clients, 1, args.rounds, args.seconds, f"s{name}", dsn))
        finally:
            stop_server(server)


if __name__ == "__main__":
    main()
