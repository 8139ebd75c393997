"""The Meta platform's canary: a Meta-shaped Instagram source, its fixture, how Meta signs a delivery,
and the loopback Graph simulator (a stand-in, served for the run) that reconciliation reads."""

from __future__ import annotations

import contextlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator

from django.conf import settings

from conduit import standins
from conduit.providers.registry import get_adapter
from ingress.models import Source

FIXTURES = Path(settings.BASE_DIR) / "fixtures"
# The Meta-shaped one: an Instagram source of a reserved app id (no Meta app has id 0), whose
# Graph is the simulator a run starts on this host (its registered URL is a loopback one).
META_CANARY = {
    "name": "canary-meta",
    "adapter": "meta-instagram",
    "account_ref": "acct_test_ig_01",
    "event_types": ["comment.created"],
    "purposes": ["public_ack", "private_delivery"],
    "trigger_keywords": ["CHECKLIST"],
    "secret_env": "CONDUIT_SOURCE_CANARY_META_SECRET",
    "app_id": "0",
    "verify_token_env": "CONDUIT_SOURCE_CANARY_META_VERIFY",
    "token_env": "CONDUIT_SOURCE_CANARY_META_TOKEN",
    "source_url": "http://127.0.0.1/instagram/v26.0",
    "canary": True,
}


@dataclass(frozen=True)
class MetaPlatform:
    """The Meta-shaped canary: an entry's time and ids made the run's own, Meta's signature header,
    and the Graph simulator holding the fixture's comments."""

    name: str
    registration: dict
    fixture: Path
    # Its replies too go to the sandbox transport (never live), into the canary sink.
    transport: str = "sandbox"

    def fixture_time(self, document: dict) -> datetime:
        return datetime.fromtimestamp(document["entry"][0]["time"], tz=timezone.utc)

    def for_run(self, document: dict, *, run_id: str, at: datetime) -> dict:
        # A comment notification carries no creation time: the entry's time stands in for it.
        entries = [
            {
                **entry,
                "time": int(at.timestamp()),
                "changes": [
                    {**change, "value": {**change["value"], "id": f"evt_test_ig_canary_{run_id}"}}
                    for change in entry["changes"]
                ],
            }
            for entry in document["entry"]
        ]
        return {**document, "entry": entries}

    def identifiers(self, document: dict) -> list[str]:
        values = []
        for entry in document.get("entry", []):
            values.append(entry.get("id", ""))
            for change in entry.get("changes", []):
                value = change.get("value", {})
                values += [
                    value.get("id", ""),
                    value.get("from", {}).get("id", ""),
                    value.get("media", {}).get("id", ""),
                ]
        return values

    def path(self, source: Source) -> str:
        return f"/webhooks/meta/{source.app_id}/"

    def headers(self, source: Source, body: bytes, secret: str) -> dict[str, str]:
        return get_adapter(source.adapter).sign(body=body, secret=secret)

    def new_secret(self) -> str:
        return secrets.token_hex(16)

    @contextlib.contextmanager
    def held_source(self, source: Source, document: dict) -> Iterator[tuple[str, Callable[[], int]]]:
        graph = standins.graph_simulator(port=0)
        try:
            graph.state.account_upsert(id=source.account_ref, object="instagram")
            for entry in document["entry"]:
                for change in entry["changes"]:
                    value = change["value"]
                    graph.state.comment_create(
                        {
                            "account": source.account_ref,
                            "media_id": value["media"]["id"],
                            "id": value["id"],
                            "text": value["text"],
                            "from_id": value["from"]["id"],
                            "notify": False,
                            # The comment was made when the notification says: the run's window holds it.
                            "created_time": entry["time"],
                        }
                    )

            def applied() -> int:
                return sum(sum(kind.values()) for kind in graph.state.applied().values())

            yield graph.instagram_url, applied
        finally:
            graph.close()


META = MetaPlatform("meta", META_CANARY, FIXTURES / "meta_instagram" / "canary__comment.json")
