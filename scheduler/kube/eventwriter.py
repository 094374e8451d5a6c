"""The event writer: occurrences in, events.k8s.io/v1 Events out, as client-go's
``tools/events`` broadcaster writes them.

What it owns: the isomorphic-event memo and the series, the Event bodies, the retries of
each write and the series' two tickers. What it does not own: deciding that something
happened (``scheduler.kube.events.EventRecorder`` does, in the scheduling loop) or where
it runs. An ``EventWriter`` runs in the scheduler's own process (``--events-in-process``,
the unit tests, the fallback when the event process dies) or in the event process of
``scheduler.kube.eventsink``; both hand it occurrences through the same two calls
(``EventSink``). So this module imports neither ``kubernetes`` nor the scheduler's core:
the event process stays small.

Events are written as kube-scheduler's event broadcaster writes them: ``regarding`` the pod
as the scheduler saw it (its resourceVersion included), ``related`` the preemptor of a
``Preempted`` victim, ``action``, ``note``, ``eventTime``, ``reportingController`` the
scheduler's name. An occurrence isomorphic to an event remembered (same type, action,
reason, regarding and related object; the note is not compared) counts into that event's
series: the second makes it a series and is written at once (``series.count`` 2); later
ones only count up here, and the series is written when it ends (no occurrence for 6
minutes, checked every 6 minutes) and every 30 minutes while it goes on. A pod retried a
hundred times while a burst of cluster events passes costs two event calls, not a hundred.
As client-go's recorder, an event is named ``<object>.<hex nanoseconds>`` when it is made
and retried under that name when the API server cannot be reached: a try whose reply was
lost and a retry cannot make two events (the retry's 409 AlreadyExists means it is there);
a series whose Event is gone is created again under its name.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from scheduler.kube.errors import ApiError, Conflict, NotFound
from scheduler.kube.transport import ignore_reply

__all__ = [
    "EVENT_MESSAGE_LIMIT",
    "SERIES_FINISH_SECONDS",
    "SERIES_REFRESH_SECONDS",
    "STRATEGIC",
    "EventSink",
    "EventWriter",
    "Occurrence",
    "Ref",
    "Sender",
    "micro_time",
    "now_micro",
    "now_rfc3339",
    "truncate_note",
]

log = structlog.get_logger("py-scheduler")

EVENT_MESSAGE_LIMIT = 1024  # upstream truncates event notes to 1 KiB
STRATEGIC = "application/strategic-merge-patch+json"
EVENT_MEMO_LIMIT = 10000
# Occurrences written at once; the others wait their turn in order. client-go starts a
# goroutine per event (a few KiB); a Python task waiting deep in a call costs about 5 KiB
# more than a queued occurrence, so a backlog of 5000 pods bound at once grew the event
# process by about 40 MiB (round 22). As many as the event client's connections.
EVENT_WRITERS = 16
EVENT_TRIES = 12  # as client-go's broadcaster; ours back off from 0.5 s to 10 s (~75 s)
# client-go tools/events: a series with no occurrence for finishTime ends (its count is
# written, it is forgotten), checked every finishTime; every refreshTime the count of each
# series is written again (which also keeps the Event from expiring).
SERIES_FINISH_SECONDS = 6 * 60.0
SERIES_REFRESH_SECONDS = 30 * 60.0

# (namespace, name, uid, resourceVersion): an ObjectReference to a pod, as client-go's
# reference.GetReference makes one (the resourceVersion included).
Ref = tuple[str, str, str, str]
# client-go's isomorphic-event key: type, action, reason, regarding, related, and the
# reporting controller ("": the writer's own; the instance is the writer's, the same for
# every event).
_MemoKey = tuple[str, str, str, Ref, Ref | None, str]


@functools.lru_cache(maxsize=4)
def _rfc3339(second: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))


def now_rfc3339() -> str:
    """The current UTC time to the second, as the API's timestamps are written (formatted
    once per second: every bound pod's event and status patch asks for it)."""
    return _rfc3339(int(time.time()))


def micro_time(at_ns: int) -> str:
    """``at_ns`` (nanoseconds since the epoch) as a MicroTime (an Event's ``eventTime``)."""
    t = at_ns // 1000
    return f"{_rfc3339(t // 1_000_000)[:-1]}.{t % 1_000_000:06d}Z"


