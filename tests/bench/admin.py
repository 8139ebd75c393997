"""Admin and read-API benchmark: p50/p95 render time of the pages people open, at 10k and at 1M events.

Run with `make bench-admin` (a throwaway PostgreSQL; DATABASE_URL exported);
`BENCH_ARGS="--events 200000 --small 10000 --samples 20"` are the knobs.

The loader writes the ledgers by COPY (psycopg 3's cursor.copy), rows generated in
Python and streamed in chunks: for each event its two transitions (RECEIVED, then
RECORD_READY or CLOSED_NO_REPLY), its two reply actions (public_ack, private_delivery)
and each action's history (created, and its final state when it moved on), plus one send
attempt per unknown or failed send. States, roughly as a busy account looks:
2% of the events have both replies waiting for review (the private one with a 7-day
deadline), 0.5% an unknown send, 0.1% a stranded failure, 5% closed without reply, 0.1%
canaries, the rest sent. Foreign-key triggers are off during the load
(session_replication_role = replica: the generated rows are consistent by construction);
secondary indexes are dropped before the big load and rebuilt after; ANALYZE after each.

The small level (--small events) is loaded first and measured; the big level appends the
rest and is measured again in the same run: the small level's figures are the baseline.
Pages are rendered in this process by Django's test Client (a logged-in superuser for the
admin, `Authorization: Token` for the API), so the figures are the server's render time
without a network or a web server in front. Target: every page's p95 at most 300 ms.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

import psycopg  # noqa: E402
from common import raw_dsn  # noqa: I001  (sets Django up)
from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402

from conduit.providers.base import event_key  # noqa: E402
from ingress.models import Source  # noqa: E402
from ingress.services import source_register  # noqa: E402
from replies.contract import reply_key  # noqa: E402
from replies.services import reply_copy_create, reply_route_declare  # noqa: E402

TARGET_MS = 300.0
SOURCES = 3
PURPOSES = ("public_ack", "private_delivery")
BIG_TABLES = (
    "inbound_events",
    "inbound_event_transitions",
    "reply_actions",
    "reply_action_transitions",
    "reply_send_attempts",
)
CHUNK = 20_000
NULL = "\\N"  # COPY text format
START = datetime(2026, 1, 1, tzinfo=dt_timezone.utc)


def setup() -> tuple[list[Source], Client, Client]:
    """Migrate, register the sources with copy and routes, and sign in a superuser and a token."""
    call_command("migrate", verbosity=0)
    sources = []
    for n in range(SOURCES):
        source, _ = source_register(
            name=f"bench{n}",
            adapter="sandbox-social",
            account_ref=f"acct_test_admin{n}",
            event_types=["comment.created"],
            purposes=list(PURPOSES),
            trigger_keywords=["CHECKLIST"],
            secret_env="CONDUIT_SOURCE_BENCH_SECRET",
        )
        for purpose in PURPOSES:
            reply_copy_create(
                source_id=source.pk,
                purpose=purpose,
                channel="public_reply",
                text="Thanks! The checklist is on its way.",
                actor="bench",
            )
            reply_route_declare(
                source_id=source.pk,
                purpose=purpose,
                transport_name="sandbox",
                target_url="http://127.0.0.1:9/",
            )
        # The every-post campaign its keywords made: what each planned action belongs to.
        source.campaign_pk = source.campaigns.get(account_default=True).pk
        sources.append(source)
    user = get_user_model().objects.create_superuser("bench", "bench@example.invalid", "bench-only")
    from rest_framework.authtoken.models import Token

    token = Token.objects.create(user=user)
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    admin = Client()
    admin.force_login(user)
    api = Client(HTTP_AUTHORIZATION=f"Token {token.key}")
    return sources, admin, api


def ts(value: datetime) -> str:
    return value.isoformat()


def action_state(i: int, purpose: str) -> str:
    """The delivery state of event i's action of `purpose` (see the module docstring)."""
    if i % 20 == 7:
        return "CLOSED_NO_REPLY"
    if i % 1000 == 17:
        return "SUPPRESSED_TEST"
    if i % 50 == 3:
        return "REVIEW_PENDING"
    if i % 200 == 11 and purpose == "public_ack":
        return "SEND_STATUS_UNKNOWN"
    if i % 1000 == 13 and purpose == "private_delivery":
        return "FAILED_BEFORE_SEND"
    return "SENT"


