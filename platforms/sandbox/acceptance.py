"""What the acceptance table's core rows act through: a sandbox source on a loopback sandbox provider,
with a signed deliverer and a test client."""

from __future__ import annotations

import base64
import secrets
import uuid
from datetime import datetime, timezone
from pathlib import Path

from django.conf import settings

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

    # What the core checks and the report read of the platform's fixtures, through the harness.
    FIXTURES = FIXTURES
    NORTHSTAR_KEY = NORTHSTAR_KEY
    PURPOSES = PURPOSES
    IDENTITY_FIXTURES = IDENTITY_FIXTURES
    fixture_body = staticmethod(fixture_body)

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
