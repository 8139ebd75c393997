"""Sender benchmark: claim-and-send through Conduit beside a raw SKIP LOCKED claim loop.

Run with `make bench-send` (it starts a throwaway PostgreSQL and exports DATABASE_URL).
Workers are real processes (`manage.py send_replies --drain` for Conduit, forked
psycopg loops for the baseline) sending approved actions to the sandbox provider,
with 0 ms and 50 ms of provider latency. Prints sends/s, the time each worker
spends per send above the provider's latency, and duplicate sends (must be 0).
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import subprocess
import sys
import time

import psycopg  # noqa: E402
from common import BENCH_SECRET, ROOT, bench_source, raw_dsn  # noqa: I001  (sets Django up)
from django.db import connection  # noqa: E402

from ingress.services import source_update, webhook_receive  # noqa: E402
from replies import sender, services  # noqa: E402
from replies.models import ReplyAction, ReplyRoute, SendAttempt  # noqa: E402
from simulators.sandbox import serve  # noqa: E402
from tests.conftest import sign  # noqa: E402

ACCOUNT = "acct_test_sendbench"


def make_actions(source, count: int, tag: str) -> list[int]:
    """`count` APPROVED actions (two per event) through ingest and approval; their ids."""
    secret = BENCH_SECRET
    for start in range(0, count // 2, 100):
        events = [
            {
                "id": f"evt_test_{tag}_{i}",
                "type": "comment.created",
                "post_id": "post_test_b",
                "comment_id": f"msg_test_{tag}_{i}",
                "from_id": "person_test_b",
                "created_at": "2026-01-15T14:30:00Z",
                "text": "CHECKLIST",
            }
            for i in range(start, min(count // 2, start + 100))
        ]
        body = json.dumps({"account": ACCOUNT, "events": events}).encode()
        webhook_receive(source=source, body=body, headers=sign(body, secret=secret))
    sender.enqueue_send = lambda action_id: None  # no cluster here: the workers below send
    ids = list(ReplyAction.objects.filter(delivery_state="REVIEW_PENDING").values_list("id", flat=True))
    for action_id in ids:
        result = services.reply_approve(action_id=action_id, actor="bench")
        assert result.ok, result
    return ids


def run_conduit(workers: int, env: dict) -> float:
    """The longest worker's own drain time (Django's start-up is not the sender's cost)."""
    procs = [
        subprocess.Popen(
            [sys.executable, "manage.py", "send_replies", "--drain"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
        )
        for _ in range(workers)
    ]
    times = []
    for p in procs:
        out, _ = p.communicate()
        assert p.returncode == 0
        times.append(float(out.decode().rsplit(" in ", 1)[1].split()[0]))
    return max(times)


def raw_worker(dsn: str, port: int) -> None:
    """Claim with FOR UPDATE SKIP LOCKED, POST to the provider, store the receipt."""
    conn = psycopg.connect(dsn, autocommit=False)
    while True:
        with conn.transaction():
            row = conn.execute(
                "SELECT id, reply_key FROM reply_actions WHERE delivery_state = 'APPROVED' "
                "ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED"
            ).fetchone()
            if row is None:
                break
            conn.execute("UPDATE reply_actions SET delivery_state = 'SENDING' WHERE id = %s", [row[0]])
        http_conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        body = json.dumps({"reply_key": row[1], "text": "synthetic"})
        http_conn.request("POST", "/replies", body=body, headers={"Idempotency-Key": row[1]})
        receipt = json.loads(http_conn.getresponse().read())["id"]
        http_conn.close()
        with conn.transaction():
            conn.execute(
                "UPDATE reply_actions SET delivery_state = 'SENT', provider_reply_id = %s WHERE id = %s",
                [receipt, row[0]],
            )
    conn.close()


def run_raw(workers: int, dsn: str, port: int) -> float:
    started = time.perf_counter()
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=raw_worker, args=(dsn, port)) for _ in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
        assert p.exitcode == 0
    return time.perf_counter() - started


def reset(ids: list[int]) -> None:
    """Put this run's actions back to APPROVED (bench bookkeeping, outside the ledger rules)."""
    SendAttempt.objects.filter(action_id__in=ids).delete()
    ReplyAction.objects.filter(id__in=ids).update(
        delivery_state="APPROVED",
        attempt_count=0,
        provider_reply_id="",
        sending_since=None,
        next_attempt_at=None,
    )
    # Statistics that know the backlog (autovacuum's analyze would, within a minute): right after
    # the bulk approval they still say no action is APPROVED, and both paths' claims are planned
    # for a handful of rows (a sort of the whole backlog instead of an index walk).
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--actions", type=int, default=400, help="actions per run at 0 ms latency")
    parser.add_argument("--slow-actions", type=int, default=60, help="actions per worker at 50 ms")
    args = parser.parse_args()
    source = bench_source("sendbench", ACCOUNT)
    for purpose in source.purposes:
        # Approval needs a route per purpose; its target is set to each run's provider below.
        ReplyRoute.objects.get_or_create(
            source=source,
            purpose=purpose,
            defaults={"transport_name": "sandbox", "target_url": "http://127.0.0.1:9"},
        )
        services.reply_copy_create(
            source_id=source.pk, purpose=purpose, channel=purpose, text="synthetic bench copy", actor="bench"
        )
    dsn = raw_dsn()
    print("sender benchmark: worker processes drain approved actions to the sandbox provider on loopback;")
    print("overhead = each worker's wall time per send minus the provider's latency\n")
    print(
        f"{'latency':>7} {'workers':>7} {'path':>8} {'sends':>6} {'sends/s':>8} "
        f"{'ms/send/worker':>15} {'overhead ms':>12} {'duplicates':>10}"
    )
    for latency_ms in (0, 50):
        for workers in (1, 4):
            count = args.actions if latency_ms == 0 else args.slow_actions * workers
            ids = make_actions(source, count, f"l{latency_ms}w{workers}")
            server, state = serve(port=0)
            state.latency = latency_ms / 1000
            port = server.server_address[1]
            source = source_update(source_id=source.pk, changes={"source_url": f"http://127.0.0.1:{port}"})
            ReplyRoute.objects.filter(source=source).update(target_url=f"http://127.0.0.1:{port}")
            for path in ("raw", "conduit"):
                reset(ids)
                with state.lock:
                    state.applied.clear()
                    state.receipts.clear()
                connection.close()
                elapsed = (
                    run_raw(workers, dsn, port) if path == "raw" else run_conduit(workers, dict(os.environ))
                )
                sent = ReplyAction.objects.filter(id__in=ids, delivery_state="SENT").count()
                assert sent == len(ids), f"{path}: {sent} of {len(ids)} sent"
                with state.lock:
                    duplicates = sum(n - 1 for n in state.applied.values())
                per_send = elapsed * workers / sent * 1000
                print(
                    f"{latency_ms:>5}ms {workers:>7} {path:>8} {sent:>6} {sent / elapsed:>8.0f} "
                    f"{per_send:>15.2f} {per_send - latency_ms:>12.2f} {duplicates:>10}",
                    flush=True,
                )
            server.shutdown()
            ReplyAction.objects.filter(id__in=ids).update(delivery_state="CLOSED_NO_REPLY")


if __name__ == "__main__":
    main()
