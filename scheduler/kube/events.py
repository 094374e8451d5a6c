"""The Recorder port: what the scheduler tells the API about its decisions.

- ``scheduled``: a ``Scheduled`` event (the Binding itself is the binder's).
- ``failed``: the PodScheduled=False condition (with ``nominatedNodeName`` when it changes)
  as a status patch, plus a ``FailedScheduling`` event. Patches are skipped when the pod's
  condition message and nomination are what we last wrote.
- ``rejected``: a FailedScheduling event for a pending pod of ours we cannot read.

Events are events.k8s.io/v1 Events, written as kube-scheduler's event broadcaster (client-go
``tools/events``) writes them: ``regarding`` the pod as the scheduler saw it (its
resourceVersion included), ``related`` the preemptor of a ``Preempted`` victim, ``action``,
``note``, ``eventTime``, ``reportingController`` the scheduler's name. An occurrence
isomorphic to an event remembered (same type, action, reason, regarding and related object;
the note is not compared) counts into that event's series: the second makes it a series
and is written at once (``series.count`` 2); later ones only count up here, and the series
is written when it ends (no occurrence for 6 minutes, checked every 6 minutes) and every 30
minutes while it goes on. A pod retried a hundred times while a burst of cluster events
passes costs two event calls, not a hundred. They go through their own client so that they
never eat the Bindings' rate budget (as kube-scheduler's event broadcaster has its own
client). As client-go's recorder, an event is named ``<object>.<hex nanoseconds>`` when it
is made and retried under that name when the API server cannot be reached: a try whose
reply was lost and a retry cannot make two events (the retry's 409 AlreadyExists means it
is there); a series whose Event is gone is created again under its name.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from scheduler.framework.waiting_pods import check_event
from scheduler.kube.binder import pod_path
from scheduler.kube.client import KubeClient, ignore_reply
from scheduler.kube.errors import ApiError, Conflict, NotFound
from scheduler.logging import v
from scheduler.metrics import Metrics
from scheduler.types import PodInfo

__all__ = ["EventRecorder", "now_micro", "now_rfc3339"]

log = structlog.get_logger("py-scheduler")

EVENT_MESSAGE_LIMIT = 1024  # upstream truncates event notes to 1 KiB
STRATEGIC = "application/strategic-merge-patch+json"
EVENT_MEMO_LIMIT = 10000
EVENT_TRIES = 12  # as client-go's broadcaster; ours back off from 0.5 s to 10 s (~75 s)
# client-go tools/events: a series with no occurrence for finishTime ends (its count is
# written, it is forgotten), checked every finishTime; every refreshTime the count of each
# series is written again (which also keeps the Event from expiring).
SERIES_FINISH_SECONDS = 6 * 60.0
SERIES_REFRESH_SECONDS = 30 * 60.0


@functools.lru_cache(maxsize=4)
def _rfc3339(second: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))


def now_rfc3339() -> str:
    """The current UTC time to the second, as the API's timestamps are written (formatted
    once per second: every bound pod's event and status patch asks for it)."""
    return _rfc3339(int(time.time()))


def now_micro() -> str:
    """The current UTC time to the microsecond (an Event's ``eventTime``, a MicroTime)."""
    t = time.time_ns() // 1000
    return f"{_rfc3339(t // 1_000_000)[:-1]}.{t % 1_000_000:06d}Z"


def _truncate(msg: str, limit: int = EVENT_MESSAGE_LIMIT) -> str:
    raw = msg.encode()
    if len(raw) <= limit:
        return msg
    return raw[: limit - 3].decode(errors="ignore") + "..."


# (namespace, name, uid, resourceVersion): an ObjectReference to a pod, as client-go's
# reference.GetReference makes one (the resourceVersion included).
_Ref = tuple[str, str, str, str]
# client-go's isomorphic-event key: type, action, reason, regarding, related (the
# reporting controller and instance are the recorder's own, the same for every event).
_MemoKey = tuple[str, str, str, _Ref, _Ref | None]


def _pod_ref(pod: PodInfo) -> _Ref:
    return (pod.namespace, pod.name, pod.uid, pod.resource_version)


def _ref_body(ref: _Ref) -> dict[str, str]:
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


