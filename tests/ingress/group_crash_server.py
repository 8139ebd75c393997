"""A threaded Conduit server that is killed (SIGKILL) inside its first shared commit.

Run by the group commit kill test as a real subprocess: `python group_crash_server.py PORT MOMENT`,
MOMENT `before_commit` (the group's statements ran in its open transaction, COMMIT not sent) or
`after_commit` (COMMIT returned, no request answered yet). A lone body's commit is left alone.
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

from conduit import groupcommit  # noqa: E402
from conduit.groupcommit import GroupCommit  # noqa: E402

groupcommit._process.patience = 60.0  # the test holds the first commit in flight on purpose

port, moment = int(sys.argv[1]), sys.argv[2]


def die(group) -> None:
    sys.stderr.write(f"group_crash_server: killed {moment} of a shared commit of {len(group)}\n")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


if moment == "before_commit":
    execute = GroupCommit.execute

    def execute_then_die(group):
        execute(group)
        die(group)

    GroupCommit.execute = staticmethod(execute_then_die)
elif moment == "after_commit":
    run_group = GroupCommit.run_group

    def run_group_then_die(self, group) -> None:
        run_group(self, group)
        die(group)

    GroupCommit.run_group = run_group_then_die
else:
    raise SystemExit(f"unknown moment {moment!r}")

run("127.0.0.1", port, get_wsgi_application(), threading=True)
