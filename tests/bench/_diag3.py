import os, subprocess, sys, time
sys.argv=[sys.argv[0]]
import reconciliation as bench
from common import ROOT
from django.core.management import call_command
from replies.sandbox_provider import serve
call_command("migrate", verbosity=0)
server, st = serve(port=0)
for n in (10000, 100000):
    src = bench.prepare(n, st, f"http://127.0.0.1:{server.server_address[1]}")
    env = {**os.environ, "CONDUIT_LOG_LEVEL": "INFO"}
    t = time.monotonic()
    out = subprocess.run([sys.executable, "manage.py", "reconcile", src.name], cwd=ROOT, env=env, capture_output=True).stderr.decode()
    lines = [l for l in out.splitlines() if "page" in l]
    import re
    stamps = [l[:23] for l in lines]
    print(n, "first page", stamps[0], "last staged", stamps[-3] if len(stamps) > 2 else "", )
    for l in out.splitlines():
        if "published" in l: print(l[:200])