def handle(i: int) -> str:
    """Event i's author's handle: one per person (sender_ref person_test_<i % 10007>)."""
    return f"buyer_test_{i % 10007:05d}"


def keys(sources: list[Source], i: int) -> tuple[Source, str, str]:
    source = sources[i % len(sources)]
    ident = f"evt_test_{i:08d}"
    key = event_key(
        source_system="sandbox-social",
        source_account_ref=source.account_ref,
        event_type="comment.created",
        source_event_id=ident,
        conversation_ref=f"post_test_{i % 997}",
        message_ref=f"msg_test_{i:08d}",
    )
    return source, ident, key


def generate(sources: list[Source], lo: int, hi: int):
    """Rows for events [lo, hi) as COPY text lines, per table, in chunks."""
    events, event_trans, actions, action_trans, attempts = [], [], [], [], []
    for i in range(lo, hi):
        source, ident, key = keys(sources, i)
        eid = i + 1
        occurred = START + timedelta(seconds=5 * i)
        received = occurred + timedelta(seconds=1)
        closed = i % 20 == 7
        canary = i % 1000 == 17
        state = "CLOSED_NO_REPLY" if closed else "RECORD_READY"
        events.append(
            f"{eid}\t{key}\t{source.pk}\tsandbox-social\t{source.account_ref}\t{ident}\tcomment.created\t"
            f"post_test_{i % 997}\tmsg_test_{i:08d}\tperson_test_{i % 10007}\t{ts(occurred)}\t{ts(occurred)}\t"
            f"{'%064x' % i}\tevent-v1\t{'t' if canary else 'f'}\t1\t{'f' if closed else 't'}\t{state}\t"
            f"UNRECONCILED\t\\N\t{ts(received)}\t{ts(received)}\t1\tPlease send the CHECKLIST {i}\t\\N\t"
            f"{handle(i)}\n"
        )
        event_trans.append(
            f"{2 * eid - 1}\t{eid}\tevent\t\\N\tRECEIVED\t{ts(received)}\tingress\taccepted\tf\n"
        )
        event_trans.append(
            f"{2 * eid}\t{eid}\tevent\tRECEIVED\t{state}\t{ts(received)}\tingress\t"
            f"{'no_trigger' if closed else 'record_ready'}\tf\n"
        )
        for p, purpose in enumerate(PURPOSES):
            aid = 2 * i + p + 1
            dstate = action_state(i, purpose)
            approved = dstate in ("SENT", "SEND_STATUS_UNKNOWN", "FAILED_BEFORE_SEND", "SUPPRESSED_TEST")
            tries = (
                1
                if dstate in ("SENT", "SEND_STATUS_UNKNOWN")
                else (2 if dstate == "FAILED_BEFORE_SEND" else 0)
            )
            deadline = ts(occurred + timedelta(days=7)) if purpose == "private_delivery" else NULL
            actions.append(
                f"{aid}\t{reply_key(key, purpose)}\t{key}\t{purpose}\t{source.campaign_pk}\t1\t"
                f"{'public_reply' if approved else ''}\t{'v1' if approved else ''}\t"
                f"{'APPROVED' if approved else 'REVIEW_PENDING'}\t{'reviewer' if approved else ''}\t"
                f"{ts(received) if approved else NULL}\t{dstate}\t"
                f"{f'rcpt_test_{aid}' if dstate == 'SENT' else ''}\t{tries}\t"
                f"{'transport_timeout' if dstate == 'SEND_STATUS_UNKNOWN' else ('live_send_disabled' if dstate == 'FAILED_BEFORE_SEND' else '')}\t"
                f"{'t' if canary else 'f'}\t{ts(received)}\t\\N\t\\N\t{deadline}\n"
            )
            action_trans.append(
                f"{2 * aid - 1}\t{aid}\treply\t\\N\tREVIEW_PENDING\t{ts(received)}\tingress\tplanned\tf\n"
            )
            if dstate != "REVIEW_PENDING":
                action_trans.append(
                    f"{2 * aid}\t{aid}\treply\tREVIEW_PENDING\t{dstate}\t{ts(received)}\t"
                    f"sender\t{dstate.lower()}\tf\n"
                )
            if dstate in ("SEND_STATUS_UNKNOWN", "FAILED_BEFORE_SEND"):
                transport = "sent" if dstate == "SEND_STATUS_UNKNOWN" else "not_sent"
                attempts.append(
                    f"{aid}\t{aid}\t1\t{ts(received)}\t{transport}\t\\N\t{dstate.lower()}\tsandbox\n"
                )
        if len(events) >= CHUNK or i == hi - 1:
            yield events, event_trans, actions, action_trans, attempts
            events, event_trans, actions, action_trans, attempts = [], [], [], [], []


