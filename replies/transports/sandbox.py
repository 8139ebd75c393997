"""The sandbox transport: HTTP to Conduit's own loopback sandbox provider. Never live."""

from __future__ import annotations

import http.client
import json
import socket
from functools import lru_cache

from conduit.loopback import loopback_address
from replies.transports.base import (
    Ambiguous,
    Capabilities,
    NotSent,
    OutboundReply,
    Receipt,
    Transport,
)

TIMEOUT_SECONDS = 10.0


@lru_cache(maxsize=64)
def _discovered(host: str, port: int) -> Capabilities:
    """The capabilities a sandbox provider was started with (fixed for its lifetime).

    Unreachable means unknown, and unknown is the most conservative answer:
    neither capability. Not cached then, so a provider that starts later is asked again.
    """
    conn = http.client.HTTPConnection(host, port, timeout=TIMEOUT_SECONDS)
    try:
        conn.request("GET", "/capabilities")
        data = json.loads(conn.getresponse().read())
        return Capabilities(bool(data["idempotency_key"]), bool(data["receipt_lookup"]))
    except (OSError, ValueError, KeyError, http.client.HTTPException):
        _discovered.cache_clear()
        return Capabilities(idempotency_key=False, receipt_lookup=False)
    finally:
        conn.close()


class SandboxTransport(Transport):
    name = "sandbox"
    live = False

    def __init__(self, url: str, capabilities: Capabilities | None = None,
                 timeout: float = TIMEOUT_SECONDS) -> None:
        address = loopback_address(url)
        if address is None:
            raise ValueError("the sandbox transport only talks to a loopback http:// URL")
        (self.host, self.port), self.timeout = address, timeout
        self.capabilities = capabilities or _discovered(self.host, self.port)

    def _connection(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def send(self, reply: OutboundReply) -> Receipt:
        body = json.dumps({
            "reply_key": reply.reply_key, "channel": reply.channel, "text": reply.text,
            "conversation_ref": reply.conversation_ref, "message_ref": reply.message_ref,
        }).encode()
        headers = {"Content-Type": "application/json"}
        if self.capabilities.idempotency_key:
            headers["Idempotency-Key"] = reply.reply_key
        conn = self._connection()
        try:
            try:
                conn.connect()
            except OSError as exc:
                raise NotSent("connect_failed") from exc  # nothing left the process
            try:
                conn.request("POST", "/replies", body=body, headers=headers)
            except OSError as exc:
                # Part of the request may have been written: the provider may have it.
                raise Ambiguous("write_failed") from exc
            try:
                response = conn.getresponse()
                payload = response.read()
            except socket.timeout as exc:
                raise Ambiguous("timeout_after_request") from exc
            except (OSError, http.client.HTTPException) as exc:
                raise Ambiguous("connection_lost_after_request") from exc
        finally:
            conn.close()
        status = response.status
        if 200 <= status < 300:
            try:
                receipt_id = str(json.loads(payload)["id"])
            except (ValueError, KeyError, TypeError) as exc:
                raise Ambiguous("unreadable_receipt", http_status=status, response=True) from exc
            return Receipt(provider_reply_id=receipt_id, http_status=status)
        if status == 429 or 400 <= status < 500:
            # The provider answered that it did not apply the reply.
            raise NotSent(f"provider_refused_{status}", http_status=status, reached=True)
        raise Ambiguous(f"provider_error_{status}", http_status=status, response=True)

    def lookup(self, reply_key: str) -> Receipt | None:
        if not self.capabilities.receipt_lookup:
            raise NotImplementedError("this provider offers no receipt lookup")
        conn = self._connection()
        try:
            conn.request("GET", f"/replies/{reply_key}")
            response = conn.getresponse()
            payload = response.read()
        finally:
            conn.close()
        if response.status == 404:
            return None
        if response.status != 200:
            raise Ambiguous(f"lookup_failed_{response.status}", http_status=response.status, response=True)
        return Receipt(provider_reply_id=str(json.loads(payload)["id"]), http_status=200)
