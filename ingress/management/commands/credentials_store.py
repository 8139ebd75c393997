"""credentials_store: store the access token a source acts with, encrypted, read from stdin."""

import getpass
import sys

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.dateparse import parse_datetime

from conduit.credentials import CredentialKeyInvalid, CredentialKeysMissing
from ingress.models import Source
from ingress.services.credentials import credential_store


class Command(BaseCommand):
    help = (
        "Store (or replace) a source's access token, encrypted under CONDUIT_CREDENTIAL_KEYS. The token "
        "is read from standard input (prompted for without echo on a terminal), never from the "
        "command line, where other users' `ps` would see it."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--source", required=True, help="the registered source name")
        parser.add_argument(
            "--scopes", default="", help="the scopes granted, comma-separated (shown in the admin)"
        )
        parser.add_argument(
            "--expires-at", default="", help="when the token expires, ISO 8601 with a UTC offset"
        )
        parser.add_argument("--actor", default="operator:cli", help="who stored it, kept with the credential")

    def handle(self, *args, source: str, scopes: str, expires_at: str, actor: str, **options) -> None:
        registered = Source.objects.filter(name=source).first()
        if registered is None:
            raise CommandError(f"no source named {source!r}; register it with register_source")
        expires = None
        if expires_at:
            expires = parse_datetime(expires_at)
            if expires is None or expires.tzinfo is None:
                raise CommandError(f"--expires-at {expires_at!r} is not an ISO 8601 time with a UTC offset")
        if sys.stdin.isatty():
            token = getpass.getpass(f"access token for {source}: ")
        else:
            token = sys.stdin.readline()
        try:
            credential = credential_store(
                source_id=registered.pk,
                token=token,
                actor=actor,
                scopes=[s.strip() for s in scopes.split(",") if s.strip()],
                expires_at=expires,
            )
        except (CredentialKeysMissing, CredentialKeyInvalid, ValueError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"source {source}: access token …{credential.last_four} stored encrypted"
            f"{f', expires {credential.expires_at.isoformat()}' if credential.expires_at else ''}"
        )
