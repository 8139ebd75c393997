"""A send worker for the budget test: reply_send_next in a loop (the same claim every worker runs),
waiting while the only work left is held by a budget, until nothing is APPROVED or time is up."""

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "conduit.settings")

import django  # noqa: E402

django.setup()

from replies import sender  # noqa: E402
from replies.models import ReplyAction  # noqa: E402
from replies.sender import deliver  # noqa: E402

if os.environ.get("CONDUIT_TEST_BUDGET_OFF"):
    # Positive control: the budget check removed (a held send is claimed anyway).
    real_held = deliver._held

    def held_without_budget(action, now):
        reason = real_held(action, now)
        return "" if reason == "deferred_budget" else reason

    deliver._held = held_without_budget

deadline = time.monotonic() + float(sys.argv[1])
sent = 0
while time.monotonic() < deadline:
    if sender.reply_send_next() is None:
        if not ReplyAction.objects.filter(delivery_state="APPROVED").exists():
            break
        time.sleep(0.05)
    else:
        sent += 1
print(f"worker sent {sent}")
