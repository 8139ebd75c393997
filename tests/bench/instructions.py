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
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
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


def child(path: str, requests: int, warm: int) -> None:
    """Answer `warm` then `requests` deliveries; print what was measured around the latter."""
    application, raw, connection = (_floor_requests if path == "floor" else _conduit_requests)(
        warm + requests
    )
    environs = [wsgi_environ(r) for r in raw]

    def start_response(status: str, headers: list) -> None:
        if not status.startswith("200"):
            raise SystemExit(f"bench-cpu: {path} answered {status}")

    for environ in environs[:warm]:
        b"".join(application(environ, start_response))
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_insert_lsn()")
        (before,) = cursor.fetchone()
    _callgrind("on")
    for environ in environs[warm:]:
        b"".join(application(environ, start_response))
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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=300, help="requests counted per path")
    parser.add_argument("--warm", type=int, default=50, help="requests answered first, not counted")
    parser.add_argument("--child", choices=PATHS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.requests, args.warm)
        return
    for tool in ("valgrind", "callgrind_control"):
        if shutil.which(tool) is None:
            raise SystemExit(f"bench-cpu: {tool} not found (Debian: apt-get install valgrind)")
    sys.path.insert(0, str(HERE))
    import floor
    from common import bench_source
    from workload import ACCOUNT

    bench_source("bench", ACCOUNT, floor_table=floor.CREATE)  # the source the Conduit requests name
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


if __name__ == "__main__":
    main()