def now_micro() -> str:
    """The current UTC time to the microsecond."""
    return micro_time(time.time_ns())


def truncate_note(msg: str, limit: int = EVENT_MESSAGE_LIMIT) -> str:
    """At most ``limit`` bytes of UTF-8, as upstream truncates a note ("..." at the end)."""
    if len(msg) * 4 <= limit:  # no character takes more than 4 bytes
        return msg
    raw = msg.encode()
    if len(raw) <= limit:
        return msg
    return raw[: limit - 3].decode(errors="ignore") + "..."


class Sender(Protocol):
    """What the writer calls the API through (``KubeClient``, or the event process's
    client)."""

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = ...,
        loads: Callable[[bytes], Any] = ...,
    ) -> Awaitable[Mapping[str, Any]]: ...


@dataclass(frozen=True, slots=True)
class Occurrence:
    """One thing that happened to a pod, as an Event tells it: the pod (``regarding``, at
    the version the scheduler saw), ``event_type`` (Normal, Warning), ``reason``,
    ``note``, ``action``, the other pod involved (``related``: a victim's preemptor) and
    when (``at_ns``, nanoseconds since the epoch; by default when it is made), and the
    profile that tells it (``controller``, the Event's reportingController; "": the
    writer's own)."""

    regarding: Ref
    event_type: str
    reason: str
    note: str
    action: str
    related: Ref | None = None
    at_ns: int = field(default_factory=time.time_ns)
    controller: str = ""

    def line(self) -> list[Any]:
        """As a line to the event process (``from_line`` reads it back): the note cut to
        what will be written."""
        return [
            "e",
            self.regarding,
            self.event_type,
            self.reason,
            truncate_note(self.note),
            self.action,
            self.related,
            self.at_ns,
            self.controller,
        ]

    @classmethod
    def from_line(cls, msg: list[Any]) -> Occurrence:
        _, regarding, event_type, reason, note, action, related, at_ns, controller = msg
        return cls(
            tuple(regarding),
            event_type,
            reason,
            note,
            action,
            None if related is None else tuple(related),
            at_ns,
            controller,
        )


class EventSink(Protocol):
    """Where the scheduler hands occurrences: an ``EventWriter`` in its own process, or the
    pipe to the event process (``scheduler.kube.eventsink.EventProcess``)."""

    def occurred(self, o: Occurrence) -> None:
        """One occurrence, written in the background."""

    async def record(self, o: Occurrence) -> None:
        """One occurrence; returns once it is written (in-process) or handed on."""


def _ref_body(ref: Ref) -> dict[str, str]:
    namespace, name, uid, resource_version = ref
    body = {"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": name}
    if uid:
        body["uid"] = uid
    if resource_version:
        body["resourceVersion"] = resource_version
    return body


def _events_path(namespace: str) -> str:
    return f"/apis/events.k8s.io/v1/namespaces/{namespace}/events"


@dataclass(slots=True)
class _EventMemo:
    """One event as we last wrote it: its API name, note and eventTime (to create it again
    should it be gone), how often it happened (``count``), the count the API server has
    (``sent``; 0 while the Event is being created), and when it last happened (the
    series' lastObservedTime, and monotonic for ending it)."""

    name: str
    note: str
    event_time: str
    count: int
    sent: int
    last_observed: str
    last_seen: float  # monotonic


def _series(memo: _EventMemo) -> dict[str, Any]:
    return {"count": memo.count, "lastObservedTime": memo.last_observed}


