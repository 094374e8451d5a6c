"""EventWriter.occurred: at most ``max_writers`` writes under way, the rest waiting in
arrival order as occurrences (not as tasks), and one failure never strands the others."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from structlog.testing import capture_logs

from scheduler.kube.eventwriter import EVENT_WRITERS, EventWriter, Occurrence
from tests.unit.kube.test_http1 import sync


class _Gate:
    """A sender whose calls wait until released; it records each call's pod, in order."""

    def __init__(self, fail: str = "") -> None:
        self.started: list[str] = []
        self.done: list[str] = []
        self.in_flight = 0
        self.most = 0
        self.release = asyncio.Event()
        self.fail = fail

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = "application/json",
        loads: Callable[[bytes], Any] | None = None,
    ) -> dict[str, Any]:
        pod = body["regarding"]["name"]
        self.started.append(pod)
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await self.release.wait()
            if pod == self.fail:
                raise RuntimeError("the connection broke")
            self.done.append(pod)
            return {}
        finally:
            self.in_flight -= 1


def _writer(sender: _Gate, writers: int = EVENT_WRITERS) -> tuple[EventWriter, list[Any]]:
    tasks: list[asyncio.Future[Any]] = []

    def spawn(coro: Any) -> asyncio.Future[Any]:
        tasks.append(asyncio.ensure_future(coro))
        return tasks[-1]

    writer = EventWriter(
        sender, identity="sched-a", controller="py-scheduler", spawn=spawn, writers=writers
    )
    return writer, tasks


def _scheduled(k: int) -> Occurrence:
    return Occurrence(("ns1", f"p{k:03d}", f"uid-{k}", "1"), "Normal", "Scheduled", "ok", "Binding")


@sync
async def test_a_burst_waits_as_occurrences_behind_a_bounded_number_of_writes() -> None:
    sender = _Gate()
    writer, tasks = _writer(sender)
    for k in range(100):
        writer.occurred(_scheduled(k))
    await asyncio.sleep(0.05)
    assert len(tasks) == EVENT_WRITERS  # one task per writer, not per occurrence
    assert sender.in_flight == EVENT_WRITERS and writer.waiting == 100 - EVENT_WRITERS
    sender.release.set()
    await asyncio.gather(*tasks)
    assert sender.started == [f"p{k:03d}" for k in range(100)]  # begun in arrival order
    assert sorted(sender.done) == sender.started
    assert sender.most == EVENT_WRITERS and writer.waiting == 0
    # Idle again: the next occurrence starts a writer of its own.
    writer.occurred(_scheduled(100))
    await asyncio.gather(*tasks)
    assert len(tasks) == EVENT_WRITERS + 1 and sender.done[-1] == "p100"


@sync
async def test_an_unexpected_failure_is_logged_and_the_others_are_written() -> None:
    sender = _Gate(fail="p001")
    writer, tasks = _writer(sender, writers=1)
    sender.release.set()
    with capture_logs() as logs:
        for k in range(3):
            writer.occurred(_scheduled(k))
        await asyncio.gather(*tasks)
    assert len(tasks) == 1 and sender.done == ["p000", "p002"]
    failed = [e for e in logs if e["event"] == "event_failed"]
    assert [(e["pod"], e["reason"]) for e in failed] == [("ns1/p001", "Scheduled")]
    assert "the connection broke" in failed[0]["error"]


@sync
async def test_writers_cancelled_before_their_first_step_are_counted_out() -> None:
    """On stop the writers' tasks may be cancelled before they ever ran (their ``finally``
    never runs): they no longer count, and a later occurrence starts a writer again."""
    sender = _Gate()
    sender.release.set()
    writer, tasks = _writer(sender, writers=2)
    for k in range(3):
        writer.occurred(_scheduled(k))
    assert len(tasks) == 2
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.sleep(0)  # the done callbacks
    assert sender.started == [] and writer.waiting == 3
    writer.occurred(_scheduled(3))
    assert len(tasks) == 3
    await tasks[-1]
    assert sender.done == ["p000", "p001", "p002", "p003"]
