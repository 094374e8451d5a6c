"""A keep-alive HTTP/1.1 pool for the scheduler's unary API calls (bindings, events, status
patches, deletes, leases, reviews): the hot path of every scheduled pod.

Why not aiohttp here (it still carries the watches, and every call when a proxy is set):
per request, aiohttp's ClientSession builds a URL object, a ClientRequest, header
multidicts, a timer and a response object, which measured at about a sixth of the
scheduler's CPU for the two calls each pod costs (a Binding and an event). The API server
speaks plain HTTP/1.1 with keep-alive, and each of our calls is one small JSON body each
way. So a request here is one ``bytes`` write on an idle connection and a response parsed
by httptools (llhttp, the parser of Node.js and uvicorn): content-length and chunked
bodies, keep-alive or ``Connection: close``.

Connections: at most ``size`` open (callers beyond it wait), idle ones reused last-in
first-out; one that the server closed while idle is dropped when noticed (``connection_lost``)
and never written to. A call that fails, times out or is cancelled closes its connection,
since its response could no longer be told apart from the next one's.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import urllib.parse
from collections.abc import Mapping
from typing import cast

import httptools

__all__ = ["ConnectionPool", "HttpError"]


class HttpError(Exception):
    """The call got no complete response (connection refused, reset or closed, TLS or
    protocol error, timeout). The message says which."""


class _Connection(asyncio.Protocol):
    """One keep-alive connection; at most one request in flight (no pipelining)."""

    def __init__(self, pool: ConnectionPool) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.body: list[bytes] = []
        self.closed = False

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports (TCP, TLS) are not asyncio.Transport subclasses: no isinstance
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as e:
            self._fail(HttpError(f"unreadable HTTP response: {e}"))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.pool._forget(self)
        why = f": {exc}" if exc else ""
        self._fail(HttpError(f"connection closed before the response was complete{why}"))

    # httptools callbacks
    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        waiter, self.waiter = self.waiter, None
        body = b"".join(self.body)
        self.body = []
        if not self.parser.should_keep_alive():
            self.close()
        if waiter is not None and not waiter.done():
            waiter.set_result((self.parser.get_status_code(), body))

    # ours
    def _fail(self, err: HttpError) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(err)

    def send(self, data: bytes) -> asyncio.Future[tuple[int, bytes]]:
        assert self.transport is not None and self.waiter is None
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(data)
        return self.waiter

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.pool._forget(self)
            if self.transport is not None:
                self.transport.close()


class ConnectionPool:
    """Keep-alive connections to one ``http(s)://host:port`` base URL.

    ``request`` sends one request and returns (status, body); it raises HttpError when no
    complete response came within ``timeout`` seconds. O(1) per call besides the I/O."""

    def __init__(
        self,
        base_url: str,
        *,
        ssl_context: ssl.SSLContext | None,
        server_hostname: str | None = None,
        size: int = 64,
        user_agent: str = "py-scheduler",
    ) -> None:
        url = urllib.parse.urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"not an http(s) base URL: {base_url!r}")
        self.host = url.hostname
        self.port = url.port or (443 if url.scheme == "https" else 80)
        self.prefix = url.path.rstrip("/")
        self.ssl = ssl_context if url.scheme == "https" else None
        self.server_hostname = (server_hostname or self.host) if self.ssl else None
        authority = url.netloc.rsplit("@", 1)[-1]
        self._fixed = (
            f"Host: {authority}\r\nUser-Agent: {user_agent}\r\nAccept: application/json\r\n"
        )
        self._idle: list[_Connection] = []
        self._open: set[_Connection] = set()
        self._slots = asyncio.Semaphore(size)
        self._closing = False

    def _forget(self, conn: _Connection) -> None:
        self._open.discard(conn)
        if conn in self._idle:
            self._idle.remove(conn)

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            _, conn = await loop.create_connection(
                lambda: _Connection(self),
                self.host,
                self.port,
                ssl=self.ssl,
                server_hostname=self.server_hostname,
            )
        except ssl.SSLError as e:
            raise HttpError(f"TLS: {e}") from e
        except OSError as e:  # "Connection refused", not asyncio's "Connect call failed (...)"
            text = os.strerror(e.errno) if e.errno else str(e) or type(e).__name__
            raise HttpError(text) from e
        self._open.add(conn)
        return conn

    def _encode(
        self, method: str, target: str, headers: Mapping[str, str], body: bytes | None
    ) -> bytes:
        lines = [f"{method} {self.prefix}{target} HTTP/1.1\r\n", self._fixed]
        for name, value in headers.items():
            if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
                raise HttpError(f"header {name!r}: line breaks are not allowed")
            lines.append(f"{name}: {value}\r\n")
        lines.append(f"Content-Length: {len(body) if body else 0}\r\n\r\n")
        head = "".join(lines).encode("latin-1")
        return head + body if body else head

    async def request(
        self,
        method: str,
        target: str,
        *,
        headers: Mapping[str, str],
        body: bytes | None,
        timeout: float,
    ) -> tuple[int, bytes]:
        """``target``: the path and query, already encoded (``/api/v1/...?a=b``)."""
        if self._closing:
            raise HttpError("the client is closed")
        data = self._encode(method, target, headers, body)
        conn: _Connection | None = None
        try:
            async with asyncio.timeout(timeout), self._slots:
                while self._idle:
                    candidate = self._idle.pop()
                    if not candidate.closed:
                        conn = candidate
                        break
                if conn is None:
                    conn = await self._connect()
                result = await conn.send(data)
        except TimeoutError as e:
            if conn is not None:
                conn.close()
            raise HttpError(f"no response within {timeout:g} s") from e
        except BaseException:
            if conn is not None:
                conn.close()
            raise
        if not conn.closed and not self._closing:
            self._idle.append(conn)
        return result

    async def close(self) -> None:
        self._closing = True
        for conn in list(self._open):
            conn.close()
        self._idle.clear()
