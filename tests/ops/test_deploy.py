"""Deployment files: compose's topology and settings, the entrypoint's migrate, gunicorn's hooks, the units."""

from __future__ import annotations

import os
import re
import runpy
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
CONDUIT_SERVICES = {"migrate", "web1", "web2", "web3", "worker1", "worker2", "sandbox-provider"}


def compose() -> dict:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def documented_settings() -> set[str]:
    """Variable names read in conduit/settings.py or listed in docs/configuration.md's table."""
    settings_text = (ROOT / "conduit/settings.py").read_text()
    names = set(re.findall(r"""["']([A-Z][A-Z0-9_]+)["']""", settings_text))
    names |= set(re.findall(r"^([A-Z][A-Z0-9_]+)=", settings_text, re.M))
    table = (ROOT / "docs" / "configuration.md").read_text()
    names |= set(re.findall(r"^\| `([A-Z][A-Z0-9_]+)`", table, re.M))
    return names


def undocumented(environment: dict) -> set[str]:
    return {name for name in environment if name not in documented_settings()}


def test_compose_has_the_topology():
    services = compose()["services"]
    assert set(services) == CONDUIT_SERVICES | {"postgres-primary", "postgres-replica", "redis"}
    assert [services[f"web{n}"]["command"] for n in (1, 2, 3)] == [["web"]] * 3
    assert [services[f"worker{n}"]["command"] for n in (1, 2)] == [["worker"]] * 2
    assert services["migrate"]["command"] == ["migrate"]
    # One image for every Conduit process.
    assert {services[name]["image"] for name in CONDUIT_SERVICES} == {"conduit:latest"}
    # The replica streams from the primary.
    assert "pg_basebackup -h postgres-primary" in " ".join(services["postgres-replica"]["command"])
    for name in CONDUIT_SERVICES - {"migrate"}:
        assert services[name].get("restart") == "unless-stopped"
    for name in ("web1", "web2", "web3", "worker1", "worker2"):
        assert services[name]["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}


def test_every_variable_compose_sets_for_conduit_is_a_documented_setting():
    services = compose()["services"]
    for name in CONDUIT_SERVICES:
        environment = services[name]["environment"]
        assert "SECRET_KEY" in environment and environment["DEBUG"] == "false"
        assert environment["CONDUIT_BEHIND_TLS_PROXY"] == "on"
        assert undocumented(environment) == set(), name
        # Secrets come from the operator's environment, never written into the file.
        for secret in ("SECRET_KEY", "CONDUIT_METRICS_TOKEN"):
            assert environment[secret].startswith("${"), secret


def test_positive_control_an_invented_setting_is_caught():
    environment = dict(compose()["services"]["web1"]["environment"], CONDUIT_NOT_A_SETTING="1")
    assert undocumented(environment) == {"CONDUIT_NOT_A_SETTING"}


def test_the_entrypoint_migrates_a_fresh_database():
    base = os.environ["DATABASE_URL"]
    name = f"conduit_entrypoint_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        url = base.rsplit("/", 1)[0] + "/" + name
        env = {**os.environ, "DATABASE_URL": url, "CONDUIT_PYTHON": sys.executable}
        done = subprocess.run(
            ["bash", str(DEPLOY / "entrypoint.sh"), "migrate"],
            cwd="/",
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        with psycopg.connect(url) as conn:
            applied = conn.execute("SELECT count(*) FROM django_migrations WHERE app = 'replies'").fetchone()[
                0
            ]
            tables = conn.execute(
                "SELECT to_regclass('axes_accessattempt'), to_regclass('otp_totp_totpdevice')"
            ).fetchone()
        assert applied > 0 and all(tables)
    finally:
        with psycopg.connect(base, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_the_entrypoint_refuses_an_unknown_command():
    done = subprocess.run(["bash", str(DEPLOY / "entrypoint.sh"), "serve"], capture_output=True, text=True)
    assert done.returncode == 64 and "usage: entrypoint.sh web|worker|migrate" in done.stderr


def test_gunicorn_config_empties_the_metrics_directory_and_marks_dead_workers(tmp_path, monkeypatch):
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    (metrics_dir / "counter_999999.db").write_bytes(b"stale")
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(metrics_dir))
    config = runpy.run_path(str(DEPLOY / "gunicorn.conf.py"))
    assert config["worker_class"] == "gthread" and config["workers"] >= 1
    config["on_starting"](None)
    assert metrics_dir.is_dir() and list(metrics_dir.iterdir()) == []
    # A worker's live gauge files go when it exits (prometheus_client's mark_process_dead).
    for kind in ("gauge_livesum", "gauge_liveall"):
        (metrics_dir / f"{kind}_4242.db").write_bytes(b"")
    (metrics_dir / "counter_4242.db").write_bytes(b"")
    config["child_exit"](None, type("Worker", (), {"pid": 4242})())
    assert sorted(p.name for p in metrics_dir.iterdir()) == ["counter_4242.db"]


def test_the_image_runs_as_a_non_root_user_through_the_entrypoint():
    lines = [line.strip() for line in (DEPLOY / "Dockerfile").read_text().splitlines()]
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert users and users[-1] not in ("root", "0")
    assert 'ENTRYPOINT ["/app/deploy/entrypoint.sh"]' in lines
    assert os.access(DEPLOY / "entrypoint.sh", os.X_OK)


@pytest.mark.parametrize(
    "unit,command",
    [
        ("conduit-web.service", "web"),
        ("conduit-worker.service", "worker"),
        ("conduit-migrate.service", "migrate"),
    ],
)
def test_systemd_units_run_the_entrypoint_as_the_service_user(unit, command):
    text = (DEPLOY / "systemd" / unit).read_text()
    assert "User=conduit" in text
    assert f"ExecStart=/opt/conduit/deploy/entrypoint.sh {command}" in text
    assert "EnvironmentFile=/etc/conduit/conduit.env" in text


def test_the_worker_node_runs_qcluster_under_the_watchdog_and_stops_it_once():
    """docs/operations.md#watchdog: the worker entrypoint is `manage.py worker`; SIGTERM reaches it alone (systemd's
    KillMode=mixed) and the stop waits longer than its own grace (conduit/watchdog.py)."""
    from conduit.watchdog import STOP_GRACE_SECONDS

    assert 'exec "$PY" manage.py worker "$@"' in (DEPLOY / "entrypoint.sh").read_text()
    unit = (DEPLOY / "systemd" / "conduit-worker.service").read_text()
    assert "KillMode=mixed" in unit
    assert int(re.search(r"^TimeoutStopSec=(\d+)$", unit, re.M).group(1)) > STOP_GRACE_SECONDS
    worker = compose()["services"]["worker1"]
    assert int(worker["stop_grace_period"].rstrip("s")) > STOP_GRACE_SECONDS
