"""Reconcile benchmark: wall time and peak memory at 10,000 and 100,000 source events (1M on demand).

Run with `make bench-reconcile` (a throwaway PostgreSQL; DATABASE_URL exported);
`BENCH_ARGS="--sizes 10000,100000,1000000"` adds the million-event level.
For each size the sandbox provider holds every source event, with a receipt for
every reply Conduit sent. Locally a tenth of the events are missing (their
webhooks never came) and a tenth of the replies are unconfirmed
(SEND_STATUS_UNKNOWN although the provider applied them). `manage.py reconcile`
then runs in a fresh process: the scan time is the command's own (Django's
start-up excluded) and the peak memory is that process's high-water resident set
(VmHWM, sampled from /proc while it runs: wait4's ru_maxrss would count the
bench's own memory, which the child shares between fork and exec).
The default scan limits of docs/concepts/reconciliation.md#limits (10,000 staged items, 32 MiB,
1,000 pages) are raised for the run with the explicit bounded adjustment the settings allow
(CONDUIT_RECONCILE_MAX_STAGED_ITEMS, _MAX_STAGED_BYTES, _MAX_PAGES), sized to the level.
Targets: 100k/10k time at most 11x (linear), peak memory flat (streamed pages).
CONDUIT_BENCH_PROFILE=/path/prefix writes a cProfile of the command and its 40 slowest
statements; CONDUIT_BENCH_EXPLAIN=MS adds the plans of statements slower than MS ms
(auto_explain with ANALYZE, as notices) to <prefix>.<source>.plans.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import subprocess
import sys
import threading
import time

from common import ROOT, cpu_seconds  # noqa: I001  (sets Django up)
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.utils import timezone  # noqa: E402

from conduit.canonical import payload_hash  # noqa: E402
from conduit.providers.base import event_key  # noqa: E402
from ingress.models import InboundEvent, Source  # noqa: E402
from ingress.services import source_register  # noqa: E402
from reconcile.models import ReconcileReport  # noqa: E402
from replies.contract import reply_key  # noqa: E402
from replies.models import ReplyAction  # noqa: E402
from replies.services.campaigns import account_default  # noqa: E402
from simulators.sandbox import serve  # noqa: E402


def synthetic(n: int, i: int) -> dict:
    minute, second = divmod(i, 60)
    return {
        "id": f"evt_test_{n}_{i:07d}",
        "type": "comment.created",
        "post_id": f"post_test_{i % 97}",
        "comment_id": f"msg_test_{n}_{i:07d}",
        "from_id": f"person_test_{i % 1013}",
        "created_at": f"2026-01-{1 + minute // 1440:02d}T{minute // 60 % 24:02d}:{minute % 60:02d}:{second:02d}Z",
        "text": "CHECKLIST",
    }


def prepare(n: int, provider_state, url: str) -> Source:
    """A source of n events at the provider; locally 90% of them, 10% of their replies unconfirmed."""
    account = f"acct_test_rb{n}"
    source, _ = source_register(
        name=f"bench{n}",
        adapter="sandbox-social",
        account_ref=account,
        event_types=["comment.created"],
        purposes=["public_ack"],
        trigger_keywords=["CHECKLIST"],
        secret_env="CONDUIT_SOURCE_BENCH_SECRET",
        source_url=url,
    )
    campaign = account_default(source)  # the keyword list's campaign: every reply's
    now = timezone.now()
    items = [synthetic(n, i) for i in range(n)]
    provider_state.hold(account, items)
    event_rows, action_rows = [], []
    for i, item in enumerate(items):
        key = event_key(
            source_system="sandbox-social",
            source_account_ref=account,
            event_type=item["type"],
            source_event_id=item["id"],
            conversation_ref=item["post_id"],
            message_ref=item["comment_id"],
        )
        rkey = reply_key(key, "public_ack")
        receipt = f"rcpt_test_{n}_{i}"
        with provider_state.lock:  # every reply Conduit sent was applied by the provider
            provider_state.receipts[rkey] = receipt
            provider_state.applied[rkey] = 1
            provider_state.targets[item["comment_id"]] = [rkey]
        if i % 10 == 9:
            continue  # missing locally: its webhook never came
        occurred = timezone.datetime.fromisoformat(item["created_at"])
        event_rows.append(
            (
                key,
                source.pk,
                "sandbox-social",
                account,
                item["id"],
                item["type"],
                item["post_id"],
                item["comment_id"],
                item["from_id"],
                occurred,
                item["created_at"],
                payload_hash(item),
                "event-v1",
                False,
                1,
                True,
                "RECORD_READY",
                "UNRECONCILED",
                now,
                now,
                1,
                item["text"],
                campaign.pk,
                campaign.version,
            )
        )
        unconfirmed = i % 10 == 4
        action_rows.append(
            (
                rkey,
                key,
                "public_ack",
                "SEND_STATUS_UNKNOWN" if unconfirmed else "SENT",
                "APPROVED",
                "" if unconfirmed else receipt,
                now,
                1,
                campaign.pk,
                campaign.version,
            )
        )
    event_columns = [
        "event_key",
        "source",
        "source_system",
        "source_account_ref",
        "source_event_id",
        "event_type",
        "conversation_ref",
        "message_ref",
        "sender_ref",
        "occurred_at",
        "occurred_at_original",
        "payload_hash",
        "contract_version",
        "canary",
        "trigger_rule_version",
        "trigger_match",
        "event_state",
        "reconcile_status",
        "first_received_at",
        "last_received_at",
        "seen_count",
        "message_text",
        "trigger_campaign",
        "trigger_campaign_version",
    ]
    action_columns = [
        "reply_key",
        "event",
        "purpose",
        "delivery_state",
        "approval_state",
        "provider_reply_id",
        "created_at",
        "attempt_count",
        "campaign",
        "campaign_version",
    ]
    _copy(InboundEvent, event_columns, event_rows)
    _copy(ReplyAction, action_columns, action_rows)
    with connection.cursor() as cursor:
        # As a running system holds its ledgers: vacuumed since they were written (hint bits set,
        # pages all-visible) and analyzed, so the scan measured does not also finish the load.
        cursor.execute("VACUUM (ANALYZE)")
    return source


def _copy(model: type, columns: list[str], rows: list[tuple]) -> None:
    """Load the local ledgers by COPY (the set-up is not what is measured; a million rows load in seconds)."""
    names = ", ".join(model._meta.get_field(c).column for c in columns)
    with (
        connection.cursor() as cursor,
        cursor.cursor.copy(f"COPY {model._meta.db_table} ({names}) FROM STDIN") as copy,
    ):
        for row in rows:
            copy.write_row(row)


def limits_for(n: int) -> dict[str, int]:
    """The per-scan limits (docs/concepts/reconciliation.md#limits) raised for n events and their receipts (an explicit, bounded adjustment)."""
    return {
        "CONDUIT_RECONCILE_MAX_STAGED_ITEMS": max(10_000, 2 * n + 1000),
        "CONDUIT_RECONCILE_MAX_STAGED_BYTES": max(32, n // 1000 + 32) * 1024 * 1024,
        "CONDUIT_RECONCILE_MAX_PAGES": max(1000, n // 1000 + 10),
    }


# `manage.py reconcile` in a fresh process, with the level's scan limits set first.
CHILD = """
import json, os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "conduit.settings")
import django
django.setup()
from django.conf import settings
for name, value in json.loads(sys.argv[2]).items():
    setattr(settings, name, value)
from django.core.management import call_command
if os.environ.get("CONDUIT_BENCH_PROFILE"):  # cProfile of the command, for finding where the time goes
    import cProfile, time
    from django.db import connection
    spent = {}
    def timed(execute, sql, params, many, context):
        t = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            key = " ".join(sql.split())
            n, total = spent.get(key, (0, 0.0))
            spent[key] = (n + 1, total + time.perf_counter() - t)
    if os.environ.get("CONDUIT_BENCH_EXPLAIN"):  # plans of the slow statements (auto_explain, as notices)
        connection.ensure_connection()
        plans = open(os.environ["CONDUIT_BENCH_PROFILE"] + "." + sys.argv[1] + ".plans", "w")
        connection.connection.add_notice_handler(lambda d: plans.write(d.message_primary + "\\n\\n"))
        with connection.cursor() as c:
            c.execute("LOAD 'auto_explain'")
            c.execute("SET auto_explain.log_min_duration = %s" % int(os.environ["CONDUIT_BENCH_EXPLAIN"]))
            c.execute("SET auto_explain.log_analyze = on")
            c.execute("SET auto_explain.log_level = notice")
    with connection.execute_wrapper(timed):
        cProfile.run('call_command("reconcile", sys.argv[1], "--actor", "bench")',
                     os.environ["CONDUIT_BENCH_PROFILE"] + "." + sys.argv[1])
    with open(os.environ["CONDUIT_BENCH_PROFILE"] + "." + sys.argv[1] + ".sql", "w") as out:
        for key, (n, total) in sorted(spent.items(), key=lambda kv: -kv[1][1])[:40]:
            out.write(f"{total:8.3f} s {n:6d}x  {key}\\n")
else:
    import time
    from django.db import connection
    connection.ensure_connection()
    print(f"backend pid {connection.connection.info.backend_pid}")
    cpu = time.process_time()
    call_command("reconcile", sys.argv[1], "--actor", "bench")
    print(f"command cpu {time.process_time() - cpu:.3f} s")
"""


def _high_water_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def wal_and_checkpoints() -> tuple[int, int]:
    """The WAL position in bytes and the checkpoints the server has begun (timed or requested)."""
    # PostgreSQL 17 moved the checkpoint counters from pg_stat_bgwriter to pg_stat_checkpointer.
    if connection.pg_version >= 170000:
        counted = "num_timed + num_requested FROM pg_stat_checkpointer"
    else:
        counted = "checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint, {counted}")
        return cursor.fetchone()


def reconcile(source: Source, n: int, page_size: int) -> tuple[float, float, int, float, float, int, int]:
    """(scan seconds, process wall seconds, peak RSS in KiB, the command's CPU seconds,
    PostgreSQL's CPU seconds meanwhile, WAL bytes written meanwhile, checkpoints begun meanwhile)
    of one `manage.py reconcile`."""
    wal_before, checkpoints_before = wal_and_checkpoints()
    pg_before = cpu_seconds()["postgres"]
    started = time.monotonic()
    overrides = {**limits_for(n), "CONDUIT_RECONCILE_PAGE_SIZE": page_size}
    process = subprocess.Popen(
        [sys.executable, "-c", CHILD, source.name, json.dumps(overrides)],
        cwd=ROOT,
        env=os.environ.copy(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    peak = 0
    reader = threading.Thread(target=lambda: setattr(process, "output", process.stdout.read().decode()))
    reader.start()
    while process.poll() is None:
        peak = max(peak, _high_water_kib(process.pid) or 0)
        time.sleep(0.02)
    reader.join()
    wall = time.monotonic() - started
    if process.returncode != 0:
        raise SystemExit(f"reconcile failed:\n{process.output}")
    # The command's session ends with it: its backend's CPU is the postmaster's once reaped.
    backend = re.search(r"backend pid ([0-9]+)", process.output)
    deadline = time.monotonic() + 10
    while backend and os.path.exists(f"/proc/{backend.group(1)}") and time.monotonic() < deadline:
        time.sleep(0.01)
    reaped = backend is not None and not os.path.exists(f"/proc/{backend.group(1)}")
    pg = cpu_seconds()["postgres"] - pg_before if reaped else float("nan")  # else not all counted
    scan = float(re.search(r"compared in ([0-9.]+) s", process.output).group(1))
    found = re.search(r"command cpu ([0-9.]+) s", process.output)
    wal_after, checkpoints_after = wal_and_checkpoints()
    app = float(found.group(1)) if found else float("nan")
    return scan, wall, peak, app, pg, wal_after - wal_before, checkpoints_after - checkpoints_before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument(
        "--page-size",
        type=int,
        default=1000,
        help="CONDUIT_RECONCILE_PAGE_SIZE for the scan (1 to 5000; the default's 1000)",
    )
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    server, provider_state = serve(port=0)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    results = {}
    for n in (int(s) for s in args.sizes.split(",")):
        t0 = time.monotonic()
        source = prepare(n, provider_state, url)
        # The provider's held events are the bench's own heap: out of the collector's reach, so
        # the provider answers a page in the same time whatever it holds, as a real one would.
        gc.collect()
        gc.freeze()
        print(f"{n} events: prepared in {time.monotonic() - t0:.1f} s", flush=True)
        scan, wall, rss, app_cpu, pg_cpu, wal, checkpoints = reconcile(source, n, args.page_size)
        counts = ReconcileReport.objects.filter(source=source).get().summary["counts"]
        expected = {
            "events_compared": n,
            "missing_recovered": n // 10,
            "receipts_attached": n // 10,
            "events_matched": n - n // 10,
            "source_unverified": 0,
        }
        wrong = {k: counts[k] for k in expected if counts[k] != expected[k]}
        if wrong:
            raise SystemExit(f"{n} events: unexpected counts {wrong}, expected {expected}")
        with provider_state.lock:
            resent = sum(n - 1 for n in provider_state.applied.values())
        results[n] = (scan, rss, app_cpu + pg_cpu)
        print(
            f"{n:>7} events: scan {scan:7.2f} s  ({n / scan:,.0f} events/s)  process wall {wall:6.2f} s  "
            f"peak RSS {rss / 1024:6.1f} MiB  CPU {app_cpu:6.2f} s + PostgreSQL {pg_cpu:6.2f} s  "
            f"WAL {wal / 2**20:,.0f} MiB  checkpoints {checkpoints}  duplicates sent {resent}",
            flush=True,
        )
    sizes = sorted(results)
    for small, large in zip(sizes, sizes[1:]):
        (t_small, m_small, c_small), (t_large, m_large, c_large) = results[small], results[large]
        print(
            f"ratio {large // small}x events ({small} -> {large}): time {t_large / t_small:.2f}x "
            f"(target <= 11x), CPU {c_large / c_small:.2f}x, peak memory {m_large / m_small:.2f}x "
            "(target flat)"
        )
    server.shutdown()


if __name__ == "__main__":
    main()
