"""Ingest benchmark: the full HTTP path beside a raw psycopg loop doing the same transaction.

Run with `make bench` (it starts a throwaway PostgreSQL and exports DATABASE_URL).
Half of the deliveries are duplicates of an event the same client sent just before.
Prints events/s and p50/p99 acknowledgement latency per concurrency level, and the
ratio full/raw measured in the same run on the same database.
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

import psycopg  # noqa: E402
from common import BENCH_SECRET, ROOT, bench_source, raw_dsn  # noqa: I001  (sets Django up)
from django.db import connection  # noqa: E402

from conduit.canonical import payload_hash, sha256_hex  # noqa: E402
from conduit.providers.registry import get_adapter  # noqa: E402
from replies.contract import reply_key  # noqa: E402
from tests.conftest import free_port  # noqa: E402

ADAPTER = get_adapter("sandbox-social")
ACCOUNT = "acct_test_bench"


def event_doc(event_id: str) -> dict:
    return {
        "id": event_id, "type": "comment.created", "post_id": "post_test_bench",
        "comment_id": f"msg_{event_id}", "from_id": "person_test_bench",
        "created_at": "2026-01-15T14:30:00Z", "text": "CHECKLIST",
    }


def workload(level: str, client: int):
    """Yield event documents: new, duplicate of it, new, duplicate, ..."""
    seq = 0
    while True:
        doc = event_doc(f"evt_test_{level}_{client}_{seq}")
        yield doc
        yield doc
        seq += 1


def run_clients(clients: int, seconds: float, one) -> tuple[int, list[float]]:
    """Run `one(client_index, doc)` in `clients` threads for `seconds`; return count, latencies."""
    stop = time.monotonic() + seconds
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors: list[str] = []
    barrier = threading.Barrier(clients)

    def loop(index: int) -> None:
        docs = workload(one.level, index)
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
    """

    PRESIGNED = 2500  # per client per round; beyond that they are signed on the fly

    def __init__(self, port: int, level: str, clients: int) -> None:
        self.port, self.level = port, level
        self.socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(clients)]
        for sock in self.socks:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffers = [b""] * clients
        self.queues: list[list[bytes]] = []
        for client in range(clients):
            docs = workload(level, client)
            self.queues.append([self._request(next(docs)) for _ in range(self.PRESIGNED)][::-1])

    @staticmethod
    def _request(doc: dict) -> bytes:
        body = json.dumps({"account": ACCOUNT, "events": [doc]}).encode()
        headers = ADAPTER.sign(body=body, secret=BENCH_SECRET, delivery_id=f"msg_{uuid.uuid4().hex}",
                               at=datetime.now(timezone.utc))
        head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        return (
            f"POST /webhooks/bench/ HTTP/1.1\r\nHost: 127.0.0.1\r\n{head}"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode() + body

    def __call__(self, client: int, doc: dict) -> None:
        # The queue holds this client's workload in order, so it matches `doc`.
        queue = self.queues[client]
        sock = self.socks[client]
        sock.sendall(queue.pop() if queue else self._request(doc))
        data = self.buffers[client]
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                raise RuntimeError("server closed the connection")
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        status = head[9:12]
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        while len(rest) < length:
            rest += sock.recv(65536)
        self.buffers[client] = rest[length:]
        if status != b"200":
            raise RuntimeError(f"HTTP {status.decode()}: {rest[:length][:200]!r}")

    def close(self) -> None:
        for sock in self.socks:
            sock.close()


class RawPath:
    """The same transaction, statement for statement, from a raw psycopg connection."""

    def __init__(self, dsn: str, source_id: int, level: str, clients: int) -> None:
        self.source_id, self.level = source_id, level
        self.conns = [psycopg.connect(dsn) for _ in range(clients)]

    def __call__(self, client: int, doc: dict) -> None:
        now = datetime.now(timezone.utc)
        key = f"sandbox-social:{ACCOUNT}:comment.created:{doc['id']}"
        digest = payload_hash(doc)
        body_hash = sha256_hex(json.dumps({"account": ACCOUNT, "events": [doc]}))
        conn = self.conns[client]
        with conn.transaction():
            conn.execute(
                "INSERT INTO ingress_deliveries (source_id, delivery_id, body_hash, event_keys, "
                "first_received_at, last_received_at, seen_count) VALUES (%s,%s,%s,%s,%s,%s,1) "
                "ON CONFLICT DO NOTHING RETURNING id",
                [self.source_id, f"msg_{uuid.uuid4().hex}", body_hash, json.dumps([key]), now, now],
            )
            row = conn.execute(
                "INSERT INTO inbound_events (event_key, source_id, source_system, source_account_ref, "
                "source_event_id, event_type, conversation_ref, message_ref, sender_ref, occurred_at, "
                "occurred_at_original, payload_hash, contract_version, canary, trigger_rule_version, "
                "trigger_match, event_state, reconcile_status, first_received_at, last_received_at, "
                "seen_count, message_text) VALUES (%s,%s,'sandbox-social',%s,%s,'comment.created',%s,%s,%s,"
                "%s,%s,%s,'event-v1',false,1,true,'RECORD_READY','UNRECONCILED',%s,%s,1,%s) "
                "ON CONFLICT DO NOTHING RETURNING id",
                [key, self.source_id, ACCOUNT, doc["id"], doc["post_id"], doc["comment_id"],
                 doc["from_id"], now, doc["created_at"], digest, now, now, doc["text"]],
            ).fetchone()
            if row is None:
                conn.execute(
                    "UPDATE inbound_events SET seen_count = seen_count + 1, last_received_at = %s "
                    "WHERE event_key = %s AND payload_hash = %s", [now, key, digest],
                )
                return
            event_id = row[0]
            conn.execute(
                "INSERT INTO inbound_event_transitions (event_id, ledger, prior_state, next_state, at, "
                "actor, reason_code, refused) VALUES "
                "(%s,'event',NULL,'RECEIVED',%s,'system:ingest','source_proof_passed',false),"
                "(%s,'event','RECEIVED','RECORD_READY',%s,'system:ingest','reply_plan_created',false) "
                "RETURNING id",
                [event_id, now, event_id, now],
            )
            ids = conn.execute(
                "INSERT INTO reply_actions (reply_key, event_key, purpose, delivery_state, "
                "approval_state, canary, created_at) VALUES "
                "(%s,%s,'public_ack','REVIEW_PENDING','REVIEW_PENDING',false,%s),"
                "(%s,%s,'private_delivery','REVIEW_PENDING','REVIEW_PENDING',false,%s) "
                "RETURNING id",
                [reply_key(key, "public_ack"), key, now, reply_key(key, "private_delivery"), key, now],
            ).fetchall()
            conn.execute(
                "INSERT INTO reply_action_transitions (action_id, ledger, prior_state, next_state, "
                "at, actor, reason_code, refused) VALUES "
                "(%s,'reply',NULL,'REVIEW_PENDING',%s,'system:ingest','planned_on_first_receipt',false),"
                "(%s,'reply',NULL,'REVIEW_PENDING',%s,'system:ingest','planned_on_first_receipt',false) "
                "RETURNING id",
                [ids[0][0], now, ids[1][0], now],
            )

    def close(self) -> None:
        for conn in self.conns:
            conn.close()


def start_server(workers: int, threads: int) -> tuple[subprocess.Popen, int]:
    port = free_port()
    env = {**os.environ, "CONN_MAX_AGE": "600"}
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "conduit.wsgi", "--workers", str(workers),
         "--worker-class", "gthread", "--threads", str(threads), "--keep-alive", "30",
         "--bind", f"127.0.0.1:{port}", "--log-level", "warning", "--backlog", "256"],
        cwd=ROOT, env=env,
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


