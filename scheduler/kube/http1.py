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

Watches (``open_stream``) get a connection of their own, outside the pool's count: the body
(chunked) is decoded by httptools and split into lines as it arrives, and the reader takes
every line already received without waiting (aiohttp's ``readline`` was a wait, a lock and a
buffer search per line: about 4 % of the scheduler's time with a hundred pods a second).
Reading pauses while more than ``STREAM_HIGH_WATER`` lines wait for the reader.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import urllib.parse
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TypeVar, cast

import httptools

P = TypeVar("P", bound=asyncio.Protocol)

__all__ = ["ConnectionPool", "HttpError", "LineStream"]

STREAM_HIGH_WATER = 4096  # lines received and not yet read: pause reading above it


class HttpError(Exception):
    """The call got no complete response (connection refused, reset or closed, TLS or
    protocol error, timeout). The message says which."""


class _Response(asyncio.Protocol):
    """What both kinds of connection share: the transport, httptools' response parser fed
    with every read, and ``_broken`` called with the error when the response cannot be
    parsed (the connection is then closed)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports (TCP, TLS) are not asyncio.Transport subclasses: no isinstance
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as e:
            self._broken(HttpError(f"unreadable HTTP response: {e}"))
            self.close()

    def _broken(self, err: HttpError) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class _Connection(_Response):
    """One keep-alive connection; at most one request in flight (no pipelining)."""

    def __init__(self, pool: ConnectionPool) -> None:
        super().__init__()
        self.pool = pool
        self.waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.body: list[bytes] = []
        self.closed = False

    def _broken(self, err: HttpError) -> None:
        self._fail(err)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.pool._forget(self)
        why = f": {exc}" if exc else ""
        self._fail(HttpError(f"connection closed before the response was complete{why}"))

    # httptools callbacks
    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self._stop_timer()
        waiter, self.waiter = self.waiter, None
        body = b"".join(self.body)
        self.body = []
        if not self.parser.should_keep_alive():
            self.close()
        if waiter is not None and not waiter.done():
            waiter.set_result((self.parser.get_status_code(), body))

    # ours
    def _fail(self, err: HttpError) -> None:
        self._stop_timer()
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(err)

    def _stop_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _expired(self, timeout: float) -> None:
        self.timer = None
        self._fail(HttpError(f"no response within {timeout:g} s"))
        self.close()

    def send(
        self, data: bytes, *, deadline: float, timeout: float
    ) -> asyncio.Future[tuple[int, bytes]]:
        """Write a request; the future gets (status, body), or HttpError when no complete
        response came by ``deadline`` (loop time). A plain timer, not ``asyncio.timeout``:
        that context manager cost ~3 % of the scheduler's time on two calls per pod."""
        assert self.transport is not None and self.waiter is None
        loop = asyncio.get_running_loop()
        self.waiter = loop.create_future()
        self.timer = loop.call_at(deadline, self._expired, timeout)
        self.transport.write(data)
        return self.waiter

    def close(self) -> None:
        self._stop_timer()
        if not self.closed:
            self.closed = True
            self.pool._forget(self)
            if self.transport is not None:
                self.transport.close()


def _expire(waiter: asyncio.Future[None], message: str) -> None:
    if not waiter.done():
        waiter.set_exception(HttpError(message))


class LineStream(_Response):
    """One streaming response on a connection of its own: ``status`` once the headers are
    in, then the body's lines (``lines``), or the whole body (``read_body``) of a refusal."""

    def __init__(self) -> None:
        super().__init__()
        self.status = 0
        self._headers: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._lines: deque[bytes] = deque()
        self._partial: list[bytes] = []  # the start of a line still arriving
        self._body: list[bytes] = []  # a refusal's body (status >= 300)
        self._complete = False
        self._error: HttpError | None = None
        self._wakeup: asyncio.Future[None] | None = None
        self._paused = False

    def _broken(self, err: HttpError) -> None:
        self._stop(err)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._complete:
            why = f": {exc}" if exc else ""
            self._stop(HttpError(f"connection closed before the response was complete{why}"))

    # httptools callbacks
    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        if not self._headers.done():
            self._headers.set_result(None)

    def on_body(self, body: bytes) -> None:
        if self.status >= 300:
            self._body.append(body)
            return
        if b"\n" not in body:  # a piece of a long line: joined once the line is complete
            self._partial.append(body)
            return
        if self._partial:
            self._partial.append(body)
            body = b"".join(self._partial)
            self._partial = []
        parts = body.split(b"\n")
        tail = parts.pop()
        if tail:
            self._partial.append(tail)
        self._lines.extend(line for line in parts if line.strip())
        if len(self._lines) > STREAM_HIGH_WATER and not self._paused and self.transport:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        last = b"".join(self._partial)
        if last.strip():
            self._lines.append(last)
        self._partial = []
        self._complete = True
        self._wake()

    # ours
    def _wake(self) -> None:
        waiter, self._wakeup = self._wakeup, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _stop(self, err: HttpError) -> None:
        if self._error is None:
            self._error = err
        if not self._headers.done():
            self._headers.set_exception(err)
        self._wake()

    async def _wait(self, timeout: float, what: str) -> None:
        loop = asyncio.get_running_loop()
        waiter = self._wakeup = loop.create_future()
        # A plain timer, not asyncio.timeout (see _Connection.send).
        timer = loop.call_later(timeout, _expire, waiter, f"no {what} within {timeout:g} s")
        try:
            await waiter
        finally:
            timer.cancel()

    async def headers(self, timeout: float) -> int:
        """Wait for the response's status line and headers; the status."""
        try:
            async with asyncio.timeout(timeout):
                await self._headers
        except TimeoutError as e:
            raise HttpError(f"no response within {timeout:g} s") from e
        return self.status

    async def read_body(self, timeout: float) -> bytes:
        """The rest of a refusal's body (a Status object)."""
        while not self._complete:
            if self._error is not None:
                raise self._error
            await self._wait(timeout, "response body")
        return b"".join(self._body)

    async def lines(self, read_timeout: float) -> AsyncIterator[bytes]:
        """The body's non-blank lines, each without its line break, until the server ends
        the response; HttpError when the connection breaks or stays silent for
        ``read_timeout`` seconds."""
        while True:
            while self._lines:
                yield self._lines.popleft()
            if self._paused and self.transport is not None:
                self._paused = False
                self.transport.resume_reading()
            if self._complete:
                return
            if self._error is not None:
                raise self._error
            await self._wait(read_timeout, "data")

    def close(self) -> None:
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
        conn = await self._open_connection(lambda: _Connection(self))
        self._open.add(conn)
        return conn

    async def _open_connection(self, factory: Callable[[], P]) -> P:
        loop = asyncio.get_running_loop()
        try:
            _, protocol = await loop.create_connection(
                factory, self.host, self.port, ssl=self.ssl, server_hostname=self.server_hostname
            )
        except ssl.SSLError as e:
            raise HttpError(f"TLS: {e}") from e
        except OSError as e:  # "Connection refused", not asyncio's "Connect call failed (...)"
            text = os.strerror(e.errno) if e.errno else str(e) or type(e).__name__
            raise HttpError(text) from e
        return protocol

    async def open_stream(
        self, target: str, *, headers: Mapping[str, str], timeout: float
    ) -> LineStream:
        """GET ``target`` on a new connection and wait for the response's headers (at most
        ``timeout`` seconds for both); the caller reads the stream, then closes it."""
        if self._closing:
            raise HttpError("the client is closed")
        data = self._encode("GET", target, headers, None)
        stream: LineStream | None = None
        try:
            async with asyncio.timeout(timeout):
                stream = await self._open_connection(LineStream)
                assert stream.transport is not None
                stream.transport.write(data)
                await stream.headers(timeout)
        except TimeoutError as e:
            if stream is not None:
                stream.close()
            raise HttpError(f"no response within {timeout:g} s") from e
        except BaseException:
            if stream is not None:
                stream.close()
            raise
        return stream

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
        deadline = asyncio.get_running_loop().time() + timeout
        conn: _Connection | None = None
        try:
            if self._slots.locked():  # every connection busy: wait for one, within the time
                async with asyncio.timeout_at(deadline):
                    await self._slots.acquire()
            else:
                await self._slots.acquire()  # returns at once
        except TimeoutError as e:
            raise HttpError(f"no response within {timeout:g} s") from e
        try:
            while self._idle:
                candidate = self._idle.pop()
                if not candidate.closed:
                    conn = candidate
                    break
            if conn is None:
                async with asyncio.timeout_at(deadline):
                    conn = await self._connect()
            result = await conn.send(data, deadline=deadline, timeout=timeout)
        except TimeoutError as e:
            if conn is not None:
                conn.close()
            raise HttpError(f"no response within {timeout:g} s") from e
        except BaseException:
            if conn is not None:
                conn.close()
            raise
        finally:
            self._slots.release()
        if not conn.closed and not self._closing:
            self._idle.append(conn)
        return result

    async def close(self) -> None:
        self._closing = True
        for conn in list(self._open):
            conn.close()
        self._idle.clear()
