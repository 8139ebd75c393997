"""A send worker killed (SIGKILL) after the provider applied the reply, before the receipt is stored.

Run by the worker-kill test as a real subprocess: `python crash_worker.py ACTION_ID`.
"""

import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "conduit.settings")

import django  # noqa: E402

django.setup()

from conduit.providers.sandbox.transport import SandboxTransport  # noqa: E402
from replies.sender import reply_send  # noqa: E402

applied_send = SandboxTransport.send


def send_then_die(self, reply):
    applied_send(self, reply)  # the provider has applied it and answered with a receipt
    sys.stderr.write("crash_worker: provider applied the reply; killing before the receipt is stored\n")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


SandboxTransport.send = send_then_die
reply_send(action_id=int(sys.argv[1]))
