"""What the checks act through: a sandbox source on a loopback sandbox provider, and an Instagram
source on a loopback Graph API simulator, each with a signed deliverer and a test client."""

from __future__ import annotations

import base64
import json
import secrets
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone as dj_timezone

from conduit import standins
from conduit.providers.registry import get_adapter
from conduit.standins import testkit
from ingress.services import source_register
from reconcile.scan import scan_until_done
from replies.models import ReplyAction

FIXTURES = Path(settings.BASE_DIR) / "fixtures" / "sandbox_social"
NORTHSTAR_KEY = "sandbox-social:acct_test_01:comment.created:evt_test_0042"
PURPOSES = ("public_ack", "private_delivery")
IDENTITY_FIXTURES = {
    "type": "comment__missing_type",
    "post_id": "comment__missing_post_id",
    "comment_id": "comment__missing_comment_id",
    "from_id": "comment__missing_from_id",
    "created_at": "comment__missing_created_at",
    "account": "comment__missing_account",
}


def fixture_body(name: str) -> bytes:
    return (FIXTURES / f"{name}.json").read_bytes()


class Harness:
    """What the checks act through: a source on a loopback sandbox provider and a signed deliverer.

    The signing secret is made for this harness only and lives in the
    environment variable the source names, as a real one would.
    """

    def __init__(
        self,
        *,
        name: str = "sandbox",
        account_ref: str = "acct_test_01",
        secret_env: str = "CONDUIT_SOURCE_ACCEPTANCE_SECRET",
        hang_seconds: float = 2.0,
    ) -> None:
        self.secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
        self._restore_secret = testkit.environ_set(secret_env, self.secret)
        self.server, self.state = standins.sandbox_provider(port=0, hang_seconds=hang_seconds)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.source, _ = source_register(
            name=name,
            adapter="sandbox-social",
            account_ref=account_ref,
            event_types=["comment.created"],
            purposes=list(PURPOSES),
            trigger_keywords=["CHECKLIST"],
            secret_env=secret_env,
            source_url=self.url,
        )
        from replies.services import reply_copy_create, reply_route_declare

        for purpose in PURPOSES:
            reply_route_declare(
                source_id=self.source.pk, purpose=purpose, transport_name="sandbox", target_url=self.url
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
        self.server.shutdown()
        self.server.server_close()
        self._restore_secret()

    def sign(
        self, body: bytes, *, delivery_id: str | None = None, secret: str | None = None
    ) -> dict[str, str]:
        return get_adapter("sandbox-social").sign(
            body=body,
            secret=secret or self.secret,
            delivery_id=delivery_id or f"msg_test_{uuid.uuid4().hex}",
            at=datetime.now(timezone.utc),
        )

    def deliver(self, body: bytes, *, headers: dict | None = None, **sign_kw):
        return self.client.post(
            f"/webhooks/{self.source.name}/",
            data=body,
            content_type="application/json",
            headers=self.sign(body, **sign_kw) if headers is None else headers,
        )

    def fail_next(self, mode: str, count: int = 1) -> None:
        self.state.fail_next(mode, count)

    def provider_calls(self) -> int:
        return self.state.applied_count()

    def planned(self) -> ReplyAction:
        """Deliver the Northstar fixture; its public_ack action, REVIEW_PENDING."""
        self.deliver(fixture_body("comment__northstar"))
        return ReplyAction.objects.get(event_id=NORTHSTAR_KEY, purpose="public_ack")

    def scan(self):
        return scan_until_done(source=self.source, trigger="command", actor="system:acceptance")


# -- Meta: the same promises through Meta's proof, field maps and Graph read-back --------

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
        from ingress.models import Source
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
        Source.objects.filter(pk=self.source.pk).update(connected_at=dj_timezone.now() - timedelta(days=1))
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
