"""acceptance: run the acceptance checks and controls (docs/concepts/acceptance.md#checks), print
the acceptance report, and record the run (who, when, code version, pass or the first failure)."""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import sys
from datetime import datetime

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser
from django.db import connection
from django.test.utils import setup_test_environment, teardown_test_environment
from django.utils import timezone

from conduit.sql import fast_paths
from conduit.standins import testkit
from reconcile.models import AcceptanceRun
from reconcile.proof import acceptance, outputs
from reconcile.services import acceptance_run_record


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container's bare user)
        return f"uid {os.getuid()}"


def _first_failure(report: dict) -> str:
    """The first check that failed or control that stayed green, in words; "" when none did."""
    for row in report["acceptance"]["rows"]:
        if not row["ok"]:
            return row["row"]
    for control in report["acceptance"]["instrument_integrity"]:
        if control["ran"] and not control["ok"]:
            return f"control {control['row']} with {control['fault']} stayed green"
    return ""


def _record(actor: str, started: datetime, failed_check: str) -> AcceptanceRun:
    return acceptance_run_record(
        ran_by=actor, started_at=started, finished_at=timezone.now(), failed_check=failed_check
    )


class Command(BaseCommand):
    help = (
        "Run every acceptance check (docs/concepts/acceptance.md) and its positive controls on a throwaway database "
        "created on the configured server, then print the acceptance report (event contract, field "
        "maps, storage schema, state transitions, synthetic fixture, canary result, reconciliation "
        "report, results and the human-held checklist). Records the run in the configured "
        "database (who ran it, when, the code version, pass or the first failure): a live reply "
        "route can be enabled only while the latest run passed on the running code version. "
        "Exits 1 when a check fails or a control stays green."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", dest="as_json", help="print the report as JSON")
        parser.add_argument(
            "--actor",
            default="",
            help="who is running it, recorded with the run (default: the operating-system user)",
        )

    def handle(self, *args, as_json: bool, actor: str = "", **options) -> None:
        actor = actor.strip() or _os_user()
        started = timezone.now()
        setup_test_environment()
        old_name = connection.settings_dict["NAME"]
        connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
        # The planted faults make noise on purpose (tracebacks of deliberate 500s): the run's log
        # lines and stderr are held, and shown with -v 2 or when something failed.
        crashed = None
        try:
            with testkit.console_held() as held, contextlib.redirect_stderr(held):
                report = self._run()
        except Exception as exc:  # recorded as a failed run below, then raised
            crashed = exc
        finally:
            connection.creation.destroy_test_db(old_name, verbosity=0)
            teardown_test_environment()
        # The throwaway database is gone: the connection is the deployment's again, and the run is
        # recorded there (a record written before would have been destroyed with it).
        if crashed is not None:
            _record(actor, started, f"the run raised {type(crashed).__name__}")
            raise crashed
        lines = held.getvalue()
        failed = _first_failure(report)
        ok = not failed
        run = _record(actor, started, failed)
        report["recorded"] = {
            "run": run.pk,
            "passed": run.passed,
            "failed_check": run.failed_check,
            "code_version": run.code_version,
            "ran_by": run.ran_by,
            "started_at": run.started_at.isoformat(),
            "finished_at": run.finished_at.isoformat(),
        }
        if as_json:
            self.stdout.write(json.dumps(report, indent=2, default=str))
        else:
            self._print(report)
        if options.get("verbosity", 1) >= 2:
            self.stderr.write(lines)
        elif not ok:
            self.stderr.write(f"the run logged {len(lines.splitlines())} line(s); run with -v 2 to see them")
        if not ok:
            sys.exit(1)

    # -- running ----------------------------------------------------------

    def _fresh(self) -> None:
        call_command("flush", interactive=False, verbosity=0)

    def _check(self, row: acceptance.Row) -> list[str]:
        if not row.needs_harness:
            return row.check()
        harness = row.harness()
        try:
            return row.check(harness)
        finally:
            harness.close()

    def _attempt(self, run) -> list[str]:
        try:
            return run()
        except Exception as exc:  # a check that crashes has failed
            return [f"raised {type(exc).__name__}: {exc}"]

    def _run(self) -> dict:
        from reconcile.models import CanaryReport, ReconcileReport

        rows, canary_result, canary_summary, reconcile_summary = [], None, None, None
        # Read before any control drops a constraint: the schema the migrations made.
        self._schema = outputs.storage_schema()
        for row in acceptance.ROWS:
            self._fresh()
            failures = self._attempt(lambda: self._check(row))
            rows.append({"row": row.name, "evidence": row.evidence, "ok": not failures, "failures": failures})
            if row.name == "Canary":
                latest = CanaryReport.objects.order_by("-pk").first()
                canary_result = latest and {"ok": latest.ok, "expectations": latest.expectations}
                canary_summary = latest and latest.summary
            if row.name == "Reconciliation":
                first = ReconcileReport.objects.order_by("pk").first()  # the scan that recovered
                reconcile_summary = first and first.summary
        controls = []
        # The constraint-dropping controls run last: their DDL is not undone (the second one finds
        # the constraint gone already), and the database is destroyed afterwards.
        for control in sorted(acceptance.CONTROLS, key=lambda c: c.plant is testkit.without_event_uniqueness):
            self._fresh()
            row = acceptance.row(control.row)

            def planted():
                with control.plant():
                    return self._check(row)

            needs_postgres = control.plant is testkit.without_event_uniqueness
            failures = None if needs_postgres and not fast_paths(connection) else self._attempt(planted)
            controls.append(
                {
                    "row": control.row,
                    "fault": control.fault,
                    "ran": failures is not None,
                    "ok": bool(failures),
                    "check_reported": failures or [],
                }
            )
        return {
            "database": connection.vendor,
            "event_contract": outputs.event_contract(),
            **outputs.field_maps(),
            "storage_schema": self._schema,
            "state_transitions": outputs.state_transitions(),
            "synthetic_fixture": outputs.synthetic_fixture(canary_summary),
            "canary_result": canary_result,
            "reconciliation_report": reconcile_summary,
            "acceptance": {"rows": rows, "instrument_integrity": controls},
            "human_held_checklist": outputs.HUMAN_HELD,
        }

    # -- printing ---------------------------------------------------------

    def _print(self, report: dict) -> None:
        w = self.stdout.write
        w("Conduit acceptance report")
        w(f"database: {report['database']} (a throwaway test database, destroyed afterwards)\n")
        w("1. Event contract")
        for name, rule in report["event_contract"].items():
            w(f"   {name:<22} {rule}")
        w("\n2. Field map (sandbox-social, frozen)")
        for source_field, contract_field in report["field_map"]["map"].items():
            w(f"   {source_field:<12} -> {contract_field}")
        w(
            f"   required: {', '.join(report['field_map']['required'])}; optional: "
            f"{', '.join(report['field_map']['optional'])}"
        )
        maps = report["meta_field_maps"]
        w(
            f"   Meta field maps ({maps['contract_version']}, frozen; declared in {maps['declared_in']}), "
            f"key {maps['key_form']}"
        )
        for row in maps["maps"]:
            refs = ", ".join(f"{k} <- {v}" for k, v in row["refs"].items())
            w(f"   {row['source']}: {row['item']} -> {row['event_type']}, id {row['event_id']}; {refs}")
        for name, adapter in maps["adapters"].items():
            w(
                f"   {name} ({adapter['object']}): "
                + ", ".join(f"{f['event_type']} ({f['recovery']})" for f in adapter["families"])
            )
        w("\n3. Storage schema")
        for table in report["storage_schema"]:
            w(f"   {table['table']} ({table['model']})")
            for column in table["columns"]:
                extra = " primary key" if column.get("primary_key") else ""
                extra += f" -> {column['references']}" if column.get("references") else ""
                w(f"     {column['name']:<26} {column['type']}{'' if column['null'] else ' not null'}{extra}")
            for constraint in table["constraints"]:
                w(
                    f"     {constraint['kind']} {constraint['name']}: "
                    f"{constraint.get('definition') or ', '.join(constraint['columns'])}"
                )
        w("\n4. State transition tables")
        for ledger, moves in report["state_transitions"].items():
            w(f"   {ledger}: " + "; ".join(moves))
        fixture = report["synthetic_fixture"]
        w(
            f"\n5. Synthetic fixture ({fixture['file']}, sha256 {fixture['sha256'][:16]}…, key {fixture['event_key']}, "
            f"purposes {', '.join(fixture['purposes'])})"
        )
        for line in fixture["body"].splitlines():
            w(f"   {line}")
        if fixture["canary_run"]:
            run = fixture["canary_run"]
            w(f"   the canary run {run['run_id']} posted it as its own event {run['event_key']}:")
            for line in run["body"].splitlines():
                w(f"   {line}")
        w("\n6. Canary result")
        canary = report["canary_result"]
        if canary:
            for e in canary["expectations"]:
                w(f"   {'ok  ' if e['ok'] else 'FAIL'} {e['name']}")
        else:
            w("   no canary report")
        w("\n7. Reconciliation report (the reconciliation check's run)")
        summary = report["reconciliation_report"]
        if summary:
            from reconcile.publication import REPORT_COUNTS

            w(
                f"   window {summary['window']}, contract {summary['contract_version']}, "
                f"{summary['source_cursor']['pages']} page(s)"
            )
            w("   " + ", ".join(f"{k}={summary['counts'][k]}" for k in REPORT_COUNTS))
        else:
            w("   no reconciliation report")
        w("\n8. Acceptance checks")
        for row in report["acceptance"]["rows"]:
            w(f"   {'PASS' if row['ok'] else 'FAIL'} {row['row']}: {row['evidence']}")
            for failure in row["failures"]:
                w(f"        {failure}")
        w("   Instrument integrity (each fault planted, the check must report failure):")
        for control in report["acceptance"]["instrument_integrity"]:
            status = (
                ("fails as it must" if control["ok"] else "STAYED GREEN")
                if control["ran"]
                else "not run (needs PostgreSQL)"
            )
            w(f"   {status}: {control['row']} with {control['fault']}")
            for failure in control["check_reported"]:
                w(f"        the check reported: {failure}")
        w("\n9. Human-held checklist")
        for item in report["human_held_checklist"]:
            w(f"   [ ] {item}")
        run = report["recorded"]
        w(
            f"\nRecorded as acceptance run {run['run']} in this deployment's database: "
            f"{'PASS' if run['passed'] else 'FAIL (' + run['failed_check'] + ')'}, code version "
            f"{run['code_version']}, by {run['ran_by']} at {run['finished_at']}"
        )
