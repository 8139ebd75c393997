"""reconcile: run one scan of a source in the foreground, page by page, and say where its report is."""

from __future__ import annotations

import sys
import time
from datetime import datetime

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.urls import reverse
from django.utils.dateparse import parse_datetime

from ingress.selectors import source_by_name
from reconcile.lease import LeaseBusy
from reconcile.models import ReconcileReport
from reconcile.scan import PageOutcome, RestartRefused, ScanConflict, scan_restart, scan_until_done

ATTENTION_WORDS = {
    "UNEXPECTED_RECEIPT": (
        "unexpected receipt(s): the provider shows a reply for an action Conduit closed or has not sent",
        "admin:reconcile_finding_changelist",
        "?queue=unexpected_receipts",
    ),
    "UNKNOWN_RECEIPT": (
        "receipt(s) under a key Conduit never planned",
        "admin:reconcile_finding_changelist",
        "?queue=unexpected_receipts",
    ),
    "NO_STATUS": (
        "sent repl(ies) the platform never reported a status for",
        "admin:reconcile_finding_changelist",
        "?queue=unexpected_receipts",
    ),
    "RETRY_CANDIDATE": ("retry candidate(s) undecided", "admin:reconcile_retrycandidatequeue_changelist", ""),
}


def attention_lines(summary: dict) -> list[str]:
    """One line per kind of finding still open for a person after this scan (new and carried)."""
    lines = []
    for kind, (words, url_name, query) in ATTENTION_WORDS.items():
        counts = summary.get("needs_a_person", {}).get(kind)
        if counts and counts["open"]:
            lines.append(
                f"{counts['open']} {words} ({counts['new']} new in this report, "
                f"{counts['already_open']} found again): {reverse(url_name)}{query}"
            )
    return lines


def _when(value: str) -> datetime:
    parsed = parse_datetime(value)
    if parsed is None or parsed.tzinfo is None:
        raise CommandError(f"{value!r} is not an ISO 8601 time with an offset, e.g. 2026-01-15T00:00:00Z")
    return parsed


class Command(BaseCommand):
    help = "Reconcile one source now: read its events page by page, compare, report, repair."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("source", help="the source's name (its /webhooks/<name>/ slug)")
        parser.add_argument("--since", type=_when, help="window start (occurred_at), ISO 8601 with offset")
        parser.add_argument("--until", type=_when, help="window end, exclusive; default: now")
        parser.add_argument("--actor", default="operator:cli", help="who asked, kept in the report")
        parser.add_argument(
            "--restart",
            action="store_true",
            help="discard an active scan's staged pages first (history is kept)",
        )
        parser.add_argument(
            "--expect-run",
            type=int,
            dest="expect_run",
            metavar="RUN",
            help="with --restart: discard only if RUN is the active scan (refused otherwise)",
        )
        parser.add_argument(
            "--wait",
            type=float,
            default=120.0,
            help="seconds to wait for another worker's scan lease (default 120)",
        )

    def handle(
        self,
        *args,
        source: str,
        since,
        until,
        actor: str,
        restart: bool,
        wait: float,
        expect_run: int | None = None,
        **options,
    ) -> None:
        found = source_by_name(source)
        if found is None:
            raise CommandError(f"no source named {source!r}")
        if since and until and since >= until:
            raise CommandError("--since must be before --until")
        if expect_run is not None and not restart:
            raise CommandError("--expect-run guards --restart; pass both")
        if restart:
            try:
                run = scan_restart(source=found, actor=actor, expected_run=expect_run)
            except LeaseBusy:
                raise CommandError("a page call holds the scan lease; try again when it ends") from None
            except RestartRefused as exc:
                raise CommandError(f"restart refused: {exc}") from None
            self.stdout.write(
                f"discarded the staged pages of run {run}" if run else "no active scan to restart"
            )
        started = time.monotonic()

        def progress(outcome: PageOutcome) -> None:
            self.stdout.write(f"\rpage {outcome.pages}: {outcome.staged_events} events staged", ending="")
            self.stdout.flush()

        try:
            outcome = scan_until_done(
                source=found,
                trigger="command",
                actor=actor,
                since=since,
                until=until,
                wait_seconds=wait,
                on_page=progress,
            )
        except LeaseBusy:
            raise CommandError("another worker holds this source's scan lease; try again later") from None
        except ScanConflict as exc:
            raise CommandError(f"{exc}: pass --restart to discard it") from None
        self.stdout.write("")
        if outcome.state == "published":
            path = reverse("admin:reconcile_reconcilereport_change", args=[outcome.report_id])
            self.stdout.write(
                self.style.SUCCESS(
                    f"run {outcome.run_id}: {outcome.pages} page(s), {outcome.staged_events} source events "
                    f"compared in {time.monotonic() - started:.2f} s"
                )
            )
            export = reverse("admin:reconcile_reconcilereport_export", args=[outcome.report_id])
            self.stdout.write(f"report {outcome.report_id}: {path} (JSON: {export})")
            # A scan that completed exits 0 (the demo and schedulers read a non-zero exit as a failed
            # scan); what waits for a person is said here and makes `doctor` exit 1.
            for line in attention_lines(ReconcileReport.objects.get(pk=outcome.report_id).summary):
                self.stdout.write(self.style.WARNING(f"needs a person: {line}"))
            return
        if outcome.state == "failed":
            error = outcome.error
            self.stderr.write(
                f"run {outcome.run_id}: a page read failed: {error.message} ({error.error_class}/{error.code})"
            )
            self.stderr.write("the pages read so far are kept; run the command again to resume")
            sys.exit(1)
        if outcome.state == "discarded":
            error = outcome.error
            why = (
                f"it passed a scan limit ({error.code}: {error.message})"
                if error
                else "the source ended the scan without completing it"
            )
            self.stderr.write(
                f"run {outcome.run_id}: {why}; "
                "the pages it read were dropped; what the last complete scan read still stands"
            )
            sys.exit(1)
        self.stderr.write(f"run {outcome.run_id}: this worker lost the scan lease; another worker continues")
        sys.exit(1)
