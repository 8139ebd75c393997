"""The WhatsApp transport: one message through the Cloud API, sent at most once.

    meta-whatsapp-message   POST /{phone-number-id}/messages   (JSON)
        {"messaging_product": "whatsapp", "recipient_type": "individual", "to": <number>,
         "context": {"message_id": <the buyer's wamid>}, "type": "text", "text": {"body"},
         "biz_opaque_callback_data": <reply key>}
        or, once the 24-hour window has closed, "type": "template" with the approved template
        -> {"messaging_product", "contacts": [{"input", "wa_id"}], "messages": [{"id": <wamid>}]}

WhatsApp has no idempotency key and no read-back of messages; the reply key rides in
`biz_opaque_callback_data`, which every status webhook of the message carries back: the status
is the receipt (conduit.providers.whatsapp.webhook), so an ambiguous send is settled without a
person once its status arrives. Outcomes as the Meta transports': the answer's wamid is a
Receipt; an error means what conduit.providers.whatsapp.errors says; no readable answer after
the request may have left is Ambiguous; a connection that never opened is NotSent.
"""

from __future__ import annotations

import re
from datetime import timedelta
from types import MappingProxyType
from typing import Any, Mapping
from urllib.parse import quote

from conduit.loopback import loopback_address
from conduit.providers.base import (
    ANSWERS_MESSAGE,
    MAX_REF_LENGTH,
    TEXT,
    Capabilities,
    OutboundReply,
    Receipt,
    Transport,
    message_form,
)
from conduit.providers.meta.graph import GraphCallFailed, GraphError, graph_request
from conduit.providers.meta.reply_outcomes import MetaAmbiguous, MetaNotSent, MetaReceipt
from conduit.providers.meta.transport import (
    SEND_MAX_BYTES,
    TIMEOUT_SECONDS,
    _MetaReplyTransport,
    graph_url_checked,
)
from conduit.providers.whatsapp import errors
from conduit.providers.whatsapp.webhook import MAX_ADDRESS_LENGTH

# A wamid: `wamid.` and base64 (standard alphabet, padded), up to the contract's bound on a ref.
WAMID = re.compile(r"[0-9A-Za-z_.:\-=+/]{1,%d}" % MAX_REF_LENGTH)
# The Cloud API's host: the only place the source's token is sent (or a simulator on this host).
HOSTS = ("graph.facebook.com",)


def _template_part(template: Mapping) -> dict:
    part: dict[str, Any] = {"name": template["name"], "language": {"code": template["language"]}}
    parameters = list(template.get("parameters") or [])
    if parameters:
        part["components"] = [
            {"type": "body", "parameters": [{"type": "text", "text": p} for p in parameters]}
        ]
    return part


class MetaWhatsAppTransport(Transport):
    """A message to the buyer who wrote, in reply to their message, from the source's number."""

    name = "meta-whatsapp-message"
    live = True
    source_bound = True
    credential_hosts = HOSTS
    answers = frozenset({ANSWERS_MESSAGE})
    # It answers from the source's phone number to the buyer's, which only a WhatsApp source has.
    adapters = frozenset({"meta-whatsapp"})
    # Receipts come as status webhooks carrying the reply key; there is nothing to look up.
    capabilities = Capabilities(idempotency_key=False, receipt_lookup=False)
    # WhatsApp sends a status webhook for every message, in seconds; Meta retries one for up to 7
    # days. A day with none is worth a person's look.
    status_expected_within = timedelta(hours=24)
    evidence_rule = "http-semantics/whatsapp-error-table"
    evidence_answers = MappingProxyType(errors.EVIDENCE_ANSWERS)

    def __init__(
        self,
        url: str,
        *,
        timeout: float = TIMEOUT_SECONDS,
        token: str = "",
        account_ref: str = "",
        object: str | None = None,
        send_node: str | None = None,
    ) -> None:
        self.url, self.timeout = graph_url_checked(url, "the WhatsApp transport"), timeout
        self.live = self.live_for(url)
        self._token = token
        self.account_ref = account_ref

    @classmethod
    def live_for(cls, url: str) -> bool:
        return loopback_address(url) is None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} at {self.url}>"

    def body(self, reply: OutboundReply, form: str) -> dict:
        """The Cloud API's message for this reply, as `form` (TEXT or TEMPLATE)."""
        body: dict[str, Any] = {
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": reply.address,
        }
        if form == TEXT:
            if WAMID.fullmatch(reply.message_ref or ""):
                body["context"] = {"message_id": reply.message_ref}
            body.update(type="text", text={"preview_url": False, "body": reply.text})
        else:
            body.update(type="template", template=_template_part(reply.template or {}))
        body["biz_opaque_callback_data"] = reply.reply_key
        return body

    def send(self, reply: OutboundReply) -> Receipt:
        if not self._token:
            raise MetaNotSent(
                "graph_token_unavailable",
                stop_source=True,
                sentence="The source has no access token: nothing was sent.",
            )
        if not (reply.address.isdigit() and len(reply.address) <= MAX_ADDRESS_LENGTH):
            raise MetaNotSent(
                "reply_address_missing",
                sentence="The buyer's number is no longer kept (purged with the message): nothing was sent.",
            )
        if not self.account_ref.isdigit():
            raise MetaNotSent("graph_url_refused", sentence="The source's phone number id is not an id.")
        form = message_form(free_form_until=reply.free_form_until, template=reply.template)
        if not form:
            meant = errors.meaning(None, 131047)
            raise MetaNotSent(meant.reason, retryable=False, sentence=meant.sentence)
        try:
            response = graph_request(
                method="POST",
                base_url=self.url,
                path=f"{quote(self.account_ref, safe='')}/messages",
                params={},
                access_token=self._token,
                timeout=self.timeout,
                max_bytes=SEND_MAX_BYTES,
                keep_alive=True,
                json_body=self.body(reply, form),
            )
        except GraphError as error:
            meant = errors.meaning(error.status, error.code)
            if meant.applied_nothing:
                raise MetaNotSent(
                    meant.reason,
                    http_status=error.status,
                    reached=True,
                    retryable=meant.retryable,
                    stop_source=meant.stop_source,
                    retry_after=error.retry_after,
                    sentence=meant.sentence,
                ) from None
            raise MetaAmbiguous(
                meant.reason, http_status=error.status, response=True, sentence=meant.sentence
            ) from None
        except GraphCallFailed as failure:
            raise _MetaReplyTransport._no_answer(failure) from None
        messages = response.document.get("messages")
        first = (
            messages[0] if isinstance(messages, list) and messages and isinstance(messages[0], dict) else {}
        )
        wamid = first.get("id") if isinstance(first.get("id"), str) else ""
        if not WAMID.fullmatch(wamid):
            raise MetaAmbiguous(
                "unreadable_receipt",
                http_status=200,
                response=True,
                sentence="WhatsApp answered without the message's id: it may have gone out.",
            )
        return MetaReceipt(provider_reply_id=wamid, http_status=200, retry_after=response.usage_pause)

    def lookup(self, reply_key: str, reply: OutboundReply | None = None) -> Receipt | None:
        raise NotImplementedError("WhatsApp has no read-back of messages: its statuses are the receipts")
