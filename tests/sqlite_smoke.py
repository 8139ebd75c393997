"""The embedded default end to end on SQLite: the path `make demo` runs. Run by test_sqlite_default.

Usage: python tests/sqlite_smoke.py DATABASE_FILE
"""

import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.update(
    DATABASE_URL=f"sqlite:///{sys.argv[1]}",
    DJANGO_SETTINGS_MODULE="conduit.settings",
    CONDUIT_LOG_LEVEL="WARNING",
    ALLOWED_HOSTS="testserver",
    CONDUIT_SOURCE_SMOKE_SECRET="whsec_c21va2UtdGVzdC1vbmx5LWtleS0wMDAwMDAwMDAwMDA=",
)

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402

from conduit.providers.registry import get_adapter  # noqa: E402
from ingress.models import InboundEvent  # noqa: E402
from reconcile.decisions.service import decision_make  # noqa: E402
from reconcile.selectors import reply_decision_request  # noqa: E402
from replies import sender, services  # noqa: E402
from replies.models import ReplyAction  # noqa: E402
from simulators.sandbox import serve  # noqa: E402

call_command("migrate", verbosity=0)
server, state = serve(port=0)
call_command(
    "register_source",
    "smoke",
    "--adapter",
    "sandbox-social",
    "--account-ref",
    "acct_test_01",
    "--event-type",
    "comment.created",
    "--purpose",
    "public_ack",
    "--purpose",
    "private_delivery",
    "--trigger-keyword",
    "CHECKLIST",
    "--secret-env",
    "CONDUIT_SOURCE_SMOKE_SECRET",
    "--copy",
    "public_ack=Synthetic thanks.",
    "--copy",
    "private_delivery=Synthetic checklist.",
    "--transport-url",
    f"http://127.0.0.1:{server.server_address[1]}",
    stdout=open(os.devnull, "w"),
)
body = (ROOT / "fixtures" / "sandbox_social" / "comment__northstar.json").read_bytes()
client = Client()
statuses = []
for _ in range(2):
    headers = get_adapter("sandbox-social").sign(
        body=body,
        secret=os.environ["CONDUIT_SOURCE_SMOKE_SECRET"],
        delivery_id="msg_test_smoke",
        at=datetime.now(timezone.utc),
    )
    statuses.append(
        client.post(
            "/webhooks/smoke/", data=body, content_type="application/json", headers=headers
        ).status_code
    )
sender.enqueue_send = lambda action_id: None
actions = list(ReplyAction.objects.order_by("id"))
for action in actions:
    assert services.reply_approve(action_id=action.pk, actor="smoke").ok
sent = [sender.reply_send_next(), sender.reply_send(action_id=actions[1].pk), sender.reply_send_next()]
states = sorted(ReplyAction.objects.values_list("delivery_state", flat=True))

# Reconciliation: the provider holds the delivered event and one whose webhook never came.
from reconcile.models import ReconcileReport  # noqa: E402

event = json.loads(body)["events"][0]
state.hold("acct_test_01", [event, {**event, "id": "evt_test_0044", "comment_id": "msg_test_0044"}])
call_command("reconcile", "smoke", stdout=open(os.devnull, "w"))
counts = ReconcileReport.objects.get().summary["counts"]
print(
    json.dumps(
        {
            "statuses": statuses,
            "seen_count": InboundEvent.objects.get(source_event_id="evt_test_0042").seen_count,
            "states": states,
            "applied": sorted(state.applied.values()),
            "sent": [s if s is None or isinstance(s, str) else [s[0], str(s[1])] for s in sent],
            "verdict": decision_make(request=reply_decision_request(actions[0]))["verdict"],
            "reconcile": {k: counts[k] for k in ("events_matched", "missing_recovered", "replies_confirmed")},
            "actions_after_reconcile": ReplyAction.objects.count(),
        }
    )
)
