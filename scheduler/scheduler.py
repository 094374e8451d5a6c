"""Scheduler: the scheduling loop around SchedulerCore, on one asyncio event loop.

What it owns: the core (queue + cache + framework), leadership (only the leader schedules;
a standby keeps its cache warm from the same informers), the scheduling loop (one cycle at a
time, yielding to the loop between cycles so informer deltas interleave), the one-second
flushes (backoff, unschedulable timeout, metrics gauges) and a clean stop.

What it does not own: the API. Deltas come in through ``scheduler.eventhandlers`` (fed by
``scheduler.kube.informer``); decisions go out through the core's ports, which
``scheduler.kube`` implements in modules of their own (binder, events, preemption) and
``scheduler.kube.live`` wires together. So this module has no I/O and no wire format.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

import structlog

from scheduler.clock import Clock, RealClock
from scheduler.config import SchedulerConfig
from scheduler.framework.extender import Extender
from scheduler.framework.preemption import PreemptionActions
from scheduler.framework.waiting_pods import ApiClient, EventRecorder
from scheduler.logging import v
from scheduler.metrics import Metrics
from scheduler.schedule_one import Binder, CycleResult, Recorder, SchedulerCore
from scheduler.types import PodInfo

__all__ = ["CycleWrites", "Scheduler"]

log = structlog.get_logger("py-scheduler")


class CycleWrites(Protocol):
    """The API writes a scheduling cycle makes on failure (the PodScheduled condition and
    the nomination), which the loop waits for before the next cycle, as kube-scheduler's
    failure handler makes them in its scheduling goroutine."""

    def begin_cycle(self) -> None: ...

    def end_cycle(self) -> Awaitable[Any] | None: ...


# Upstream runs flushUnschedulableEntitiesLeftover every 30 s; the flush loop ticks each 1 s.
LEFT_OVER_FLUSH_TICKS = 30

CYCLE_LABELS = {
    "assumed": "scheduled",
    "unschedulable": "unschedulable",
    "preempting": "unschedulable",
    "error": "error",
}


class Scheduler:
    def __init__(
        self,
        config: SchedulerConfig,
        *,
        binder: Binder,
        recorder: Recorder,
        actions: PreemptionActions | None,
        identity: str,
        namespace_labels: dict[str, dict[str, str]] | None = None,
        clock: Clock | None = None,
        metrics: Metrics | None = None,
        on_assumed: Callable[[PodInfo, int], None] | None = None,
        settle_preemption: Callable[[], Awaitable[None]] | None = None,
        cycle_writes: CycleWrites | None = None,
        api_client: ApiClient | None = None,
        event_recorder: EventRecorder | None = None,
        profile_recorders: Callable[[str], EventRecorder] | None = None,
        extenders: Sequence[Extender] = (),
    ) -> None:
        self.config = config
        self.identity = identity
        self.clock = clock or RealClock()
        self.metrics = metrics or Metrics()
        self.namespace_labels = {} if namespace_labels is None else namespace_labels
        self.on_assumed = on_assumed
        self.settle_preemption = settle_preemption
        self.cycle_writes = cycle_writes
        self._wake = asyncio.Event()
        self._leader = asyncio.Event()
        self._synced = asyncio.Event()
        self._stopping = False
        self.last_loop_tick = time.monotonic()
        # More gauges to set before each scrape (the live layer's informers').
        self.gauge_sources: list[Callable[[], None]] = []
        self._api_waits = 0  # awaits of the loop on API calls under way (not a stall)
        labels = self.namespace_labels
        self.core = SchedulerCore(
            config,
            self.clock,
            binder=binder,
            recorder=recorder,
            actions=actions,
            on_ready=self._wake.set,
            on_incoming=self.metrics.incoming,
            namespace_labels=lambda ns: labels.get(ns, {}),
            observer=self.metrics,
            api_client=api_client,
            event_recorder=event_recorder,
            profile_recorders=profile_recorders,
            extenders=extenders,
        )

    # ================================================================== state
    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    def mark_synced(self, **objects: int) -> None:
        """Every informer has handed on its first listing: scheduling may start.
        ``objects``: how many of each kind were listed (for the log line)."""
        if not self._synced.is_set():
            log.info(
                "caches_synced",
                **objects,
                pending=len(self.core.queue),
                nominated=len(self.core.queue.nominator),
            )
        self._synced.set()
        self._wake.set()

    @property
    def is_leader(self) -> bool:
        return self._leader.is_set()

    def set_leader(self, leader: bool, *, elected: bool = True) -> None:
        """``elected=False``: leader election is off; nothing was acquired, nothing to log."""
        if leader:
            if elected:
                log.info("leader_acquired", identity=self.identity)
            self._leader.set()
        else:
            if self._leader.is_set():
                log.warning("leader_lost", identity=self.identity)
            self._leader.clear()
        self.metrics.leader.set(1 if leader else 0)
        self._wake.set()

    def wake(self) -> None:
        self._wake.set()

    # ================================================================== loops
    async def run(self) -> None:
        """Until ``stop()``: wait for the caches, then schedule and flush."""
        await self._synced.wait()
        loops = [
            asyncio.create_task(self._schedule_loop(), name="schedule"),
            asyncio.create_task(self._flush_loop(), name="flush"),
        ]
        try:
            await asyncio.gather(*loops)
        finally:
            for t in loops:
                t.cancel()

    async def _schedule_loop(self) -> None:
        while not self._stopping:
            self.last_loop_tick = time.monotonic()
            if not self.is_leader:
                self._wake.clear()
                await self._wait_wake(1.0)
                continue
            start = time.perf_counter()
            writes = self.cycle_writes
            if writes is not None:
                writes.begin_cycle()
            try:
                if self.core.extenders:
                    # Waiting for an extender's answer is not a stall (as _api_wait).
                    self._api_waits += 1
                    try:
                        result = await self.core.schedule_one_async()
                    finally:
                        self._api_waits -= 1
                        self.last_loop_tick = time.monotonic()
                else:
                    result = self.core.schedule_one()
            finally:
                written = None if writes is None else writes.end_cycle()
            if result is None:
                self._wake.clear()
                await self._wait_wake(1.0)
                continue
            self._observe(result, time.perf_counter() - start)
            if written is not None:
                await self._api_wait(written)  # the failure's status write, as upstream's
            if result.outcome == "preempting" and self.settle_preemption is not None:
                await self._api_wait(self.settle_preemption())
            await asyncio.sleep(0)  # let informer deltas in between cycles

    async def _api_wait(self, calls: Awaitable[Any]) -> None:
        """Wait for API calls the next cycle must not start before. They may wait for the
        client's rate limit behind a backlog of bindings (seconds at the defaults), and
        each is bounded by the client's timeout: waiting for them is not a stall."""
        self._api_waits += 1
        try:
            await calls
        finally:
            self._api_waits -= 1
            self.last_loop_tick = time.monotonic()

    async def _wait_wake(self, timeout: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout=timeout)

    async def _flush_loop(self) -> None:
        # On the whole seconds of the core's clock, as upstream's backoff flush: backoff
        # expiries are cut to the second, so each window's pods leave when it begins.
        # The left-over flush of the unschedulable pods every 30 seconds (the first at once),
        # as upstream's: a pod no event helped goes again 5 to 5.5 minutes after its attempt.
        clock = self.core.clock
        tick = 0
        while not self._stopping:
            await asyncio.sleep(1.0 - clock.now() % 1.0)
            self.core.flush(left_over=tick % LEFT_OVER_FLUSH_TICKS == 0)
            tick += 1
            self.refresh_gauges()

    def refresh_gauges(self) -> None:
        """Set the queue and cache gauges from the queue and cache as they are now. Called by
        the flush loop and by the metrics server before each scrape (same event loop), so a
        scrape reads the sizes of the moment, as upstream's gauges (moved on every queue
        change) show them."""
        m = self.metrics
        for q, n in self.core.queue.counts().items():
            if q != "in_flight":
                m.pending_pods.labels(q).set(n)
                m.queued_entities.labels(q, "pod").set(n)
        for name, (framework, _) in self.core.profiles.items():
            m.set_plugin_evaluations(name, framework.evaluations)
        m.fold_hint_times(self.core.queue.take_hint_times())
        for source in self.gauge_sources:
            source()
        self.metrics.set_unschedulable(self.core.queue.unschedulable_by_plugin_and_profile())
        self.metrics.set_inflight_events(self.core.queue.in_flight_events())
        cache = self.core.cache
        self.metrics.cache_pods.set(cache.pod_count())
        size = self.metrics.cache_size
        size.labels("nodes").set(cache.node_count())
        size.labels("pods").set(cache.pod_count())
        size.labels("assumed_pods").set(cache.assumed_count())

    def _observe(self, result: CycleResult, seconds: float) -> None:
        outcome = result.outcome
        label = CYCLE_LABELS.get(outcome)
        if label is None:
            return  # "skipped": nothing was attempted
        name = result.pod.scheduler_name  # the pod's profile
        m = self.metrics
        m.child(m.schedule_attempts, label, name).inc()
        m.child(m.attempt_duration, label, name).observe(seconds)
        if outcome == "assumed":
            if self.on_assumed is not None:
                self.on_assumed(result.pod, result.attempts)
            log.debug(
                "pod_assumed",
                pod=result.pod.key,
                node=result.node,
                evaluated=result.evaluated_nodes,
                feasible=result.feasible_nodes,
            )
            return
        if outcome == "error":
            log.warning("scheduling_error", pod=result.pod.key, message=result.message)
            return
        if outcome == "preempting":
            log.info(
                "preemption_victims_selected",
                pod=result.pod.key,
                node=result.node,
                victims=[v.key for v in result.victims],
            )
        elif v(2):  # kube-scheduler's "Unable to schedule pod; no fit; waiting" is V(2)
            log.info("pod_unschedulable", pod=result.pod.key, message=result.message)
        for node, st in result.node_statuses.items():
            log.debug(
                "node_filtered",
                pod=result.pod.key,
                node=node,
                plugin=st.plugin,
                code=st.code.name,
                reasons=list(st.reasons),
            )

    async def stop(self) -> None:
        """Stop taking pods (bindings in flight are the live layer's to drain)."""
        self._stopping = True
        self.core.queue.close()
        self._wake.set()

    def healthy(self, stall_seconds: float = 30.0) -> bool:
        """The scheduling loop turned within ``stall_seconds``, or is still waiting for the
        caches (which /readyz reports), or for API calls the next cycle must follow (a
        failure's status write, a synchronous preemption's calls: they progress, each
        bounded by the client's timeout)."""
        if not self.synced or self._api_waits:
            return True
        return time.monotonic() - self.last_loop_tick < stall_seconds


Spawn = Callable[[Any], None]