COLUMNS = {
    "inbound_events": (
        "id, event_key, source_id, source_system, source_account_ref, source_event_id, event_type, "
        "conversation_ref, message_ref, sender_ref, occurred_at, occurred_at_original, payload_hash, "
        "contract_version, canary, trigger_rule_version, trigger_match, event_state, reconcile_status, "
        "reconciled_at, first_received_at, last_received_at, seen_count, message_text, content_purged_at, "
        "sender_handle"
    ),
    "inbound_event_transitions": "id, event_id, ledger, prior_state, next_state, at, actor, reason_code, refused",
    "reply_actions": (
        "id, reply_key, event_key, purpose, campaign_id, campaign_version, channel, copy_version, approval_state, "
        "approved_by, approved_at, "
        "delivery_state, provider_reply_id, attempt_count, last_error_code, canary, created_at, sending_since, "
        "next_attempt_at, reply_deadline"
    ),
    "reply_action_transitions": "id, action_id, ledger, prior_state, next_state, at, actor, reason_code, refused",
    "reply_send_attempts": "id, action_id, attempt_number, at, transport, http_status, evidence, transport_name",
}
ORDER = (
    "inbound_events",
    "inbound_event_transitions",
    "reply_actions",
    "reply_action_transitions",
    "reply_send_attempts",
)


def load(sources: list[Source], lo: int, hi: int, *, rebuild_indexes: bool) -> dict[str, float]:
    """COPY events [lo, hi) and their rows; returns seconds for copy, index rebuild and ANALYZE."""
    connection.close()  # nothing of Django's holds a snapshot or lock across the load
    timings = {}
    with psycopg.connect(raw_dsn(), autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")  # no FK triggers: rows consistent by design
        conn.execute("SET synchronous_commit = off")
        conn.execute("SET maintenance_work_mem = '256MB'")
        dropped = []
        if rebuild_indexes:
            dropped = conn.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = ANY(%s) "
                "AND indexname NOT IN (SELECT conname FROM pg_constraint)",
                [list(BIG_TABLES)],
            ).fetchall()
            for name, _ in dropped:
                conn.execute(f'DROP INDEX "{name}"')
        started = time.perf_counter()
        with conn.transaction():
            with conn.cursor() as cur:
                for chunk in generate(sources, lo, hi):
                    for table, lines in zip(ORDER, chunk):
                        if lines:
                            with cur.copy(f"COPY {table} ({COLUMNS[table]}) FROM STDIN") as copy:
                                copy.write("".join(lines))
        timings["copy_s"] = time.perf_counter() - started
        started = time.perf_counter()
        for _, definition in dropped:
            conn.execute(definition)
        timings["index_s"] = time.perf_counter() - started
        started = time.perf_counter()
        for table in BIG_TABLES:
            conn.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                f"(SELECT coalesce(max(id), 1) FROM {table}))"
            )
            conn.execute(f"VACUUM ANALYZE {table}")
        timings["analyze_s"] = time.perf_counter() - started
    return timings


