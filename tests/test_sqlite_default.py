"""`make demo` runs on SQLite: ingest, approval, the SKIP LOCKED drain, a decision and a reconcile."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_embedded_default_path_works_on_sqlite(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    result = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "sqlite_smoke.py"), str(tmp_path / "demo.sqlite3")],
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    report = json.loads(result.stdout.decode().strip().splitlines()[-1])
    assert report["statuses"] == [200, 200]
    assert report["seen_count"] == 2
    assert report["states"] == ["SENT", "SENT"]
    assert report["applied"] == [1, 1]
    assert report["sent"] == [[report["sent"][0][0], "SENT"], "SENT", None]
    # The sandbox honours idempotency keys, so with no model the rules say a retry is safe.
    assert report["verdict"] == "retry"
    # Reconciliation recovers the missed event (two actions held for review) and confirms both sends.
    assert report["reconcile"] == {"events_matched": 1, "missing_recovered": 1, "replies_confirmed": 2}
    assert report["actions_after_reconcile"] == 4
