"""`manage.py acceptance` records each run in the deployment's database: who ran it, when, on which
code version, and whether it passed (docs/concepts/acceptance.md#live).

The checks run on a throwaway database the command creates and destroys; the record is written
after it is destroyed, into the configured one. Here the throwaway database and the checks are
stood in for (the whole run is tests/acceptance/test_acceptance.py's), to watch that order.
"""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from conduit.code_version import code_version
from reconcile.management.commands import acceptance as command
from reconcile.models import AcceptanceRun


def _report(*, row_ok: bool = True, control_ok: bool = True) -> dict:
    return {
        "acceptance": {
            "rows": [
                {"row": "Event identity", "ok": True, "failures": []},
                {"row": "Reply identity", "ok": row_ok, "failures": [] if row_ok else ["found 2"]},
            ],
            "instrument_integrity": [
                {
                    "row": "Canary",
                    "fault": "a canary aimed at the live adapter",
                    "ran": True,
                    "ok": control_ok,
                },
                {"row": "Event identity", "fault": "not run here", "ran": False, "ok": False},
            ],
        }
    }


@pytest.fixture
def stood_in(monkeypatch):
    """The command with its throwaway database and checks stood in for: `order` lists what happened,
    and how many runs were recorded when the throwaway database was destroyed."""
    from django.db import connection

    order = []
    state = {"report": _report(), "raise": None}

    def run(self):
        order.append("checks")
        if state["raise"]:
            raise state["raise"]
        return state["report"]

    monkeypatch.setattr(command, "setup_test_environment", lambda: None)
    monkeypatch.setattr(command, "teardown_test_environment", lambda: None)
    monkeypatch.setattr(connection.creation, "create_test_db", lambda **kw: order.append("created"))
    monkeypatch.setattr(
        connection.creation,
        "destroy_test_db",
        lambda *a, **kw: order.append(f"destroyed with {AcceptanceRun.objects.count()} run(s) recorded"),
    )
    monkeypatch.setattr(command.Command, "_run", run)
    monkeypatch.setattr(command.Command, "_print", lambda self, report: None)
    AcceptanceRun.objects.all().delete()
    return order, state


def _acceptance(*args: str) -> int:
    try:
        call_command("acceptance", *args, stdout=io.StringIO(), stderr=io.StringIO())
    except SystemExit as exit_:
        return exit_.code
    return 0


def recording_failures(stood_in, *args: str, expect_passed: bool, expect_check: str, actor: str) -> list[str]:
    order, _ = stood_in
    failures = []
    _acceptance(*args)
    if order[:3] != ["created", "checks", "destroyed with 0 run(s) recorded"]:
        failures.append(f"the run was recorded before the throwaway database was destroyed: {order}")
    runs = list(AcceptanceRun.objects.all())
    if len(runs) != 1:
        return [*failures, f"expected one recorded run, found {len(runs)}"]
    run = runs[0]
    found = (run.passed, run.failed_check, run.ran_by, run.code_version)
    if found != (expect_passed, expect_check, actor, code_version()):
        failures.append(f"recorded {found}")
    if not run.started_at <= run.finished_at:
        failures.append("finished before it started")
    return failures


@pytest.mark.django_db
def test_a_passing_run_is_recorded_after_the_throwaway_database_is_gone(stood_in):
    assert (
        recording_failures(
            stood_in, "--actor", "ops_test", expect_passed=True, expect_check="", actor="ops_test"
        )
        == []
    )


@pytest.mark.django_db
def test_a_failed_check_is_recorded_by_name(stood_in):
    stood_in[1]["report"] = _report(row_ok=False)
    assert (
        recording_failures(
            stood_in,
            "--actor",
            "ops_test",
            expect_passed=False,
            expect_check="Reply identity",
            actor="ops_test",
        )
        == []
    )


@pytest.mark.django_db
def test_a_control_that_stayed_green_fails_the_run(stood_in):
    stood_in[1]["report"] = _report(control_ok=False)
    words = "control Canary with a canary aimed at the live adapter stayed green"
    assert (
        recording_failures(
            stood_in, "--actor", "ops_test", expect_passed=False, expect_check=words, actor="ops_test"
        )
        == []
    )


@pytest.mark.django_db
def test_a_run_that_crashes_is_recorded_as_failed(stood_in):
    stood_in[1]["raise"] = RuntimeError("planted")
    with pytest.raises(RuntimeError, match="planted"):
        call_command("acceptance", "--actor", "ops_test", stdout=io.StringIO(), stderr=io.StringIO())
    run = AcceptanceRun.objects.get()
    assert (run.passed, run.failed_check) == (False, "the run raised RuntimeError")


@pytest.mark.django_db
def test_the_actor_defaults_to_the_operating_system_user(stood_in, monkeypatch):
    monkeypatch.setattr(command.getpass, "getuser", lambda: "os_user_test")
    assert recording_failures(stood_in, expect_passed=True, expect_check="", actor="os_user_test") == []


@pytest.mark.django_db
def test_control_a_record_written_before_the_throwaway_database_is_destroyed_is_reported(
    stood_in, monkeypatch
):
    from django.db import connection

    order, _ = stood_in
    destroy = connection.creation.destroy_test_db

    def record_first(*a, **kw):
        command._record("ops_test", command.timezone.now(), "")
        destroy(*a, **kw)

    monkeypatch.setattr(connection.creation, "destroy_test_db", record_first)
    failures = recording_failures(
        stood_in, "--actor", "ops_test", expect_passed=True, expect_check="", actor="ops_test"
    )
    assert failures[0].startswith("the run was recorded before the throwaway database was destroyed")


@pytest.mark.django_db
def test_control_a_run_not_recorded_is_reported(stood_in, monkeypatch):
    def unsaved(*, failed_check: str = "", **fields) -> AcceptanceRun:
        return AcceptanceRun(
            code_version=code_version(), passed=not failed_check, failed_check=failed_check, **fields
        )

    monkeypatch.setattr(command, "acceptance_run_record", unsaved)
    assert "expected one recorded run, found 0" in recording_failures(
        stood_in, "--actor", "ops_test", expect_passed=True, expect_check="", actor="ops_test"
    )
