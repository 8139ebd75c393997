"""The sandbox transport: HTTP to Conduit's own loopback sandbox provider. Never live."""

from __future__ import annotations

import http.client
import json
import os
import select
import socket
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

TIMEOUT_SECONDS = 10.0
# A discovered answer is reused this long, then asked again: a sandbox provider
# is restarted with other capabilities in tests and demos, and one GET a minute
# is cheap. A connection refused on send forgets it at once.
CAPABILITIES_TTL_SECONDS = 60.0
CONSERVATIVE = Capabilities(idempotency_key=False, receipt_lookup=False)

# The statuses with which the sandbox provider refuses a POST /replies before
# applying anything (see conduit/providers/sandbox/simulator.py): only these mean "not
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

# A kept-alive connection idle longer than this is closed rather than reused: servers close
# idle connections on their own clock, and a request written just as one does would be lost
# with nothing to say whether it arrived. A fresh loopback connection costs a fraction of a ms.
KEEPALIVE_IDLE_SECONDS = 1.0


def _quiet(conn: http.client.HTTPConnection) -> bool:
    """An idle connection with nothing to read: not closed by the server, no stray bytes."""
    sock = conn.sock
    if sock is None:
        return False
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return False
    return not readable


# A failed write on a reused connection: the server had already closed the idle connection.
STALE_ON_WRITE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


class _Connection(http.client.HTTPConnection):
    """http.client writes a request's headers, then its body: on a kept-alive connection Nagle's
    algorithm holds the body until the server's delayed ACK of the headers (40 ms on Linux).
    No delay: both go out at once."""

    def connect(self) -> None:
        super().connect()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _ack_at_once(conn: http.client.HTTPConnection) -> None:
    """Acknowledge the answer's first segment at once (Linux TCP_QUICKACK, which the kernel
    clears again by itself, hence per request). A server that writes its headers and its body
    apart without TCP_NODELAY (http.server's default, the sandbox provider's) holds the body
    until that ACK, which a kept-alive connection would otherwise delay by 40 ms."""
    quickack = getattr(socket, "TCP_QUICKACK", None)
    if quickack is not None and conn.sock is not None:
        try:
            conn.sock.setsockopt(socket.IPPROTO_TCP, quickack, 1)
        except OSError:
            pass  # only a delay


class _StaleConnection(Exception):
    """A reused connection the server had closed: the request did not reach it."""


class SandboxTransport(Transport):
    """One instance keeps one connection alive for its sends (the sender keeps one instance per
    route and worker: replies.transports). A connection goes back only after a complete answer
    that leaves it open; after anything else (a timeout, a dropped or unreadable answer, an
    error of any kind) it is closed, so a late answer to one request is never read as another's.
    Before reuse it must be idle and quiet (readable means the server closed it, or sent what
    no request asked for), young (KEEPALIVE_IDLE_SECONDS), of this process (a forked child
    never writes on its parent's socket) and of the current discovery generation (a provider
    forgotten or rediscovered from scratch is never spoken to on an old connection)."""

    name = "sandbox"
    live = False
    kept_alive = True

    def __init__(self, url: str, capabilities: Capabilities | None = None,
                 timeout: float = TIMEOUT_SECONDS) -> None:
        address = loopback_address(url)
        if address is None:
            raise ValueError("the sandbox transport only talks to a loopback http:// URL")
        (self.host, self.port), self.timeout = address, timeout
        self._kept: tuple[http.client.HTTPConnection, float, int, int] | None = None
        self._set_capabilities(capabilities or _discovered(self.host, self.port))

    def refresh(self) -> None:
        """Read the provider's capabilities as a new build would (a kept instance's next send)."""
        self._set_capabilities(_discovered(self.host, self.port))

    def _take(self) -> http.client.HTTPConnection | None:
        """The kept connection if it is still fit for a request, else None (closed)."""
        kept, self._kept = self._kept, None
        if kept is None:
            return None
        conn, idle_since, pid, generation = kept
        if pid != os.getpid():
            return None  # the parent's socket: leave it alone
        if (generation != _discovered.generation or time.monotonic() - idle_since > KEEPALIVE_IDLE_SECONDS
                or not _quiet(conn)):
            conn.close()
            return None
        return conn

    def _give_back(self, conn: http.client.HTTPConnection, reusable: bool) -> None:
        """Keep `conn` for the next send when `reusable`; close it otherwise."""
        if self._kept is not None:
            self._kept[0].close()
            self._kept = None
        if not reusable or conn.sock is None:
            conn.close()
            return
        self._kept = (conn, time.monotonic(), os.getpid(), _discovered.generation)

    def close(self) -> None:
        if self._kept is not None:
            self._kept[0].close()
            self._kept = None

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
        return _Connection(self.host, self.port, timeout=self.timeout)

    def send(self, reply: OutboundReply) -> Receipt:
        body = json.dumps({
            "reply_key": reply.reply_key, "channel": reply.channel, "text": reply.text,
            "conversation_ref": reply.conversation_ref, "message_ref": reply.message_ref,
        }).encode()
        if not self._rediscover():
            raise NotSent("capability_discovery_failed")  # nothing left the process
        headers = {"Content-Type": "application/json"}
        if self.capabilities.idempotency_key:
            headers["Idempotency-Key"] = reply.reply_key
        conn = self._take()
        if conn is not None:
            try:
                return self._answer(*self._exchange(conn, body, headers, reused=True))
            except _StaleConnection:
                pass  # nothing reached the provider: the request goes once more, on a fresh connection
        conn = self._connection()
        try:
            conn.connect()
        except OSError as exc:
            conn.close()
            # Nothing left the process. The provider is down: whatever comes
            # back on this address is asked for its capabilities again.
            _discovered.forget(self.host, self.port)
            raise NotSent("connect_failed") from exc
        return self._answer(*self._exchange(conn, body, headers, reused=False))

    def _exchange(self, conn: http.client.HTTPConnection, body: bytes, headers: dict,
                  *, reused: bool) -> tuple[int, bytes]:
        """POST /replies on `conn` and read the whole answer; the connection is kept only after
        a complete answer that leaves it open, and closed after anything else."""
        reusable = False
        try:
            try:
                conn.request("POST", "/replies", body=body, headers=headers)
            except STALE_ON_WRITE as exc:
                if reused:
                    # A write that fails was not taken whole (http.client writes the headers,
                    # then the body), and a server cannot act on a request it did not receive
                    # whole (the body is framed by Content-Length). On a reused connection the
                    # peer reset it: the server had closed it while idle, just after _quiet looked.
                    raise _StaleConnection() from exc
                raise Ambiguous("write_failed") from exc
            except OSError as exc:
                # Part of the request may have been written: the provider may have it.
                raise Ambiguous("write_failed") from exc
            try:
                _ack_at_once(conn)
                response = conn.getresponse()
                payload = response.read()
            except socket.timeout as exc:
                raise Ambiguous("timeout_after_request") from exc
            except (OSError, http.client.HTTPException) as exc:
                # Also on a reused connection: the request was written whole, and the server
                # may have applied it before the connection closed (drop_after_accept does).
                raise Ambiguous("connection_lost_after_request") from exc
            reusable = not response.will_close
            return response.status, payload
        finally:
            self._give_back(conn, reusable)

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
