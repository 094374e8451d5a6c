"""The keep-alive HTTP/1.1 pool (scheduler.kube.http1) against a raw asyncio server on
loopback that answers as told: reuse of idle connections, chunked and content-length
bodies, ``Connection: close``, a connection the server closed while idle, timeouts,
refused connections, cancellation and the bound on open connections. And KubeClient on
top of it: status codes become the API errors, bodies decode."""

from __future__ import annotations

import asyncio
import functools
import ssl
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from scheduler.kube.http1 import ConnectionPool, HttpError

Reply = Callable[[bytes], bytes | None]  # request head+body -> raw response (None: hang)


def ok(body: bytes = b'{"kind":"Status"}', extra: str = "") -> bytes:
    return (
        f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{extra}"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


class Server:
    """Reads one request at a time per connection (head, then Content-Length bytes) and
    writes ``reply(request)``; counts connections and requests."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.connections = 0
        self.requests: list[bytes] = []
        self.writers: list[asyncio.StreamWriter] = []
        self.concurrent = 0
        self.max_concurrent = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                request = head + await reader.readexactly(length)
                self.requests.append(request)
                self.concurrent += 1
                self.max_concurrent = max(self.max_concurrent, self.concurrent)
                await asyncio.sleep(0.01)
                self.concurrent -= 1
                out = self.reply(request)
                if out is None:
                    await asyncio.sleep(3600)
                writer.write(out or b"")
                await writer.drain()
                if b"Connection: close" in (out or b""):
                    writer.close()
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


_SERVERS: list[asyncio.Server] = []


async def serve(reply: Reply, tls: ssl.SSLContext | None = None) -> tuple[Server, str]:
    s = Server(reply)
    srv = await asyncio.start_server(s.handle, "127.0.0.1", 0, ssl=tls)
    _SERVERS.append(srv)
    port = srv.sockets[0].getsockname()[1]
    return s, f"{'https' if tls else 'http'}://127.0.0.1:{port}"


def sync(test: Callable[[], Coroutine[Any, Any, None]]) -> Callable[[], None]:
    """Run an async test in a fresh event loop; close the servers it started."""

    @functools.wraps(test)
    def run() -> None:
        async def body() -> None:
            try:
                await asyncio.wait_for(test(), 20)
            finally:
                for srv in _SERVERS:
                    srv.close()
                _SERVERS.clear()

        asyncio.run(body())

    return run


def pool(base: str, size: int = 4) -> ConnectionPool:
    return ConnectionPool(base, ssl_context=None, size=size)


@sync
async def test_a_request_and_its_reply_on_one_reused_connection() -> None:
    server, base = await serve(lambda req: ok(b'{"n":1}'))
    p = pool(base)
    for _ in range(3):
        status, body = await p.request(
            "POST", "/api/v1/x?a=b", headers={"Authorization": "Bearer t"}, body=b"{}", timeout=5
        )
        assert (status, body) == (200, b'{"n":1}')
    assert server.connections == 1, "keep-alive: one connection for consecutive calls"
    first = server.requests[0]
    assert first.startswith(b"POST /api/v1/x?a=b HTTP/1.1\r\n")
    assert b"\r\nAuthorization: Bearer t\r\n" in first and first.endswith(b"\r\n\r\n{}")
    assert b"\r\nHost: 127.0.0.1:" in first and b"\r\nContent-Length: 2\r\n" in first
    await p.close()


@sync
async def test_chunked_bodies_and_error_statuses_come_back_whole() -> None:
    chunked = (
        b"HTTP/1.1 409 Conflict\r\nTransfer-Encoding: chunked\r\n\r\n"
        b'5\r\n{"a":\r\n3\r\n12}\r\n0\r\n\r\n'
    )
    _, base = await serve(lambda req: chunked)
    p = pool(base)
    assert await p.request("GET", "/", headers={}, body=None, timeout=5) == (409, b'{"a":12}')
    await p.close()


@sync
async def test_connection_close_opens_a_new_connection_next_time() -> None:
    server, base = await serve(lambda req: ok(extra="Connection: close\r\n"))
    p = pool(base)
    for _ in range(2):
        status, _ = await p.request("GET", "/", headers={}, body=None, timeout=5)
        assert status == 200
    assert server.connections == 2
    await p.close()


@sync
async def test_a_connection_the_server_closed_while_idle_is_not_reused() -> None:
    server, base = await serve(lambda req: ok())
    p = pool(base)
    await p.request("GET", "/", headers={}, body=None, timeout=5)
    server.writers[0].close()  # the server drops the idle connection
    for _ in range(50):
        await asyncio.sleep(0.01)
        if not p._idle:
            break
    assert not p._idle, "the pool noticed the close"
    assert (await p.request("GET", "/", headers={}, body=None, timeout=5))[0] == 200
    assert server.connections == 2
    await p.close()


@sync
async def test_no_reply_times_out_and_closes_the_connection() -> None:
    server, base = await serve(lambda req: None if b"slow" in req else ok())
    p = pool(base)
    with pytest.raises(HttpError, match=r"no response within 0\.2 s"):
        await p.request("GET", "/slow", headers={}, body=None, timeout=0.2)
    assert not p._open and not p._idle
    assert (await p.request("GET", "/fast", headers={}, body=None, timeout=5))[0] == 200
    assert server.connections == 2, "the timed-out connection was not reused"
    await p.close()


@sync
async def test_a_cancelled_call_leaves_no_connection_behind() -> None:
    _, base = await serve(lambda req: None)
    p = pool(base)
    task = asyncio.create_task(p.request("GET", "/", headers={}, body=None, timeout=30))
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not p._open and not p._idle
    await p.close()


@sync
async def test_a_refused_connection_and_a_server_that_hangs_up_are_http_errors() -> None:
    probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()
    with pytest.raises(HttpError):
        await pool(f"http://127.0.0.1:{port}").request("GET", "/", headers={}, body=None, timeout=5)
    truncated = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\nConnection: close\r\n\r\nabc"
    _, base = await serve(lambda req: truncated)  # then hangs up mid-body
    with pytest.raises(HttpError, match="connection closed before the response was complete"):
        await pool(base).request("GET", "/", headers={}, body=None, timeout=5)


@sync
async def test_garbage_is_a_protocol_error() -> None:
    _, base = await serve(lambda req: b"NOT HTTP AT ALL\r\n\r\n")
    p = pool(base)
    with pytest.raises(HttpError, match="unreadable HTTP response"):
        await p.request("GET", "/", headers={}, body=None, timeout=5)
    assert not p._open


@sync
async def test_open_connections_are_bounded_by_the_size() -> None:
    server, base = await serve(lambda req: ok())
    p = pool(base, size=3)
    results = await asyncio.gather(
        *(p.request("GET", f"/{i}", headers={}, body=None, timeout=5) for i in range(12))
    )
    assert [s for s, _ in results] == [200] * 12
    assert server.connections <= 3 and server.max_concurrent <= 3
    await p.close()


@sync
async def test_waiting_for_a_free_connection_counts_in_the_timeout() -> None:
    """With every connection busy, a call waits for one only as long as its timeout, and
    gives its slot back whatever happened (the next call still gets through)."""
    _, base = await serve(lambda req: None if b"hang" in req else ok())
    p = pool(base, size=1)
    hung = asyncio.create_task(p.request("GET", "/hang", headers={}, body=None, timeout=0.5))
    await asyncio.sleep(0.05)
    with pytest.raises(HttpError, match=r"no response within 0\.2 s"):
        await p.request("GET", "/queued", headers={}, body=None, timeout=0.2)
    with pytest.raises(HttpError, match=r"no response within 0\.5 s"):
        await hung
    assert (await p.request("GET", "/next", headers={}, body=None, timeout=5))[0] == 200
    assert not p._slots.locked()
    await p.close()


@sync
async def test_header_values_with_line_breaks_are_refused() -> None:
    server, base = await serve(lambda req: ok())
    p = pool(base)
    with pytest.raises(HttpError, match="line breaks"):
        await p.request("GET", "/", headers={"X": "a\r\nEvil: 1"}, body=None, timeout=5)
    assert server.requests == []


def test_only_http_base_urls() -> None:
    with pytest.raises(ValueError, match="not an http"):
        ConnectionPool("ftp://example", ssl_context=None)


@sync
async def test_kube_client_calls_go_through_the_pool() -> None:
    """KubeClient.request: the body as JSON, the query encoded, the bearer token sent, the
    reply decoded; a 404 is NotFound with the server's message; a dead server is
    Unreachable naming the call; a reply nobody reads is not decoded."""
    from kubernetes.aio import client as aio_client

    from scheduler.kube.client import KubeClient, ignore_reply
    from scheduler.kube.errors import NotFound, Unreachable

    def reply(req: bytes) -> bytes:
        if b"/missing" in req:
            body = b'{"kind":"Status","message":"pods \\"x\\" not found"}'
            return f"HTTP/1.1 404 Not Found\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body
        return ok(b'{"kind":"Binding","ok":true}')

    server, base = await serve(reply)
    cfg = aio_client.Configuration(host=base)
    cfg.api_key = {"BearerToken": "tok"}
    cfg.api_key_prefix = {"BearerToken": "Bearer"}
    client = KubeClient(cfg, qps=1000, burst=1000)
    got = await client.request(
        "POST", "/api/v1/namespaces/d/pods/p/binding", query={"dryRun": "All"}, body={"a": 1}
    )
    assert got == {"kind": "Binding", "ok": True}
    sent = server.requests[0]
    assert sent.startswith(b"POST /api/v1/namespaces/d/pods/p/binding?dryRun=All HTTP/1.1")
    assert b"\r\nauthorization: Bearer tok\r\n" in sent.lower().replace(b"bearer", b"Bearer")
    assert sent.endswith(b'\r\n\r\n{"a":1}')
    got = await client.request("GET", "/api/v1/pods", loads=lambda raw: {"raw": raw})
    assert got == {"raw": b'{"kind":"Binding","ok":true}'}  # the caller's decoder, given bytes
    assert await client.request("POST", "/api/v1/x", body={}, loads=ignore_reply) == {}
    with pytest.raises(NotFound, match='pods "x" not found'):
        await client.request("GET", "/api/v1/missing")
    with pytest.raises(NotFound, match='pods "x" not found'):  # an error's body still read
        await client.request("GET", "/api/v1/missing", loads=ignore_reply)
    await client.close()
    for srv in _SERVERS:
        srv.close()
        await srv.wait_closed()
    for w in server.writers:
        w.close()
    dead = KubeClient(aio_client.Configuration(host=base), qps=1000, burst=1000)
    with pytest.raises(
        Unreachable,
        match=r"cannot reach the API server at http://127\.0\.0\.1:\d+ "
        r"\(GET /api/v1/x\): Connection refused$",
    ):
        await dead.request("GET", "/api/v1/x")
    await dead.close()


def test_tls_under_uvloop_as_the_scheduler_runs() -> None:
    """The scheduler runs on uvloop and talks TLS to the API server: uvloop's transports
    are not asyncio.Transport subclasses, and its TLS handshake calls connection_made."""
    import uvloop

    from scheduler.servingcert import server_context

    async def body() -> None:
        tls, _ = server_context(cert_file=None, key_file=None, bind_address="127.0.0.1")
        server, base = await serve(lambda req: ok(b'{"tls":true}'), tls)
        client_ctx = ssl.create_default_context()
        client_ctx.check_hostname = False
        client_ctx.verify_mode = ssl.CERT_NONE
        p = ConnectionPool(base, ssl_context=client_ctx)
        for _ in range(2):
            got = await p.request("GET", "/x", headers={}, body=None, timeout=5)
            assert got == (200, b'{"tls":true}')
        assert server.connections == 1
        await p.close()
        for srv in _SERVERS:
            srv.close()
        _SERVERS.clear()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(asyncio.wait_for(body(), 20))


# ---------------------------------------------------------------------- watch streams

Script = list[bytes | float | None]  # bytes to write, a pause (s), None: hang up abruptly


async def stream_server(script: Script, *, status: str = "200 OK") -> tuple[list[bytes], str]:
    """A server that answers each GET with a chunked response written piece by piece as
    ``script`` says (each bytes item one HTTP chunk); the requests it read are listed."""
    requests: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        requests.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(
            f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\n\r\n".encode()
        )
        for step in script:
            if step is None:
                writer.transport.abort()
                return
            if isinstance(step, float):
                await writer.drain()
                await asyncio.sleep(step)
                continue
            writer.write(b"%x\r\n%s\r\n" % (len(step), step))
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    _SERVERS.append(srv)
    return requests, f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}"


def kube(base: str) -> Any:
    from kubernetes.aio import client as aio_client

    from scheduler.kube.client import KubeClient

    return KubeClient(aio_client.Configuration(host=base), qps=1000, burst=1000, timeout=5)


async def read_all(client: Any, read_timeout: float = 5.0) -> list[bytes]:
    return [
        line
        async for line in client.stream(
            "/api/v1/pods", query={"watch": "1"}, read_timeout=read_timeout
        )
    ]


@sync
async def test_a_watch_yields_whole_lines_however_the_chunks_cut_them() -> None:
    """Several lines in one chunk, a line cut across chunks and reads, a long line in many
    pieces, blank lines dropped, a last line without its line break, and the end of the
    response ending the iteration."""
    long_line = b'{"type":"ADDED","object":{"x":"' + b"y" * 100_000 + b'"}}'
    pieces = [long_line[i : i + 4096] for i in range(0, len(long_line), 4096)]
    script: Script = [
        b'{"a":1}\n{"b":2}\n\n{"c":',
        0.02,
        b"3}\n",
        *pieces,
        b"\n",
        0.02,
        b'{"d":4}',
    ]
    requests, base = await stream_server(script)
    client = kube(base)
    got = await read_all(client)
    assert got == [b'{"a":1}', b'{"b":2}', b'{"c":3}', long_line, b'{"d":4}']
    assert requests[0].startswith(b"GET /api/v1/pods?watch=1 HTTP/1.1\r\n")
    await client.close()


@sync
async def test_a_refused_watch_is_the_api_error_with_the_servers_message() -> None:
    from scheduler.kube.errors import Forbidden

    status = b'{"kind":"Status","message":"pods is forbidden: User \\"x\\" cannot watch"}'
    _, base = await stream_server([status], status="403 Forbidden")
    client = kube(base)
    with pytest.raises(Forbidden, match='GET /api/v1/pods: 403: pods is forbidden: User "x"'):
        await read_all(client)
    await client.close()


@sync
async def test_a_broken_or_silent_watch_is_unreachable() -> None:
    """A connection that breaks mid-stream, or sends nothing for the read timeout, ends the
    stream with Unreachable (the informer resumes from its last version) after the lines
    that did arrive."""
    from scheduler.kube.errors import Unreachable

    _, base = await stream_server([b'{"a":1}\n{"b":', 0.02, None])
    client = kube(base)
    seen: list[bytes] = []
    with pytest.raises(Unreachable, match="connection closed before the response was complete"):
        async for line in client.stream("/api/v1/pods", query={}, read_timeout=5):
            seen.append(line)
    assert seen == [b'{"a":1}']

    _, base = await stream_server([b'{"a":1}\n', 2.0, b'{"b":2}\n'])
    client2 = kube(base)
    seen = []
    with pytest.raises(Unreachable, match=r"no data within 0\.3 s"):
        async for line in client2.stream("/api/v1/pods", query={}, read_timeout=0.3):
            seen.append(line)
    assert seen == [b'{"a":1}']
    await client.close()
    await client2.close()


@sync
async def test_a_reader_that_falls_behind_pauses_the_connection_and_loses_nothing() -> None:
    """Lines received and not read are bounded: above the high-water mark the connection
    stops reading (TCP pushes back on the server) until the reader has taken them all."""
    import scheduler.kube.http1 as http1

    lines = [b'{"n":%d,"pad":"%s"}' % (i, b"x" * 1000) for i in range(2000)]
    script: Script = [b"\n".join(lines[i : i + 50]) + b"\n" for i in range(0, 2000, 50)]
    _, base = await stream_server(script)
    p = pool(base)
    old = http1.STREAM_HIGH_WATER
    http1.STREAM_HIGH_WATER = 100
    try:
        stream = await p.open_stream("/api/v1/pods", headers={}, timeout=5)
        await asyncio.sleep(0.3)  # the server has written everything by now
        assert stream._paused
        # stopped within one read of the mark (uvloop reads up to 256 KiB: 256 such lines)
        assert 100 < len(stream._lines) <= 100 + 300
        got = [line async for line in stream.lines(5)]
    finally:
        http1.STREAM_HIGH_WATER = old
    assert got == lines
    stream.close()
    await p.close()
