"""What Meta's acceptance rows act through: an Instagram source on a loopback Graph API simulator,
with Meta's signed deliverer and a test client."""

from __future__ import annotations

import json
import secrets
from datetime import datetime, timezone
from typing import Any

from conduit import standins
from conduit.standins import testkit
from ingress.services import source_register
from reconcile.scan import scan_until_done
from replies.models import ReplyAction

PURPOSES = ("public_ack", "private_delivery")

META_APP_ID = "900000000000001"
META_ACCOUNT = "17841400000000001"
META_MEDIA = "18000000000000001"
META_BUYER = "17841400000000901"
META_ROUTES = {"public_ack": "meta-comment-reply", "private_delivery": "meta-private-reply"}
# How long the simulator holds a timed-out answer, and the transport's timeout in the row that
# times out: the answer never comes within the timeout, and the check stays short.
META_HANG_SECONDS = 3.0
META_TIMEOUT_SECONDS = 1.0


class MetaHarness:
    """An Instagram source of a synthetic Meta app, read back from the loopback Graph simulator.

    Its app secret, verify token and access token are made for this harness only
    and live in the variables the source names, as real ones would.
    """

    def __init__(self) -> None:
        from replies.services import reply_copy_create, reply_route_declare

        self.secret = secrets.token_hex(16)
        self._restore = [
            testkit.environ_set(name, value)
            for name, value in (
                ("CONDUIT_SOURCE_ACCEPTANCE_META_SECRET", self.secret),
                ("CONDUIT_SOURCE_ACCEPTANCE_META_VERIFY", secrets.token_hex(8)),
                ("CONDUIT_SOURCE_ACCEPTANCE_META_TOKEN", secrets.token_hex(16)),
            )
        ]
        # A timeout fault holds the answer this long: past the transport's timeout in the ambiguous row.
        self.graph = standins.graph_simulator(port=0, hang_seconds=META_HANG_SECONDS)
        self._sim("/_sim/accounts", {"id": META_ACCOUNT, "object": "instagram", "app_id": META_APP_ID})
        self.source, _ = source_register(
            name="meta-acceptance",
            adapter="meta-instagram",
            account_ref=META_ACCOUNT,
            event_types=["comment.created"],
            purposes=list(PURPOSES),
            trigger_keywords=["CHECKLIST"],
            secret_env="CONDUIT_SOURCE_ACCEPTANCE_META_SECRET",
            app_id=META_APP_ID,
            verify_token_env="CONDUIT_SOURCE_ACCEPTANCE_META_VERIFY",
            token_env="CONDUIT_SOURCE_ACCEPTANCE_META_TOKEN",
            source_url=self.graph.instagram_url,
        )
        # Connected a day ago: the comments below are new work, not history.
        testkit.source_connected_ago(self.source.pk, days=1)
        self.source.refresh_from_db()
        for purpose, transport in META_ROUTES.items():
            # Meta's own transports at the simulator's Instagram host (loopback: not live).
            reply_route_declare(
                source_id=self.source.pk,
                purpose=purpose,
                transport_name=transport,
                target_url=self.graph.instagram_url,
            )
            reply_copy_create(
                source_id=self.source.pk,
                purpose=purpose,
                channel=purpose,
                text="Synthetic copy for the acceptance checks.",
                actor="system:acceptance",
            )
        self.client = testkit.test_client()

    def close(self) -> None:
        self.graph.close()
        for restore in self._restore:
            restore()

    def _sim(self, path: str, body: dict | None = None, *, method: str = "POST") -> dict:
        return self.graph.control(path, body, method=method)

    def comment(self, text: str) -> str:
        """A comment the platform holds, with no webhook sent (the caller delivers one, or not)."""
        return self._sim(
            "/_sim/comments",
            {
                "account": META_ACCOUNT,
                "media_id": META_MEDIA,
                "text": text,
                "from_id": META_BUYER,
                "notify": False,
            },
        )["id"]

    @staticmethod
    def body(*comments: tuple[str, str]) -> bytes:
        """Meta's notification of (comment id, text) pairs, in one entry."""
        changes = [
            {
                "field": "comments",
                "value": {
                    "id": cid,
                    "text": text,
                    "from": {"id": META_BUYER, "username": "buyer_test"},
                    "media": {"id": META_MEDIA, "media_product_type": "FEED"},
                },
            }
            for cid, text in comments
        ]
        return json.dumps(
            {
                "object": "instagram",
                "entry": [
                    {
                        "id": META_ACCOUNT,
                        "time": int(datetime.now(timezone.utc).timestamp()),
                        "changes": changes,
                    }
                ],
            }
        ).encode()

    def deliver(self, body: bytes, *, secret: str | None = None):
        from conduit.providers.meta.webhook import signature_header

        return self.client.post(
            f"/webhooks/meta/{META_APP_ID}/",
            data=body,
            content_type="application/json",
            headers={"X-Hub-Signature-256": signature_header(body=body, secret=secret or self.secret)},
        )

    def key(self, comment_id: str) -> str:
        return f"meta-instagram:{META_ACCOUNT}:comment.created:{comment_id}"

    def planned(self) -> ReplyAction:
        """A comment the platform holds, delivered as Meta notifies it; its public_ack action,
        REVIEW_PENDING, routed to meta-comment-reply at the simulator."""
        comment = self.comment("CHECKLIST please")
        self.deliver(self.body((comment, "CHECKLIST please")))
        return ReplyAction.objects.get(event_id=self.key(comment), purpose="public_ack")

    def fail_next(self, mode: str, **fault: Any) -> None:
        """The simulator's next Graph write fails so (its `/_sim/faults` modes and fields)."""
        self._sim("/_sim/faults", {"mode": mode, "count": 1, "method": "POST", **fault})

    def applied(self) -> dict:
        """What the simulator applied: {"public": {comment_id: n}, "private": {comment_id: n}}."""
        return self._sim("/_sim/applied", method="GET")

    def graph_writes(self) -> int:
        """Graph writes the simulator was asked for (each POST, applied or not)."""
        calls = self._sim("/_sim/calls", method="GET")
        return sum(1 for call in calls["log"] if call["method"] == "POST")

    def scan(self):
        return scan_until_done(source=self.source, trigger="command", actor="system:acceptance")
