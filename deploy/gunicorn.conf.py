"""gunicorn configuration for a Conduit web node (deploy/entrypoint.sh web, conduit-web.service)."""

import multiprocessing
import os
import shutil

from prometheus_client import multiprocess

bind = os.environ.get("CONDUIT_BIND", "0.0.0.0:8000")
# Ingest is short and database-bound: a few workers per core, threads for the waits.
workers = int(os.environ.get("GUNICORN_WORKERS", multiprocessing.cpu_count() * 2 + 1))
threads = int(os.environ.get("GUNICORN_THREADS", "4"))
worker_class = "gthread"
# Longer than the slowest request (a webhook's transaction); the proxy's timeout should be longer.
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "30"))
graceful_timeout = 30
keepalive = 5
# A worker is replaced after this many requests (jittered): bounded memory growth.
max_requests = 10000
max_requests_jitter = 1000
accesslog = None  # Conduit logs its own key=value lines; the proxy keeps the access log.
errorlog = "-"
# The application is imported per worker (not preloaded): each gets its own database connections.
preload_app = False


def on_starting(server):
    # prometheus_client's multiprocess mode: every process writes its counters to a file in this
    # directory and /metrics sums them. Files left by a previous run would be summed in too:
    # start from an empty directory.
    path = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if path:
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path, exist_ok=True)


def child_exit(server, worker):
    # A dead worker's live gauges are dropped from /metrics; its counters stay summed.
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.mark_process_dead(worker.pid)
