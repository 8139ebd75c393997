"""purge_retained: blank retained message content older than each source's retention period."""

from django.core.management.base import BaseCommand, CommandParser

from ingress.services import retention_purge
from reconcile.retention import staging_purge


class Command(BaseCommand):
    help = (
        "Blank the retained message text of events older than their source's retention_days "
        "(keys, hashes, states and history stay). --dry-run only counts."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--dry-run", action="store_true", help="count what would be purged; change nothing"
        )

    def handle(self, *args, dry_run: bool, **options) -> None:
        verb = "would purge" if dry_run else "purged"
        for name, count in retention_purge(dry_run=dry_run).items():
            self.stdout.write(f"{name}: {verb} the message text of {count} event(s)")
        staged = staging_purge(dry_run=dry_run)
        self.stdout.write(f"reconcile staging: {verb} the text of {staged} staged event(s) of stalled scans")
