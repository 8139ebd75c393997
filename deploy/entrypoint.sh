#!/usr/bin/env bash
# One image, three processes: web (gunicorn), worker (django-q2's qcluster under the worker
# watchdog, `manage.py worker`), migrate (once per release).
# Usage: entrypoint.sh web|worker|migrate [extra arguments for that command]
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${CONDUIT_PYTHON:-python}"

command="${1:-}"
[ $# -gt 0 ] && shift
case "$command" in
  web)
    # gunicorn runs no system checks: refuse to start here on one that fails (stored
    # credentials no configured key reads, a ranged setting out of range).
    "$PY" manage.py check --fail-level ERROR
    exec "$PY" -m gunicorn --config deploy/gunicorn.conf.py conduit.wsgi:application "$@"
    ;;
  worker)
    # The worker's counters join the web's in /metrics only on the same host; clear its own
    # directory at start, as gunicorn's on_starting does for the web.
    if [ -n "${PROMETHEUS_MULTIPROC_DIR:-}" ]; then
      rm -rf "${PROMETHEUS_MULTIPROC_DIR:?}"/* && mkdir -p "$PROMETHEUS_MULTIPROC_DIR"
    fi
    # `manage.py worker` runs qcluster as its child and ends and restarts a cluster that finishes
    # no task while work is due (CONDUIT_WORKER_WATCHDOG_SECONDS; conduit/watchdog.py).
    exec "$PY" manage.py worker "$@"
    ;;
  migrate)
    # Safe to run from every release: applies what is missing, then checks nothing is left.
    "$PY" manage.py migrate --noinput "$@"
    exec "$PY" manage.py migrate --check
    ;;
  *)
    echo "usage: entrypoint.sh web|worker|migrate" >&2
    exit 64
    ;;
esac
