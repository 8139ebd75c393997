"""worker: the worker node's process, django-q2's qcluster under the worker watchdog (conduit/watchdog.py)."""

from django.core.management.base import BaseCommand

from conduit.watchdog import supervise


class Command(BaseCommand):
    help = (
        "Run django-q2's qcluster as a child process and restart it when it finishes no task while "
        "work is due for CONDUIT_WORKER_WATCHDOG_SECONDS (0: never). SIGTERM stops it."
    )

    def handle(self, *args, **options) -> None:
        raise SystemExit(supervise())
