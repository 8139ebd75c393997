"""The sandbox transport: HTTP to Conduit's own loopback sandbox provider. Never live."""

from __future__ import annotations

import http.client
import json
import threading
import time

from conduit.loopback import loopback_address
from conduit.providers.base import (
    Ambiguous,
    Capabilities,
    NotSent,
    OutboundReply,
    Receipt,
    Transport,
)
from conduit.providers.keepalive import (
    ExchangeFailed,
    KeptConnection,
    NoDelayHTTPConnection,
)

TIMEOUT_SECONDS = 10.0
# A discovered answer is reused this long, then asked again: a sandbox provider
# is restarted with other capabilities in tests and demos, and one GET a minute
# is cheap. A connection refused on send forgets it at once.
CAPABILITIES_TTL_SECONDS = 60.0
CONSERVATIVE = Capabilities(idempotency_key=False, receipt_lookup=False)

# The statuses with which the sandbox provider refuses a POST /replies before
# applying anything (see simulators/sandbox.py): only these mean "not
# sent". Any other 4xx (409 above all: the provider may already hold the reply)
# is not established, so it parks the send in SEND_STATUS_UNKNOWN.
REFUSED_BEFORE_APPLYING: dict[int, str] = {
    400: "the body is not a JSON object with a reply_key; answered before anything is applied",
    404: "the path is not /replies; answered before the body is read",
    429: "refuse mode: the provider declines the send and applies nothing",
}


class _Discovery:
    """Capabilities per provider address; only a successful discovery is remembered.

    A failed discovery is never cached (an lru_cache would keep the conservative
    answer for the life of the process), so a provider that starts later, or
    restarts, is asked again on the next build.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[tuple[str, int], tuple[float, Capabilities]] = {}
        # Bumped whenever what is known is dropped (a provider down, restarted, replaced):
        # kept-alive connections from an older generation are closed, never reused.
        self.generation = 0

    def __call__(self, host: str, port: int) -> Capabilities | None:
        """The provider's capabilities, or None when they could not be discovered."""
        now = time.monotonic()
        with self._lock:
            cached = self._known.get((host, port))
        if cached and now - cached[0] < CAPABILITIES_TTL_SECONDS:
            return cached[1]
        conn = http.client.HTTPConnection(host, port, timeout=TIMEOUT_SECONDS)
        try:
            conn.request("GET", "/capabilities")
            response = conn.getresponse()
            data = json.loads(response.read())
            if response.status != 200:
                raise ValueError(f"status {response.status}")
            found = Capabilities(bool(data["idempotency_key"]), bool(data["receipt_lookup"]))
        except (OSError, ValueError, KeyError, TypeError, http.client.HTTPException):
            self.forget(host, port)
            return None
        finally:
            conn.close()
        with self._lock:
            self._known[(host, port)] = (now, found)
        return found

    def forget(self, host: str, port: int) -> None:
        with self._lock:
            self._known.pop((host, port), None)
            self.generation += 1

    def cache_clear(self) -> None:
        with self._lock:
            self._known.clear()
            self.generation += 1


_discovered = _Discovery()


class SandboxTransport(Transport):
    """One instance keeps one connection alive for its sends (the sender keeps one instance per
    route and worker: replies.transports), with conduit.providers.keepalive's guards; its
    generation is the discovery's (a provider forgotten or rediscovered from scratch is never
    spoken to on an old connection)."""

    name = "sandbox"
    live = False
    kept_alive = True

    def __init__(
        self, url: str, capabilities: Capabilities | None = None, timeout: float = TIMEOUT_SECONDS
    ) -> None:
        address = loopback_address(url)
        if address is None:
            raise ValueError("the sandbox transport only talks to a loopback http:// URL")
        (self.host, self.port), self.timeout = address, timeout
        self.kept = KeptConnection(self._connection, generation=lambda: _discovered.generation)
        self._set_capabilities(capabilities or _discovered(self.host, self.port))

    def refresh(self) -> None:
        """Read the provider's capabilities as a new build would (a kept instance's next send)."""
        self._set_capabilities(_discovered(self.host, self.port))

    def close(self) -> None:
        self.kept.close()

    def _set_capabilities(self, found: Capabilities | None) -> None:
        # Undiscovered: readers get the conservative answer, and send() refuses
        # to go out rather than drop the Idempotency-Key it may owe the provider.
        self.discovered = found is not None
        self.capabilities = found or CONSERVATIVE

    def _rediscover(self) -> bool:
        """Ask again if the build could not; True when the capabilities are known."""
        if not self.discovered:
            self._set_capabilities(_discovered(self.host, self.port))
        return self.discovered

    def _connection(self) -> http.client.HTTPConnection:
        return NoDelayHTTPConnection(self.host, self.port, timeout=self.timeout)

    def send(self, reply: OutboundReply) -> Receipt:
        body = json.dumps(
            {
                "reply_key": reply.reply_key,
                "channel": reply.channel,
                "text": reply.text,
                "conversation_ref": reply.conversation_ref,
                "message_ref": reply.message_ref,
            }
        ).encode()
        if not self._rediscover():
            raise NotSent("capability_discovery_failed")  # nothing left the process
        headers = {"Content-Type": "application/json"}
        if self.capabilities.idempotency_key:
            headers["Idempotency-Key"] = reply.reply_key
        try:
            status, _, payload = self.kept.exchange("POST", "/replies", body, headers)
        except ExchangeFailed as exc:
            if exc.stage == "connect":
                # Nothing left the process. The provider is down: whatever comes
                # back on this address is asked for its capabilities again.
                _discovered.forget(self.host, self.port)
                raise NotSent("connect_failed") from exc
            # Part of the request may have been written, or all of it: the provider may have it.
            raise Ambiguous(
                {"write": "write_failed", "timeout": "timeout_after_request"}.get(
                    exc.stage, "connection_lost_after_request"
                )
            ) from exc
        return self._answer(status, payload)

    def _answer(self, status: int, payload: bytes) -> Receipt:
        """Read a complete answer: a receipt, or NotSent/Ambiguous as the status says."""
        if 200 <= status < 300:
            try:
                receipt_id = str(json.loads(payload)["id"])
            except (ValueError, KeyError, TypeError) as exc:
                raise Ambiguous("unreadable_receipt", http_status=status, response=True) from exc
            return Receipt(provider_reply_id=receipt_id, http_status=status)
        if status in REFUSED_BEFORE_APPLYING:
            # The provider answered that it did not apply the reply.
            raise NotSent(f"provider_refused_{status}", http_status=status, reached=True)
        if 400 <= status < 500:
            # A refusal this transport does not declare as "before applying" (a 409
            # above all) may mean the provider already holds the reply.
            raise Ambiguous(f"provider_undeclared_{status}", http_status=status, response=True)
        raise Ambiguous(f"provider_error_{status}", http_status=status, response=True)

    def lookup(self, reply_key: str, reply: OutboundReply | None = None) -> Receipt | None:
        if not self._rediscover():
            raise Ambiguous("capability_discovery_failed")  # no answer either way: try again
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
