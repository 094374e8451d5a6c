"""Prometheus metrics with upstream kube-scheduler's names, on a private registry.

The metrics are written on every scheduling cycle (a dozen histogram observations per pod),
by one thread: the event loop. prometheus_client's Counter, Gauge and Histogram take a lock
on every write and walk the buckets in Python, which was 3-4 % of the process's time at a
hundred pods a second (docs/benchmarks.md, round 13). The families here keep plain numbers
(a write is an addition; a histogram finds its bucket by bisection) and are exported by
prometheus_client's registry and text format at scrape time, as any custom collector.
A scrape from another thread reads numbers the loop may be updating: a histogram's count
and sum can be one observation apart, as with prometheus_client's own per-value locks.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Generic, TypeVar

import numpy as np
from prometheus_client import CollectorRegistry
from prometheus_client import utils as _prom_utils
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

# Upstream's buckets: exponential from 1 ms by 2 (15) for the algorithm and the SLI,
# from 0.1 ms by 2 (12) for extension points, from 0.01 ms by 1.5 (20) for plugins.
_ALGO_BUCKETS = tuple(0.001 * 2**i for i in range(15))
_EXT_BUCKETS = tuple(0.0001 * 2**i for i in range(12))
_PLUGIN_BUCKETS = tuple(0.00001 * 1.5**i for i in range(20))
_SLI_BUCKETS = tuple(0.01 * 2**i for i in range(20))
_BATCH_BUCKETS = tuple(0.00001 * 2**i for i in range(12))

# The text format's spelling of a bucket bound ("+Inf", "0.001"), as prometheus_client's own.
_bound_text: Callable[[float], str] = _prom_utils.floatToGoString

__all__ = ["Counter", "Gauge", "Histogram", "Metrics"]


class Value:
    """One counter or gauge series: a number."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount

    def dec(self, amount: float = 1.0) -> None:
        self.value -= amount

    def set(self, value: float) -> None:
        self.value = float(value)


class HistogramValue:
    """One histogram series: a count per bucket (not cumulated until exported) and a sum."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * len(bounds)
        self.sum = 0.0

    def observe(self, amount: float) -> None:
        # The first bucket whose upper bound is >= amount ("le"); the last bound is +Inf.
        self.counts[bisect_left(self.bounds, amount)] += 1
        self.sum += amount


V = TypeVar("V", Value, HistogramValue)


class _Family(Generic[V]):
    """A metric and its series by label values; registered as a collector."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        *,
        registry: CollectorRegistry,
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._series: dict[tuple[str, ...], V] = {}
        registry.register(self)

    def _new(self) -> V:
        raise NotImplementedError

    def labels(self, *values: str) -> V:
        series = self._series.get(values)
        if series is None:
            if len(values) != len(self.labelnames):
                raise ValueError(
                    f"metric {self.name}: {len(self.labelnames)} label values needed "
                    f"({', '.join(self.labelnames)}), got {len(values)}"
                )
            series = self._series[values] = self._new()
        return series

    def describe(self) -> list[Metric]:
        return [self._family()]

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        for values, series in list(self._series.items()):
            self._add(family, list(values), series)
        yield family

    def _family(self) -> Metric:
        raise NotImplementedError

    def _add(self, family: Any, values: list[str], series: V) -> None:
        raise NotImplementedError


class _Scalar(_Family[Value]):
    """A family whose series are single numbers (counters, gauges)."""

    def _new(self) -> Value:
        return Value()

    @property
    def value(self) -> float:
        """The unlabelled series' value."""
        return self.labels().value

    def _add(self, family: Any, values: list[str], series: Value) -> None:
        family.add_metric(values, series.value)


class Counter(_Scalar):
    def inc(self, amount: float = 1.0) -> None:
        self.labels().value += amount

    def _family(self) -> Metric:
        return CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)


class Gauge(_Scalar):
    def set(self, value: float) -> None:
        self.labels().set(value)

    def _family(self) -> Metric:
        return GaugeMetricFamily(self.name, self.documentation, labels=self.labelnames)


