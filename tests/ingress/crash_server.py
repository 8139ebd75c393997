"""A Conduit server that is killed (SIGKILL) after the ingest commit and before acknowledging.

Run by the lost-response test as a real subprocess: `python crash_server.py PORT`.
"""

import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "conduit.settings")

import django  # noqa: E402

django.setup()

from django.core.servers.basehttp import run  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402
from django.db import connection  # noqa: E402

from ingress import views  # noqa: E402
from ingress.services import ingest  # noqa: E402

committed_receive = ingest.webhook_receive


def receive_then_die(**kwargs):
    result = committed_receive(**kwargs)
    # The service's durable transaction has committed; nothing has been sent back.
    assert not connection.in_atomic_block
    sys.stderr.write(f"crash_server: committed {result.delivery_id}, killing before the response\n")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


views.webhook_receive = receive_then_die
run("127.0.0.1", int(sys.argv[1]), get_wsgi_application(), threading=False)
