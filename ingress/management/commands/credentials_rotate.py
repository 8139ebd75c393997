"""credentials_rotate: re-seal every stored credential under the first key of CONDUIT_CREDENTIAL_KEYS."""

from django.core.management.base import BaseCommand, CommandError, CommandParser

from conduit.credentials import CredentialKeyInvalid, CredentialKeysMissing
from ingress.services.credentials import credentials_rotate


class Command(BaseCommand):
    help = (
        "Re-encrypt every stored credential under the first key of CONDUIT_CREDENTIAL_KEYS "
        "(list the new key first, the old ones after it; afterwards only the new one is needed)."
    )
    # It names the credentials no key decrypts itself, where the system check would stop it first.
    requires_system_checks = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--dry-run", action="store_true", help="count what would be re-encrypted; change nothing"
        )

    def handle(self, *args, dry_run: bool, **options) -> None:
        def progress(done: int, total: int) -> None:
            if done == total or done % 100 == 0:
                self.stderr.write(f"credentials_rotate: {done}/{total}")

        try:
            result = credentials_rotate(dry_run=dry_run, progress=progress)
        except (CredentialKeysMissing, CredentialKeyInvalid) as exc:
            raise CommandError(str(exc)) from None
        verb = "would re-encrypt" if dry_run else "re-encrypted"
        self.stdout.write(
            f"{result.total} stored credential(s): {verb} {result.resealed}, "
            f"{result.already_current} already under the first key"
        )
        if result.unreadable:
            raise CommandError(
                f"{len(result.unreadable)} decrypt under no configured key, left as they are: "
                f"{', '.join(result.unreadable)}"
            )
