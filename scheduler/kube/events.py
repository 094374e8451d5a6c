"""The Recorder port: what the scheduler tells the API about its decisions.

- ``scheduled``: a ``Scheduled`` event (the Binding itself is the binder's).
- ``failed``: the PodScheduled=False condition (with ``nominatedNodeName`` when it changes)
  as a status patch, plus a ``FailedScheduling`` event. Patches are skipped when the pod's
  condition message and nomination are what we last wrote.
- ``rejected``: a FailedScheduling event for a pending pod of ours we cannot read.

Status patches go through the main client, as kube-scheduler's. Events are occurrences
handed to an ``EventSink`` (``scheduler.kube.eventwriter``): the event process of
``scheduler.kube.eventsink`` by default, which writes them with a client and a rate budget of
its own, as kube-scheduler's event broadcaster has its own client and goroutines; or an
``EventWriter`` in this process. Handing one on costs the loop a JSON line; the series
bookkeeping, the request and its TLS run elsewhere.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import structlog

from scheduler.framework.waiting_pods import check_event
from scheduler.kube.binder import pod_path
from scheduler.kube.client import KubeClient, ignore_reply
from scheduler.kube.errors import ApiError
from scheduler.kube.eventwriter import STRATEGIC, EventSink, Occurrence, Ref, now_rfc3339
from scheduler.logging import v
from scheduler.metrics import Metrics
from scheduler.types import PodInfo

__all__ = ["STRATEGIC", "EventRecorder", "ProfileEvents", "now_rfc3339"]

log = structlog.get_logger("py-scheduler")


def _pod_ref(pod: PodInfo) -> Ref:
    return (pod.namespace, pod.name, pod.uid, pod.resource_version)


class EventRecorder:
    def __init__(
        self,
        client: KubeClient,
        sink: EventSink,
        *,
        spawn: Callable[[Any], asyncio.Future[Any]],
        metrics: Metrics,
        profiles: tuple[str, ...] = (),
    ) -> None:
        self.client = client
        # The profiles' names: an event about a pod of one of them names it as its
        # reportingController, as upstream's recorder per profile; any other event, and
        # every event with a single profile, the sink's own controller (the first profile).
        self.profiles = frozenset(profiles) if len(profiles) > 1 else frozenset()
        self.sink = sink  # where events go: the event process, or a writer in this one
        self.spawn = spawn
        self.metrics = metrics
        self._status_memo: dict[str, tuple[str, str | None]] = {}
        self._assumed: dict[str, tuple[float, int]] = {}
        # The status writes of the scheduling cycle under way (None between cycles).
        self._cycle_writes: list[asyncio.Future[Any]] | None = None

    def _controller(self, name: str) -> str:
        """The reportingController for an event told by the profile ``name`` ("": the
        sink's own)."""
        return name if name in self.profiles else ""

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
        self.sink.occurred(
            Occurrence(
                _pod_ref(pod),
                "Normal",
                "Scheduled",
                f"Successfully assigned {pod.key} to {node_name}",
                "Binding",
                controller=self._controller(pod.scheduler_name),
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
        self.sink.occurred(
            Occurrence(
                _pod_ref(pod),
                "Warning",
                "FailedScheduling",
                message,
                "Scheduling",
                controller=self._controller(pod.scheduler_name),
            )
        )

    def skipped_deleting(self, pod: PodInfo) -> None:
        self._assumed.pop(pod.key, None)
        self.sink.occurred(
            Occurrence(
                _pod_ref(pod),
                "Warning",
                "FailedScheduling",
                f"skip schedule deleting pod: {pod.key}",
                "Scheduling",
                controller=self._controller(pod.scheduler_name),
            )
        )

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
        *,
        profile: str | None = None,
    ) -> None:
        """A plugin's event (``FrameworkHandle.event_recorder``), written in the background
        like the scheduler's own; told by ``profile`` (the plugin's, ``for_profile``), else
        by the profile of ``related`` if given, else of ``regarding``."""
        check_event(event_type, reason, action)
        rel = None if related is None else _pod_ref(related)
        teller = self._controller(
            (related or regarding).scheduler_name if profile is None else profile
        )
        self.sink.occurred(
            Occurrence(
                _pod_ref(regarding), event_type, reason, note, action, rel, controller=teller
            )
        )

    def for_profile(self, name: str) -> ProfileEvents:
        """The recorder the FrameworkHandle of profile ``name`` gives its plugins: their
        events name that profile as reportingController, as upstream's recorder per
        profile."""
        return ProfileEvents(self, name)

    def rejected(self, raw: Mapping[str, Any], message: str) -> None:
        """A FailedScheduling event about the pod whose raw form is ``raw`` (which could
        not be decoded)."""
        meta = raw.get("metadata") or {}
        spec = raw.get("spec") or {}
        name = spec.get("schedulerName") if isinstance(spec, Mapping) else None
        regarding: Ref = (
            str(meta.get("namespace") or "default"),
            str(meta.get("name") or ""),
            str(meta.get("uid") or ""),
            str(meta.get("resourceVersion") or ""),
        )
        self.sink.occurred(
            Occurrence(
                regarding,
                "Warning",
                "FailedScheduling",
                message,
                "Scheduling",
                controller=self._controller(str(name or "")),
            )
        )

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
                priority=pod.priority,
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
        """One occurrence about ``pod``, told by the profile of ``related`` if given (a
        victim's event is its preemptor's profile's), else of ``pod``; returns once it is
        written (an in-process writer) or handed to the event process."""
        rel = None if related is None else _pod_ref(related)
        teller = self._controller((related or pod).scheduler_name)
        await self.sink.record(
            Occurrence(_pod_ref(pod), event_type, reason, message, action, rel, controller=teller)
        )


class ProfileEvents:
    """``EventRecorder.eventf`` told by one profile (``EventRecorder.for_profile``)."""

    __slots__ = ("profile", "recorder")

    def __init__(self, recorder: EventRecorder, profile: str) -> None:
        self.recorder = recorder
        self.profile = profile

    def eventf(
        self,
        regarding: PodInfo,
        related: PodInfo | None,
        event_type: str,
        reason: str,
        action: str,
        note: str,
    ) -> None:
        self.recorder.eventf(
            regarding, related, event_type, reason, action, note, profile=self.profile
        )
