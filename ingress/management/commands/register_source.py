"""register_source: create a source, or confirm an identical one, from the command line."""

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from conduit.providers.registry import ADAPTERS
from ingress.services import SourceConflict, source_register
from replies.sender import copy_current, reply_copy_create


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
            "--copy", action="append", default=[], dest="copies", metavar="PURPOSE=TEXT",
            help="approved reply copy for a purpose (repeat per purpose)",
        )
        parser.add_argument(
            "--channel", action="append", default=[], dest="channels", metavar="PURPOSE=CHANNEL",
            help="destination channel for a purpose's copy (default: the purpose's name)",
        )
        parser.add_argument("--transport", default="sandbox", help="where approved replies are sent")
        parser.add_argument("--transport-url", default="", help="base URL of the sandbox provider")
        parser.add_argument(
            "--canary", action="store_true",
            help="mark this a trusted test source: its events are canaries and never sent",
        )

    def handle(self, *args, **options) -> None:
        copies = self._pairs(options["copies"], "--copy")
        channels = self._pairs(options["channels"], "--channel")
        unknown = (set(copies) | set(channels)) - set(options["purposes"])
        if unknown:
            raise CommandError(f"not declared with --purpose: {', '.join(sorted(unknown))}")
        try:
            with transaction.atomic():
                source, created = self._register(options)
                notes = [self._copy(source, purpose, text, channels.get(purpose, purpose))
                         for purpose, text in copies.items()]
        except SourceConflict as exc:
            raise CommandError(str(exc)) from None
        except ValidationError as exc:
            problems = "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())
            raise CommandError(f"invalid source: {problems}") from None
        verb = "registered" if created else "unchanged, already registered with these values"
        self.stdout.write(f"source {source.name}: {verb} (/webhooks/{source.name}/)")
        for note in notes:
            self.stdout.write(note)

    @staticmethod
    def _pairs(values: list[str], flag: str) -> dict[str, str]:
        pairs = {}
        for value in values:
            key, sep, text = value.partition("=")
            if not sep or not key.strip() or not text.strip():
                raise CommandError(f"{flag} takes PURPOSE=VALUE, got {value!r}")
            pairs[key.strip()] = text.strip()
        return pairs

    @staticmethod
    def _copy(source, purpose: str, text: str, channel: str) -> str:
        current = copy_current(source_id=source.pk, purpose=purpose)
        if current and (current.text, current.channel) != (text, channel):
            raise SourceConflict(
                f"purpose {purpose!r} already has approved copy {current.copy_version} with another "
                "text or channel; add a new version under Replies > Reply copies if that is intended"
            )
        copy, made = reply_copy_create(
            source_id=source.pk, purpose=purpose, channel=channel, text=text, actor="register_source"
        )
        return f"copy {purpose}: {'approved as ' + copy.copy_version if made else 'unchanged'}"

    @staticmethod
    def _register(options: dict):
        return source_register(
            name=options["name"], adapter=options["adapter"], account_ref=options["account_ref"],
            event_types=options["event_types"], purposes=options["purposes"],
            trigger_keywords=options["trigger_keywords"], secret_env=options["secret_env"],
            contract_version=options["contract_version"],
            retention_days=options["retention_days"], canary=options["canary"],
            transport=options["transport"], transport_url=options["transport_url"],
        )
