"""sandbox_provider: run the loopback sandbox provider that the sandbox transport talks to."""

import json
import sqlite3
import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from simulators.sandbox import serve


class Command(BaseCommand):
    help = "Serve the sandbox provider on 127.0.0.1 (replies, receipt lookups, failure modes)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=8765)
        parser.add_argument(
            "--no-idempotency", action="store_true", help="ignore Idempotency-Key: every POST applies"
        )
        parser.add_argument("--no-lookup", action="store_true", help="disable receipt lookups")
        parser.add_argument(
            "--hang-seconds", type=float, default=15.0, help="how long timeout_after_accept holds a request"
        )
        parser.add_argument(
            "--hold",
            action="append",
            default=[],
            metavar="FIXTURE",
            help="hold this fixture's events as the synthetic source's own "
            "(what reconciliation reads); repeatable",
        )
        parser.add_argument(
            "--state",
            metavar="FILE",
            default=None,
            help="keep what it applied and holds in this SQLite file, so a restart "
            "still shows every receipt (default: in memory only)",
        )

    def handle(
        self,
        *args,
        port: int,
        no_idempotency: bool,
        no_lookup: bool,
        hang_seconds: float,
        hold: list[str],
        state: str | None = None,
        **options,
    ) -> None:
        held = []
        for name in hold:
            try:
                document = json.loads(Path(name).read_text())
                held.append((str(document["account"]), list(document["events"])))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise CommandError(f"{name}: not a fixture with an account and events ({exc})") from None
        try:
            server, provider = serve(
                port=port,
                idempotency_key=not no_idempotency,
                receipt_lookup=not no_lookup,
                hang_seconds=hang_seconds,
                state_path=state,
            )
        except sqlite3.Error as exc:
            raise CommandError(f"--state {state}: not a usable SQLite file ({exc})") from None
        for account, events in held:
            provider.hold(account, events)
        kept = f"state in {state}, {len(provider.receipts)} receipt(s) kept" if state else "state in memory"
        self.stdout.write(
            f"sandbox provider on http://127.0.0.1:{server.server_address[1]} "
            f"(idempotency key: {'no' if no_idempotency else 'yes'}, "
            f"receipt lookup: {'no' if no_lookup else 'yes'}; {kept})"
        )
        self.stdout.flush()
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            server.shutdown()
