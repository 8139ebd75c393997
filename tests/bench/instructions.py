"""Instructions and WAL per webhook request: Conduit beside the bare Django floor, counted.

Run with `make bench-cpu`. Timed figures on a shared machine move with its neighbours; counted
ones do not. Each path answers the same deliveries in process, through its WSGI application
(Conduit's `conduit.wsgi`, with its lean webhook handler; the floor's `floor:application`), one
event per body, half of them repeats, and for each the bench counts:

- the instructions the Python process executes per request, under valgrind's callgrind with
  instrumentation switched on only around the measured requests (the warm-up, start-up and
  the server's own HTTP parsing not counted, nor PostgreSQL's work);
- the WAL PostgreSQL writes per request (the log position before and after those requests),
  the closest counted figure of the database's work for each event.

It prints both per path and Conduit's ratio to the floor. It needs valgrind (Debian's package).

Then, timed and so as noisy as the machine (`--timed N` requests a path a round, `--rounds`
rounds, the paths' order reversed every other round, medians), each path answers fresh
deliveries outside valgrind, and
the bench reads what each request cost on either side of the connection: the CPU of the Python
process, of its PostgreSQL backend (from /proc: the server runs on this machine), and, where
PostgreSQL loads pg_stat_statements with track_planning on (`make bench-cpu` has it do so), the
time the backend spent planning and executing the request's statements, the foreign-key checks
of their rows listed apart among them. What the backend spent beyond those is the rest of the
request's round trip: parsing, binding and reading the parameters, taking the locks, the commit
and its WAL flush.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
PATHS = ("floor", "conduit")
FLOOR_SECRET = "floor-" + uuid.uuid4().hex  # made for this run only; it signs nothing real


def wsgi_environ(raw: bytes) -> dict:
    """A WSGI environ for one raw HTTP/1.1 request, as a server would build it."""
    head, _, body = raw.partition(b"\r\n\r\n")
    request_line, *lines = head.decode("latin-1").split("\r\n")
    method, path, protocol = request_line.split(" ")
    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "SCRIPT_NAME": "",
        "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": protocol,
        "REMOTE_ADDR": "127.0.0.1",
        "wsgi.input": io.BytesIO(body),
        "wsgi.url_scheme": "http",
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    for line in lines:
        name, value = line.split(": ", 1)
        key = name.upper().replace("-", "_")
        environ[key if key in ("CONTENT_TYPE", "CONTENT_LENGTH") else f"HTTP_{key}"] = value
    return environ


def _floor_requests(count: int) -> tuple:
    """The floor's WSGI application and `count` requests (the floor configures Django itself)."""
    os.environ["BENCH_FLOOR_SECRET"] = FLOOR_SECRET
    sys.path.insert(0, str(HERE))
    import floor
    from workload import ACCOUNT, workload

    docs = workload(uuid.uuid4().hex[:8], 0)
    raw = [floor.request(ACCOUNT, next(docs), FLOOR_SECRET) for _ in range(count)]
    return floor.application, raw, floor.connection


def _conduit_requests(count: int) -> tuple:
    """Conduit's WSGI application (as gunicorn serves it) and `count` signed requests."""
    sys.path.insert(0, str(HERE))
    import run  # sets Django up (tests/bench/common.py) and signs as the bench's senders do
    from django.db import connection

    from conduit.wsgi import application

    docs = run.workload(uuid.uuid4().hex[:8], 0)
    return application, [run.HttpPath._request(next(docs)) for _ in range(count)], connection


def _callgrind(switch: str) -> None:
    subprocess.run(["callgrind_control", "-i", switch, str(os.getpid())], check=True, capture_output=True)


def _backend_cpu(connection) -> tuple[int, float]:
    """The connection's PostgreSQL backend (on this machine): its pid and CPU seconds so far."""
    from procstat import cpu_seconds

    connection.ensure_connection()
    pid = connection.connection.info.backend_pid  # psycopg's own record: no statement sent
    return pid, cpu_seconds(pid)


