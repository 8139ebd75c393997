"""One kept-alive HTTP connection with its guards, shared by the sandbox and the Meta transports.

A connection goes back only after a complete answer that leaves it open; after anything else (a
timeout, a dropped, partial or unreadable answer, an error of any kind) it is closed, so a late
answer to one request is never read as another's. Before reuse it must be idle and quiet
(readable means the server closed it, or sent what no request asked for), young
(KEEPALIVE_IDLE_SECONDS), of this process (a forked child never writes on its parent's socket)
and of the caller's current generation (a provider forgotten or rediscovered is never spoken to
on an old connection). A write the server refuses on a reused connection goes once more on a
fresh one; a failure while reading the answer stays ambiguous (the request was written whole).
"""

from __future__ import annotations

import http.client
import os
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping

# A kept-alive connection idle longer than this is closed rather than reused: servers close
# idle connections on their own clock, and a request written just as one does would be lost
# with nothing to say whether it arrived. A fresh loopback connection costs a fraction of a ms.
KEEPALIVE_IDLE_SECONDS = 1.0

# A failed write on a reused connection: the server had already closed the idle connection.
STALE_ON_WRITE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


def _quiet(conn: http.client.HTTPConnection) -> bool:
    """An idle connection with nothing to read: not closed by the server, no stray bytes."""
    sock = conn.sock
    if sock is None:
        return False
    if isinstance(sock, ssl.SSLSocket) and sock.pending():
        return False  # decrypted bytes nobody asked for
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return False
    return not readable


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


def _no_delay(conn: http.client.HTTPConnection) -> None:
    """http.client writes a request's headers, then its body: on a kept-alive connection Nagle's
    algorithm holds the body until the server's delayed ACK of the headers (40 ms on Linux)."""
    try:
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except (OSError, AttributeError):
        pass  # only a delay


class NoDelayHTTPConnection(http.client.HTTPConnection):
    def connect(self) -> None:
        super().connect()
        _no_delay(self)


class NoDelayHTTPSConnection(http.client.HTTPSConnection):
    def connect(self) -> None:
        super().connect()
        _no_delay(self)


class ExchangeFailed(Exception):
    """No complete answer. `stage`: connect (nothing left the process), write (part of the
    request may have left), timeout or read (the request was written whole: maybe applied)."""

    def __init__(self, stage: str) -> None:
        super().__init__(stage)
        self.stage = stage


class _Stale(Exception):
    """A reused connection the server had closed: the request did not reach it."""


class KeptConnection:
    """One connection kept alive from request to request (one per transport and thread)."""

    def __init__(
        self, factory: Callable[[], http.client.HTTPConnection], generation: Callable[[], int] = lambda: 0
    ) -> None:
        self._factory = factory
        self._generation = generation
        self._kept: tuple[http.client.HTTPConnection, float, int, int] | None = None

    def take(self) -> http.client.HTTPConnection | None:
        """The kept connection if it is still fit for a request, else None (closed)."""
        kept, self._kept = self._kept, None
        if kept is None:
            return None
        conn, idle_since, pid, generation = kept
        if pid != os.getpid():
            return None  # the parent's socket: leave it alone
        if (
            generation != self._generation()
            or time.monotonic() - idle_since > KEEPALIVE_IDLE_SECONDS
            or not _quiet(conn)
        ):
            conn.close()
            return None
        return conn

    def give_back(self, conn: http.client.HTTPConnection, reusable: bool) -> None:
        """Keep `conn` for the next request when `reusable`; close it otherwise."""
        if self._kept is not None:
            self._kept[0].close()
            self._kept = None
        if not reusable or conn.sock is None:
            conn.close()
            return
        self._kept = (conn, time.monotonic(), os.getpid(), self._generation())

    def close(self) -> None:
        if self._kept is not None:
            if self._kept[2] == os.getpid():
                self._kept[0].close()
            self._kept = None

    def exchange(
        self,
        method: str,
        url: str,
        body: bytes | None,
        headers: Mapping[str, str],
        *,
        max_bytes: int | None = None,
    ) -> tuple[int, http.client.HTTPMessage, bytes]:
        """One request and its whole answer (status, headers, at most `max_bytes` + 1 bytes of
        body), on the kept connection when it is fit, else on a fresh one. Raises ExchangeFailed."""
        conn = self.take()
        if conn is not None:
            try:
                return self._exchange(conn, method, url, body, headers, max_bytes, reused=True)
            except _Stale:
                pass  # nothing reached the server: the request goes once more, on a fresh connection
        conn = self._factory()
        try:
            conn.connect()
        except OSError as exc:
            conn.close()
            raise ExchangeFailed("connect") from exc
        return self._exchange(conn, method, url, body, headers, max_bytes, reused=False)

    def _exchange(
        self,
        conn: http.client.HTTPConnection,
        method: str,
        url: str,
        body: bytes | None,
        headers: Mapping[str, str],
        max_bytes: int | None,
        *,
        reused: bool,
    ) -> tuple[int, http.client.HTTPMessage, bytes]:
        reusable = False
        try:
            try:
                conn.request(method, url, body=body, headers=dict(headers))
            except STALE_ON_WRITE as exc:
                if reused:
                    # A write that fails was not taken whole (http.client writes the headers,
                    # then the body), and a server cannot act on a request it did not receive
                    # whole (the body is framed by Content-Length). On a reused connection the
                    # peer reset it: the server had closed it while idle, just after _quiet looked.
                    raise _Stale() from exc
                raise ExchangeFailed("write") from exc
            except (OSError, http.client.HTTPException) as exc:
                # Part of the request may have been written: the server may have it.
                raise ExchangeFailed("write") from exc
            try:
                _ack_at_once(conn)
                response = conn.getresponse()
                payload = response.read() if max_bytes is None else response.read(max_bytes + 1)
            except TimeoutError as exc:  # socket.timeout is TimeoutError
                raise ExchangeFailed("timeout") from exc
            except (OSError, http.client.HTTPException) as exc:
                # Also on a reused connection: the request was written whole, and the server
                # may have applied it before the connection closed.
                raise ExchangeFailed("read") from exc
            # Only a whole answer (http.client closes the response once its body is read) on a
            # connection the server leaves open; an answer cut at max_bytes is not whole.
            reusable = response.isclosed() and not response.will_close
            return response.status, response.headers, payload
        finally:
            self.give_back(conn, reusable)


# Kept connections per thread (and process), by (scheme, host, port, timeout): for callers that
# build a client per request (the Meta transports carry a source's token) yet may share a socket.
_local = threading.local()
KEPT_PER_THREAD = 32


def kept_connection(scheme: str, host: str, port: int, timeout: float) -> KeptConnection:
    """This thread's kept connection to (scheme, host, port), made on first use."""
    if getattr(_local, "pid", None) != os.getpid():  # a forked child starts with none of its parent's
        _local.pid, _local.kept = os.getpid(), {}
    key = (scheme, host, port, timeout)
    kept = _local.kept.get(key)
    if kept is None:
        if scheme == "https":
            context = ssl.create_default_context()
            factory = lambda: NoDelayHTTPSConnection(host, port, timeout=timeout, context=context)
        else:
            factory = lambda: NoDelayHTTPConnection(host, port, timeout=timeout)
        if len(_local.kept) >= KEPT_PER_THREAD:
            _local.kept.pop(next(iter(_local.kept))).close()
        kept = _local.kept[key] = KeptConnection(factory)
    return kept
