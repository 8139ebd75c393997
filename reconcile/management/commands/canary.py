"""canary: prove the whole path on the signed synthetic fixture, with zero external calls."""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand, CommandParser
from django.urls import reverse

from reconcile.proof.canary import CanaryRefused, canary_run
from reconcile.proof.platforms import canary_platform_default, canary_platforms


class Command(BaseCommand):
    help = (
        "Run the non-delivery canary: post the signed Northstar fixture, made this run's own event "
        "(fresh reserved ids), twice through the webhook "
        "endpoint, approve and send its replies into the canary sink, reconcile, check every "
        "expectation and keep a canary report. Exits 0 only when all hold."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--actor", required=True, help="the person running it; approvals are recorded for them"
        )
        parser.add_argument(
            "--platform",
            choices=sorted(canary_platforms()),
            default=canary_platform_default(),
            help="which reserved source to prove: the sandbox one (default), a Meta-shaped "
            "Instagram source read back from a Graph simulator started for the run, or a "
            "WhatsApp-shaped phone number (no read-back; its replies stay in the canary sink)",
        )

    def handle(self, *args, actor: str, platform: str | None = None, **options) -> None:
        try:
            result = canary_run(actor=actor, platform=platform)
        except CanaryRefused as exc:
            self.stderr.write(f"canary refused before any network call: {exc}")
            sys.exit(2)
        except ValueError as exc:
            self.stderr.write(str(exc))
            sys.exit(2)
        report = result.report
        summary = report.summary
        if summary["first_run"]:
            self.stdout.write(f"run {summary['run_id']}: its own synthetic event {summary['event_key']}")
        else:
            self.stdout.write(
                f"run {summary['run_id']}: found {summary['event_key']} held already "
                f"(seen_count {summary['seen_count']['before']} -> {summary['seen_count']['after']}): "
                "this run's evidence is not its own"
            )
        for expectation in result.expectations:
            mark = "ok  " if expectation.ok else "FAIL"
            detail = (
                "" if expectation.ok else f" (expected {expectation.expected}, found {expectation.found})"
            )
            self.stdout.write(f"  {mark} {expectation.name}{detail}")
        path = reverse("admin:reconcile_canaryreport_change", args=[report.pk])
        export = reverse("admin:reconcile_canaryreport_export", args=[report.pk])
        self.stdout.write(f"canary report {report.pk}: {path} (JSON: {export})")
        if not report.ok:
            self.stderr.write(f"canary FAILED: {report.failed}")
            sys.exit(1)
        self.stdout.write(self.style.SUCCESS("canary passed"))
