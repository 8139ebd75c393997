"""Test-only process: fail once through a view and once through a django-q2 task, then flush Sentry.

Usage: sentry_run.py [--no-scrub]   (SENTRY_DSN and CONDUIT_PLANTED_SECRET from the environment)
"""

import os
import sys

os.environ["DJANGO_SETTINGS_MODULE"] = "tests.ops.sentry_settings"

if "--no-scrub" in sys.argv:
    # The positive control: the boundary's scrubber taken away, nothing else changed.
    import conduit.observability

    conduit.observability.scrub = lambda value: value

import django

django.setup()

import threading  # noqa: E402
import urllib.error  # noqa: E402
import urllib.request  # noqa: E402
from wsgiref.simple_server import WSGIRequestHandler, make_server  # noqa: E402

import sentry_sdk  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402
from django_q.tasks import async_task  # noqa: E402

from tests.ops.planted import PlantedError  # noqa: E402


class QuietHandler(WSGIRequestHandler):
    def log_message(self, *args) -> None:
        pass


# The view fails behind Django's WSGI handler, as under gunicorn (sentry-sdk wraps that handler).
server = make_server("127.0.0.1", 0, get_wsgi_application(), handler_class=QuietHandler)
threading.Thread(target=server.serve_forever, daemon=True).start()
request = urllib.request.Request(
    f"http://127.0.0.1:{server.server_port}/planted-error/", headers={"Host": "localhost"}
)
try:
    urllib.request.urlopen(request, timeout=30)
except urllib.error.HTTPError as exc:
    print(f"view status={exc.code}")
server.shutdown()
try:
    async_task("tests.ops.planted.failing_task", sync=True)
except PlantedError:
    print("task raised=PlantedError")
sentry_sdk.flush(timeout=10)
