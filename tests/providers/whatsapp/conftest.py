"""WhatsApp sources for tests: one phone number of the Meta test app, and signed bodies in the
Cloud API's shape (synthetic ids: a fictional 555-01xx number, test-only wamids)."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone

import pytest

from tests.providers.meta.integration.conftest import (  # noqa: F401  (the app's env and poster)
    _meta_env,
    post_meta,
    register_meta,
)

WABA = "100000000000900"
NUMBER = "100000000000901"
BUYER = "15550100001"
CONNECTED = datetime(2025, 1, 1, tzinfo=timezone.utc)


def wamid(n: int) -> str:
    """A test-only message id in the wamid shape (`wamid.` and base64)."""
    return f"wamid.HBgLMTU1NTAxMDAwMDEVAgASGBQzQTEwMDAwMDAwMDAwMDAwMD{n:04d}A="


def change(value: dict) -> dict:
    return {
        "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "15550100000", "phone_number_id": NUMBER},
            **value,
        },
        "field": "messages",
    }


def body(*changes: dict, business: str = WABA) -> bytes:
    return json.dumps(
        {"object": "whatsapp_business_account", "entry": [{"id": business, "changes": list(changes)}]},
        separators=(",", ":"),
    ).encode()


def text_message(
    n: int, text: str, *, at: int | None = None, sender: str = BUYER, name: str = "Test Person 01"
):
    """A buyer's text message, written `at` (unix seconds; now unless told)."""
    at = int(time.time()) if at is None else at
    return change(
        {
            "contacts": [{"profile": {"name": name}, "wa_id": sender}],
            "messages": [
                {"from": sender, "id": wamid(n), "timestamp": str(at), "type": "text", "text": {"body": text}}
            ],
        }
    )


def status(message_id: str, state: str, *, at: int | None = None, key: str = "", error: int | None = None):
    item = {
        "id": message_id,
        "status": state,
        "timestamp": str(at or int(time.time())),
        "recipient_id": BUYER,
    }
    if key:
        item["biz_opaque_callback_data"] = key
    if error is not None:
        item["errors"] = [{"code": error, "title": "Message undeliverable"}]
    return change({"statuses": [item]})


@pytest.fixture
def whatsapp_source(db):
    return register_meta(
        "wa-test",
        "meta-whatsapp",
        NUMBER,
        event_types=["message.created"],
        purposes=["private_delivery"],
        contract_version="whatsapp-v1",
        connected=CONNECTED,
    )


@pytest.fixture
def deliver(post_meta, django_capture_on_commit_callbacks):  # noqa: F811 (the imported fixture)
    """POST a WhatsApp body to the Meta callback and run its on-commit work (replies' receivers)."""

    def _deliver(raw: bytes):
        with django_capture_on_commit_callbacks(execute=True):
            response = post_meta(raw)
        assert response.status_code == 200, response.content
        return response.json()

    return _deliver


def routed(source, url: str = "http://127.0.0.1:9/v26.0", template: dict | None = None):
    """The source's private_delivery routed to the WhatsApp transport at `url`, with copy."""
    from replies.services import reply_copy_create, reply_route_declare

    reply_route_declare(
        source_id=source.pk,
        purpose="private_delivery",
        transport_name="meta-whatsapp-message",
        target_url=url,
    )
    reply_copy_create(
        source_id=source.pk,
        purpose="private_delivery",
        channel="whatsapp",
        text="Thanks! The price list is on its way.",
        actor="test",
        template=template,
    )
    return source
