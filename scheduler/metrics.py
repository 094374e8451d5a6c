"""Prometheus metrics with upstream kube-scheduler's names, on a private registry."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["Metrics"]


class Metrics:
    def __init__(self, profile: str) -> None:
        self.profile = profile
        r = self.registry = CollectorRegistry()
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