# The statements this database planned and ran since the reset, the bench's own reads left out.
STATEMENTS_SQL = (
    "SELECT coalesce(sum(calls), 0), coalesce(sum(total_plan_time + total_exec_time), 0) "
    "FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
    "AND query NOT LIKE '%pg_stat_statements%'"
)


def _statements_reset(connection) -> bool:
    """Empty pg_stat_statements; False where PostgreSQL does not load it."""
    from django.db import DatabaseError

    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_stat_statements_reset()")
    except DatabaseError:  # not created, or not in shared_preload_libraries
        return False
    return True


def _timed(connection, answer, environs: list) -> dict:
    """Answer the requests outside valgrind; per request: the process's CPU, its backend's, and
    the statements' planning and execution time (None without pg_stat_statements)."""
    statements = _statements_reset(connection)
    (pid, backend), own = _backend_cpu(connection), time.process_time()
    for environ in environs:
        answer(environ)
    own = time.process_time() - own
    after, backend_after = _backend_cpu(connection)
    if after != pid:
        raise SystemExit("bench-cpu: the connection was opened again during the timed requests")
    backend = backend_after - backend
    calls = spent = None
    if statements:
        with connection.cursor() as cursor:
            cursor.execute(STATEMENTS_SQL)
            calls, spent = cursor.fetchone()
    count = len(environs)
    return {
        "python_ms": 1000 * own / count,
        "backend_ms": 1000 * backend / count,
        "statement_ms": None if spent is None else float(spent) / count,
        "statements": None if calls is None else int(calls) / count,
    }


def child(path: str, requests: int, warm: int, timed: bool = False) -> None:
    """Answer `warm` then `requests` deliveries; print what was measured around the latter:
    under callgrind, the instructions (read from its output) and the WAL; with `timed`, the CPU."""
    application, raw, connection = (_floor_requests if path == "floor" else _conduit_requests)(
        warm + requests
    )
    environs = [wsgi_environ(r) for r in raw]

    def start_response(status: str, headers: list) -> None:
        if not status.startswith("200"):
            raise SystemExit(f"bench-cpu: {path} answered {status}")

    def answer(environ: dict) -> None:
        b"".join(application(environ, start_response))

    for environ in environs[:warm]:
        answer(environ)
    if timed:
        print(json.dumps(_timed(connection, answer, environs[warm:])))
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_insert_lsn()")
        (before,) = cursor.fetchone()
    _callgrind("on")
    for environ in environs[warm:]:
        answer(environ)
    _callgrind("off")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), %s)", [before])
        (wal,) = cursor.fetchone()
    print(json.dumps({"wal_per_request": float(wal) / requests}))


def _run_child(path: str, args: argparse.Namespace) -> dict:
    """One path's figures, from a child process run under callgrind."""
    with tempfile.TemporaryDirectory() as work:
        out = Path(work) / "callgrind.out"
        command = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"]
        command += [sys.executable, str(Path(__file__).resolve()), "--child", path]
        command += ["--requests", str(args.requests), "--warm", str(args.warm)]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"bench-cpu: the {path} run failed:\n{done.stderr[-2000:]}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        totals = [line for line in out.read_text().splitlines() if line.startswith("totals:")]
        result["instructions_per_request"] = int(totals[-1].split()[1]) / args.requests
    return result


