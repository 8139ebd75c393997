"""send_replies: send due replies from this process, the way a queue worker would."""

import random
import time

from django.core.management.base import BaseCommand, CommandParser

from replies.sender import due_action_ids, reply_send


class Command(BaseCommand):
    help = (
        "Send every due reply (APPROVED, or FAILED_BEFORE_SEND past its backoff) through the "
        "claim and the transport boundary. Several can run at once: the claim makes each send "
        "at-most-once."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--drain", action="store_true", help="repeat until nothing is due")
        parser.add_argument("--batch", type=int, default=200)

    def handle(self, *args, drain: bool, batch: int, **options) -> None:
        started, outcomes = time.monotonic(), {}
        while True:
            ids = due_action_ids(limit=batch)
            random.shuffle(ids)  # workers started together should not march in step
            for action_id in ids:
                state = reply_send(action_id=action_id)
                outcomes[state] = outcomes.get(state, 0) + 1
            if not drain or not ids:
                break
        summary = ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())) or "nothing due"
        self.stdout.write(f"send_replies: {summary} in {time.monotonic() - started:.1f} s")
