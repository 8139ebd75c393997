"""sandbox_provider: run the loopback sandbox provider that the sandbox transport talks to."""

import json
import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from conduit.providers.sandbox.simulator import serve


class Command(BaseCommand):
    help = "Serve the sandbox provider on 127.0.0.1 (replies, receipt lookups, failure modes)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=8765)
        parser.add_argument("--no-idempotency", action="store_true",
                            help="ignore Idempotency-Key: every POST applies")
        parser.add_argument("--no-lookup", action="store_true", help="disable receipt lookups")
        parser.add_argument("--hang-seconds", type=float, default=15.0,
                            help="how long timeout_after_accept holds a request")
        parser.add_argument("--hold", action="append", default=[], metavar="FIXTURE",
                            help="hold this fixture's events as the synthetic source's own "
                                 "(what reconciliation reads); repeatable")

    def handle(self, *args, port: int, no_idempotency: bool, no_lookup: bool,
               hang_seconds: float, hold: list[str], **options) -> None:
        held = []
        for name in hold:
            try:
                document = json.loads(Path(name).read_text())
                held.append((str(document["account"]), list(document["events"])))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise CommandError(f"{name}: not a fixture with an account and events ({exc})") from None
        server, state = serve(port=port, idempotency_key=not no_idempotency,
                              receipt_lookup=not no_lookup, hang_seconds=hang_seconds)
        for account, events in held:
            state.hold(account, events)
        self.stdout.write(
            f"sandbox provider on http://127.0.0.1:{server.server_address[1]} "
            f"(idempotency key: {'no' if no_idempotency else 'yes'}, "
            f"receipt lookup: {'no' if no_lookup else 'yes'})"
        )
        self.stdout.flush()
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            server.shutdown()