def summary(count: int, latencies: list[float], seconds: float) -> tuple[float, float, float]:
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else float("nan")
    return count / seconds, statistics.median(ordered) * 1000, p99 * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of one measurement")
    parser.add_argument("--rounds", type=int, default=3, help="raw/full pairs per level; medians reported")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--workers", type=int, default=4, help="gunicorn worker processes")
    parser.add_argument("--threads", type=int, default=4, help="threads per gunicorn worker")
    args = parser.parse_args()

    source = bench_source("bench", ACCOUNT)
    dsn = raw_dsn()
    connection.close()
    server, port = start_server(args.workers, args.threads)
    print(f"ingest benchmark: {args.rounds} rounds of {args.seconds:.0f} s per path and level, "
          f"gunicorn {args.workers} workers x {args.threads} threads, {os.cpu_count()} cores, half the deliveries duplicates;")
    print("medians of the rounds; full/raw is the median of the per-round ratios\n")
    print(f"{'clients':>7} {'path':>5} {'events/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'full/raw':>9}")
    try:
        for clients in args.clients:
            # Warm up both paths (imports, connections, caches) before measuring.
            warm = HttpPath(port, f"warm{clients}", clients)
            run_clients(clients, 1.0, warm)
            warm.close()
            raw = RawPath(dsn, source.pk, f"warmraw{clients}", clients)
            run_clients(clients, 1.0, raw)
            raw.close()
            raw_runs, full_runs = [], []
            for round_ in range(args.rounds):
                raw = RawPath(dsn, source.pk, f"raw{clients}r{round_}", clients)
                raw_runs.append(summary(*run_clients(clients, args.seconds, raw), args.seconds))
                raw.close()
                full = HttpPath(port, f"http{clients}r{round_}", clients)
                full_runs.append(summary(*run_clients(clients, args.seconds, full), args.seconds))
                full.close()
            ratio = statistics.median(f[0] / r[0] for f, r in zip(full_runs, raw_runs))
            for name, runs, extra in (("raw", raw_runs, ""), ("full", full_runs, f"{ratio:>9.2f}")):
                rate, p50, p99 = (statistics.median(col) for col in zip(*runs))
                print(f"{clients:>7} {name:>5} {rate:>9.0f} {p50:>8.2f} {p99:>8.2f} {extra}", flush=True)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