class Histogram(_Family[HistogramValue]):
    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        *,
        buckets: Sequence[float],
        registry: CollectorRegistry,
    ) -> None:
        bounds = sorted(float(b) for b in buckets)
        if not bounds or bounds[-1] != float("inf"):
            bounds.append(float("inf"))
        self.bounds = tuple(bounds)
        super().__init__(name, documentation, labelnames, registry=registry)

    def _new(self) -> HistogramValue:
        return HistogramValue(self.bounds)

    def observe(self, amount: float) -> None:
        self.labels().observe(amount)

    def _family(self) -> Metric:
        return HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def _add(self, family: Any, values: list[str], series: HistogramValue) -> None:
        cumulative = 0
        buckets: list[tuple[str, float]] = []
        for bound, n in zip(self.bounds, list(series.counts), strict=True):
            cumulative += n
            buckets.append((_bound_text(bound), float(cumulative)))
        family.add_metric(values, buckets, series.sum)


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self._unschedulable_seen: set[tuple[str, str]] = set()
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
        # DynamicResources (upstream registers these with their feature gates, on in 1.37).
        self.resourceclaim_creates = Counter(
            "dynamic_resource_allocation_resourceclaim_creates_total",
            "Number of ResourceClaims creation requests, categorized by creation status, "
            "admin access, and owning API group and kind (the scheduler creates claims for "
            "pods' extended resources backed by devices).",
            ["status", "admin_access", "owner_api_group", "owner_api_kind"],
            registry=r,
        )
        self.dra_binding_allocations = Counter(
            "scheduler_dra_bindingconditions_allocations_total",
            "Number of allocations using devices with BindingConditions, counted per driver "
            "per scheduling attempt.",
            ["profile", "driver", "status"],
            registry=r,
        )
        self.dra_binding_wait_seconds = Histogram(
            "scheduler_dra_bindingconditions_wait_duration_seconds",
            "Time in seconds spent waiting for BindingConditions to be satisfied during PreBind.",
            ["profile", "driver", "status"],
            buckets=tuple(0.1 * 2**i for i in range(14)),
            registry=r,
        )
        self.scheduled_after_flush = Counter(
            "scheduler_pod_scheduled_after_flush",
            "Number of pods that were successfully scheduled after being flushed from the "
            "unschedulable pods because they stayed there too long (a queueing hint that "
            "misses an event shows here).",
            registry=r,
        )
        # OpportunisticBatching's (framework/batch.py), upstream's names and labels.
        self.batch_attempts = Counter(
            "scheduler_batch_attempts_total",
            "OpportunisticBatching's node hints by outcome (no_hint, hint_used, hint_not_used).",
            ["profile", "result"],
            registry=r,
        )
        self.batch_flushes = Counter(
            "scheduler_batch_cache_flushed_total",
            "Times OpportunisticBatching dropped its kept scores, by reason.",
            ["profile", "reason"],
            registry=r,
        )
        self.batch_rescores = Counter(
            "scheduler_batch_rescore_attempts_total",
            "Times OpportunisticBatching scored again the node it chose last.",
            ["profile"],
            registry=r,
        )

        # Upstream's ALPHA timings of OpportunisticBatching's steps (buckets from 0.01 ms by 2).
        self.batch_hint_seconds = Histogram(
            "scheduler_get_node_hint_duration_seconds",
            "Latency for getting a node hint (hinted: hint or no_hint).",
            ["hinted", "profile"],
            buckets=_BATCH_BUCKETS,
            registry=r,
        )
        self.batch_store_seconds = Histogram(
            "scheduler_store_schedule_results_duration_seconds",
            "Latency for storing scheduling results.",
            ["profile"],
            buckets=_BATCH_BUCKETS,
            registry=r,
        )
        self.batch_rescore_seconds = Histogram(
            "scheduler_batch_rescore_duration_seconds",
            "Latency for rescoring a node during opportunistic batching.",
            ["profile"],
            buckets=_BATCH_BUCKETS,
            registry=r,
        )
        self.queued_entities = Gauge(
            "scheduler_queued_entities",
            "Number of queued scheduling entities by the queue type and the entity type "
            "(pod: every entity here; py-scheduler has no pod groups).",
            ["queue", "type"],
            registry=r,
        )
        self.queue_incoming_entities = Counter(
            "scheduler_queue_incoming_entities_total",
            "Number of scheduling entities added to scheduling queues by event, queue type, "
            "and entity type (pod).",
            ["queue", "event", "type"],
            registry=r,
        )
        self.queueing_hint_seconds = Histogram(
            "scheduler_queueing_hint_execution_duration_seconds",
            "Duration for running a queueing hint function of a plugin.",
            ["plugin", "event", "hint"],
            buckets=_PLUGIN_BUCKETS,
            registry=r,
        )
        self.plugin_evaluations = Counter(
            "scheduler_plugin_evaluation_total",
            "Number of attempts to schedule pods by each plugin and the extension point "
            "(PreFilter, Filter, PreScore and Score; set from the profiles' counts at "
            "each scrape).",
            ["plugin", "extension_point", "profile"],
            registry=r,
        )
        # client-go's informer metrics, which kube-scheduler v1.37 serves (name: the
        # component; group, version, resource: the informer's).
        self.informer_latency = Histogram(
            "informer_processing_latency_seconds",
            "Time taken to process events after popping from the queue (each watch event's "
            "handling: the cache, the queue's moves).",
            ["name", "group", "version", "resource"],
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=r,
        )
        self.informer_store_version = Gauge(
            "informer_store_resource_version",
            "The 15 least significant digits of the resource version of the store.",
            ["name", "group", "version", "resource"],
            registry=r,
        )
        self.volume_stage_errors = Counter(
            "scheduler_volume_scheduling_stage_error_total",
            "Volume scheduling stage error count (predicate, assume, bind).",
            ["operation"],
            registry=r,
        )

    def child(self, metric: Any, *values: str) -> Any:
        """``metric.labels(*values)``: one series of a labelled metric."""
        return metric.labels(*values)

    # ------------------------------------------------------------------ the cycle observer
    # (scheduler.schedule_one.CycleObserver): upstream's per-cycle metrics.

    def algorithm_duration(self, seconds: float) -> None:
        self.algorithm_seconds.observe(seconds)

    def extension_point(self, point: str, status: str, seconds: float, profile: str) -> None:
        self.child(self.extension_point_seconds, point, status, profile).observe(seconds)

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

    def batch_attempt(self, profile: str, result: str) -> None:
        self.child(self.batch_attempts, profile, result).inc()

    def batch_flushed(self, profile: str, reason: str) -> None:
        self.child(self.batch_flushes, profile, reason).inc()

    def batch_rescored(self, profile: str) -> None:
        self.child(self.batch_rescores, profile).inc()

    def batch_timed(self, step: str, profile: str, seconds: float, hinted: str = "") -> None:
        if step == "hint":
            self.child(self.batch_hint_seconds, hinted, profile).observe(seconds)
        elif step == "store":
            self.child(self.batch_store_seconds, profile).observe(seconds)
        else:
            self.child(self.batch_rescore_seconds, profile).observe(seconds)

    def fold_hint_times(self, times: Mapping[tuple[str, str, str], Sequence[float]]) -> None:
        """Queueing hint calls' seconds by (plugin, event, hint), into their histogram in
        bulk (the queue keeps them between scrapes: a list append per call)."""
        for key, seconds in times.items():
            series = self.child(self.queueing_hint_seconds, *key)
            values = np.asarray(seconds, dtype=np.float64)
            where = np.searchsorted(series.bounds, values, side="left")
            for i, n in enumerate(np.bincount(where, minlength=len(series.bounds)).tolist()):
                series.counts[i] += n
            series.sum += float(values.sum())

    def incoming(self, queue: str, event: str) -> None:
        """A pod entered a queue (upstream counts it as a pod and as an entity)."""
        self.child(self.queue_incoming, queue, event).inc()
        self.child(self.queue_incoming_entities, queue, event, "pod").inc()

    def volume_stage_error(self, operation: str) -> None:
        self.child(self.volume_stage_errors, operation).inc()

    def set_plugin_evaluations(self, profile: str, counts: Mapping[tuple[str, str], int]) -> None:
        """The profile's plugin evaluations so far, ``(plugin, extension point)`` keys."""
        for (plugin, point), n in counts.items():
            self.child(self.plugin_evaluations, plugin, point, profile).set(n)

    def resource_claim_created(self, ok: bool) -> None:
        status = "success" if ok else "failure"
        self.child(self.resourceclaim_creates, status, "false", "", "Pod").inc()

    def binding_conditions(
        self,
        profile: str,
        status: str,
        seconds: float,
        drivers: Sequence[str],
        conditioned: Sequence[str],
    ) -> None:
        for driver in drivers:
            self.child(self.dra_binding_wait_seconds, profile, driver, status).observe(seconds)
        for driver in conditioned:
            self.child(self.dra_binding_allocations, profile, driver, status).inc()

    def set_inflight_events(self, per_event: Mapping[str, int]) -> None:
        """Events kept for pods in flight, by event; events no longer kept read 0."""
        for event in self._inflight_seen - set(per_event):
            self.inflight_events.labels(event).set(0)
        for event, n in per_event.items():
            self.inflight_events.labels(event).set(n)
        self._inflight_seen = set(per_event)

    def set_unschedulable(self, per_plugin: Mapping[tuple[str, str], int]) -> None:
        """Pods waiting in the unschedulable map, by the plugin that rejected them and the
        profile they belong to (``(plugin, profile)`` keys)."""
        for plugin, profile in self._unschedulable_seen - set(per_plugin):
            self.unschedulable_pods.labels(plugin, profile).set(0)
        for (plugin, profile), n in per_plugin.items():
            self.unschedulable_pods.labels(plugin, profile).set(n)
        self._unschedulable_seen = set(per_plugin)