def pages(sources: list[Source], size: int) -> list[tuple[str, str, str]]:
    """(name, client, URL) of each page measured; keys picked inside the loaded range."""
    pick = size // 2 + 1  # an event in the middle of the range, neither newest nor oldest
    while action_state(pick, "public_ack") != "SENT":
        pick += 1
    source, ident, key = keys(sources, pick)
    from django.utils.http import urlencode

    # Pending: an event whose replies wait for review (2% of them), for the inbox's searches.
    pending = pick + 1
    while action_state(pending, "public_ack") != "REVIEW_PENDING":
        pending += 1
    _, pending_ident, _ = keys(sources, pending)
    events = "/admin/ingress/inboundevent/"
    actions = "/admin/replies/replyaction/"
    inbox = "/admin/replies/reviewqueue/inbox/"
    action_key = reply_key(key, "public_ack")
    return [
        ("review queue", "admin", "/admin/replies/reviewqueue/"),
        ("inbox", "admin", inbox),
        ("inbox, by handle", "admin", f"{inbox}?{urlencode({'q': handle(pending)})}"),
        ("inbox, by event id", "admin", f"{inbox}?{urlencode({'q': pending_ident})}"),
        ("unknown-send queue", "admin", "/admin/replies/unknownsendqueue/"),
        ("events changelist", "admin", events),
        (
            "events, filtered",
            "admin",
            f"{events}?{urlencode({'source__id__exact': source.pk, 'event_state__exact': 'CLOSED_NO_REPLY'})}",
        ),
        ("events, by whole key", "admin", f"{events}?{urlencode({'q': key})}"),
        ("events, by event id", "admin", f"{events}?{urlencode({'q': ident})}"),
        ("events, by comment id", "admin", f"{events}?{urlencode({'q': f'msg_test_{pick:08d}'})}"),
        ("events, by part of key", "admin", f"{events}?{urlencode({'q': key[-20:-3]})}"),
        ("events, by post id", "admin", f"{events}?{urlencode({'q': f'post_test_{pick % 997}'})}"),
        ("events, by handle", "admin", f"{events}?{urlencode({'q': handle(pick)})}"),
        ("events, by a rare word", "admin", f"{events}?{urlencode({'q': f'checklist {pick}'})}"),
        ("events, by a common word", "admin", f"{events}?{urlencode({'q': 'please'})}"),
        ("events, by a word in none", "admin", f"{events}?{urlencode({'q': 'nowhere_test'})}"),
        ("actions, by event id", "admin", f"{actions}?{urlencode({'q': ident})}"),
        ("actions, by reply key start", "admin", f"{actions}?{urlencode({'q': action_key[:12]})}"),
        ("event page", "admin", f"/admin/ingress/inboundevent/{pick + 1}/change/"),
        ("GET /api/events/?event_key=", "api", f"/api/events/?{urlencode({'event_key': key})}"),
    ]


# What each searched page must show: the searched row (a search that finds nothing fast is no search).
FOUND = {
    "events, by whole key": b"evt_test_",
    "events, by event id": b"evt_test_",
    "events, by comment id": b"evt_test_",
    "events, by part of key": b"evt_test_",
    "events, by post id": b"evt_test_",
    "events, by handle": b"evt_test_",
    "events, by a rare word": b"evt_test_",
    "events, by a common word": b"evt_test_",
    "actions, by event id": b"public_ack",
    "actions, by reply key start": b"public_ack",
    "inbox, by handle": b"conduit-card",
    "inbox, by event id": b"conduit-card",
    "inbox": b"conduit-card",
}


ONLY: tuple[str, ...] = ()  # --only


def measured(sources: list[Source], size: int) -> list[tuple[str, str, str]]:
    return [page for page in pages(sources, size) if not ONLY or any(part in page[0] for part in ONLY)]


def measure(clients: dict[str, Client], sources: list[Source], size: int, samples: int) -> dict[str, tuple]:
    results = {}
    for name, who, url in measured(sources, size):
        client = clients[who]
        for _ in range(2):  # warm: the first render compiles templates and fills caches
            response = client.get(url)
            assert response.status_code == 200, (name, url, response.status_code)
        times = []
        for _ in range(samples):
            started = time.perf_counter()
            response = client.get(url)
            times.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200, (name, url, response.status_code)
        if name in FOUND or name.startswith("GET /api"):
            assert FOUND.get(name, b"evt_test_") in response.content, (
                name,
                "the searched row is not on the page",
            )
        if name == "events, by a word in none":
            assert b"0 inbound events" in response.content or b"0 results" in response.content, name
        times.sort()
        p95 = times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))]
        results[name] = (statistics.median(times), p95)
    return results


