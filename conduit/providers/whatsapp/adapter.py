"""The WhatsApp source adapter: the webhook map, the app callback it shares with Meta's other
objects, its one event family and what is lost of it, its send budgets and its window."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from types import MappingProxyType

from conduit.providers.base import ANSWERS_MESSAGE, NOT_RECOVERABLE, Family, SourceConfig, SourcePage
from conduit.providers.meta.adapters import META_APP_CALLBACK
from conduit.providers.reading import SourceReader
from conduit.providers.whatsapp import errors
from conduit.providers.whatsapp.transport import HOSTS, MetaWhatsAppTransport
from conduit.providers.whatsapp.webhook import MetaWhatsAppWebhook

# Free-form messages may answer a buyer within 24 hours of their last message; past it only an
# approved template (WhatsApp's customer service window; docs/platforms/whatsapp.md#window).
SERVICE_WINDOW = timedelta(hours=24)

_NO_READ_BACK = (
    "WhatsApp offers no read-back of messages: a message Conduit did not receive is recovered only by "
    "Meta delivering its webhook again (it retries for up to 7 days), and a message lost past that "
    "is not recovered"
)


class MetaWhatsAppReader(SourceReader):
    """Nothing to read: the Cloud API lists no messages. A scan reads one empty page, so its report
    says what it could not compare (the family's limitation) instead of failing."""

    live = False
    # No read shows a WhatsApp reply: its statuses (webhooks) are its receipts, never a read.
    receipt_transports = frozenset()

    def read_page(
        self,
        *,
        config: SourceConfig,
        base_url: str,
        since: datetime | None,
        until: datetime | None,
        cursor: str | None,
        limit: int,
        timeout: float,
        checkpoint: datetime | None = None,
        max_bytes: int = 0,
    ) -> SourcePage:
        return SourcePage(
            scan_id=f"whatsapp-{uuid.uuid4().hex}",
            observations=[],
            rejections=[],
            receipts=[],
            next_cursor=None,
            complete=True,
        )


class MetaWhatsAppAdapter(MetaWhatsAppReader, MetaWhatsAppWebhook):
    """WhatsApp Business phone numbers (the Cloud API): buyers' messages, and statuses as receipts."""

    credential_hosts = HOSTS
    shared_callback = META_APP_CALLBACK
    graph_host = "https://graph.facebook.com"
    free_form_window = SERVICE_WINDOW
    # A reply to a WhatsApp message is a message; no purpose has another default.
    default_routes = MappingProxyType({"private_delivery": MetaWhatsAppTransport.name})
    # Documented limits (docs/platforms/whatsapp.md#budgets): 80 messages a second per number by
    # default. The pair rate (about one message per 6 s to one person) is the transport's 131056,
    # retried after its pause.
    send_budgets = MappingProxyType({MetaWhatsAppTransport.name: (80, 1)})
    families = (Family("message.created", NOT_RECOVERABLE, _NO_READ_BACK, answers=ANSWERS_MESSAGE),)

    def delivery_failure(self, error_code: str) -> str:
        return errors.failure_sentence(error_code)
