"""Meta sources: a rename by registration leaves the app's callback as it was.

docs/platforms/sources.md#rename: "Registering the same namespace and Scope under a new name is a
renamed configuration entry". A Meta source is delivered through its app's callback, /webhooks/meta/<app id>/, not
through a path named after it, so its rename changes no URL Meta holds.
"""

from __future__ import annotations

from django.core.management import call_command

from conduit.providers.meta.webhook import signature_header
from ingress.models import InboundEvent, Source
from tests.providers.meta.integration.conftest import (
    APP_ID,
    APP_SECRET,
    IG_ACCOUNT,
    SECRET_ENV,
    TOKEN_ENV,
    VERIFY_ENV,
    meta_body,
)

GRAPH = "http://127.0.0.1:9/v26.0"


def register(name: str) -> None:
    call_command(
        "register_source",
        name,
        "--adapter",
        "meta-instagram",
        "--account-ref",
        IG_ACCOUNT,
        "--meta-app-id",
        APP_ID,
        "--secret-env",
        SECRET_ENV,
        "--verify-token-env",
        VERIFY_ENV,
        "--token-env",
        TOKEN_ENV,
        "--event-type",
        "comment.created",
        "--purpose",
        "public_ack",
        "--trigger-keyword",
        "price",
        "--graph-url",
        GRAPH,
    )


def test_a_renamed_meta_source_keeps_its_callback_and_its_history(db, client, capsys):
    register("ig")
    Source.objects.filter(name="ig").update(connected_at="2025-01-01T00:00:00Z")  # the fixture is new work
    before = Source.objects.get()
    body = meta_body("meta_instagram/comment__created")
    headers = {"X-Hub-Signature-256": signature_header(body=body, secret=APP_SECRET)}
    url = f"/webhooks/meta/{APP_ID}/"
    assert client.post(url, data=body, content_type="application/json", headers=headers).status_code == 200
    capsys.readouterr()

    register("ig-shop")
    out = capsys.readouterr().out
    assert "source ig-shop: renamed from ig" in out
    assert f"Meta's callback /webhooks/meta/{APP_ID}/ is per app id, so it does not change" in out
    renamed = Source.objects.get()
    assert (renamed.pk, renamed.name, renamed.connected_at) == (before.pk, "ig-shop", before.connected_at)
    # The same callback, the same source: the redelivery is a duplicate of the event it holds.
    again = client.post(url, data=body, content_type="application/json", headers=headers)
    assert again.status_code == 200
    assert InboundEvent.objects.filter(source__name="ig-shop").count() == 1
    assert InboundEvent.objects.get().seen_count == 2
