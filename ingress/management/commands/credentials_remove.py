"""credentials_remove: wipe a source's stored access token; the source reads its variable again."""

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ingress.models import Source
from ingress.services.credentials import credential_remove


class Command(BaseCommand):
    help = (
        "Wipe the access token stored for a source (the source, its history and its keys stay; its "
        "connection authorisation goes). It then reads the variable its token_env names, if any."
    )
    # It removes a token no key opens any longer too: the start check warns of that one.
    requires_system_checks = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--source", required=True, help="the registered source name")
        parser.add_argument("--actor", default="operator:cli", help="who removed it, kept in the log")

    def handle(self, *args, source: str, actor: str, **options) -> None:
        registered = Source.objects.filter(name=source).first()
        if registered is None:
            raise CommandError(f"no source named {source!r}")
        if not credential_remove(source_id=registered.pk, actor=actor):
            raise CommandError(f"source {source!r} has no stored access token")
        fallback = f"the variable {registered.token_env}" if registered.token_env else "no token at all"
        self.stdout.write(f"source {source}: stored access token removed; it now reads {fallback}")
