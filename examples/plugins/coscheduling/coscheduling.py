"""Coscheduling: an example Permit plugin for py-scheduler (all-or-nothing pod groups).

Pods labelled ``<prefix>/name=<group>`` and ``<prefix>/min-member=<n>`` bind only together:
each member that finds a node waits at Permit, keeping its room, until ``n`` members of
its group (same namespace) are placed, counting itself, the members waiting and those
already bound; then every waiting member is allowed at once. When the group is not
complete within ``timeoutSeconds`` the waiting members are rejected together and give
their room back (``unreserve`` rejects the others once the first one fails), and they are
tried again as soon as another member of the group reaches Permit (``pods_to_activate``).
Pods without the name label are not concerned.

It is also the profile's QueueSort plugin (``less``): higher priority first, then the
group's time (the creation time of the first member it met; a pod without a group, its
own), then the group's name, so that the members of a group leave the queue one after
the other and reach Permit together instead of interleaved with other pods. As with
scheduler-plugins' Coscheduling, PrioritySort must be disabled. Configuration::

    plugins:
      multiPoint:
        enabled: [{name: Coscheduling}]
        disabled: [{name: PrioritySort}]
    pluginConfig:
      - name: Coscheduling
        args: {timeoutSeconds: 30, labelPrefix: pod-group.example.com}

It shows the FrameworkHandle (``Coscheduling(args, handle)``): ``node_infos`` to count the
placed members, ``iterate_over_waiting_pods`` to allow or reject them, ``event_recorder``
for a ``WaitingForPodGroup`` event on each member that waits, and
``state.pods_to_activate``. The idea is the scheduler-plugins project's Coscheduling, much
simplified (no PodGroup object, no quota check before Filter).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.plugins import (
    MAX_PERMIT_TIMEOUT_SECONDS,
    SUCCESS,
    Code,
    CycleState,
    EventRegistration,
    FrameworkHandle,
    PodInfo,
    QueuedPodInfo,
    Status,
)


class Coscheduling:
    name = "Coscheduling"

    def __init__(self, args: Mapping[str, Any], handle: FrameworkHandle) -> None:
        unknown = sorted(set(args) - {"timeoutSeconds", "labelPrefix"})
        if unknown:
            raise ValueError(f"{unknown[0]}: unknown field (known: labelPrefix, timeoutSeconds)")
        timeout = args.get("timeoutSeconds", 60)
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not 0 < timeout <= MAX_PERMIT_TIMEOUT_SECONDS
        ):
            raise ValueError(
                f"timeoutSeconds: expected seconds in (0, {MAX_PERMIT_TIMEOUT_SECONDS:g}], "
                f"got {timeout!r}"
            )
        prefix = args.get("labelPrefix", "pod-group.example.com")
        if not isinstance(prefix, str) or not prefix:
            raise ValueError(f"labelPrefix: expected a label prefix, got {prefix!r}")
        self.timeout = float(timeout)
        self.group_label = f"{prefix}/name"
        self.min_label = f"{prefix}/min-member"
        self.handle = handle
        # Members turned down at Permit (timed out, or rejected with their group), by
        # (namespace, group): tried again when another member reaches Permit.
        self.rejected: dict[tuple[str, str], set[str]] = {}
        # The queue order's time of each group: the creation time of the first member
        # ``less`` met. Fixed once set, as a sort key must stay while pods wait.
        self.group_time: dict[tuple[str, str], float] = {}

    def _group(self, pod: PodInfo) -> tuple[str, str] | None:
        name = pod.labels.get(self.group_label)
        return (pod.namespace, name) if name else None

    def _sort_key(self, pod: PodInfo) -> tuple[int, float, str]:
        group = self._group(pod)
        if group is None:
            return -pod.priority, pod.creation_time, pod.key
        since = self.group_time.setdefault(group, pod.creation_time)
        return -pod.priority, since, f"{group[0]}/{group[1]}"

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        """QueueSort: priority, then the group's time, then the group's name (members of
        one group are next to each other; the queue keeps their own order among them)."""
        return self._sort_key(a.pod) < self._sort_key(b.pod)

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        group = self._group(pod)
        if group is None:
            return SUCCESS, 0.0
        raw = pod.labels.get(self.min_label, "")
        if not raw.isdigit() or int(raw) < 1:
            message = f"label {self.min_label}: expected a positive integer, got {raw!r}"
            return Status.unresolvable(message), 0.0
        needed = int(raw)
        placed = 1 + sum(
            1
            for ni in self.handle.node_infos()
            for p in ni.pods.values()
            if p.uid != pod.uid and self._group(p) == group
        )
        # Whoever was turned down before gets another chance along with this member.
        retry = self.rejected.pop(group, set())
        retry.discard(pod.key)
        state.pods_to_activate.update(retry)
        if placed < needed:
            message = f"waiting for {needed - placed} more member(s) of pod group {group[1]}"
            # Tell the pod's owner why it is pending with a node already found: an Event
            # (kubectl describe pod), reported by the scheduler.
            self.handle.event_recorder.eventf(
                pod, None, "Normal", "WaitingForPodGroup", "Scheduling", message
            )
            return Status(Code.WAIT, (message,)), self.timeout
        for wp in self.handle.iterate_over_waiting_pods():
            if self._group(wp.pod) == group:
                wp.allow(self.name)
        return SUCCESS, 0.0

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        return SUCCESS  # the room is the cache's; only unreserve has work to do

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        """A member failed after Reserve (timed out or rejected at Permit, deleted, its
        binding failed): the group cannot complete now, so the others let go too."""
        group = self._group(pod)
        if group is None:
            return
        self.rejected.setdefault(group, set()).add(pod.key)
        for wp in self.handle.iterate_over_waiting_pods():
            if self._group(wp.pod) == group:
                wp.reject(self.name, f"pod group {group[1]}: member {pod.name} gave up")

    def events_to_register(self) -> list[EventRegistration]:
        """None: a member turned down here waits for another member of its group, which
        sends it back through ``pods_to_activate``; no cluster event helps it."""
        return []
