"""credentials_store: store the access token a source acts with, encrypted, read from stdin."""

import getpass
import sys

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.dateparse import parse_datetime

from conduit.credentials import CredentialKeyInvalid, CredentialKeysMissing
from ingress.models import Source
from ingress.services.credentials import credential_store
from ingress.services.disconnect import credential_grantor_set


class Command(BaseCommand):
    # It is how a token no key opens any longer is replaced: the start check warns of that one.
    requires_system_checks = []
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
        parser.add_argument(
            "--grantor-id",
            default="",
            help="the platform's id of the person who granted the token (Meta: the app-scoped user id "
            "its deauthorize and data deletion callbacks name), so their requests find this source",
        )

    def handle(
        self, *args, source: str, scopes: str, expires_at: str, actor: str, grantor_id: str, **options
    ) -> None:
        if grantor_id and not (grantor_id.isascii() and grantor_id.isdigit() and len(grantor_id) <= 32):
            raise CommandError(f"--grantor-id {grantor_id!r} is not 1 to 32 digits")
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
        credential_grantor_set(source_id=registered.pk, grantor_ref=grantor_id)
        self.stdout.write(
            f"source {source}: access token …{credential.last_four} stored encrypted"
            f"{f', expires {credential.expires_at.isoformat()}' if credential.expires_at else ''}"
        )
