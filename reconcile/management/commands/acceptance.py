"""acceptance: run seed 000's acceptance checks and controls, and print the acceptance report."""

from __future__ import annotations

import contextlib
import json
import sys

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser
from django.db import connection
from django.test.utils import setup_test_environment, teardown_test_environment

from reconcile.proof import acceptance, testkit

HUMAN_HELD = [
    "Credentials and account access: connecting an account and entering its secret (in the environment only).",
    "Buyer data and every actual field value: real payloads never enter fixtures, tests or reports.",
    "Trigger policy, reply copy, consent, retention periods and platform judgment.",
    "Approval of every outward action (the review queue) and enabling any live send "
    "(CONDUIT_LIVE_SEND=on and an owner's per-source switch).",
    "Every decision on SEND_STATUS_UNKNOWN and on reconciliation's retry candidates.",
    "Production routing, qualification and later commercial decisions.",
    "What the canary cannot prove: production credentials, platform permission, a live send.",
]


class Command(BaseCommand):
    help = ("Run every acceptance check of seed 000 and its positive controls on a throwaway database "
            "created on the configured server, then print the acceptance report (event contract, field "
            "map, storage schema, state transitions, canary result, reconciliation report, results and "
            "the human-held checklist). Exits 1 when a check fails or a control stays green.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", dest="as_json", help="print the report as JSON")

    def handle(self, *args, as_json: bool, **options) -> None:
        setup_test_environment()
        old_name = connection.settings_dict["NAME"]
        connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
        # The planted faults make noise on purpose (tracebacks of deliberate 500s): the run's log
        # lines and stderr are held, and shown with -v 2 or when something failed.
        try:
            with testkit.console_held() as held, contextlib.redirect_stderr(held):
                report = self._run()
        finally:
            connection.creation.destroy_test_db(old_name, verbosity=0)
            teardown_test_environment()
        lines = held.getvalue()
        ok = all(r["ok"] for r in report["acceptance"]["rows"]) and all(
            c["ok"] for c in report["acceptance"]["instrument_integrity"] if c["ran"])
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

        rows, canary_result, reconcile_summary = [], None, None
        for row in acceptance.ROWS:
            self._fresh()
            failures = self._attempt(lambda: self._check(row))
            rows.append({"row": row.name, "evidence": row.evidence, "ok": not failures, "failures": failures})
            if row.name == "Canary":
                latest = CanaryReport.objects.order_by("-pk").first()
                canary_result = latest and {"ok": latest.ok, "expectations": latest.expectations}
            if row.name == "Reconciliation":
                first = ReconcileReport.objects.order_by("pk").first()  # the scan that recovered
                reconcile_summary = first and first.summary
        controls = []
        # The constraint-dropping control runs last: its DDL is not undone, and the
        # database is destroyed afterwards.
        for control in sorted(acceptance.CONTROLS, key=lambda c: c.plant is testkit.without_event_uniqueness):
            self._fresh()
            row = acceptance.row(control.row)

            def planted():
                with control.plant():
                    return self._check(row)

            needs_postgres = control.plant is testkit.without_event_uniqueness
            failures = None if needs_postgres and connection.vendor != "postgresql" else self._attempt(planted)
            controls.append({
                "row": control.row, "fault": control.fault, "ran": failures is not None,
                "ok": bool(failures), "check_reported": failures or [],
            })
        return {
            "database": connection.vendor,
            "event_contract": _event_contract(),
            "field_map": _field_map(),
            "storage_schema": _storage_schema(),
            "state_transitions": _state_transitions(),
            "canary_result": canary_result,
            "reconciliation_report": reconcile_summary,
            "acceptance": {"rows": rows, "instrument_integrity": controls},
            "human_held_checklist": HUMAN_HELD,
        }

    # -- printing ---------------------------------------------------------

    def _print(self, report: dict) -> None:
        w = self.stdout.write
        w("Conduit acceptance report (seed 000)")
        w(f"database: {report['database']} (a throwaway test database, destroyed afterwards)\n")
        w("1. Event contract")
        for name, rule in report["event_contract"].items():
            w(f"   {name:<22} {rule}")
        w("\n2. Field map (sandbox-social, frozen)")
        for source_field, contract_field in report["field_map"]["map"].items():
            w(f"   {source_field:<12} -> {contract_field}")
        w(f"   required: {', '.join(report['field_map']['required'])}; optional: "
          f"{', '.join(report['field_map']['optional'])}")
        w("\n3. Storage schema")
        for table in report["storage_schema"]:
            w(f"   {table['table']}: unique {', '.join(table['unique']) or '-'}; checks {', '.join(table['checks']) or '-'}")
        w("\n4. State transition tables")
        for ledger, moves in report["state_transitions"].items():
            w(f"   {ledger}: " + "; ".join(moves))
        w("\n5. Canary result")
        canary = report["canary_result"]
        if canary:
            for e in canary["expectations"]:
                w(f"   {'ok  ' if e['ok'] else 'FAIL'} {e['name']}")
        else:
            w("   no canary report")
        w("\n6. Reconciliation report (the reconciliation check's run)")
        summary = report["reconciliation_report"]
        if summary:
            from reconcile.publication import REPORT_COUNTS

            w(f"   window {summary['window']}, contract {summary['contract_version']}, "
              f"{summary['source_cursor']['pages']} page(s)")
            w("   " + ", ".join(f"{k}={summary['counts'][k]}" for k in REPORT_COUNTS))
        else:
            w("   no reconciliation report")
        w("\n7. Acceptance checks")
        for row in report["acceptance"]["rows"]:
            w(f"   {'PASS' if row['ok'] else 'FAIL'} {row['row']}: {row['evidence']}")
            for failure in row["failures"]:
                w(f"        {failure}")
        w("   Instrument integrity (each fault planted, the check must report failure):")
        for control in report["acceptance"]["instrument_integrity"]:
            status = ("fails as it must" if control["ok"] else "STAYED GREEN") if control["ran"] \
                else "not run (needs PostgreSQL)"
            w(f"   {status}: {control['row']} with {control['fault']}")
        w("\n8. Human-held checklist")
        for item in report["human_held_checklist"]:
            w(f"   [ ] {item}")