def _run_timed(path: str, args: argparse.Namespace) -> dict:
    """One path's timed figures, from a child process outside valgrind."""
    command = [sys.executable, str(Path(__file__).resolve()), "--child", path, "--timed-child"]
    command += ["--requests", str(args.timed), "--warm", str(args.warm)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"bench-cpu: the timed {path} run failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _timed_table(args: argparse.Namespace) -> None:
    """The timed rounds, the paths alternated; medians per path and of the per-round ratios."""
    rounds = {path: [] for path in PATHS}
    for round_ in range(args.rounds):
        for path in PATHS if round_ % 2 == 0 else reversed(PATHS):
            rounds[path].append(_run_timed(path, args))
    columns = ("python_ms", "backend_ms", "statement_ms", "statements")
    print(
        f"\ntimed, outside valgrind: {args.timed} requests a path a round, {args.rounds} rounds (the "
        "paths' order reversed every other\nround), medians. ms of CPU a request: the Python process's, "
        "its PostgreSQL backend's; statements: their\nplanning and execution in the backend "
        "(pg_stat_statements, the foreign-key checks among them) and how many\na request ran\n"
    )
    print(f"{'path':>8} {'python ms':>10} {'backend ms':>11} {'statement ms':>13} {'statements':>11}")

    def median(path: str, column: str) -> float | None:
        values = [r[column] for r in rounds[path]]
        return None if None in values else statistics.median(values)

    def cell(value: float | None, width: int, form: str) -> str:
        return f"{'-':>{width}}" if value is None else f"{value:>{width}{form}}"

    for path in PATHS:
        widths = (10, 11, 13, 11)
        forms = (".3f", ".3f", ".3f", ".1f")
        print(
            f"{path:>8} " + " ".join(cell(median(path, c), w, f) for c, w, f in zip(columns, widths, forms)),
            flush=True,
        )
    ratios = []
    for column in columns[:3]:
        pairs = [(c[column], f[column]) for c, f in zip(rounds["conduit"], rounds["floor"])]
        ratios.append(
            None if any(c is None or not f for c, f in pairs) else statistics.median(c / f for c, f in pairs)
        )
    print(
        f"{'ratio':>8} "
        + " ".join(f"{'-':>{w}}" if r is None else f"{r:>{w - 1}.2f}x" for r, w in zip(ratios, (10, 11, 13)))
        + "  (Conduit / floor, medians of the rounds' ratios)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=300, help="requests counted per path")
    parser.add_argument("--warm", type=int, default=50, help="requests answered first, not counted")
    parser.add_argument(
        "--timed", type=int, default=3000, help="requests a path a timed round (0: no timed rounds)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds, the paths alternated")
    parser.add_argument("--child", choices=PATHS, help=argparse.SUPPRESS)
    parser.add_argument("--timed-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.requests, args.warm, timed=args.timed_child)
        return
    if args.requests < 1 or args.warm < 0 or args.timed < 0 or args.rounds < 1:
        parser.error("--requests and --rounds must be at least 1, --warm and --timed at least 0")
    for tool in ("valgrind", "callgrind_control"):
        if shutil.which(tool) is None:
            raise SystemExit(f"bench-cpu: {tool} not found (Debian: apt-get install valgrind)")
    sys.path.insert(0, str(HERE))
    import floor
    from common import bench_source
    from workload import ACCOUNT

    bench_source("bench", ACCOUNT, floor_table=floor.CREATE)  # the source the Conduit requests name
    if args.timed:
        from django.db import DatabaseError, connection

        try:
            with connection.cursor() as cursor:
                cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        except DatabaseError:
            pass  # no statement times: that column prints "-"
    print(
        f"per webhook request, one event a body, half of them repeats; {args.requests} requests a path "
        f"after {args.warm} not counted.\ninstructions: the Python process under callgrind (no HTTP "
        "server, no PostgreSQL); WAL: the bytes PostgreSQL logged for them\n"
    )
    print(f"{'path':>8} {'instructions':>14} {'WAL bytes':>10}")
    figures = {}
    for path in PATHS:
        figures[path] = _run_child(path, args)
        print(
            f"{path:>8} {figures[path]['instructions_per_request']:>14,.0f} "
            f"{figures[path]['wal_per_request']:>10,.0f}",
            flush=True,
        )
    conduit, floor_ = figures["conduit"], figures["floor"]
    print(
        f"{'ratio':>8} {conduit['instructions_per_request'] / floor_['instructions_per_request']:>13.2f}x "
        f"{conduit['wal_per_request'] / floor_['wal_per_request']:>9.2f}x  (Conduit / floor)"
    )
    if args.timed:
        _timed_table(args)


if __name__ == "__main__":
    main()