class EventRecorder:
    def __init__(
        self,
        client: KubeClient,
        event_client: KubeClient,
        *,
        identity: str,
        spawn: Callable[[Any], asyncio.Future[Any]],
        metrics: Metrics,
        controller: str = "py-scheduler",
    ) -> None:
        self.client = client
        self.event_client = event_client
        self.identity = identity
        self.controller = controller  # reportingController: the scheduler's name, as upstream
        self.spawn = spawn
        self.metrics = metrics
        self._status_memo: dict[str, tuple[str, str | None]] = {}
        # client-go's isomorphic events (a pod re-created under its name, or changed since,
        # is another object: another event).
        self._event_memo: dict[_MemoKey, _EventMemo] = {}
        self._assumed: dict[str, tuple[float, int]] = {}
        # The status writes of the scheduling cycle under way (None between cycles).
        self._cycle_writes: list[asyncio.Future[Any]] | None = None
        self.retry_delay = 0.5

    # ------------------------------------------------------------------ the port
    def assumed(self, pod: PodInfo, attempts: int) -> None:
        """Remember when the binding started (for the pod_bound log line)."""
        self._assumed[pod.key] = (time.perf_counter(), attempts)

    def scheduled(self, pod: PodInfo, node_name: str) -> None:
        started, attempts = self._assumed.pop(pod.key, (0.0, 1))
        if v(2):  # kube-scheduler's "Successfully bound pod to node" is V(2)
            log.info(
                "pod_bound",
                pod=pod.key,
                node=node_name,
                attempts=attempts,
                bind_seconds=round(time.perf_counter() - started, 4) if started else None,
            )
        self.metrics.pod_scheduling_attempts.observe(attempts)
        self._status_memo.pop(pod.key, None)
        self.spawn(
            self.event(
                pod,
                "Normal",
                "Scheduled",
                f"Successfully assigned {pod.key} to {node_name}",
                action="Binding",
            )
        )

    def failed(
        self, pod: PodInfo, *, reason: str, message: str, nominated_node: str | None
    ) -> None:
        self._assumed.pop(pod.key, None)
        want = (message, nominated_node)
        if self._status_memo.get(pod.key) != want:
            written_before = pod.key in self._status_memo
            self._status_memo[pod.key] = want
            condition: dict[str, Any] = {
                "type": "PodScheduled",
                "status": "False",
                "reason": reason,
                "message": message,
                "lastProbeTime": None,
            }
            if pod.generation:
                # PodObservedGenerationTracking (GA in 1.35): the generation it judged.
                condition["observedGeneration"] = pod.generation
            if not (written_before or pod.pod_scheduled == "False"):
                # As upstream's UpdatePodCondition: the transition time moves only when the
                # status does; left out of the merge patch, the server keeps the old one.
                condition["lastTransitionTime"] = now_rfc3339()
            status: dict[str, Any] = {"conditions": [condition]}
            if nominated_node is not None:
                status["nominatedNodeName"] = nominated_node or None
            write = self.spawn(self.patch_status(pod, {"status": status}))
            if self._cycle_writes is not None:
                self._cycle_writes.append(write)  # the loop awaits it (end_cycle)
        self.spawn(self.event(pod, "Warning", "FailedScheduling", message, action="Scheduling"))

    # ------------------------------------------------------------------ the cycle's writes
    def begin_cycle(self) -> None:
        """A scheduling cycle starts: the status it writes on failure (the PodScheduled
        condition, the nomination) is kept for ``end_cycle``."""
        self._cycle_writes = []

    def end_cycle(self) -> Awaitable[list[Any]] | None:
        """The cycle is over: what the loop awaits before the next one, or None when it
        wrote nothing. As kube-scheduler, whose failure handler makes that call in the
        scheduling goroutine (its SchedulerAsyncAPICalls gate, which would queue it, is off
        by default in v1.37): the next cycle starts once it is answered, or has failed, or
        timed out, and a client that waits for its rate limit holds the loop with it. So a
        pod retried while the victims of its preemption still terminate is retried when its
        turn comes after that wait, as upstream's."""
        writes, self._cycle_writes = self._cycle_writes, None
        if not writes:
            return None
        return asyncio.gather(*writes, return_exceptions=True)

    def eventf(
        self,
        regarding: PodInfo,
        related: PodInfo | None,
        event_type: str,
        reason: str,
        action: str,
        note: str,
    ) -> None:
        """A plugin's event (``FrameworkHandle.event_recorder``), written in the background
        like the scheduler's own."""
        check_event(event_type, reason, action)
        self.spawn(self.event(regarding, event_type, reason, note, action=action, related=related))

    def rejected(self, raw: Mapping[str, Any], message: str) -> None:
        meta = raw.get("metadata") or {}
        self.spawn(self.raw_event(meta, "Warning", "FailedScheduling", message))

    def forget(self, key: str) -> None:
        """The pod is gone: drop what we remembered of it."""
        self._status_memo.pop(key, None)
        self._assumed.pop(key, None)

    async def nominate(self, pod: PodInfo, node: str) -> None:
        """``status.nominatedNodeName = node`` for the binding cycle (upstream's
        NominatedNodeNameForExpectation, before PreBind). What we last wrote is forgotten, so
        that a failure after it writes its condition, and clears the nomination, again."""
        self._status_memo.pop(pod.key, None)
        await self.patch_status(pod, {"status": {"nominatedNodeName": node}})

    def clear_nomination(self, pod: PodInfo) -> None:
        self._status_memo.pop(pod.key, None)
        self.spawn(self.patch_status(pod, {"status": {"nominatedNodeName": None}}))

    # ------------------------------------------------------------------ calls
    async def patch_status(self, pod: PodInfo, patch: Mapping[str, Any]) -> None:
        try:
            await self.client.request(
                "PATCH",
                pod_path(pod.namespace, pod.name) + "/status",
                body=patch,
                content_type=STRATEGIC,
                loads=ignore_reply,
            )
        except ApiError as e:
            if e.status != 404:
                log.warning("status_patch_failed", pod=pod.key, error=str(e))

    async def event(
        self,
        pod: PodInfo,
        event_type: str,
        reason: str,
        message: str,
        *,
        action: str,
        related: PodInfo | None = None,
    ) -> None:
        rel = None if related is None else _pod_ref(related)
        await self._record(_pod_ref(pod), event_type, reason, message, action, rel)

    async def raw_event(
        self,
        meta: Mapping[str, Any],
        event_type: str,
        reason: str,
        message: str,
        *,
        action: str = "Scheduling",
    ) -> None:
        """An event about the pod whose (raw) ``metadata`` is ``meta``."""
        regarding: _Ref = (
            str(meta.get("namespace") or "default"),
            str(meta.get("name") or ""),
            str(meta.get("uid") or ""),
            str(meta.get("resourceVersion") or ""),
        )
        await self._record(regarding, event_type, reason, message, action, None)

    async def _record(
        self,
        regarding: _Ref,
        event_type: str,
        reason: str,
        message: str,
        action: str,
        related: _Ref | None,
    ) -> None:
        """One occurrence of an event. As client-go's broadcaster: an occurrence isomorphic
        to one remembered (same type, action, reason, regarding object at the same
        resourceVersion, related object; not the note) counts into that event's series
        instead of making an Event."""
        memo_key = (event_type, action, reason, regarding, related)
        memo = self._event_memo.get(memo_key)
        if memo is not None:
            memo.count += 1
            memo.last_observed = now_micro()
            memo.last_seen = time.monotonic()
            if memo.sent == 1:
                await self._write_series(memo_key, memo)  # the series begins: written at once
            # Later occurrences are written when the series ends, or refreshed; while the
            # Event is being created (sent 0), they are written once it exists.
            return
        now = now_micro()
        memo = _EventMemo(
            name=f"{regarding[1]}.{time.time_ns():x}",
            note=_truncate(message),
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

    def _body(self, key: _MemoKey, memo: _EventMemo, *, series: bool = False) -> dict[str, Any]:
        """The events.k8s.io/v1 Event (the deprecated core/v1 fields left unset, as the
        API requires of this version), with its series when ``series``."""
        event_type, action, reason, regarding, related = key
        body: dict[str, Any] = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": memo.name, "namespace": regarding[0]},
            "eventTime": memo.event_time,
            "reportingController": self.controller,
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

    async def _send(
        self, method: str, path: str, body: Mapping[str, Any], content_type: str | None
    ) -> None:
        kw: dict[str, Any] = {"body": body, "loads": ignore_reply}
        if content_type:
            kw["content_type"] = content_type
        await self.event_client.request(method, path, **kw)

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
