"""The event process: events written on another core, as kube-scheduler's broadcaster
writes them on goroutines of its own.

Why: py-scheduler decides on one event loop, so everything that loop does per pod bounds its
rate. Writing a pod's ``Scheduled`` event (the series memo, the Event's body, the request,
its TLS and the reply) measured at about 7 % of the scheduler's CPU per bound pod, none of
it a decision. ``py-scheduler run`` therefore starts one child process,
``python -m scheduler.kube.eventsink``, which owns the event client (its own connection
pool and rate budget, as before) and an ``EventWriter``; the scheduler hands it each
occurrence as one JSON line on the child's stdin, written in batches
(every ``FLUSH_SECONDS``: one write and one wake-up of the child per batch).

Data flow::

    EventRecorder.scheduled / failed / eventf / rejected       (the scheduling loop)
            | EventProcess.occurred: one JSON line, buffered
            v  flushed every 10 ms: one write per batch
    child stdin ----> readline -> EventWriter.occurred -> POST / PATCH events.k8s.io/v1

Lines: ``["init", {settings}]`` first (the API server, TLS files, rate budget, identity,
controller, -v; sent on the pipe rather than argv so that the bearer token never shows in
``ps``), then ``["e", regarding, type, reason, note, action, related, at_ns]`` per
occurrence and ``["auth", token]`` when the credential changes (the scheduler's loaders
refresh it: a rotated ServiceAccount token, an exec plugin's; checked every
``AUTH_RELAY_SECONDS``). A line the child cannot read is logged (``event_process_bad_line``)
and skipped. The child imports neither ``kubernetes`` nor the scheduler's core
(``scheduler.kube.transport`` and ``scheduler.kube.http1`` make its calls), so it costs
a peak RSS of about 38 MiB in the benchmark, also when 5000 pods are bound at once (its
writer keeps what waits as occurrences, not as tasks: ``EventWriter.occurred``).

Lifetimes: the child reads until end of file. ``EventProcess.stop`` closes its stdin; the
child then waits up to the drain time for the writes under way and exits. A scheduler that
dies (even by SIGKILL) closes the pipe with it, so the child never outlives it by more than
that drain. The child ignores SIGINT (a terminal's Ctrl-C reaches the whole process group;
it stops when the scheduler closes the pipe). If the child exits while the scheduler runs,
the scheduler logs ``event_process_exited`` and writes events itself from then on (an
``EventWriter`` of its own): occurrences handed on but not yet written are lost (events
are best effort upstream too: client-go's broadcaster gives up on an event whose writes
keep failing, and its watchers may drop events when their queue is full).
A scheduler behind an HTTP proxy writes events in its own process (the child speaks to the
API server directly).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson
import structlog

from scheduler.kube.errors import Unreachable
from scheduler.kube.eventwriter import EventWriter, Occurrence
from scheduler.kube.http1 import ConnectionPool, HttpError
from scheduler.kube.transport import (
    TokenBucket,
    ignore_reply,
    read_reply,
    tls_context,
    unreachable_message,
)

__all__ = ["AUTH_RELAY_SECONDS", "EventProcess", "main"]

log = structlog.get_logger("py-scheduler")

AUTH_RELAY_SECONDS = 5.0
# Occurrences are handed on in batches, this often: one pipe write for the scheduler and
# one wake-up for the child per batch instead of per event (an event appears this much
# later; kube-scheduler's broadcaster queues them too).
FLUSH_SECONDS = 0.01
LINE_LIMIT = 1 << 22  # bytes; a line is one occurrence (its note at most 1 KiB)


class EventProcess:
    """The scheduler's end of the event process: an ``EventSink``.

    ``settings``: what the child needs to reach the API server and write as this scheduler
    (``host``, ``ca_file``, ``ca_data``, ``cert_file``, ``key_file``, ``verify``,
    ``server_name``, ``qps``, ``burst``, ``pool_size``, ``timeout``, ``user_agent``,
    ``identity``, ``controller``, ``verbosity``, ``drain_seconds``). ``token``: the current
    bearer token (None: client certificates only). ``fallback``: makes the in-process writer
    used once the child is gone."""

    def __init__(
        self,
        settings: Mapping[str, Any],
        *,
        token: Callable[[], Awaitable[str | None]],
        fallback: Callable[[], EventWriter],
        python: str = sys.executable,
    ) -> None:
        self.settings = dict(settings)
        self._token = token
        self._fallback = fallback
        self._python = python
        self._proc: asyncio.subprocess.Process | None = None
        self._stdin: asyncio.StreamWriter | None = None
        self._buf: list[bytes] = []
        self._flush_due = False
        self._stopping = False
        self._sent_token: str | None = None
        self._watcher: asyncio.Task[None] | None = None  # ends when the child exits
        self._tasks: list[asyncio.Task[Any]] = []  # the token relay, a fallback's series
        self.inline: EventWriter | None = None  # set once the child is gone
        self.exited = asyncio.Event()

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Start the child; a child that cannot be started leaves the events to this
        process (logged as ``event_process_failed``)."""
        token = await self._token()
        self._sent_token = token
        try:
            self._proc = await asyncio.create_subprocess_exec(
                self._python,
                "-m",
                "scheduler.kube.eventsink",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.DEVNULL,
            )
        except OSError as e:
            log.error("event_process_failed", python=self._python, error=str(e))
            self.exited.set()
            self._go_inline()
            return
        self._stdin = self._proc.stdin
        # The settings first, ahead of whatever was handed on while the child started.
        self._buf.insert(0, orjson.dumps(["init", {**self.settings, "token": token}]))
        self._schedule_flush()
        self._watcher = asyncio.create_task(self._watch(), name="event-process")
        self._tasks.append(asyncio.create_task(self._relay_auth(), name="event-process-auth"))
        log.info("event_process_started", pid=self._proc.pid)

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    async def stop(self, *, drain_seconds: float) -> None:
        """Hand on what is buffered, close the pipe and wait (bounded) for the child to
        write what it holds and exit; then it is killed."""
        self._stopping = True
        self._flush()
        for t in self._tasks:
            t.cancel()
        if self._stdin is not None:
            self._stdin.close()
        if self._proc is not None and self._proc.returncode is None:
            try:
                await asyncio.wait_for(self._proc.wait(), drain_seconds + 5.0)
            except TimeoutError:
                log.warning("event_process_killed", pid=self._proc.pid)
                with contextlib.suppress(ProcessLookupError):
                    self._proc.kill()
                await self._proc.wait()
        waited = self._tasks if self._watcher is None else [self._watcher, *self._tasks]
        await asyncio.gather(*waited, return_exceptions=True)

    async def _watch(self) -> None:
        assert self._proc is not None
        code = await self._proc.wait()
        self.exited.set()
        if self._stopping:
            return
        log.error(
            "event_process_exited",
            pid=self._proc.pid,
            exit_code=code,
            writing_events="in the scheduler's process from now on",
        )
        self._go_inline()

    def _go_inline(self) -> None:
        """From now on this process writes the events (what was buffered is handed over)."""
        self.inline = self._fallback()
        self._tasks.append(
            asyncio.create_task(self.inline.maintain_series(), name="event-series-inline")
        )
        pending, self._buf = self._buf, []
        for raw in pending:
            msg = orjson.loads(raw)
            if msg[0] == "e":
                self.inline.occurred(Occurrence.from_line(msg))

    async def _relay_auth(self) -> None:
        """Hand the child every new bearer token (the loaders refresh it on our side)."""
        while True:
            await asyncio.sleep(AUTH_RELAY_SECONDS)
            try:
                token = await self._token()
            except Exception as e:  # a refresh hook that failed: the next try may not
                log.warning("event_process_auth_failed", error=repr(e))
                continue
            if token != self._sent_token and self.inline is None:
                self._sent_token = token
                self._line(["auth", token])

    # ------------------------------------------------------------------ the sink
    def occurred(self, o: Occurrence) -> None:
        if self.inline is not None:
            self.inline.occurred(o)
        else:
            self._line(o.line())

    async def record(self, o: Occurrence) -> None:
        if self.inline is not None:
            await self.inline.record(o)
        else:
            self.occurred(o)

    def _line(self, message: list[Any]) -> None:
        self._buf.append(orjson.dumps(message))
        self._schedule_flush()

    def _schedule_flush(self) -> None:
        if not self._flush_due:
            self._flush_due = True
            asyncio.get_running_loop().call_later(FLUSH_SECONDS, self._flush)

    def _flush(self) -> None:
        self._flush_due = False
        stdin = self._stdin
        if not self._buf or stdin is None:
            return  # nothing, or not started yet: kept for start()
        data = b"\n".join(self._buf) + b"\n"
        self._buf.clear()
        if stdin.is_closing() or self.exited.is_set():
            return
        stdin.write(data)


