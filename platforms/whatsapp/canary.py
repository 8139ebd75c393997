"""The WhatsApp platform's canary: a WhatsApp-shaped phone number of a reserved app id, its fixture,
and how Meta signs a delivery. Reconciliation reads nothing of WhatsApp (no read-back), so the run
holds no stand-in for it: the scan reads one empty page and makes no call at all."""

from __future__ import annotations

import contextlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator

from django.conf import settings

from conduit.providers.registry import get_adapter
from ingress.models import Source

FIXTURES = Path(settings.BASE_DIR) / "fixtures"
# A phone number of a reserved app id (no Meta app has id 0); its replies go to the sandbox
# transport (never live), into the canary sink. The buyer's number is in the fictional 555-01xx
# range and never becomes a ref (sender refs are keyed hashes).
WHATSAPP_CANARY = {
    "name": "canary-whatsapp",
    "adapter": "meta-whatsapp",
    "account_ref": "acct_test_wa_01",
    "event_types": ["message.created"],
    "purposes": ["private_delivery"],
    "trigger_keywords": ["CHECKLIST"],
    "secret_env": "CONDUIT_SOURCE_CANARY_META_SECRET",
    "app_id": "0",
    "verify_token_env": "CONDUIT_SOURCE_CANARY_META_VERIFY",
    "token_env": "CONDUIT_SOURCE_CANARY_META_TOKEN",
    "source_url": "http://127.0.0.1/v26.0",
    "contract_version": "whatsapp-v1",
    "canary": True,
}


@dataclass(frozen=True)
class WhatsAppPlatform:
    name: str
    registration: dict
    fixture: Path
    transport: str = "sandbox"
    # Nothing is read back: the scan's report matches no event and compares no action.
    reads_back: bool = False
    # The run's event is past the 24-hour window (its second is the fixture's): the copy's template.
    copy_template: dict | None = None

    def fixture_time(self, document: dict) -> datetime:
        message = document["entry"][0]["changes"][0]["value"]["messages"][0]
        return datetime.fromtimestamp(int(message["timestamp"]), tz=timezone.utc)

    def for_run(self, document: dict, *, run_id: str, at: datetime) -> dict:
        def message(item: dict) -> dict:
            return {**item, "id": f"evt_test_wa_canary_{run_id}", "timestamp": str(int(at.timestamp()))}

        entries = [
            {
                **entry,
                "changes": [
                    {
                        **change,
                        "value": {
                            **change["value"],
                            "messages": [message(m) for m in change["value"]["messages"]],
                        },
                    }
                    for change in entry["changes"]
                ],
            }
            for entry in document["entry"]
        ]
        return {**document, "entry": entries}

    def identifiers(self, document: dict) -> list[str]:
        """The ids that become refs or keys (the number never does: it is hashed)."""
        values = []
        for entry in document.get("entry", []):
            values.append(entry.get("id", ""))
            for change in entry.get("changes", []):
                value = change.get("value", {})
                values.append(value.get("metadata", {}).get("phone_number_id", ""))
                values += [m.get("id", "") for m in value.get("messages", [])]
        return values

    def path(self, source: Source) -> str:
        return f"/webhooks/meta/{source.app_id}/"

    def headers(self, source: Source, body: bytes, secret: str) -> dict[str, str]:
        return get_adapter(source.adapter).sign(body=body, secret=secret)

    def new_secret(self) -> str:
        return secrets.token_hex(16)

    @contextlib.contextmanager
    def held_source(self, source: Source, document: dict) -> Iterator[tuple[str, Callable[[], int]]]:
        yield source.source_url, lambda: 0


WHATSAPP = WhatsAppPlatform(
    "whatsapp",
    WHATSAPP_CANARY,
    FIXTURES / "meta_whatsapp" / "canary__message.json",
    copy_template={"name": "canary_checklist", "language": "en_US", "parameters": []},
)
