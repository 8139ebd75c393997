"""Run as a child process: report the pool settings and which server backends served queries."""

import json
import multiprocessing
import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "conduit.settings")
django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402

REQUESTS = 20


def backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def child(queue) -> None:
    queue.put(backend_pid())
    connection.close()


if __name__ == "__main__":
    pids = []
    for _ in range(REQUESTS):
        pids.append(backend_pid())
        connection.close()  # the end of a request
    # A fork (as django-q2 forks its workers) after the pool has served queries.
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=child, args=(queue,))
    proc.start()
    child_pid = queue.get(timeout=30)
    proc.join(30)
    after = backend_pid()
    connection.close()
    print(
        json.dumps(
            {
                "conn_max_age": settings.DATABASES["default"]["CONN_MAX_AGE"],
                "pool": settings.DATABASES["default"].get("OPTIONS", {}).get("pool"),
                "pids": pids,
                "child_pid": child_pid,
                "child_exit": proc.exitcode,
                "after": after,
            }
        )
    )