def _event_contract() -> dict[str, str]:
    return {
        "source_system": "adapter's system (trusted configuration)",
        "source_account_ref": "payload account, must equal the source's",
        "source_event_id": "provider event id (optional)",
        "event_type": "allowlisted per source",
        "conversation_ref": "stable thread id",
        "message_ref": "stable message id",
        "sender_ref": "stable sender id",
        "occurred_at": "UTC; the original offset kept",
        "received_at": "first_received_at / last_received_at",
        "payload_hash": "SHA-256 of the canonical JSON of the accepted event",
        "contract_version": "per source (event-v1)",
        "canary": "trusted source configuration, never the payload",
        "trigger": "trigger_rule_version and trigger_match",
        "event_key": "system:account:type:event_id, or SHA-256(system|account|type|conversation|message)",
        "reply_key": 'SHA-256("reply|" + event_key + "|" + purpose)',
    }


def _field_map() -> dict:
    from conduit.providers.sandbox import webhook as sandbox_social

    return {"map": dict(sandbox_social.FIELD_MAP), "required": list(sandbox_social.REQUIRED),
            "optional": list(sandbox_social.OPTIONAL)}


def _storage_schema() -> list[dict]:
    from django.db import models

    from ingress.models import Delivery, InboundEvent, QuarantineReceipt, Source
    from reconcile.models import Finding, ReconcileRun, ScanState
    from replies.models import ReplyAction

    tables = []
    for model in (Source, InboundEvent, Delivery, QuarantineReceipt, ReplyAction, ReconcileRun, ScanState, Finding):
        constraints = model._meta.constraints
        tables.append({
            "table": model._meta.db_table,
            "unique": [c.name for c in constraints if isinstance(c, models.UniqueConstraint)],
            "checks": [c.name for c in constraints if isinstance(c, models.CheckConstraint)],
        })
    return tables


def _state_transitions() -> dict[str, list[str]]:
    from ingress.contract import EVENT_TABLE, QUARANTINE_TABLE
    from replies.contract import REPLY_TABLE

    return {
        table.ledger: sorted(f"{prior or 'created'} -> {nxt}" for prior, nxt in table.moves)
        for table in (EVENT_TABLE, QUARANTINE_TABLE, REPLY_TABLE)
    }
