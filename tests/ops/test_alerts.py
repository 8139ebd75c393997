"""deploy/prometheus/alerts.yml: promtool checks the rules and runs their unit tests (never skipped)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import yaml

PROMETHEUS = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
EXPECTED_ALERTS = {
    "ConduitUnknownSendWaiting",
    "ConduitQuarantineGrowing",
    "ConduitReconcileLagging",
    "ConduitReconcilePageFailures",
    "ConduitNotReady",
    "ConduitSourceNeedsReauth",
    "ConduitSendQueueNotDraining",
    # The worker watchdog (docs/operations.md#watchdog).
    "ConduitWorkerStalled",
    "ConduitWorkerWatchdogRestarted",
}


def promtool(*args: str, cwd: Path = PROMETHEUS) -> subprocess.CompletedProcess:
    # Missing promtool fails the suite: CI installs Debian's prometheus package (.ci/run).
    path = shutil.which("promtool")
    assert path, "promtool is missing: apt-get install prometheus (Debian), as .ci/run does"
    return subprocess.run([path, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_promtool_checks_the_rules():
    result = promtool("check", "rules", "alerts.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_unit_tests_pass():
    result = promtool("test", "rules", "alerts_test.yml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_expected_alert_fires_and_stays_quiet_in_a_unit_test():
    rules = yaml.safe_load((PROMETHEUS / "alerts.yml").read_text())
    names = {rule["alert"] for group in rules["groups"] for rule in group["rules"]}
    assert EXPECTED_ALERTS <= names
    tests = yaml.safe_load((PROMETHEUS / "alerts_test.yml").read_text())["tests"]
    firing, quiet = set(), set()
    for case in tests:
        for check in case.get("alert_rule_test", []):
            (firing if check["exp_alerts"] else quiet).add(check["alertname"])
    assert names <= firing, names - firing
    assert names <= quiet, names - quiet


def test_positive_control_a_loosened_threshold_fails_the_unit_tests(tmp_path):
    for name in ("alerts.yml", "alerts_test.yml"):
        shutil.copy(PROMETHEUS / name, tmp_path / name)
    rules = tmp_path / "alerts.yml"
    text = rules.read_text()
    loosened = re.sub(
        r"conduit_unknown_send_oldest_age_seconds\) > 3600",
        "conduit_unknown_send_oldest_age_seconds) > 7200",
        text,
    )
    assert loosened != text
    rules.write_text(loosened)
    result = promtool("test", "rules", "alerts_test.yml", cwd=tmp_path)
    assert result.returncode != 0
    assert "ConduitUnknownSendWaiting" in result.stdout + result.stderr
