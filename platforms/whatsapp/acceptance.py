"""What WhatsApp's acceptance rows act through: a phone number's source on a loopback Graph API
simulator serving the Cloud API, whose signed webhooks (buyers' messages, statuses) a recorder
keeps for the check to deliver to Conduit's callback with a test client."""

from __future__ import annotations

import json
import secrets

from conduit import standins
from conduit.standins import testkit
from ingress.services import source_register
from replies.models import ReplyAction

WHATSAPP_APP_ID = "900000000000002"
WHATSAPP_BUSINESS = "100000000000930"
WHATSAPP_NUMBER = "100000000000931"
WHATSAPP_BUYER = "12025550142"  # a fictional 555-01xx number
PURPOSE = "private_delivery"
TRANSPORT = "meta-whatsapp-message"
# As Meta's rows: the simulator holds a timed-out answer past the transport's timeout.
WHATSAPP_HANG_SECONDS = 3.0
WHATSAPP_TIMEOUT_SECONDS = 1.0
_ENV = (
    "CONDUIT_SOURCE_ACCEPTANCE_WA_SECRET",
    "CONDUIT_SOURCE_ACCEPTANCE_WA_VERIFY",
    "CONDUIT_SOURCE_ACCEPTANCE_WA_TOKEN",
)


class WhatsAppHarness:
    """A WhatsApp source of a synthetic Meta app at the loopback simulator; its secret, verify
    token and access token are made for this harness only and live in the variables it names."""

    def __init__(self) -> None:
        from replies.services import reply_copy_create, reply_route_declare

        self.secret = secrets.token_hex(16)
        values = (self.secret, secrets.token_hex(8), secrets.token_hex(16))
        self._restore = [testkit.environ_set(name, value) for name, value in zip(_ENV, values)]
        self.recorder = testkit.callback_recorder()
        self.graph = standins.graph_simulator(
            port=0,
            hang_seconds=WHATSAPP_HANG_SECONDS,
            callback=self.recorder.url,
            app_id=WHATSAPP_APP_ID,
            app_secret=self.secret,
        )
        self._wa(
            "numbers",
            {"phone_number_id": WHATSAPP_NUMBER, "waba_id": WHATSAPP_BUSINESS, "app_id": WHATSAPP_APP_ID},
        )
        self.source, _ = source_register(
            name="whatsapp-acceptance",
            adapter="meta-whatsapp",
            account_ref=WHATSAPP_NUMBER,
            event_types=["message.created"],
            purposes=[PURPOSE],
            trigger_keywords=["CHECKLIST"],
            secret_env=_ENV[0],
            app_id=WHATSAPP_APP_ID,
            verify_token_env=_ENV[1],
            token_env=_ENV[2],
            source_url=self.graph.url,
            contract_version="whatsapp-v1",
        )
        testkit.source_connected_ago(self.source.pk, days=1)
        self.source.refresh_from_db()
        reply_route_declare(
            source_id=self.source.pk, purpose=PURPOSE, transport_name=TRANSPORT, target_url=self.graph.url
        )
        reply_copy_create(
            source_id=self.source.pk,
            purpose=PURPOSE,
            channel="whatsapp",
            text="Synthetic copy for the acceptance checks.",
            actor="system:acceptance",
        )
        self.client = testkit.test_client()

    def close(self) -> None:
        self.graph.close()
        self.recorder.close()
        for restore in self._restore:
            restore()

    def _wa(self, route: str, body: dict | None = None, *, method: str = "POST") -> dict:
        return self.graph.control(f"/_sim/whatsapp/{route}", body, method=method)

    def message(self, text: str) -> tuple[str, bytes]:
        """The buyer writes `text`: its wamid and the signed body the simulator posted of it."""
        seen = len(self.recorder.bodies)
        wamid = self._wa(
            "messages", {"phone_number_id": WHATSAPP_NUMBER, "from": WHATSAPP_BUYER, "text": text}
        )["id"]
        bodies = self.recorder.wait(seen + 1)
        if len(bodies) <= seen:
            raise RuntimeError("the simulator posted no webhook of the buyer's message")
        return wamid, bodies[seen]

    def statuses(self, after: int, count: int) -> list[bytes]:
        """The `count` status bodies the simulator posted after its first `after` bodies."""
        return self.recorder.wait(after + count)[after:]

    @staticmethod
    def merged(*bodies: bytes) -> bytes:
        """One body holding the changes of several (a retry Meta batched otherwise)."""
        changes = [c for raw in bodies for e in json.loads(raw)["entry"] for c in e["changes"]]
        return json.dumps(
            {"object": "whatsapp_business_account", "entry": [{"id": WHATSAPP_BUSINESS, "changes": changes}]}
        ).encode()

    def deliver(self, body: bytes, *, secret: str | None = None):
        from conduit.providers.meta.webhook import signature_header

        # A status settles its send on commit (ingress.services.evidence): run that work here too
        # when the check runs inside a test's transaction.
        with testkit.commits_run():
            return self.client.post(
                f"/webhooks/meta/{WHATSAPP_APP_ID}/",
                data=body,
                content_type="application/json",
                headers={"X-Hub-Signature-256": signature_header(body=body, secret=secret or self.secret)},
            )

    def key(self, wamid: str) -> str:
        return f"meta-whatsapp:{WHATSAPP_NUMBER}:message.created:{wamid}"

    def planned(self) -> ReplyAction:
        """A buyer's message with the keyword, delivered as the simulator posted it: its
        private_delivery action, REVIEW_PENDING, routed to the WhatsApp transport."""
        wamid, body = self.message("CHECKLIST please")
        self.deliver(body)
        return ReplyAction.objects.get(event_id=self.key(wamid), purpose=PURPOSE)

    def fail_next(self, mode: str, **fault) -> None:
        """The simulator's next send fails so (its `/_sim/faults` modes and fields)."""
        self.graph.control("/_sim/faults", {"mode": mode, "count": 1, "method": "POST", **fault})

    def applied(self) -> dict[str, int]:
        """How many sends the simulator applied under each reply key."""
        return self._wa("sent", method="GET")["by_callback_data"]

    def sends_asked(self) -> int:
        """Cloud API sends the simulator was asked for (each POST to /messages, applied or not)."""
        calls = self.graph.control("/_sim/calls", method="GET")
        return sum(
            1 for call in calls["log"] if call["method"] == "POST" and call["path"].endswith("/messages")
        )