# ---------------------------------------------------------------------- the child


class _Client:
    """The child's API client: the event writer's ``Sender``. One keep-alive pool, a token
    bucket, the bearer token the scheduler relays; replies read as ``KubeClient`` reads
    them."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self.host = str(settings["host"]).rstrip("/")
        self.timeout = float(settings.get("timeout") or 30.0)
        self.bucket = TokenBucket(float(settings["qps"]), int(settings["burst"]))
        self.token: str | None = settings.get("token")
        ssl_context = (
            tls_context(
                ca_file=settings.get("ca_file"),
                ca_data=(
                    base64.b64decode(settings["ca_der"])
                    if settings.get("ca_der")
                    else settings.get("ca_data")
                ),
                cert_file=settings.get("cert_file"),
                key_file=settings.get("key_file"),
                verify=bool(settings.get("verify", True)),
            )
            if self.host.startswith("https:")
            else None
        )
        self.pool = ConnectionPool(
            self.host,
            ssl_context=ssl_context,
            server_hostname=settings.get("server_name") or None,
            size=int(settings.get("pool_size") or 16),
            user_agent=str(settings.get("user_agent") or "py-scheduler"),
        )

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = "application/json",
        loads: Callable[[bytes], Any] = ignore_reply,
    ) -> dict[str, Any]:
        await self.bucket.take()
        headers = {"Content-Type": content_type}
        if self.token:
            headers["Authorization"] = self.token
        try:
            status, data = await self.pool.request(
                method,
                path,
                headers=headers,
                body=None if body is None else orjson.dumps(body),
                timeout=self.timeout,
            )
        except HttpError as e:
            raise Unreachable(unreachable_message(self.host, method, path, e)) from e
        return read_reply(method, path, status, data, loads)


async def _serve(stdin: asyncio.StreamReader) -> int:
    from scheduler.logging import configure_logging

    first = await stdin.readline()
    try:
        kind, settings = orjson.loads(first)
        if kind != "init" or not isinstance(settings, dict):
            raise ValueError(f"expected ['init', {{...}}], got {kind!r}")
    except ValueError as e:
        print(f"py-scheduler event process: bad first line: {e}", file=sys.stderr)
        return 2
    configure_logging(int(settings.get("verbosity") or 0))
    client = _Client(settings)
    tasks: set[asyncio.Task[Any]] = set()

    def spawn(coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        return task

    writer = EventWriter(
        client,
        identity=str(settings["identity"]),
        controller=str(settings["controller"]),
        spawn=spawn,
    )
    series = asyncio.create_task(writer.maintain_series())
    try:
        while True:
            try:
                line = await stdin.readline()
            except ValueError as e:  # over LINE_LIMIT: the reader has dropped it already
                log.warning("event_process_bad_line", error=str(e))
                continue
            if not line:
                break
            _handle_line(line, writer, client)
    finally:
        series.cancel()
        pending = [t for t in tasks if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=float(settings.get("drain_seconds") or 10.0))
        await client.pool.close()
    return 0


def _handle_line(line: bytes, writer: EventWriter, client: _Client) -> None:
    """One line from the scheduler. A line that cannot be read (the scheduler writes only
    what it made with orjson, so this would be a bug) costs that line alone: logged with its
    start, and the child reads on."""
    try:
        msg = orjson.loads(line)
        kind = msg[0]
        if kind == "e":
            writer.occurred(Occurrence.from_line(msg))
        elif kind == "auth":
            client.token = msg[1]
        else:
            log.warning("event_process_unknown_line", kind=str(kind))
    except (ValueError, TypeError, KeyError, IndexError) as e:
        log.warning(
            "event_process_bad_line", error=repr(e), line=line[:200].decode(errors="replace")
        )


async def _main() -> int:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=LINE_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    return await _serve(reader)


def main() -> int:
    """``python -m scheduler.kube.eventsink``: started by the scheduler, never by hand."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if os.isatty(0):
        print("py-scheduler event process: started by `py-scheduler run`", file=sys.stderr)
        return 2
    if os.environ.get("PY_SCHEDULER_LOOP", "uvloop") == "asyncio":  # as the scheduler's
        return asyncio.run(_main())
    import uvloop

    return uvloop.run(_main())


if __name__ == "__main__":
    raise SystemExit(main())
