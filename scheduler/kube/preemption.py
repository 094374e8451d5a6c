"""The PreemptionActions port: carry out a preemption the Evaluator decided.

For each victim (not already terminating): the DisruptionTarget condition, then a graceful
DELETE guarded by the victim's uid, then a ``Preempted`` event naming the preemptor; lower
priority pods nominated to the node lose their nomination at once (their space goes to the
preemptor) and are activated to look elsewhere.

With ``asyncPreemption`` (the default, as upstream) the calls run in a task and the
preemptor is held out of activeQ (the queue's PreEnqueue-style gate) until they are done;
a success then leaves the preemptor to the victims' deletion events, a failure or a victim
already gone activates it for a fresh decision. Without it, the scheduling loop waits for
the calls (``settle``) before its next cycle, as upstream's synchronous path blocks the
scheduling cycle on them.

The calls are retried with backoff while the API server cannot be reached or answers 429/5xx
(for about a minute): both are idempotent (the DELETE is guarded by the victim's uid; a
retried DELETE of a pod already terminating or gone changes nothing), so an API server
restart in the middle of a preemption neither loses it nor makes a second decision pick
more victims. Only when the retries are exhausted does the preemptor get a fresh decision,
and the Evaluator forgets the victims it handed out for it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

import structlog

from scheduler.framework.interface import Status
from scheduler.framework.preemption import Candidate
from scheduler.kube.binder import pod_path
from scheduler.kube.client import KubeClient, ignore_reply
from scheduler.kube.errors import ApiError
from scheduler.kube.events import STRATEGIC, EventRecorder, now_rfc3339
from scheduler.metrics import Metrics
from scheduler.schedule_one import SchedulerCore
from scheduler.types import PodInfo

__all__ = ["PreemptionExecutor", "disruption_patch"]

log = structlog.get_logger("py-scheduler")

CALL_TRIES = 10  # 0.5 s doubling to 8 s: about a minute


def disruption_patch(victim: PodInfo, preemptor: PodInfo) -> dict[str, Any]:
    """The victim's DisruptionTarget condition (with the generation it observed, as
    upstream's PodObservedGenerationTracking, GA in 1.35), its message naming the
    preemptor's scheduler (profile), as upstream's. A victim whose condition is
    already True keeps its transition time (the patch leaves it out, as upstream's
    UpdatePodCondition keeps it when the status does not change)."""
    condition: dict[str, Any] = {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "PreemptionByScheduler",
        "message": f"{preemptor.scheduler_name}: preempting to accommodate a higher priority pod",
    }
    if not victim.disruption_target:
        condition["lastTransitionTime"] = now_rfc3339()
    if victim.generation:
        condition["observedGeneration"] = victim.generation
    return {"status": {"conditions": [condition]}}


class PreemptionExecutor:
    def __init__(
        self,
        client: KubeClient,
        recorder: EventRecorder,
        *,
        asynchronous: bool,
        metrics: Metrics,
        wake: Callable[[], None],
    ) -> None:
        self.client = client
        self.recorder = recorder
        self.asynchronous = asynchronous
        self.metrics = metrics
        self.wake = wake
        self.core: SchedulerCore | None = None  # set by the scheduler that owns the core
        self._preempting: set[str] = set()  # preemptor uids whose calls are running
        self._tasks: set[asyncio.Task[None]] = set()
        self.retry_delay = 0.5

    def attach(self, core: SchedulerCore) -> None:
        self.core = core
        core.queue.gate = self.gate

    def gate(self, pod: PodInfo) -> bool:
        """PreEnqueue: hold a preemptor out of activeQ while its preemption's calls run."""
        return pod.uid not in self._preempting

    # ------------------------------------------------------------------ the port
    def prepare_candidate(
        self, preemptor: PodInfo, candidate: Candidate, lower_nominated: Sequence[PodInfo]
    ) -> Status:
        assert self.core is not None, "attach() the executor to a core first"
        self.metrics.preemption_attempts.inc()
        self.metrics.preemption_victims.observe(len(candidate.victims))
        for p in lower_nominated:
            self.core.queue.nominator.delete_nominated_pod_if_exists(p.key)
            self.recorder.clear_nomination(p)
        self.core.queue.activate(p.key for p in lower_nominated)
        victims = [v for v in candidate.victims if not v.terminating]
        if self.asynchronous:
            self._preempting.add(preemptor.uid)
        task = asyncio.ensure_future(self._run(preemptor, candidate, victims))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return Status()

    async def settle(self) -> None:
        """Wait for the calls of every preemption started so far (the synchronous mode)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    @property
    def busy(self) -> bool:
        return bool(self._tasks)

    # ------------------------------------------------------------------ calls
    async def _run(self, preemptor: PodInfo, candidate: Candidate, victims: list[PodInfo]) -> None:
        assert self.core is not None
        ok = True
        started = time.perf_counter()
        try:
            results = await asyncio.gather(
                *(self._preempt_victim(v, preemptor, candidate.node_name) for v in victims),
                return_exceptions=True,
            )
            for v, r in zip(victims, results, strict=True):
                if isinstance(r, BaseException):
                    ok = False
                    self.metrics.preemption_failures.inc()
                    log.warning(
                        "preemption_victim_failed", pod=preemptor.key, victim=v.key, error=str(r)
                    )
        finally:
            if victims:  # upstream starts no goroutine when every victim is terminating
                result = "success" if ok else "error"
                m = self.metrics
                m.child(m.preemption_goroutines_total, result).inc()
                seconds = time.perf_counter() - started
                m.child(m.preemption_goroutines_seconds, result).observe(seconds)
            self._preempting.discard(preemptor.uid)
            if not ok:
                # A fresh decision is due; the victims handed out for this one are not coming.
                self.core.evaluator_for(preemptor).forget_preemptor(preemptor.key)
            # As upstream, a successful preemption leaves the preemptor to the victims'
            # deletion events (NodeResourcesFit's hint moves it). It is activated at once
            # only if a call failed (a fresh decision is due) or a victim is already gone
            # (its deletion event arrived while the gate held the preemptor back).
            gone = any(self.core.cache.get_pod(v.key) is None for v in victims)
            if not ok or gone or not victims:
                self.core.queue.activate([preemptor.key])
            self.wake()
        log.info("preemption_finished", pod=preemptor.key, node=candidate.node_name, ok=ok)

    async def _preempt_victim(self, victim: PodInfo, preemptor: PodInfo, node: str) -> None:
        path = pod_path(victim.namespace, victim.name)
        options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if victim.uid:
            # Default grace period; the uid guard never deletes a re-created namesake.
            options["preconditions"] = {"uid": victim.uid}
        try:
            # Under apiCallOrder: Priority these calls wait as the preemptor's.
            rank = preemptor.priority
            await self._call(
                "PATCH", path + "/status", disruption_patch(victim, preemptor), STRATEGIC, rank
            )
            await self._call("DELETE", path, options, "application/json", rank)
        except ApiError as e:
            if e.status != 404:
                raise
            return
        await self.recorder.event(
            victim,
            "Normal",
            "Preempted",
            f"Preempted by pod {preemptor.uid} on node {node}",
            action="Preempting",
            related=preemptor,
        )

    async def _call(
        self, method: str, path: str, body: Any, content_type: str, priority: int
    ) -> None:
        delay = self.retry_delay
        for attempt in range(1, CALL_TRIES + 1):
            try:
                await self.client.request(
                    method,
                    path,
                    body=body,
                    content_type=content_type,
                    loads=ignore_reply,
                    priority=priority,
                )
                return
            except ApiError as e:
                if not e.retryable or attempt == CALL_TRIES:
                    raise
                log.info("preemption_call_retry", call=f"{method} {path}", error=str(e))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 8.0)