class EventWriter:
    """client-go's broadcaster and recorder, for one reporting controller and instance.
    Every method runs on one event loop; ``spawn`` runs a write in the background (and is
    whoever drains them on stop)."""

    def __init__(
        self,
        sender: Sender,
        *,
        identity: str,
        controller: str,
        spawn: Callable[[Any], asyncio.Future[Any]],
        writers: int = EVENT_WRITERS,
    ) -> None:
        self.sender = sender
        self.identity = identity  # reportingInstance
        self.controller = controller  # reportingController: the scheduler's name
        self.spawn = spawn
        self.max_writers = max(1, writers)
        self._waiting: deque[Occurrence] = deque()  # handed on, not yet being written
        self._writers = 0  # tasks writing from ``_waiting``
        # client-go's isomorphic events (a pod re-created under its name, or changed since,
        # is another object: another event).
        self._event_memo: dict[_MemoKey, _EventMemo] = {}
        self.retry_delay = 0.5

    # ------------------------------------------------------------------ the sink
    def occurred(self, o: Occurrence) -> None:
        """Written in the background: by one of at most ``max_writers`` tasks (each started
        with ``spawn``, so whoever drains those on stop drains these), in arrival order."""
        self._waiting.append(o)
        if self._writers < self.max_writers:
            self._writers += 1
            started = [False]
            task = self.spawn(self._write_waiting(started))
            # A writer cancelled before its first step (on stop) never runs its ``finally``:
            # it is counted out here instead.
            task.add_done_callback(lambda _: None if started[0] else self._writer_gone())

    @property
    def waiting(self) -> int:
        """Occurrences handed on and not yet being written."""
        return len(self._waiting)

    def _writer_gone(self) -> None:
        self._writers -= 1

    async def _write_waiting(self, started: list[bool]) -> None:
        # Counted out by its ``finally`` as it ends, in the same step (an occurrence handed on
        # right after it finds nothing waiting starts a writer of its own).
        started[0] = True
        try:
            while self._waiting:
                o = self._waiting.popleft()
                try:
                    await self.record(o)
                except Exception as e:  # one event's failure must not strand the others
                    log.warning(
                        "event_failed",
                        pod=f"{o.regarding[0]}/{o.regarding[1]}",
                        reason=o.reason,
                        error=repr(e),
                    )
        finally:
            self._writers -= 1

    async def record(self, o: Occurrence) -> None:
        """One occurrence. As client-go's broadcaster: an occurrence isomorphic to one
        remembered (same type, action, reason, regarding object at the same
        resourceVersion, related object; not the note) counts into that event's series
        instead of making an Event."""
        at_ns = o.at_ns
        regarding, event_type, reason, action = o.regarding, o.event_type, o.reason, o.action
        memo_key = (event_type, action, reason, regarding, o.related, o.controller)
        memo = self._event_memo.get(memo_key)
        if memo is not None:
            memo.count += 1
            memo.last_observed = micro_time(at_ns)
            memo.last_seen = time.monotonic()
            if memo.sent == 1:
                await self._write_series(memo_key, memo)  # the series begins: written at once
            # Later occurrences are written when the series ends, or refreshed; while the
            # Event is being created (sent 0), they are written once it exists.
            return
        now = micro_time(at_ns)
        memo = _EventMemo(
            name=f"{regarding[1]}.{time.time_ns():x}",
            note=truncate_note(o.note),
            event_time=now,
            count=1,
            sent=0,
            last_observed=now,
            last_seen=time.monotonic(),
        )
        if len(self._event_memo) >= EVENT_MEMO_LIMIT:
            self._evict_oldest()
        # Remembered before the call, as client-go caches an event before writing it: a
        # repeat that comes while the creation is under way counts in this series.
        self._event_memo[memo_key] = memo
        try:
            await self._with_retries(
                "POST", _events_path(regarding[0]), self._body(memo_key, memo), None
            )
        except ApiError as e:
            if self._event_memo.get(memo_key) is memo:
                del self._event_memo[memo_key]
            log.warning(
                "event_failed", pod=f"{regarding[0]}/{regarding[1]}", reason=reason, error=str(e)
            )
            return
        memo.sent = 1
        if memo.count > 1 and self._event_memo.get(memo_key) is memo:
            await self._write_series(memo_key, memo)

    # ------------------------------------------------------------------ bodies and calls
    def _body(self, key: _MemoKey, memo: _EventMemo, *, series: bool = False) -> dict[str, Any]:
        """The events.k8s.io/v1 Event (the deprecated core/v1 fields left unset, as the
        API requires of this version), with its series when ``series``."""
        event_type, action, reason, regarding, related, controller = key
        body: dict[str, Any] = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": memo.name, "namespace": regarding[0]},
            "eventTime": memo.event_time,
            "reportingController": controller or self.controller,
            "reportingInstance": self.identity,
            "action": action,
            "reason": reason,
            "regarding": _ref_body(regarding),
            "note": memo.note,
            "type": event_type,
        }
        if related is not None:
            body["related"] = _ref_body(related)
        if series:
            body["series"] = _series(memo)
        return body

    async def _write_series(self, key: _MemoKey, memo: _EventMemo) -> None:
        """Write the series (its count and when it last happened) to its Event, as
        client-go does: a strategic merge patch, and when the Event is gone (expired,
        deleted) it is created again under its name, series and all. Tries and backs off
        as creation does; a 409 from that creation means a create raced it: patch again."""
        memo.sent = memo.count
        namespace = key[3][0]
        path = f"{_events_path(namespace)}/{memo.name}"
        delay = self.retry_delay
        for attempt in range(1, EVENT_TRIES + 1):
            try:
                try:
                    await self._send("PATCH", path, {"series": _series(memo)}, STRATEGIC)
                except NotFound:
                    body = self._body(key, memo, series=True)
                    await self._send("POST", _events_path(namespace), body, None)
                return
            except ApiError as e:
                if attempt == EVENT_TRIES or not (e.retryable or isinstance(e, Conflict)):
                    log.warning(
                        "event_failed",
                        pod=f"{namespace}/{key[3][1]}",
                        reason=key[2],
                        error=str(e),
                    )
                    return
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10.0)

    async def _send(
        self, method: str, path: str, body: Mapping[str, Any], content_type: str | None
    ) -> None:
        if content_type:
            await self.sender.request(
                method, path, body=body, content_type=content_type, loads=ignore_reply
            )
        else:
            await self.sender.request(method, path, body=body, loads=ignore_reply)

    async def _with_retries(
        self, method: str, path: str, body: Mapping[str, Any], content_type: str | None
    ) -> None:
        delay = self.retry_delay
        for attempt in range(1, EVENT_TRIES + 1):
            try:
                await self._send(method, path, body, content_type)
                return
            except Conflict:
                if method == "POST" and attempt > 1:
                    return  # an earlier try created it; its reply was lost
                raise
            except ApiError as e:
                if not e.retryable or attempt == EVENT_TRIES:
                    raise
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)

    # ------------------------------------------------------------------ series upkeep
    def _evict_oldest(self) -> None:
        """Make room: the event remembered longest ends now (its unwritten count, if any,
        is written)."""
        key = next(iter(self._event_memo))
        memo = self._event_memo.pop(key)
        if memo.count > memo.sent >= 1:
            self.spawn(self._write_series(key, memo))

    def finish_series(self, now: float | None = None) -> int:
        """client-go's finishSeries: every event with no occurrence for
        ``SERIES_FINISH_SECONDS`` is forgotten, a series' unwritten count written first.
        Returns the events forgotten."""
        cutoff = (time.monotonic() if now is None else now) - SERIES_FINISH_SECONDS
        done = [(k, m) for k, m in self._event_memo.items() if m.last_seen < cutoff]
        for key, memo in done:
            del self._event_memo[key]
            if memo.count > memo.sent >= 1:
                self.spawn(self._write_series(key, memo))
        return len(done)

    def refresh_series(self) -> int:
        """client-go's refreshExistingEventSeries: write every series' count again (an
        Event written lately expires later). Returns the series written."""
        series = [(k, m) for k, m in self._event_memo.items() if m.count > 1 and m.sent >= 1]
        for key, memo in series:
            self.spawn(self._write_series(key, memo))
        return len(series)

    async def maintain_series(self) -> None:
        """Until cancelled: ``finish_series`` every ``SERIES_FINISH_SECONDS`` and
        ``refresh_series`` every ``SERIES_REFRESH_SECONDS`` (client-go's two tickers)."""
        ticks = 0
        per_refresh = round(SERIES_REFRESH_SECONDS / SERIES_FINISH_SECONDS)
        while True:
            await asyncio.sleep(SERIES_FINISH_SECONDS)
            ticks += 1
            if ticks % per_refresh == 0:
                self.refresh_series()
            self.finish_series()
