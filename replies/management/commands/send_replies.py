"""send_replies: send due replies from this process, the way a queue worker would."""

import time

from django.core.management.base import BaseCommand, CommandParser

from replies.sender import reply_send_next


class Command(BaseCommand):
    help = (
        "Send due replies (APPROVED, or FAILED_BEFORE_SEND past its backoff), oldest first, "
        "each claimed with SKIP LOCKED so several processes can drain together. Without "
        "--drain, sends at most --limit and stops."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--drain", action="store_true", help="repeat until nothing is due")
        parser.add_argument("--limit", type=int, default=100, help="sends without --drain")

    def handle(self, *args, drain: bool, limit: int, **options) -> None:
        started, outcomes = time.monotonic(), {}
        while drain or sum(outcomes.values()) < limit:
            sent = reply_send_next()
            if sent is None:
                break
            outcomes[sent[1]] = outcomes.get(sent[1], 0) + 1
        elapsed = time.monotonic() - started
        summary = ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())) or "nothing due"
        self.stdout.write(f"send_replies: {summary} in {elapsed:.3f} s")
