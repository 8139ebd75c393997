"""The embedded default (SQLite) holds a statement-checked reference too, row by row (conduit.references)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import os, sys
os.environ.update(DATABASE_URL="sqlite:///" + sys.argv[1], DJANGO_SETTINGS_MODULE="conduit.settings",
                  CONDUIT_LOG_LEVEL="WARNING", SECRET_KEY="test-only-not-secret")
sys.path.insert(0, sys.argv[2])
import django
django.setup()
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction
from django.utils import timezone
call_command("migrate", verbosity=0)
from conduit.references import Reference
from ingress.services import source_register
from reconcile.models import ReconcileRun, StagedReceipt
source, _ = source_register(name="lite", adapter="sandbox-social", account_ref="acct_test_lite",
                            event_types=["comment.created"], purposes=["public_ack"], trigger_keywords=["X"],
                            secret_env="CONDUIT_SOURCE_TEST_SECRET")
now = timezone.now()
run = ReconcileRun.objects.create(source=source, trigger="command", requested_by="tester", until=now,
                                  created_at=now)
if sys.argv[3] == "control":
    with connection.cursor() as cursor:
        for sql in Reference("reconcile_stagedreceipt", "run_id", "reconcile_reconcilerun").sqlite_drop():
            cursor.execute(sql)
outcomes = []
try:
    with transaction.atomic():
        StagedReceipt.objects.create(run_id=run.pk + 1000, reply_key="a" * 64, provider_reply_id="m", event_key="k")
    outcomes.append("orphan kept")
except IntegrityError:
    outcomes.append("orphan refused")
StagedReceipt.objects.create(run=run, reply_key="b" * 64, provider_reply_id="m", event_key="k")
try:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("DELETE FROM reconcile_reconcilerun WHERE id = %s", [run.pk])
    outcomes.append("run deleted")
except IntegrityError:
    outcomes.append("delete refused")
print(" / ".join(outcomes))
"""


def _outcomes(tmp_path, mode: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "lite.sqlite3"), str(ROOT), mode],
        env=env,
        capture_output=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    return result.stdout.decode().strip().splitlines()[-1]


def test_sqlite_refuses_an_orphan_staged_row_and_a_run_deleted_from_under_its_rows(tmp_path):
    assert _outcomes(tmp_path, "kept") == "orphan refused / delete refused"


def test_positive_control_sqlite_without_the_triggers_keeps_both(tmp_path):
    assert _outcomes(tmp_path, "control") == "orphan kept / run deleted"
