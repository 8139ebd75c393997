"""The sandbox platform's canary: its reserved source, its fixture, how a delivery is signed and posted,
and the loopback sandbox provider (a stand-in, served for the run) that reconciliation reads."""

from __future__ import annotations

import base64
import contextlib
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator

from django.conf import settings

from conduit import standins
from conduit.providers.registry import get_adapter
from conduit.timefmt import iso_z
from ingress.models import Source

FIXTURES = Path(settings.BASE_DIR) / "fixtures"
FIXTURE = FIXTURES / "sandbox_social" / "comment__northstar.json"
# The reserved synthetic source: trusted configuration, never read from a payload.
CANARY = {
    "name": "canary",
    "adapter": "sandbox-social",
    "account_ref": "acct_test_01",
    "event_types": ["comment.created"],
    "purposes": ["public_ack", "private_delivery"],
    "trigger_keywords": ["CHECKLIST"],
    "secret_env": "CONDUIT_SOURCE_CANARY_SECRET",
    "canary": True,
}


@dataclass(frozen=True)
class SandboxPlatform:
    """What differs between canaries: the reserved source, its fixture, how a delivery is made,
    and the loopback copy of the source that reconciliation reads."""

    name: str
    registration: dict
    fixture: Path
    # Every purpose's replies are routed to the sandbox transport (never live); the guard
    # writes a canary's replies to the canary sink before any transport is built.
    transport: str = "sandbox"

    def fixture_time(self, document: dict) -> datetime:
        """When the fixture's event occurred (the time of the positive control's fixed run)."""
        return datetime.fromisoformat(document["events"][0]["created_at"])

    def for_run(self, document: dict, *, run_id: str, at: datetime) -> dict:
        """The fixture as one run's own synthetic event: reserved ids made for the run, its own second."""
        events = [
            {
                **event,
                "id": f"evt_test_canary_{run_id}",
                "comment_id": f"msg_test_canary_{run_id}",
                "created_at": iso_z(at),
            }
            for event in document["events"]
        ]
        return {**document, "events": events}

    def identifiers(self, document: dict) -> list[str]:
        values = [document.get("account", "")]
        for item in document.get("events", []):
            values += [item.get(k, "") for k in ("id", "post_id", "comment_id", "from_id")]
        return values

    def path(self, source: Source) -> str:
        return f"/webhooks/{source.name}/"

    def headers(self, source: Source, body: bytes, secret: str) -> dict[str, str]:
        return get_adapter(source.adapter).sign(
            body=body,
            secret=secret,
            delivery_id=f"msg_test_canary_{uuid.uuid4().hex}",
            at=datetime.now(timezone.utc),
        )

    def new_secret(self) -> str:
        return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()

    @contextlib.contextmanager
    def held_source(self, source: Source, document: dict) -> Iterator[tuple[str, Callable[[], int]]]:
        """A loopback copy of the source holding the fixture's events: (its URL, replies it applied)."""
        server, state = standins.sandbox_provider(port=0)
        state.hold(source.account_ref, document["events"])
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}", state.applied_count
        finally:
            server.shutdown()
            server.server_close()


SANDBOX = SandboxPlatform("sandbox", CANARY, FIXTURE)
