"""Prometheus metrics with upstream kube-scheduler's names, on a private registry."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# Upstream's buckets: exponential from 1 ms by 2 (15) for the algorithm and the SLI,
# from 0.1 ms by 2 (12) for extension points, from 0.01 ms by 1.5 (20) for plugins.
_ALGO_BUCKETS = tuple(0.001 * 2**i for i in range(15))
_EXT_BUCKETS = tuple(0.0001 * 2**i for i in range(12))
_PLUGIN_BUCKETS = tuple(0.00001 * 1.5**i for i in range(20))
_SLI_BUCKETS = tuple(0.01 * 2**i for i in range(20))

__all__ = ["Metrics"]


class Metrics:
    def __init__(self, profile: str) -> None:
        self.profile = profile
        r = self.registry = CollectorRegistry()
        # (metric, label values) -> its child: prometheus_client's labels() validates and
        # locks on every call, and the cycle observes several labelled metrics per pod.
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        self._unschedulable_seen: set[str] = set()
        self.algorithm_seconds = Histogram(
            "scheduler_scheduling_algorithm_duration_seconds",
            "Scheduling algorithm latency in seconds (filter, score and preemption's decision).",
            buckets=_ALGO_BUCKETS,
            registry=r,
        )
        self.extension_point_seconds = Histogram(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency of running all plugins of one extension point, in seconds.",
            ["extension_point", "status", "profile"],
            buckets=_EXT_BUCKETS,
            registry=r,
        )
        self.plugin_seconds = Histogram(
            "scheduler_plugin_execution_duration_seconds",
            "Duration of one plugin at one extension point, in seconds (sampled cycles).",
            ["plugin", "extension_point", "status"],
            buckets=_PLUGIN_BUCKETS,
            registry=r,
        )
        self.sli_seconds = Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "Pod scheduling latency from the first time it entered the queue to bound, "
            "in seconds, by the number of attempts.",
            ["attempts"],
            buckets=_SLI_BUCKETS,
            registry=r,
        )
        self.permit_wait_seconds = Histogram(
            "scheduler_permit_wait_duration_seconds",
            "Duration of waiting on permit, by result (Success, Unschedulable, Error).",
            ["result"],
            buckets=tuple(0.001 * 2**i for i in range(15)),
            registry=r,
        )
        self.unschedulable_pods = Gauge(
            "scheduler_unschedulable_pods",
            "Pods waiting in the unschedulable map, by the plugin that rejected them.",
            ["plugin", "profile"],
            registry=r,
        )
        self.schedule_attempts = Counter(
            "scheduler_schedule_attempts_total",
            "Number of attempts to schedule pods, by the result.",
            ["result", "profile"],
            registry=r,
        )
        self.attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding).",
            ["result", "profile"],
            buckets=(
                0.0005,
                0.001,
                0.002,
                0.004,
                0.008,
                0.016,
                0.032,
                0.064,
                0.128,
                0.256,
                0.512,
                1.024,
                2.048,
                4.096,
                8.192,
            ),
            registry=r,
        )
        self.pending_pods = Gauge(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type.",
            ["queue"],
            registry=r,
        )
        self.preemption_attempts = Counter(
            "scheduler_preemption_attempts_total",
            "Total preemption attempts in the cluster till now.",
            registry=r,
        )
        self.preemption_victims = Histogram(
            "scheduler_preemption_victims",
            "Number of selected preemption victims.",
            buckets=(1, 2, 4, 8, 16, 32, 64),
            registry=r,
        )
        self.preemption_failures = Counter(
            "py_scheduler_preemption_action_failures_total",
            "API calls of an asynchronous preemption that failed (preemptor requeued).",
            registry=r,
        )
        self.queue_incoming = Counter(
            "scheduler_queue_incoming_pods_total",
            "Number of pods added to scheduling queues by event and queue type.",
            ["queue", "event"],
            registry=r,
        )
        self.pod_scheduling_attempts = Histogram(
            "scheduler_pod_scheduling_attempts",
            "Number of attempts to successfully schedule a pod.",
            buckets=(1, 2, 4, 8, 16),
            registry=r,
        )
        self.binding_failures = Counter(
            "py_scheduler_binding_failures_total",
            "Bindings that failed, by outcome (conflict, gone, error).",
            ["outcome"],
            registry=r,
        )
        self.leader = Gauge(
            "py_scheduler_leader", "1 when this replica holds the leader lease.", registry=r
        )
        self.cache_pods = Gauge(
            "py_scheduler_cache_pods",
            "Pods placed on nodes in the scheduler cache.",
            registry=r,
        )
        self.cache_size = Gauge(
            "scheduler_cache_size",
            "Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
            ["type"],
            registry=r,
        )
        self.event_handling_seconds = Histogram(
            "scheduler_event_handling_duration_seconds",
            "Event handling latency in seconds, by event (the cache and the queue's moves).",
            ["event"],
            buckets=_EXT_BUCKETS,
            registry=r,
        )
        self.inflight_events = Gauge(
            "scheduler_inflight_events",
            "Number of events kept in the scheduling queue for pods in flight, by event "
            "(PodPopped: the pods in flight).",
            ["event"],
            registry=r,
        )
        self._inflight_seen: set[str] = set()
        self.goroutines = Gauge(
            "scheduler_goroutines",
            "Number of running tasks split by the work they do (binding: a pod's binding "
            "cycle, from Permit's wait to the Binding call).",
            ["operation"],
            registry=r,
        )
        self.preemption_goroutines_total = Counter(
            "scheduler_preemption_goroutines_execution_total",
            "Number of preemptions whose API calls ran (DisruptionTarget, DELETE), by result.",
            ["result"],
            registry=r,
        )
        self.preemption_goroutines_seconds = Histogram(
            "scheduler_preemption_goroutines_duration_seconds",
            "Duration in seconds of a preemption's API calls, by result (deprecated upstream "
            "in 1.37, still registered there).",
            ["result"],
            buckets=tuple(0.01 * 2**i for i in range(20)),
            registry=r,
        )
        self.scheduled_after_flush = Counter(
            "scheduler_pod_scheduled_after_flush",
            "Number of pods that were successfully scheduled after being flushed from the "
            "unschedulable pods because they stayed there too long (a queueing hint that "
            "misses an event shows here).",
            registry=r,
        )

    def child(self, metric: Any, *values: str) -> Any:
        """``metric.labels(*values)``, remembered (label values come from small sets:
        extension points, plugins, statuses, queues, events)."""
        key = (id(metric), values)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*values)
        return found

    # ------------------------------------------------------------------ the cycle observer
    # (scheduler.schedule_one.CycleObserver): upstream's per-cycle metrics.

    def algorithm_duration(self, seconds: float) -> None:
        self.algorithm_seconds.observe(seconds)

    def extension_point(self, point: str, status: str, seconds: float) -> None:
        self.child(self.extension_point_seconds, point, status, self.profile).observe(seconds)

    def plugin_execution(self, plugin: str, point: str, status: str, seconds: float) -> None:
        self.child(self.plugin_seconds, plugin, point, status).observe(seconds)

    def pod_scheduled(self, attempts: int, sli_seconds: float, after_flush: bool) -> None:
        self.child(self.sli_seconds, str(attempts)).observe(sli_seconds)
        if after_flush:
            self.scheduled_after_flush.inc()

    def event_handled(self, event: str, seconds: float) -> None:
        self.child(self.event_handling_seconds, event).observe(seconds)

    def permit_wait(self, result: str, seconds: float) -> None:
        self.child(self.permit_wait_seconds, result).observe(seconds)

    def set_inflight_events(self, per_event: Mapping[str, int]) -> None:
        """Events kept for pods in flight, by event; events no longer kept read 0."""
        for event in self._inflight_seen - set(per_event):
            self.inflight_events.labels(event).set(0)
        for event, n in per_event.items():
            self.inflight_events.labels(event).set(n)
        self._inflight_seen = set(per_event)

    def set_unschedulable(self, per_plugin: Mapping[str, int]) -> None:
        """Pods waiting in the unschedulable map, by the plugin that rejected them."""
        for plugin in set(self._unschedulable_seen) - set(per_plugin):
            self.unschedulable_pods.labels(plugin, self.profile).set(0)
        for plugin, n in per_plugin.items():
            self.unschedulable_pods.labels(plugin, self.profile).set(n)
        self._unschedulable_seen = set(per_plugin)
