"""The event process (scheduler.kube.eventsink) as the scheduler runs it: a real child
process (``python -m scheduler.kube.eventsink``) writing to a raw HTTP server on loopback
(the one of test_http1). What it writes (events.k8s.io/v1 bodies, series, the relayed
credential, the occurrence's time), what happens when the scheduler stops, dies or the
child dies (the fallback writer), and a bad first line."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from structlog.testing import capture_logs

from scheduler.kube import eventsink
from scheduler.kube.eventsink import EventProcess
from scheduler.kube.eventwriter import EventWriter, Occurrence, micro_time, truncate_note
from tests.unit.kube.fakekube import FakeKube
from tests.unit.kube.test_http1 import Server, ok, serve, sync

POD = ("ns1", "web-0", "uid-1", "42")
PREEMPTOR = ("ns1", "big", "uid-9", "7")


def _requests(server: Server) -> list[tuple[str, str, dict[str, str], Any]]:
    """(method, path, headers, JSON body) of every request the server read."""
    out = []
    for raw in server.requests:
        head, _, body = raw.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
        out.append((method, path, headers, orjson.loads(body) if body else None))
    return out


def _process(
    host: str, tokens: Iterator[str | None], fallback: EventWriter | None = None
) -> EventProcess:
    async def token() -> str | None:
        return next(tokens)

    def make_fallback() -> EventWriter:
        assert fallback is not None, "the child was not supposed to exit"
        return fallback

    return EventProcess(
        {
            "host": host,
            "qps": 1000.0,
            "burst": 1000,
            "identity": "sched-a",
            "controller": "py-scheduler",
            "verbosity": 0,
            "drain_seconds": 5.0,
        },
        token=token,
        fallback=make_fallback,
    )


def _fallback_writer() -> tuple[FakeKube, list[asyncio.Future[Any]], EventWriter]:
    """An in-process writer on a recording API, and the writes it spawns."""
    api = FakeKube()
    tasks: list[asyncio.Future[Any]] = []

    def spawn(coro: Any) -> asyncio.Future[Any]:
        tasks.append(asyncio.ensure_future(coro))
        return tasks[-1]

    writer = EventWriter(
        api,  # type: ignore[arg-type]
        identity="sched-a",
        controller="py-scheduler",
        spawn=spawn,
    )
    return api, tasks, writer


async def _until(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


@sync
async def test_the_child_writes_events_and_series_with_the_scheduler_s_credential() -> None:
    server, host = await serve(lambda _: ok())
    proc = _process(host, iter(["Bearer t1"] * 10))
    await proc.start()
    seen = time.time_ns() - 3_600 * 10**9  # when the scheduler saw it: an hour ago here
    for k in range(2):  # isomorphic: one Event, then its series
        proc.occurred(
            Occurrence(POD, "Warning", "FailedScheduling", "no room", "Scheduling", None, seen + k)
        )
    await _until(lambda: len(server.requests) == 2)
    # Told by another profile (its reportingController); the others by the child's own.
    await proc.record(
        Occurrence(PREEMPTOR, "Normal", "Preempted", "by x", "Preempting", POD, controller="b")
    )
    await proc.stop(drain_seconds=5.0)
    assert proc.exited.is_set() and proc.inline is None
    reqs = _requests(server)
    assert [(m, p.rsplit("/", 1)[-1]) for m, p, _, _ in reqs] == [
        ("POST", "events"),
        ("PATCH", reqs[0][3]["metadata"]["name"]),
        ("POST", "events"),
    ]
    assert {h["authorization"] for _, _, h, _ in reqs} == {"Bearer t1"}
    first = reqs[0][3]
    assert reqs[0][1] == "/apis/events.k8s.io/v1/namespaces/ns1/events"
    assert first["regarding"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": "ns1",
        "name": "web-0",
        "uid": "uid-1",
        "resourceVersion": "42",
    }
    assert (first["reportingController"], first["reportingInstance"]) == ("py-scheduler", "sched-a")
    # eventTime is when the scheduler saw it happen, not when the child wrote it.
    assert first["eventTime"] == micro_time(seen)
    assert reqs[1][3] == {
        "series": {"count": 2, "lastObservedTime": reqs[1][3]["series"]["lastObservedTime"]}
    }
    preempted = reqs[2][3]
    assert preempted["related"]["name"] == "web-0" and preempted["regarding"]["name"] == "big"
    assert preempted["reportingController"] == "b"


def test_a_new_credential_is_relayed_to_the_child(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(eventsink, "AUTH_RELAY_SECONDS", 0.05)

    @sync
    async def go() -> None:
        server, host = await serve(lambda _: ok())
        current = ["Bearer old"]  # what the scheduler's loaders hold now

        def tokens() -> Iterator[str | None]:
            while True:
                yield current[0]

        proc = _process(host, tokens())
        await proc.start()
        proc.occurred(Occurrence(POD, "Normal", "Scheduled", "a", "Binding", None))
        await _until(lambda: len(server.requests) == 1)
        current[0] = "Bearer new"  # rotated
        # The relay hands it on; the child reads its lines in order, so the next event
        # goes out with it.
        await _until(lambda: proc._sent_token == "Bearer new")
        proc.occurred(Occurrence(PREEMPTOR, "Normal", "Scheduled", "b", "Binding", None))
        await _until(lambda: len(server.requests) == 2)
        await proc.stop(drain_seconds=5.0)
        assert [h["authorization"] for _, _, h, _ in _requests(server)] == [
            "Bearer old",
            "Bearer new",
        ]

    go()


def test_a_refresh_that_fails_is_logged_and_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(eventsink, "AUTH_RELAY_SECONDS", 0.01)

    @sync
    async def go() -> None:
        server, host = await serve(lambda _: ok())
        answers: list[str | Exception] = ["Bearer old", RuntimeError("exec plugin failed")]

        async def token() -> str | None:
            answer = answers.pop(0) if answers else "Bearer new"
            if isinstance(answer, Exception):
                raise answer
            return answer

        proc = _process(host, iter([]))
        proc._token = token
        with capture_logs() as logs:
            await proc.start()
            await _until(lambda: proc._sent_token == "Bearer new")
        assert any(e["event"] == "event_process_auth_failed" for e in logs)
        proc.occurred(Occurrence(POD, "Normal", "Scheduled", "a", "Binding", None))
        await _until(lambda: len(server.requests) == 1)
        await proc.stop(drain_seconds=5.0)
        assert [h["authorization"] for _, _, h, _ in _requests(server)] == ["Bearer new"]

    go()


@sync
async def test_when_the_child_dies_the_scheduler_writes_events_itself() -> None:
    _, host = await serve(lambda _: ok())
    api, tasks, fallback = _fallback_writer()
    proc = _process(host, iter(["Bearer t"] * 10), fallback)
    await proc.start()
    assert proc.pid is not None
    with capture_logs() as logs:
        os.kill(proc.pid, signal.SIGKILL)
        await asyncio.wait_for(proc.exited.wait(), 10)
        await _until(lambda: proc.inline is not None)
    (exited,) = [e for e in logs if e["event"] == "event_process_exited"]
    assert exited["exit_code"] == -signal.SIGKILL and exited["log_level"] == "error"
    proc.occurred(Occurrence(POD, "Warning", "FailedScheduling", "no room", "Scheduling", None))
    await proc.record(Occurrence(POD, "Normal", "Scheduled", "ok", "Binding", None))
    await asyncio.gather(*tasks)
    assert sorted(api.events()) == [("FailedScheduling", "web-0"), ("Scheduled", "web-0")]
    await proc.stop(drain_seconds=1.0)


@sync
async def test_a_scheduler_that_dies_closes_the_pipe_and_the_child_writes_what_it_has() -> None:
    """The scheduler killed: its end of the pipe closes with it (closed here by hand), and
    the child writes what it was handed, then exits 0 on its own."""
    server, host = await serve(lambda _: ok())
    proc = _process(host, iter(["Bearer t"] * 10))
    await proc.start()
    proc.occurred(Occurrence(POD, "Normal", "Scheduled", "ok", "Binding", None))
    proc._flush()
    assert proc._stdin is not None and proc._proc is not None and proc._watcher is not None
    proc._stopping = True  # the scheduler is gone: nobody falls back
    for t in proc._tasks:
        t.cancel()
    proc._stdin.close()
    assert await asyncio.wait_for(proc._proc.wait(), 10) == 0
    await asyncio.gather(proc._watcher, *proc._tasks, return_exceptions=True)
    assert [m for m, *_ in _requests(server)] == ["POST"]


@sync
async def test_occurrences_before_the_start_are_written_after_the_settings() -> None:
    """Something can happen while the child starts (a malformed pod in the first
    listing): the settings still go first, then what was handed on."""
    server, host = await serve(lambda _: ok())
    proc = _process(host, iter(["Bearer t"] * 10))
    proc.occurred(Occurrence(POD, "Warning", "FailedScheduling", "bad pod", "Scheduling", None))
    proc._flush()  # a flush before the start: nothing to write to yet, the line is kept
    await proc.start()
    await _until(lambda: len(server.requests) == 1)
    await proc.stop(drain_seconds=5.0)
    assert proc.inline is None
    ((method, _, _, body),) = _requests(server)
    assert (method, body["note"]) == ("POST", "bad pod")


@sync
async def test_a_line_the_child_cannot_read_costs_that_line_alone() -> None:
    """Lines that are not JSON, of the wrong shape, or longer than the child's limit (never
    written by the scheduler, which makes each with orjson): the child skips each and
    writes the occurrences around them; it does not exit (no fallback is offered here)."""
    server, host = await serve(lambda _: ok())
    proc = _process(host, iter(["Bearer t"] * 10))
    await proc.start()
    proc.occurred(Occurrence(POD, "Normal", "Scheduled", "before", "Binding", None))
    proc._buf += [
        b"not json",
        b'["e", "too", "short"]',
        b"[]",
        b'{"e": 1}',
        b'["e", ' + b"1" * (eventsink.LINE_LIMIT + 10) + b"]",
    ]
    proc.occurred(Occurrence(PREEMPTOR, "Normal", "Scheduled", "after", "Binding", None))
    await _until(lambda: len(server.requests) == 2)
    assert proc._proc is not None and proc._proc.returncode is None
    await proc.stop(drain_seconds=5.0)
    assert proc.inline is None and proc._proc.returncode == 0
    assert sorted(body["note"] for _, _, _, body in _requests(server)) == ["after", "before"]


@sync
async def test_a_child_that_cannot_start_leaves_the_events_to_the_scheduler() -> None:
    api, tasks, fallback = _fallback_writer()

    async def no_token() -> str | None:
        return None

    proc = EventProcess(
        {"host": "http://127.0.0.1:1"},
        token=no_token,
        fallback=lambda: fallback,
        python="/nonexistent/python3",
    )
    proc.occurred(Occurrence(POD, "Normal", "Scheduled", "early", "Binding", None))
    with capture_logs() as logs:
        await proc.start()
    assert [e["event"] for e in logs] == ["event_process_failed"]
    assert proc.inline is fallback
    proc.occurred(Occurrence(PREEMPTOR, "Normal", "Scheduled", "late", "Binding", None))
    await asyncio.gather(*tasks)
    assert sorted(api.events()) == [("Scheduled", "big"), ("Scheduled", "web-0")]
    await proc.stop(drain_seconds=1.0)


@sync
async def test_the_child_refuses_a_first_line_that_is_not_its_settings() -> None:
    reader = asyncio.StreamReader()
    reader.feed_data(
        b'["e", ["ns", "p", "", ""], "Normal", "Scheduled", "x", "Binding", null, 1]\n'
    )
    reader.feed_eof()
    assert await eventsink._serve(reader) == 2


@pytest.mark.parametrize(
    ("note", "kept"),
    [
        pytest.param("short", "short", id="short notes are kept"),
        pytest.param("x" * 1024, "x" * 1024, id="exactly 1 KiB is kept"),
        pytest.param("é" * 600, None, id="1200 bytes: cut at a character, '...' at the end"),
    ],
)
def test_notes_are_cut_at_1_kib_of_utf8(note: str, kept: str | None) -> None:
    out = truncate_note(note)
    if kept is not None:
        assert out == kept
    else:
        assert len(out.encode()) <= 1024 and out.endswith("...") and out.startswith("é")
