"""The security cases every source adapter must pass, written once and inherited (anymail's habit).

Each adapter's class supplies how to sign and post a body, a valid body, and a
body for an account the endpoint does not own; the cases are the same for all.
"""

from __future__ import annotations

import json
import time

import pytest

from conduit.providers.meta.webhook import signature_header
from ingress.models import Delivery, InboundEvent, QuarantineReceipt
from tests.conftest import TEST_SECRET, fixture_body, sign
from tests.providers.meta.integration.conftest import APP_ID, APP_SECRET, NEXT_ENV, NEXT_SECRET, meta_body
from tests.providers.whatsapp import conftest as whatsapp
from tests.providers.whatsapp.conftest import whatsapp_source  # noqa: F401  (the fixture)

OTHER_SANDBOX_SECRET = "whsec_" + "b3RoZXItdGVzdC1vbmx5LXNpZ25pbmcta2V5LTAy"


class AdapterSecurityCases:
    """Inherit and fill in the hooks; every test below then runs for that adapter."""

    url = ""
    unknown_account_code = ""
    # What an authentic body with a quarantined member is answered.
    quarantined_status = 200
    # Whether a second, rotating secret can be registered beside the first.
    rotates = False
    # The setting that bounds this endpoint's bodies.
    limit_setting = "CONDUIT_WEBHOOK_MAX_BYTES"

    @pytest.fixture(autouse=True)
    def _source(self, db):
        raise NotImplementedError

    def valid_body(self) -> bytes:
        raise NotImplementedError

    def unknown_account_body(self) -> bytes:
        raise NotImplementedError

    def signed(self, body: bytes, secret: str | None = None) -> dict:
        raise NotImplementedError

    def other_secret(self) -> str:
        raise NotImplementedError

    def register_second_secret(self, monkeypatch) -> None:
        raise NotImplementedError

    def post(self, client, body: bytes, headers: dict):
        return client.post(self.url, data=body, content_type="application/json", headers=headers)

    # -- the cases ---------------------------------------------------------

    def test_valid_body_is_accepted(self, client):
        response = self.post(client, self.valid_body(), self.signed(self.valid_body()))
        assert response.status_code == 200, response.content
        assert InboundEvent.objects.count() == 1

    def test_bad_signature_is_401_with_an_unauthenticated_receipt(self, client):
        body = self.valid_body()
        response = self.post(client, body, self.signed(body, self.other_secret()))
        assert response.status_code == 401 and response.json()["code"] == "invalid_signature"
        receipt = QuarantineReceipt.objects.get()
        assert not receipt.authenticated and str(receipt.receipt_id) == response.json()["receipt_id"]
        assert not InboundEvent.objects.exists() and not Delivery.objects.exists()

    def test_body_changed_after_signing_is_refused(self, client):
        body = self.valid_body()
        headers = self.signed(body)
        changed = body.replace(b"price", b"prize", 1)
        assert changed != body
        response = self.post(client, changed, headers)
        assert response.status_code == 401 and response.json()["code"] == "invalid_signature"
        assert not InboundEvent.objects.exists()

    def test_missing_proof_header_is_refused(self, client):
        response = self.post(client, self.valid_body(), {})
        assert response.status_code == 401 and response.json()["code"] == "missing_proof_headers"
        assert not InboundEvent.objects.exists()

    def test_oversize_body_is_413_and_writes_nothing(self, client, settings):
        body = self.valid_body()
        setattr(settings, self.limit_setting, len(body) - 1)
        response = self.post(client, body, self.signed(body))
        assert response.status_code == 413 and response.json()["code"] == "payload_too_large"
        assert not QuarantineReceipt.objects.exists() and not InboundEvent.objects.exists()

    def test_unknown_account_is_an_authenticated_receipt(self, client):
        body = self.unknown_account_body()
        response = self.post(client, body, self.signed(body))
        assert response.status_code == self.quarantined_status
        receipt = QuarantineReceipt.objects.get(reason_code=self.unknown_account_code)
        assert receipt.authenticated
        assert str(receipt.receipt_id) in response.json()["receipt_ids"]

    def test_second_secret_is_accepted_only_when_registered(self, client, monkeypatch):
        body = self.valid_body()
        refused = self.post(client, body, self.signed(body, self.other_secret()))
        assert refused.status_code == 401
        if not self.rotates:
            return  # one secret per source: the refusal above is the whole behaviour
        self.register_second_secret(monkeypatch)
        accepted = self.post(client, body, self.signed(body, self.other_secret()))
        assert accepted.status_code == 200 and InboundEvent.objects.count() == 1
        # And the first secret still works while both are registered.
        again = self.post(client, body, self.signed(body))
        assert again.status_code == 200 and InboundEvent.objects.get().seen_count == 2


class TestSandboxAdapter(AdapterSecurityCases):
    url = "/webhooks/sandbox/"
    unknown_account_code = "account_mismatch"
    quarantined_status = 202

    @pytest.fixture(autouse=True)
    def _source(self, sandbox_source):
        return sandbox_source

    def valid_body(self) -> bytes:
        document = json.loads(fixture_body("comment__northstar"))
        document["events"][0]["text"] = "what is the price of the checklist?"
        return json.dumps(document).encode()

    def unknown_account_body(self) -> bytes:
        document = json.loads(self.valid_body())
        document["account"] = "acct_test_unknown"
        return json.dumps(document).encode()

    def signed(self, body, secret=None):
        return sign(body, secret=secret or TEST_SECRET)

    def other_secret(self):
        return OTHER_SANDBOX_SECRET


class _MetaCases(AdapterSecurityCases):
    url = f"/webhooks/meta/{APP_ID}/"
    unknown_account_code = "unknown_account"
    rotates = True
    limit_setting = "CONDUIT_META_WEBHOOK_MAX_BYTES"

    @pytest.fixture(autouse=True)
    def _source(self, meta_sources):
        return meta_sources

    def signed(self, body, secret=None):
        return {"X-Hub-Signature-256": signature_header(body=body, secret=secret or APP_SECRET)}

    def other_secret(self):
        return NEXT_SECRET

    def register_second_secret(self, monkeypatch):
        from ingress.models import Source

        monkeypatch.setenv(NEXT_ENV, NEXT_SECRET)
        Source.objects.filter(app_id=APP_ID).update(secret_env_next=NEXT_ENV)


class TestMetaInstagramAdapter(_MetaCases):
    def valid_body(self):
        return meta_body("meta_instagram/comment__created")

    def unknown_account_body(self):
        return meta_body("meta_instagram/comment__created").replace(
            b"17841400000000001", b"17841400000000999"
        )


class TestMetaPageAdapter(_MetaCases):
    def valid_body(self):
        return meta_body("meta_page/comment__add")

    def unknown_account_body(self):
        document = json.loads(meta_body("meta_page/comment__add"))
        document["entry"][0]["id"] = "100000000000999"
        return json.dumps(document).encode()


# Written once per run: every call of valid_body() must give the same bytes, as a signature covers them.
WHATSAPP_AT = int(time.time()) - 60


class TestMetaWhatsAppAdapter(_MetaCases):
    """A phone number's messages on the same Meta callback and app secret."""

    @pytest.fixture(autouse=True)
    def _source(self, whatsapp_source):
        return whatsapp_source

    def valid_body(self):
        return whatsapp.body(whatsapp.text_message(1, "What is the price?", at=WHATSAPP_AT))

    def unknown_account_body(self):
        # metadata.phone_number_id is the account: a number this app has not registered.
        return self.valid_body().replace(whatsapp.NUMBER.encode(), b"100000000000999")
