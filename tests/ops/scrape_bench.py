"""Scrape cost of /metrics with an empty ledger and with N events (default 100 000) behind it.

Run: SECRET_KEY=bench-only-not-secret scripts/with-postgres .venv/bin/python tests/ops/scrape_bench.py [--events N]
Each event carries two reply actions (mostly SENT, a few waiting) and two transitions; one in
fifty has a quarantine receipt, most reviewed. Prints the median and p95 scrape time of each.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "conduit.settings")
os.environ["CONDUIT_METRICS_TOKEN"] = ""
os.environ["CONDUIT_METRICS_LOOPBACK"] = "on"  # no proxy in front of the bench's test client

import django  # noqa: E402

django.setup()
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402


def timed_scrapes(rounds: int) -> list[float]:
    client, spent = Client(), []
    for _ in range(rounds):
        started = time.perf_counter()
        response = client.get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_HOST="localhost")
        spent.append(time.perf_counter() - started)
        assert response.status_code == 200
    return spent


def fill(events: int) -> None:
    from ingress.services import source_register

    source, _ = source_register(
        name="bench",
        adapter="sandbox-social",
        account_ref="acct_test_bench",
        event_types=["comment.created"],
        purposes=["public_ack", "private_delivery"],
        trigger_keywords=["CHECKLIST"],
        secret_env="CONDUIT_SOURCE_BENCH_SECRET",
    )
    with connection.cursor() as c:
        c.execute(
            """
            INSERT INTO inbound_events (event_key, source_id, source_system, source_account_ref, source_event_id,
              event_type, conversation_ref, message_ref, sender_ref, occurred_at, occurred_at_original, payload_hash,
              contract_version, canary, trigger_rule_version, trigger_match, event_state, reconcile_status,
              first_received_at, last_received_at, seen_count, message_text)
            SELECT 'bench:' || g, %s, 'sandbox-social', 'acct_test_bench', 'evt_test_' || g, 'comment.created',
              'c' || g, 'm' || g, 's' || g, now(), '', md5(g::text), 'event-v1', false, 1, true, 'RECORD_READY',
              'UNRECONCILED', now(), now(), 1 + g %% 3, ''
            FROM generate_series(1, %s) g""",
            [source.pk, events],
        )
        c.execute("""
            INSERT INTO reply_actions (reply_key, event_key, purpose, campaign_id, campaign_version, approval_state,
              delivery_state, created_at, channel, copy_version, approved_by, provider_reply_id, attempt_count,
              last_error_code, canary, approved_at)
            SELECT md5(e.event_key || p), e.event_key, p, c.id, 1, 'APPROVED',
              CASE WHEN e.id % 997 = 0 THEN 'SEND_STATUS_UNKNOWN' WHEN e.id % 499 = 0 THEN 'REVIEW_PENDING'
                   ELSE 'SENT' END, now(), '', '', 'bench', '', 1, '', false, now()
            FROM inbound_events e, (VALUES ('public_ack'), ('private_delivery')) AS v(p),
              reply_campaigns c WHERE c.source_id = e.source_id AND c.account_default""")
        c.execute("""
            INSERT INTO reply_action_transitions (action_id, ledger, prior_state, next_state, at, actor, reason_code, refused)
            SELECT a.id, 'reply_action', 'SENDING', a.delivery_state, now() - interval '1 hour', 'bench', 'bench', false
            FROM reply_actions a""")
        c.execute(
            """
            INSERT INTO quarantine_receipts (receipt_id, source_id, reason_code, detail, state, authenticated,
              received_at, delivery_id, event_key, body_sha256, body_bytes, invalid_members, reviewed_by, review_note)
            SELECT gen_random_uuid(), %s, 'signature_mismatch', '',
              CASE WHEN g %% 10 = 0 THEN 'QUARANTINED' ELSE 'DISMISSED' END, false, now(), '', '', md5(g::text), 10,
              '[]', '', '' FROM generate_series(1, %s) g""",
            [source.pk, events // 50],
        )
        c.execute("ANALYZE")


def report(label: str, spent: list[float]) -> None:
    spent = sorted(spent)
    print(
        f"{label:>18}: median {statistics.median(spent) * 1000:7.1f} ms   "
        f"p95 {spent[int(len(spent) * 0.95) - 1] * 1000:7.1f} ms   ({len(spent)} scrapes)"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    timed_scrapes(3)
    report("empty", timed_scrapes(args.rounds))
    started = time.perf_counter()
    fill(args.events)
    print(f"filled {args.events} events in {time.perf_counter() - started:.1f} s")
    timed_scrapes(3)
    report(f"{args.events} events", timed_scrapes(args.rounds))
    with connection.cursor() as c:
        for table in ("inbound_events", "reply_actions", "reply_action_transitions", "quarantine_receipts"):
            c.execute(f"SELECT count(*) FROM {table}")
            print(f"{table}: {c.fetchone()[0]} rows")


if __name__ == "__main__":
    main()
