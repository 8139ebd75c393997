"""Set-up the benchmarks share: Django on the bench database, a synthetic source, the raw DSN."""

from __future__ import annotations

import base64
import functools
import os
import secrets
import sys
from pathlib import Path

from procstat import stat_fields

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "conduit.settings")
os.environ.setdefault("SECRET_KEY", "bench-only-not-secret")
os.environ.setdefault("CONDUIT_LOG_LEVEL", "WARNING")
# A signing secret made for this run only; it signs nothing real.
BENCH_SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
os.environ["CONDUIT_SOURCE_BENCH_SECRET"] = BENCH_SECRET

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from ingress.models import Source  # noqa: E402
from ingress.services import source_register  # noqa: E402


def bench_source(name: str, account_ref: str, *, floor_table: str = "") -> Source:
    """Migrate the bench database and register a synthetic source whose trigger always matches;
    with `floor_table` (tests/bench/floor.py's CREATE), make the bare Django floor's table too."""
    call_command("migrate", verbosity=0)
    if floor_table:
        with connection.cursor() as cursor:
            cursor.execute(floor_table)
    source, _ = source_register(
        name=name,
        adapter="sandbox-social",
        account_ref=account_ref,
        event_types=["comment.created"],
        purposes=["public_ack", "private_delivery"],
        trigger_keywords=["CHECKLIST"],
        secret_env="CONDUIT_SOURCE_BENCH_SECRET",
    )
    return source


def raw_dsn() -> str:
    """The bench database for raw psycopg connections (the baselines)."""
    s = connection.settings_dict
    return f"host={s['HOST']} port={s['PORT']} user={s['USER']} dbname={s['NAME']}"


@functools.cache
def _postmaster() -> str:
    """The bench database's postmaster: the parent of this process's own backend."""
    connection.ensure_connection()
    return stat_fields(str(connection.connection.info.backend_pid))[1]


def cpu_seconds() -> dict[str, float]:
    """CPU seconds so far of the bench database's PostgreSQL (`postgres`) and of the machine's
    gunicorn processes (`gunicorn`), read from /proc. PostgreSQL's are its postmaster's, its
    running children's, and those of its children that ended (a session's backend, an autovacuum
    worker), which the postmaster holds once reaped. Another cluster on the machine is not counted."""
    tick = os.sysconf("SC_CLK_TCK")
    postmaster = _postmaster()
    used = {"postgres": 0, "gunicorn": 0}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = stat_fields(pid)
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline_file:
                cmdline = cmdline_file.read()
        except OSError:  # gone meanwhile
            continue
        own = int(fields[11]) + int(fields[12])  # utime + stime
        if pid == postmaster:
            used["postgres"] += own + int(fields[13]) + int(fields[14])  # + its reaped children's
        elif fields[1] == postmaster:
            used["postgres"] += own
        elif b"gunicorn" in cmdline:
            used["gunicorn"] += own
    return {name: ticks / tick for name, ticks in used.items()}
