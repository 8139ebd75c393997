"""register_source: create a source, or confirm an identical one, from the command line."""

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from ingress.services import SourceConflict, source_register
from ingress.sources import ADAPTERS


class Command(BaseCommand):
    help = (
        "Register a source. Running it again with the same values changes nothing; "
        "conflicting values are refused (edit a source in the admin)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="URL slug: deliveries go to /webhooks/NAME/")
        parser.add_argument("--adapter", required=True, choices=sorted(ADAPTERS))
        parser.add_argument("--account-ref", required=True, help="the source account identifier")
        parser.add_argument(
            "--event-type", action="append", required=True, dest="event_types",
            help="an allowlisted event type (repeat for more)",
        )
        parser.add_argument(
            "--purpose", action="append", default=[], dest="purposes",
            help="a declared reply purpose, e.g. public_ack (repeat for more)",
        )
        parser.add_argument(
            "--trigger-keyword", action="append", default=[], dest="trigger_keywords",
            help="a keyword whose presence plans replies (repeat for more)",
        )
        parser.add_argument(
            "--secret-env", required=True,
            help="NAME of the environment variable holding the whsec_ signing secret",
        )
        parser.add_argument("--contract-version", default="event-v1")
        parser.add_argument("--retention-days", type=int, default=30)
        parser.add_argument(
            "--canary", action="store_true",
            help="mark this a trusted test source: its events are canaries and never sent",
        )

    def handle(self, *args, **options) -> None:
        try:
            source, created = source_register(
                name=options["name"], adapter=options["adapter"], account_ref=options["account_ref"],
                event_types=options["event_types"], purposes=options["purposes"],
                trigger_keywords=options["trigger_keywords"], secret_env=options["secret_env"],
                contract_version=options["contract_version"],
                retention_days=options["retention_days"], canary=options["canary"],
            )
        except SourceConflict as exc:
            raise CommandError(str(exc)) from None
        except ValidationError as exc:
            problems = "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())
            raise CommandError(f"invalid source: {problems}") from None
        verb = "registered" if created else "unchanged, already registered with these values"
        self.stdout.write(f"source {source.name}: {verb} (/webhooks/{source.name}/)")
