"""A send worker for the drain test: reply_send_next in a loop (the claim every worker runs) until no
work is left that could still be sent, or time is up.

Waits are scaled down, not removed (the same code, shorter clocks): a throttled account pauses
THROTTLE_PAUSE_SECONDS and a failed send backs off `backoff_seconds`; here both are fractions of a
second so a few-minute drain fits in a test. The transport timeout comes from the environment
(CONDUIT_TRANSPORT_TIMEOUT_SECONDS), as in production.
"""

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "conduit.settings")

import django  # noqa: E402

django.setup()

from django.db.models import Q  # noqa: E402

from replies import sender  # noqa: E402
from replies.models import ReplyAction  # noqa: E402
from replies.sender import deliver  # noqa: E402

deliver.THROTTLE_PAUSE_SECONDS = 0.3
deliver.backoff_seconds = lambda attempt_count: 0.2

if os.environ.get("CONDUIT_TEST_UNKNOWN_RETRIED"):
    # Positive control: the ambiguity guard removed (SEND_STATUS_UNKNOWN claimable like a failure).
    from conduit.statemachine import TransitionTable

    sender.CLAIMABLE["SEND_STATUS_UNKNOWN"] = lambda now: {}
    sender.CLAIMABLE_SQL["SEND_STATUS_UNKNOWN"] = ""  # the claims' plain-SQL rule, the same guard taken away
    allows = TransitionTable.allows
    TransitionTable.allows = lambda self, p, n: (
        allows(self, p, n) or (p, n) == ("SEND_STATUS_UNKNOWN", "SENDING")
    )

# Work that may still be claimed: approved, or failed before send with an automatic retry due
# (which includes the sends waiting on a re-authorised token).
PENDING = Q(delivery_state="APPROVED") | Q(delivery_state="FAILED_BEFORE_SEND", next_attempt_at__isnull=False)

deadline = time.monotonic() + float(sys.argv[1])
outcomes: dict[str, int] = {}
while time.monotonic() < deadline:
    done = sender.reply_send_next()
    if done is None:
        if not ReplyAction.objects.filter(PENDING).exists():
            break
        time.sleep(0.05)
    else:
        outcomes[done[1]] = outcomes.get(done[1], 0) + 1
print("worker " + " ".join(f"{state}={n}" for state, n in sorted(outcomes.items())))