def table(small: int, big: int, low: dict, high: dict) -> str:
    lines = [
        f"{'page':<30} {'p50 ' + label(small):>11} {'p95 ' + label(small):>11} {'p50 ' + label(big):>11} "
        f"{'p95 ' + label(big):>11} {'p95 ratio':>9} {'target':>7}  verdict"
    ]
    for name in high:
        (lp50, lp95), (hp50, hp95) = low.get(name, (float("nan"),) * 2), high[name]
        verdict = "PASS" if hp95 <= TARGET_MS else "FAIL"
        lines.append(
            f"{name:<30} {lp50:>9.1f}ms {lp95:>9.1f}ms {hp50:>9.1f}ms {hp95:>9.1f}ms "
            f"{hp95 / lp95:>8.2f}x {TARGET_MS:>5.0f}ms  {verdict}"
        )
    return "\n".join(lines)


def label(n: int) -> str:
    return f"{n // 1_000_000}M" if n >= 1_000_000 and n % 1_000_000 == 0 else f"{n // 1000}k"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--events", type=int, default=1_000_000, help="events at the big level (2 actions each)"
    )
    parser.add_argument("--small", type=int, default=10_000, help="events at the baseline level")
    parser.add_argument("--samples", type=int, default=20, help="timed renders per page and level")
    parser.add_argument("--explain", action="store_true", help="print each page's SQL with EXPLAIN ANALYZE")
    parser.add_argument(
        "--only", default="", help="measure only the pages whose name holds one of these (comma-separated)"
    )
    args = parser.parse_args()
    global ONLY
    ONLY = tuple(part.strip() for part in args.only.split(",") if part.strip())
    if connection.vendor != "postgresql":
        print("bench-admin needs PostgreSQL (DATABASE_URL)", file=sys.stderr)
        return 2
    sources, admin_client, api_client = setup()
    clients = {"admin": admin_client, "api": api_client}
    small = min(args.small, args.events)

    started = time.perf_counter()
    t = load(sources, 0, small, rebuild_indexes=False)
    print(
        f"loaded {small:,} events, {2 * small:,} actions in {time.perf_counter() - started:.1f}s {fmt(t)}",
        flush=True,
    )
    low = measure(clients, sources, small, args.samples)

    started = time.perf_counter()
    t = load(sources, small, args.events, rebuild_indexes=True)
    print(
        f"loaded {args.events - small:,} more events, {2 * (args.events - small):,} actions in "
        f"{time.perf_counter() - started:.1f}s {fmt(t)}",
        flush=True,
    )
    if args.explain:
        explain(clients, sources, args.events)
    high = measure(clients, sources, args.events, args.samples)
    print(
        f"\n{args.samples} renders per page and level (Django test Client, in process, logged-in superuser; "
        "the API with a token)"
    )
    print(table(small, args.events, low, high))
    return 0 if all(p95 <= TARGET_MS for _, p95 in high.values()) else 1


def fmt(timings: dict[str, float]) -> str:
    return "(" + ", ".join(f"{k.removesuffix('_s')} {v:.1f}s" for k, v in timings.items()) + ")"


def explain(clients: dict[str, Client], sources: list[Source], size: int) -> None:
    """Each page's queries with their time, and the plan of any over 20 ms."""
    from django.db import reset_queries
    from django.test.utils import CaptureQueriesContext

    for name, who, url in measured(sources, size):
        with CaptureQueriesContext(connection) as queries:
            clients[who].get(url)
        print(f"\n== {name}: {len(queries)} queries")
        for q in queries.captured_queries:
            print(f"  {float(q['time']) * 1000:8.1f} ms  {q['sql'][:160]}")
            if float(q["time"]) > 0.02 and q["sql"].lstrip().upper().startswith("SELECT"):
                with connection.cursor() as cursor:
                    cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + q["sql"])
                    print("\n".join("      " + row[0] for row in cursor.fetchall()))
        reset_queries()


if __name__ == "__main__":
    sys.exit(main())
