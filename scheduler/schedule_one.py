"""SchedulerCore: cluster events in, one scheduling cycle at a time, decisions out.

This is the synchronous heart shared by the live scheduler (scheduler.py, fed by kopf
through operator.py) and by ``simulate`` (fed from YAML). It owns the cache, the queue, the
snapshot and the framework, and talks to the world only through three ports:

- ``Binder.bind(pod, node)``: start binding; the outcome comes back later through
  ``on_bind_result`` (the live binder is asynchronous; simulate's is immediate).
- ``Recorder``: ``scheduled`` / ``failed`` (status patch + event in the live scheduler) /
  ``skipped_deleting`` (an event).
- ``PreemptionActions`` (framework/preemption.py): carry out a preemption decision.

One cycle (``schedule_one``): pop -> update snapshot -> PreFilter -> Filter (the nominated
node first, or else OpportunisticBatching's hint for a pod like the last one,
framework/batch.py; then nodes from a rotating offset until enough feasible ones are
found) -> PreScore/Score -> select host (ties at random; the other scored nodes kept for
the next pod when this one was signed) -> assume -> bind. When no node fits:
PostFilter (preemption), then one failure path records the reason, updates the nomination
and returns the pod to the queue. Every failure after ``assume_pod`` unwinds through
``_unwind_binding`` (forget, requeue). Nothing awaits inside a cycle, so no locks; the one
exception is ``schedule_one_async``, for scheduler extenders (framework/extender.py),
whose calls it awaits while reading only its snapshot, taken at its start.

Bulk path (``vectorized``, the default): the Filter walk asks the framework which nodes
surely pass (numpy masks over the snapshot's ``NodeArrays``) and calls plugins only on the
other nodes, on nodes with nominated pods, and for plugins without a bulk answer; Score
totals come from ``run_score_batch`` and the host is drawn among the best as the
node-by-node path draws it (one ``randrange``). Every result (feasible nodes and their
order, statuses, scores, host, ``next_start_node_index``) equals the node-by-node path's;
``vectorized=False`` forces that path (the equivalence tests compare the two).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol, TypeVar, overload

import numpy as np

from scheduler.backend.cache import Cache, Snapshot
from scheduler.backend.cache.snapshot import BoolArray, Int64Array, IntpArray
from scheduler.backend.queue import PriorityQueue, QueuedPodInfo
from scheduler.backend.queue.events import ANY
from scheduler.clock import Clock
from scheduler.config import SchedulerConfig
from scheduler.draapi import (
    Allocation,
    DeviceClassInfo,
    DeviceTaintRuleInfo,
    DraObject,
    ResourceClaimInfo,
)
from scheduler.framework.batch import BatchObserver, Candidates, OpportunisticBatch
from scheduler.framework.extender import (
    EXTENDER_NAME,
    MAX_EXTENDER_PRIORITY,
    Extender,
    ExtenderError,
)
from scheduler.framework.interface import (
    CODE_NAMES,
    MAX_NODE_SCORE,
    ClusterEvent,
    Code,
    CycleState,
    Diagnosis,
    EventRegistration,
    FilterPlugin,
    NodeScore,
    PostFilterResult,
    PreFilterResult,
    Status,
)
from scheduler.framework.outoftree import PluginRaised
from scheduler.framework.plugins.dynamicresources import DraObjects
from scheduler.framework.plugins.helper import SelectorObjects
from scheduler.framework.plugins.registry import PluginMetrics, build_framework
from scheduler.framework.plugins.volumebinding import VolumeObjects
from scheduler.framework.preemption import (
    Candidate,
    Evaluator,
    PreemptionActions,
    fit_error_message,
    most_important_first,
)
from scheduler.framework.runtime import Framework, int64_column
from scheduler.framework.waiting_pods import (
    ApiClient,
    EventRecorder,
    PodInPreBind,
    WaitingPod,
    WaitingPods,
)
from scheduler.types import (
    CSIDriverInfo,
    CSINodeInfo,
    CSIStorageCapacityInfo,
    NodeInfo,
    NodeRecord,
    PDBInfo,
    PodInfo,
    PriorityClassInfo,
    PVCInfo,
    PVInfo,
    SelectorObject,
    ServiceInfo,
    StorageClassInfo,
    VolumeAttachmentInfo,
    VolumeObject,
    pod_with,
)

__all__ = [
    "BindOutcome",
    "Binder",
    "BindingCycle",
    "CycleResult",
    "Recorder",
    "SchedulerCore",
    "binding_step_outcome",
    "num_feasible_nodes_to_find",
]

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
ERR_NO_NODES = "no nodes available to schedule pods"

# Reasons of the PodScheduled=False condition, as upstream.
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_SCHEDULER_ERROR = "SchedulerError"

_R = TypeVar("_R")


def _extender_log(event: str, level: str = "info", **kw: object) -> None:
    import structlog  # here: only extenders log from the core (simulate stays lean)

    getattr(structlog.get_logger("py-scheduler"), level)(event, **kw)


# The cluster event resource of each storage object (upstream's ClusterEvent resources).
_VOLUME_RESOURCES: dict[type, str] = {
    PVCInfo: "PersistentVolumeClaim",
    PVInfo: "PersistentVolume",
    StorageClassInfo: "StorageClass",
    CSINodeInfo: "CSINode",
    CSIDriverInfo: "CSIDriver",
    VolumeAttachmentInfo: "VolumeAttachment",
    CSIStorageCapacityInfo: "CSIStorageCapacity",
}


def _dra_resource(obj: DraObject) -> str:
    if isinstance(obj, ResourceClaimInfo):
        return "ResourceClaim"
    if isinstance(obj, DeviceTaintRuleInfo):
        return "DeviceTaintRule"
    return "DeviceClass" if isinstance(obj, DeviceClassInfo) else "ResourceSlice"


class _FeasibleNodes(Sequence[NodeInfo]):
    """The feasible nodes found by the bulk filter: positions in the node list, each
    NodeInfo fetched when asked for. A cycle usually reads one of them (the chosen host);
    building the list up front touched every feasible node's record in memory, hundreds
    per cycle at the adaptive percentage (~4 % of the process at 1000 and 5000 nodes).

    It refers to the snapshot's node list, not a copy: it is valid within the cycle that
    built it, before the next ``update_snapshot``. Its one consumer, ``_schedule_pod``,
    hands it to PreScore and Score plugins, whose state lives in that cycle's CycleState."""

    __slots__ = ("_at", "_nodes")

    def __init__(self, nodes: list[NodeInfo], at: list[int]) -> None:
        self._nodes = nodes
        self._at = at

    def __len__(self) -> int:
        return len(self._at)

    @overload
    def __getitem__(self, i: int) -> NodeInfo: ...

    @overload
    def __getitem__(self, i: slice) -> list[NodeInfo]: ...

    def __getitem__(self, i: int | slice) -> NodeInfo | list[NodeInfo]:
        if isinstance(i, slice):
            nodes = self._nodes
            return [nodes[j] for j in self._at[i]]
        return self._nodes[self._at[i]]

    def __iter__(self) -> Iterator[NodeInfo]:
        nodes = self._nodes
        return (nodes[j] for j in self._at)


@dataclass(frozen=True, slots=True)
class BindingCycle:
    """The plugin steps a binder runs around the Binding when PreBind or Bind plugins are
    enabled or the pod waits at Permit (upstream's bindingCycle): ``pre_flight()``; on
    SUCCESS the pod's nominatedNodeName is set to the node first
    (NominatedNodeNameForExpectation, on by default since 1.35), on SKIP not; then
    ``pre_bind()``; then, when set, ``bind()`` (Bind plugins before DefaultBinder). A
    failed step fails the binding with ``BindOutcome.REJECTED`` (a rejection) or
    ``BindOutcome.PRE_BIND`` (an error)."""

    pre_flight: Callable[[], Status]
    pre_bind: Callable[[], Status]
    # The pod held at Permit (None: no Permit plugin asked to wait): the binder waits for
    # its outcome (``WaitingPod.on_done``) between ``begin`` and ``finish``, calling
    # ``expire`` once ``permit_timeout()`` seconds (the earliest pending plugin's) pass.
    waiting: WaitingPod | None = None
    permit_timeout: Callable[[], float | None] = lambda: None
    expire: Callable[[], object] = lambda: None
    # Set when a PreBind plugin is async: the binder awaits ``finish_async`` instead, and
    # registers the binding for the time it takes (``enter_pre_bind(cancel)``, upstream's
    # AddPodInPreBind: a preemption that picks the pod calls ``cancel`` rather than
    # deleting it; ``leave_pre_bind`` afterwards).
    pre_bind_async: Callable[[], Awaitable[Status]] | None = None
    enter_pre_bind: Callable[[Callable[[str], object]], PodInPreBind] | None = None
    leave_pre_bind: Callable[[], object] = lambda: None
    # Set when Bind plugins run before DefaultBinder: after PreBind the binder awaits it.
    # SUCCESS: a plugin bound the pod (no Binding is sent); SKIP: send the Binding
    # (DefaultBinder's turn); anything else fails the binding as a PreBind failure does.
    bind: Callable[[], Awaitable[Status]] | None = None

    def begin(self) -> tuple[Status | None, bool]:
        """Run the pre-flight: (the status that stops the binding, or None; whether the
        pod's nominatedNodeName is to be set before ``finish``: a PreBind plugin has work
        to do, or the pod waits at Permit, as upstream's WillWaitOnPermit)."""
        st = self.pre_flight()
        if st.is_success():
            return None, True
        return (None, self.waiting is not None) if st.is_skip() else (st, False)

    def permitted(self, outcome: Status) -> Status | None:
        """The end of the wait at Permit: None when every plugin allowed the pod, else the
        status that stops the binding (upstream's WaitOnPermit): a rejection as it is, a
        preemption or any other stop as an error."""
        if outcome.is_success():
            return None
        if outcome.is_rejected():
            return outcome
        message = f"waiting on permit for pod: {outcome.message()}"
        return Status(Code.ERROR, (message,), outcome.plugin)

    def finish(self) -> Status | None:
        """Run PreBind: None when the Binding may be sent, else the status that stops it.
        With an async PreBind plugin, ``finish_async`` instead."""
        if self.pre_bind_async is not None:
            raise TypeError("an async PreBind plugin is enabled: await finish_async()")
        st = self.pre_bind()
        return None if st.is_success() else st

    async def finish_async(self) -> Status | None:
        """``finish``, awaiting async PreBind plugins (for a binder that runs on a loop)."""
        if self.pre_bind_async is None:
            return self.finish()
        st = await self.pre_bind_async()
        return None if st.is_success() else st


def binding_step_outcome(st: Status, *, at_permit: bool = False) -> str:
    """The BindOutcome of a failed BindingCycle step (``at_permit``: the wait at Permit)."""
    if at_permit and st.is_rejected():
        return BindOutcome.PERMIT
    return BindOutcome.REJECTED if st.is_rejected() else BindOutcome.PRE_BIND


class Binder(Protocol):
    def bind(self, pod: PodInfo, node_name: str, cycle: BindingCycle | None = None) -> None:
        """Bind, never blocking; the outcome arrives via ``SchedulerCore.on_bind_result``.
        ``cycle``: PreBind steps to run first (None: no PreBind plugin is enabled)."""
        ...


class Recorder(Protocol):
    def scheduled(self, pod: PodInfo, node_name: str) -> None: ...

    def failed(
        self, pod: PodInfo, *, reason: str, message: str, nominated_node: str | None
    ) -> None:
        """``nominated_node``: None leaves the pod's nomination as it is; "" clears it."""
        ...

    def skipped_deleting(self, pod: PodInfo) -> None:
        """A pending pod whose deletion had begun came out of the queue: no cycle ran for
        it (upstream's skipPodSchedule: a FailedScheduling warning, no status written)."""
        ...


class CycleObserver(PluginMetrics, BatchObserver, Protocol):
    """Where a cycle's timings go (the live scheduler's Prometheus metrics; nothing in
    ``simulate``). Upstream's names: scheduling_algorithm_duration, framework
    extension_point_duration, plugin_execution_duration (sampled cycles only),
    pod_scheduling_sli_duration, pod_scheduled_after_flush and permit_wait_duration;
    the in-tree plugins' own (``PluginMetrics``: DynamicResources', VolumeBinding's),
    and OpportunisticBatching's (``BatchObserver``)."""

    def algorithm_duration(self, seconds: float) -> None: ...

    def extension_point(self, point: str, status: str, seconds: float, profile: str) -> None: ...

    def plugin_execution(self, plugin: str, point: str, status: str, seconds: float) -> None: ...

    def pod_scheduled(self, attempts: int, sli_seconds: float, after_flush: bool) -> None: ...

    def permit_wait(self, result: str, seconds: float) -> None: ...


# Upstream's pluginMetricsSamplePercent: plugin durations are recorded in 10% of cycles.
PLUGIN_METRICS_SAMPLE_PERCENT = 10


class BindOutcome:
    OK = "ok"
    CONFLICT = "conflict"  # 409: already bound (by us earlier, or by someone else)
    GONE = "gone"  # 404: the pod was deleted
    ERROR = "error"  # anything else after retries
    REJECTED = "rejected"  # a PreBind or Bind plugin rejected the pod (no Binding was sent)
    # PreBindPreFlight, PreBind, a Bind plugin or the wait at Permit failed (no Binding)
    PRE_BIND = "prebind"
    PERMIT = "permit"  # rejected while waiting at Permit: unschedulable for that plugin


@dataclass(slots=True)
class CycleResult:
    pod: PodInfo
    outcome: str  # "assumed" | "unschedulable" | "preempting" | "error" | "skipped"
    node: str = ""
    message: str = ""
    victims: tuple[PodInfo, ...] = ()
    evaluated_nodes: int = 0
    feasible_nodes: int = 0
    nominated_node: str | None = None
    attempts: int = 0  # scheduling attempts of this pod so far, this one included
    # Per-node filter verdicts of a failed attempt (for -v 4+ logs and tools); empty else.
    node_statuses: Mapping[str, Status] = field(default_factory=dict)


class _FitError(Exception):
    def __init__(self, diagnosis: Diagnosis) -> None:
        super().__init__("fit error")
        self.diagnosis = diagnosis


class _CycleError(Exception):
    pass


class _NoNodesError(Exception):
    """Upstream's ErrNoNodesAvailable: a rejection (reason Unschedulable), not an error."""


def _record_rejection(diagnosis: Diagnosis, node: str, st: Status) -> None:
    """A node a Filter plugin turned down: keep its status for the FitError message and
    the queue's hints; an ERROR ends the cycle (the one rule both filter walks share)."""
    if st.code == Code.ERROR:
        raise _CycleError(f"running Filter plugin {st.plugin}: {st.message()}")
    diagnosis.node_to_status[node] = st
    if st.plugin:
        diagnosis.unschedulable_plugins.add(st.plugin)
        rejected = diagnosis.rejected_by
        rejected[st.plugin] = rejected.get(st.plugin, 0) + 1


def num_feasible_nodes_to_find(percentage: int, num_all_nodes: int) -> int:
    """Upstream's adaptive percentageOfNodesToScore."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    if percentage == 0:
        percentage = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    return max(num_all_nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


@dataclass(slots=True)
class _Scores:
    """A cycle's scores as OpportunisticBatching keeps them: each plugin's raw scores
    (None: one was not an int that fits int64) and the totals."""

    raw: dict[str, Int64Array | None] = field(default_factory=dict)
    totals: Int64Array | None = None


@dataclass
class _Binding:
    qpi: QueuedPodInfo
    node: str
    framework: Framework  # the pod's profile's
    state: CycleState | None = None  # for Unreserve and PostBind; None: no such plugins
    waiting: WaitingPod | None = None  # held at Permit (the pod is still in flight)


@dataclass
class SchedulerCore:
    config: SchedulerConfig
    clock: Clock
    binder: Binder
    recorder: Recorder
    actions: PreemptionActions | None = None
    rng: random.Random = field(default_factory=random.Random)
    namespace_labels: Callable[[str], Mapping[str, str]] | None = None
    on_ready: Callable[[], None] | None = None
    on_incoming: Callable[[str, str], None] | None = None
    vectorized: bool = True  # False: the node-by-node Filter/Score and dry run (same results)
    observer: CycleObserver | None = None
    # System default spreading selects pods as upstream (Services, RCs, RSs, StatefulSets fed
    # through on_selector_object_set/delete; the live layer watches them, simulate and
    # explain load them). False: by controller owner, the approximation of earlier versions,
    # kept for benchmarks that compare the two.
    upstream_default_selector: bool = True
    # The API client and event recorder that plugins reach through their FrameworkHandle
    # (the live scheduler's; None in simulate and explain).
    api_client: ApiClient | None = None
    event_recorder: EventRecorder | None = None
    # The recorder of each profile's FrameworkHandle, by profile name (the live
    # scheduler's: its events name that profile); None: ``event_recorder`` for every one.
    profile_recorders: Callable[[str], EventRecorder] | None = None
    # Scheduler extenders (scheduler/framework/extender.py), in the order they are asked;
    # with any, cycles run through ``schedule_one_async``.
    extenders: Sequence[Extender] = ()

    def __post_init__(self) -> None:
        self.cache = Cache()
        self.snapshot = Snapshot()
        self.pdbs: dict[str, PDBInfo] = {}
        self.priority_classes: dict[str, PriorityClassInfo] = {}
        self.selector_objects = SelectorObjects()
        self.volumes = VolumeObjects()  # claims, volumes, storage classes (VolumeBinding)
        self.volumes.node_labels = self._node_labels
        self.volumes.claim_in_use = self.cache.claim_in_use
        self.dra = DraObjects()  # ResourceClaims, ResourceSlices, DeviceClasses
        self.dra.on_given_up = self._claim_given_up
        # The queue owns the nominator; the framework reads it for the two-pass filter.
        self.queue = PriorityQueue(
            self.clock,
            initial_backoff=self.config.pod_initial_backoff_seconds,
            max_backoff=self.config.pod_max_backoff_seconds,
            max_unschedulable_duration=self.config.pod_max_in_unschedulable_seconds,
            on_ready=self.on_ready,
            on_incoming=self.on_incoming,
            time_hints=self.observer is not None,
        )
        # One framework (and preemption evaluator) per profile, by scheduler name; the
        # queue, cache, snapshot, nominator, the pods held at Permit and those in an async
        # PreBind are shared, as upstream's profiles share them.
        self.waiting_pods = WaitingPods()
        self.pods_in_pre_bind: dict[str, PodInPreBind] = {}
        self.profiles: dict[str, tuple[Framework, Evaluator]] = {}
        self._profile_configs = {p.scheduler_name: p for p in self.config.profiles}
        for profile in self.config.profiles:
            fw, ev = build_framework(
                profile,
                snapshot=self.snapshot,
                nominator=self.queue.nominator,
                pdbs=lambda: list(self.pdbs.values()),
                actions=self.actions,
                rng=self.rng,
                namespace_labels=self.namespace_labels,
                selectors=self.selector_objects if self.upstream_default_selector else None,
                api_client=self.api_client,
                event_recorder=(
                    self.event_recorder
                    if self.profile_recorders is None
                    else self.profile_recorders(profile.scheduler_name)
                ),
                waiting_pods=self.waiting_pods,
                pods_in_pre_bind=self.pods_in_pre_bind,
                volumes=self.volumes,
                dra=self.dra,
                now=self.clock.now,
                metrics=self.observer,
                priority_classes=self.priority_classes,
            )
            ev.fast_dry_run = self.vectorized
            if self.extenders:
                # Extenders have no hints: a pod they turned nodes down for waits for any
                # cluster event (upstream's defaultEnqueueExtension for ExtenderName).
                fw.hints[EXTENDER_NAME] = [EventRegistration(ClusterEvent(ANY, ANY))]
            self.profiles[profile.scheduler_name] = (fw, ev)
        # The framework, evaluator and profile of the pod in the cycle (``use_profile_of``;
        # the first profile's until the first cycle); outside a cycle, ask
        # ``framework_for(pod)``.
        self.framework, self.evaluator = self._first = self.profiles[self.config.scheduler_name]
        self.profile_config = self.config
        self.queue.hints = dict(self.framework.hints)
        if len(self.profiles) > 1:
            self.queue.profile_hints = {n: dict(fw.hints) for n, (fw, _) in self.profiles.items()}
        # Profiles agree on the queue's order (config.py checks): the first one's sorts it.
        if self.framework.queue_sort is not None:
            self.queue.set_less(self.framework.queue_sort.less)
        if any(fw.pre_enqueue_plugins for fw, _ in self.profiles.values()):
            self.queue.pre_enqueue = self._run_pre_enqueue
            self.queue.pre_enqueue_gated = self._run_pre_enqueue
        self.next_start_node_index = 0
        # Which cycles record plugin durations: its own generator, so that metrics never
        # change the decisions' random draws (ties, offsets).
        self._sampler = random.Random()
        self._binding: dict[str, _Binding] = {}
        # Whether an extender filters or scores: then Filter looks for more than one node
        # even without Score plugins (upstream's hasExtenderFilters / hasScoring).
        self._extenders_look = any(e.is_filter() or e.is_prioritizer() for e in self.extenders)
        # Whether an extender takes part in preemption: then PostFilter is awaited, and
        # each profile's evaluator asks the extenders about its candidates.
        self._extenders_preempt_on = any(e.supports_preemption() for e in self.extenders)
        if self._extenders_preempt_on:
            for _, ev in self.profiles.values():
                ev.async_candidate_filter = self._extenders_preempt
        # Upstream's scheduling cycle count: one a pod popped. OpportunisticBatching keeps
        # scores only from one cycle to the next.
        self.cycle = 0
        # Each profile's OpportunisticBatch, by scheduler name (none with extenders: no
        # pod is signed then, and their cycles run through ``schedule_one_async``).
        self.batches: dict[str, OpportunisticBatch] = {}
        self._tie_draw: np.random.Generator | None = None
        if self.config.opportunistic_batching and not self.extenders:
            for name, (fw, _) in self.profiles.items():
                self.batches[name] = OpportunisticBatch(fw, self.clock.now, self.observer)

    # ================================================================== cluster events
    def responsible_for(self, pod: PodInfo) -> bool:
        return pod.scheduler_name in self.profiles

    def framework_for(self, pod: PodInfo) -> Framework:
        """The framework of the profile ``pod`` names (the first profile's for a pod that
        names none of ours)."""
        return self.profiles.get(pod.scheduler_name, self._first)[0]

    def evaluator_for(self, pod: PodInfo) -> Evaluator:
        """The preemption evaluator of the profile ``pod`` names (as ``framework_for``)."""
        return self.profiles.get(pod.scheduler_name, self._first)[1]

    def use_profile_of(self, pod: PodInfo) -> Framework:
        """Make the profile ``pod`` names (as ``framework_for``) the current one: the
        ``framework``, ``evaluator`` and ``profile_config`` a cycle for ``pod`` runs with.
        Returns the framework."""
        self.framework, self.evaluator = self.profiles.get(pod.scheduler_name, self._first)
        self.profile_config = self._profile_configs.get(pod.scheduler_name, self.config)
        return self.framework

    def on_pod_add(self, pod: PodInfo) -> None:
        if pod.node_name:
            if pod.terminal:
                self._remove_assigned(pod.key)
                return
            self.queue.delete(pod.key)
            self.cache.add_pod(pod)
            self.queue.move_all_to_active_or_backoff(ClusterEvent("AssignedPod", "Add"), None, pod)
        elif self.responsible_for(pod) and not pod.terminal:
            # A pod whose deletion has begun is queued too, as upstream's (see _begin_cycle).
            # Equal priorities go in creation order, also for pods found at start-up.
            self.queue.add(pod, timestamp=pod.creation_time or None)

    def on_pod_update(self, old: PodInfo | None, new: PodInfo) -> None:
        if new.node_name:
            if new.terminal:
                self._remove_assigned(new.key)
                return
            self.queue.delete(new.key)  # it was pending and now is bound
            known = self.cache.get_pod(new.key) is not None
            if known and not self.cache.is_assumed(new.key):
                self.cache.update_pod(new)
                self.queue.move_all_to_active_or_backoff(
                    ClusterEvent("AssignedPod", "Update"), old, new
                )
            else:
                self.cache.add_pod(new)
                self.queue.move_all_to_active_or_backoff(
                    ClusterEvent("AssignedPod", "Add"), None, new
                )
            return
        if new.key in self._binding and self.cache.is_assumed(new.key):
            # As upstream, an update of an assumed pod (its binding under way, or its wait
            # at Permit) changes nothing, not even its place in flight (our own
            # nominatedNodeName write comes back this way), except the start of its
            # deletion: that lets it go at once (handleAssumedPodDeletion).
            if new.terminating and (old is None or not old.terminating):
                self.queue.delete(new.key)
                self._drop_binding(new.key)
                self._remove_assigned(new.key)
            return
        if not self.responsible_for(new):
            return
        if new.terminal:
            self.queue.delete(new.key)
            return
        # Someone (another replica, a user) changed the nomination: follow the API.
        if old is not None and old.nominated_node_name != new.nominated_node_name:
            if new.nominated_node_name:
                self.queue.nominator.add_nominated_pod(new, new.nominated_node_name)
            else:
                self.queue.nominator.delete_nominated_pod_if_exists(new.key)
        if self.queue.contains(new.key):
            self.queue.update(new)
        elif new.key not in self._binding and self.cache.get_pod(new.key) is None:
            self.queue.add(new, timestamp=new.creation_time or None)

    def on_pod_delete(self, pod: PodInfo) -> None:
        self.evaluator_for(pod).forget_preemptor(pod.key)
        self.queue.delete(pod.key)
        self._drop_binding(pod.key)
        if pod.node_name or self.cache.get_pod(pod.key) is not None:
            self._remove_assigned(pod.key)

    def _drop_binding(self, key: str) -> None:
        """A pod whose binding is in flight is going away: the binding's outcome will be
        ignored (upstream finds the pod gone and drops it, so it never comes back to the
        queue), its Reserve plugins are told (upstream's failed binding cycle unreserves),
        and a pod held at Permit is let go ("removed", upstream's RejectWaitingPod)."""
        b = self._binding.pop(key, None)
        if b is None:
            return
        if b.waiting is not None:
            b.waiting.reject("", "removed")
        in_pre_bind = b.framework.pods_in_pre_bind.get(b.qpi.pod.uid)
        if in_pre_bind is not None:  # upstream's PreBind finds the pod gone and gives up
            in_pre_bind.cancel("pod does not exist any more")
        if b.state is not None and b.framework.reserve_plugins:
            assumed = pod_with(b.qpi.pod, node_name=b.node)
            self._timed("Unreserve", b.framework.run_unreserve, b.state, assumed, b.node)

    def _remove_assigned(self, key: str) -> None:
        removed = self.cache.remove_pod(key)
        if removed is not None:
            self.queue.move_all_to_active_or_backoff(
                ClusterEvent("AssignedPod", "Delete"), removed, None
            )

    def on_node_add(self, node: NodeRecord) -> None:
        self.cache.add_node(node)
        self.queue.move_all_to_active_or_backoff(ClusterEvent("Node", "Add"), None, node)

    def on_node_update(self, old: NodeRecord | None, new: NodeRecord) -> None:
        self.cache.update_node(new)
        if old is None or old != new:
            self.queue.move_all_to_active_or_backoff(ClusterEvent("Node", "Update"), old, new)

    def on_node_delete(self, name: str) -> None:
        ni = self.cache.get_node(name)
        old = ni.node if ni is not None else None
        self.cache.remove_node(name)
        if old is not None:
            # Its pods leave the spreading counts with it (PodTopologySpread's Node/Delete).
            self.queue.move_all_to_active_or_backoff(ClusterEvent("Node", "Delete"), old, None)

    def on_namespace_update(self, old: Mapping[str, str], new: Mapping[str, str]) -> None:
        """A namespace's labels changed (the namespace_labels lookup already answers
        ``new``): affinity terms' namespaceSelectors may select it now, or no longer."""
        if old != new:
            self.queue.move_all_to_active_or_backoff(ClusterEvent("Namespace", "Update"), old, new)

    def on_pdb_set(self, pdb: PDBInfo) -> None:
        old = self.pdbs.get(pdb.key)
        self.pdbs[pdb.key] = pdb
        if old != pdb:
            self.queue.move_all_to_active_or_backoff(
                ClusterEvent("PDB", "Update" if old else "Add"), old, pdb
            )

    def on_pdb_delete(self, key: str) -> None:
        old = self.pdbs.pop(key, None)
        if old is not None:
            self.queue.move_all_to_active_or_backoff(ClusterEvent("PDB", "Delete"), old, None)

    def on_priority_class_set(self, pc: PriorityClassInfo) -> None:
        old = self.priority_classes.get(pc.name)
        self.priority_classes[pc.name] = pc
        if old != pc:
            self.queue.move_all_to_active_or_backoff(
                ClusterEvent("PriorityClass", "Update" if old else "Add"), old, pc
            )

    def on_priority_class_delete(self, name: str) -> None:
        old = self.priority_classes.pop(name, None)
        if old is not None:
            self.queue.move_all_to_active_or_backoff(
                ClusterEvent("PriorityClass", "Delete"), old, None
            )

    def on_selector_object_set(self, kind: str, rec: ServiceInfo | SelectorObject) -> None:
        """A Service, ReplicationController, ReplicaSet or StatefulSet was added or
        changed (``kind`` names which). Only system default spreading reads them, and as
        upstream (PodTopologySpread registers pod and node events only) no pod is requeued:
        the next attempt of each pod reads the new selector."""
        if kind == "Service":
            if not isinstance(rec, ServiceInfo):
                raise TypeError(f"on_selector_object_set(Service): got {type(rec).__name__}")
            self.selector_objects.set_service(rec)
            return
        if not isinstance(rec, SelectorObject) or rec.kind != kind:
            raise TypeError(f"on_selector_object_set({kind}): got {rec!r}")
        self.selector_objects.set_controller(rec)

    def on_selector_object_delete(self, kind: str, key: str) -> None:
        """One of those objects (``namespace/name``) was deleted; no pod is requeued."""
        if kind == "Service":
            self.selector_objects.delete_service(key)
        else:
            self.selector_objects.delete_controller(kind, key)

    def _node_labels(self, name: str) -> Mapping[str, str] | None:
        ni = self.cache.get_node(name)
        return None if ni is None or ni.node is None else ni.node.labels

    def on_volume_object_set(self, obj: VolumeObject) -> None:
        """A PersistentVolumeClaim, PersistentVolume, StorageClass, CSINode, CSIDriver,
        VolumeAttachment or CSIStorageCapacity was added or changed: the volume plugins
        read it, and the pods
        their hints wait for such an event are moved. As upstream's informers, only events
        some plugin registers for are raised (a VolumeAttachment's add or update, a
        CSIDriver's add, none)."""
        old = self.volumes.set(obj)
        action = "Add" if old is None else "Update"
        resource = _VOLUME_RESOURCES[type(obj)]
        if not self.extenders and (
            resource == "VolumeAttachment" or (resource == "CSIDriver" and old is None)
        ):
            return  # (with extenders every event is registered, as upstream)
        self.queue.move_all_to_active_or_backoff(ClusterEvent(resource, action), old, obj)

    def on_volume_object_delete(self, obj: VolumeObject) -> None:
        """One of those objects was deleted; only a VolumeAttachment's deletion is an
        event (NodeVolumeLimits': an attachment freed on a node), or any with extenders."""
        self.volumes.delete(obj)
        if isinstance(obj, VolumeAttachmentInfo) or self.extenders:
            event = ClusterEvent(_VOLUME_RESOURCES[type(obj)], "Delete")
            self.queue.move_all_to_active_or_backoff(event, obj, None)

    def on_dra_object_set(self, obj: DraObject) -> None:
        """A ResourceClaim, ResourceSlice, DeviceClass or DeviceTaintRule was added or
        changed: DynamicResources reads it, and the pods its hints wait for are moved. (A
        DeviceTaintRule is seen as the update of the slices it patches, as upstream's.)"""
        old = self.dra.set(obj)
        if isinstance(obj, DeviceTaintRuleInfo):
            self.queue.move_all_to_active_or_backoff(ClusterEvent("ResourceSlice", "Update"))
            return
        self.queue.move_all_to_active_or_backoff(
            ClusterEvent(_dra_resource(obj), "Add" if old is None else "Update"), old, obj
        )

    def _claim_given_up(self, claim: ResourceClaimInfo) -> None:
        """A claim's in-flight allocation was given up (its pod's binding failed): an
        update from "allocated" to the claim as it is, so the hints see its devices freed
        and the claim free to allocate again."""
        held = replace(claim, allocation=Allocation((), None, {}))
        event = ClusterEvent("ResourceClaim", "Update")
        self.queue.move_all_to_active_or_backoff(event, held, claim)

    def on_dra_object_delete(self, obj: DraObject) -> None:
        """One of those objects was deleted (a claim's deletion is an event, and a
        DeviceTaintRule's, as the update of the slices it patched)."""
        self.dra.delete(obj)
        if isinstance(obj, DeviceTaintRuleInfo):
            self.queue.move_all_to_active_or_backoff(ClusterEvent("ResourceSlice", "Update"))
        elif isinstance(obj, ResourceClaimInfo) or self.extenders:
            event = ClusterEvent(_dra_resource(obj), "Delete")
            self.queue.move_all_to_active_or_backoff(event, obj, None)

    # ================================================================== periodic work
    def flush(self, *, left_over: bool = True) -> None:
        """The backoff flush, Permit timeouts (the binder also expires its own pod's on
        time) and, with ``left_over``, the unschedulable-timeout flush. The live loop calls
        this every second and asks for the left-over flush every 30 seconds, as upstream's
        flushers run. Assumed pods never expire: only the watch confirms them."""
        self.queue.flush_backoff_completed()
        if left_over:
            self.queue.flush_unschedulable_left_over()
        self.expire_waiting()

    # ================================================================== one cycle
    def schedule_one(self) -> CycleResult | None:
        """One scheduling cycle (None: no pod to schedule). With extenders configured,
        ``schedule_one_async`` instead: their calls are awaited inside the cycle."""
        if self.extenders:
            raise TypeError("extenders are configured: await schedule_one_async()")
        begun = self._begin_cycle()
        if not isinstance(begun, tuple):
            return begun
        qpi, state = begun
        started = time.perf_counter()
        try:
            try:
                placed = self._schedule_pod(state, qpi.pod)
            except PluginRaised as e:
                raise _CycleError(str(e)) from e
            finally:
                self._algorithm_done(started)
        except (_FitError, _NoNodesError, _CycleError) as e:
            return self._cycle_failed(qpi, state, e)
        return self._assume_and_bind(qpi, state, *placed)

    async def schedule_one_async(self) -> CycleResult | None:
        """``schedule_one`` awaiting the extenders' filter and prioritize calls. While it
        waits, the cache may change (informer deltas, binding outcomes): the cycle reads
        only its snapshot, taken at its start, as upstream's does."""
        begun = self._begin_cycle()
        if not isinstance(begun, tuple):
            return begun
        qpi, state = begun
        started = time.perf_counter()
        try:
            try:
                placed = await self._schedule_pod_async(state, qpi.pod)
            except PluginRaised as e:
                raise _CycleError(str(e)) from e
            finally:
                self._algorithm_done(started)
        except (_FitError, _NoNodesError, _CycleError) as e:
            preempting = self._extenders_preempt_on and self.framework.post_filter_plugins
            if isinstance(e, _FitError) and preempting:
                return await self._fit_error_async(qpi, state, e.diagnosis)
            return self._cycle_failed(qpi, state, e)
        if qpi.deleted_in_flight or self.cache.get_pod(qpi.pod.key) is not None:
            # Deleted, or bound (by another scheduler, say), while the extenders answered:
            # nothing to bind (upstream would send the Binding and have it refused).
            self.queue.done(qpi.pod.key)
            return CycleResult(qpi.pod, "skipped")
        return self._assume_and_bind(qpi, state, *placed)

    async def _fit_error_async(
        self, qpi: QueuedPodInfo, state: CycleState, diagnosis: Diagnosis
    ) -> CycleResult:
        """The failure path with PostFilter awaited (extenders that take part in
        preemption); the rest as ``_cycle_failed``."""
        t0 = time.perf_counter()
        try:
            result, st = await self.framework.run_post_filter_async(
                state, qpi.pod, diagnosis.node_to_status
            )
            post = (result, st, time.perf_counter() - t0)
            return self._handle_fit_error(qpi, state, diagnosis, post)
        except PluginRaised as raised:
            qpi.errored = True
            self._record_failure(qpi, REASON_SCHEDULER_ERROR, str(raised), "")
            return CycleResult(qpi.pod, "error", message=str(raised), nominated_node="")

    def _begin_cycle(self) -> tuple[QueuedPodInfo, CycleState] | CycleResult | None:
        """Pop the next pod and set the cycle up: (its queue entry, the cycle's state), a
        skipped result, or None when no pod is ready."""
        qpi = self.queue.pop()
        if qpi is None:
            return None
        self.cycle += 1
        pod = qpi.pod
        if pod.terminating:
            # As upstream's skipPodSchedule: a pod whose deletion has begun (it waits for a
            # finalizer) stays queued, with its nomination, until popped; then it is told
            # so and dropped from the queue until its next update.
            self.queue.done(pod.key)
            self.recorder.skipped_deleting(pod)
            return CycleResult(pod, "skipped")
        if self.cache.get_pod(pod.key) is not None:
            self.queue.done(pod.key)
            return CycleResult(pod, "skipped")
        self.use_profile_of(pod)
        self.cache.update_snapshot(self.snapshot)
        state = CycleState()
        obs = self.observer
        if obs is not None and self._sampler.randrange(100) < PLUGIN_METRICS_SAMPLE_PERCENT:
            state.plugin_timer = obs.plugin_execution
        return qpi, state

    def _algorithm_done(self, started: float) -> None:
        if self.observer is not None:
            self.observer.algorithm_duration(time.perf_counter() - started)

    def _cycle_failed(
        self, qpi: QueuedPodInfo, state: CycleState, e: _FitError | _NoNodesError | _CycleError
    ) -> CycleResult:
        pod = qpi.pod
        if isinstance(e, _FitError):
            try:
                return self._handle_fit_error(qpi, state, e.diagnosis)
            except PluginRaised as raised:  # a Score hook of a preemption plugin, say
                qpi.errored = True
                self._record_failure(qpi, REASON_SCHEDULER_ERROR, str(raised), "")
                return CycleResult(pod, "error", message=str(raised), nominated_node="")
        if isinstance(e, _NoNodesError):
            # No rejecting plugin: the queue retries it after backoff (or on any event).
            self._record_failure(qpi, REASON_UNSCHEDULABLE, ERR_NO_NODES, "")
            return CycleResult(pod, "unschedulable", message=ERR_NO_NODES, nominated_node="")
        # As upstream, an error clears the nomination (clearNominatedNode).
        qpi.errored = True
        self._record_failure(qpi, REASON_SCHEDULER_ERROR, str(e), "")
        return CycleResult(pod, "error", message=str(e), nominated_node="")

    def _assume_and_bind(
        self, qpi: QueuedPodInfo, state: CycleState, host: str, evaluated: int, feasible: int
    ) -> CycleResult:
        pod = qpi.pod
        # Assume: the pod counts on the host from now on; its nomination is spent.
        assumed = self.cache.assume_pod(pod, host)
        self.queue.nominator.delete_nominated_pod_if_exists(pod.key)
        self.evaluator.forget_preemptor(pod.key)
        fw = self.framework
        if fw.reserve_plugins:
            failed = self._reserve(qpi, state, assumed, host)
            if failed is not None:
                return failed
        waiting: WaitingPod | None = None
        if fw.permit_plugins:
            failed, waiting = self._permit(qpi, state, assumed, host)
            if failed is not None:
                return failed
        if waiting is None:
            self.queue.done(pod.key)
        plugged = (
            fw.reserve_plugins or fw.permit_plugins or fw.pre_bind_plugins or fw.post_bind_plugins
        )
        self._binding[pod.key] = _Binding(qpi, host, fw, state if plugged else None, waiting)
        binders = [e for e in self.extenders if e.is_binder() and e.is_interested(pod)]
        if waiting is not None or fw.bind_plugins or binders or fw.pre_bind_wanted(state):
            self.binder.bind(
                assumed,
                host,
                BindingCycle(
                    pre_flight=lambda: self._timed(
                        "PreBindPreFlight", fw.run_pre_bind_pre_flight, state, assumed, host
                    ),
                    pre_bind=lambda: self._timed("PreBind", fw.run_pre_bind, state, assumed, host),
                    pre_bind_async=(
                        (lambda: self._timed_pre_bind_async(fw, state, assumed, host))
                        if fw.async_pre_bind
                        else None
                    ),
                    enter_pre_bind=(
                        (lambda cancel: self._enter_pre_bind(fw, assumed.uid, cancel))
                        if fw.async_pre_bind
                        else None
                    ),
                    leave_pre_bind=lambda: fw.pods_in_pre_bind.pop(assumed.uid, None),
                    waiting=waiting,
                    permit_timeout=self._permit_timeout(waiting),
                    expire=self.expire_waiting,
                    bind=(
                        (lambda: self._bind_step(fw, binders, state, assumed, host))
                        if fw.bind_plugins or binders
                        else None
                    ),
                ),
            )
        else:
            self.binder.bind(assumed, host)
        self._activate(state)
        return CycleResult(
            pod,
            "assumed",
            node=host,
            evaluated_nodes=evaluated,
            feasible_nodes=feasible,
            attempts=qpi.attempts,
        )

    def _reserve(
        self, qpi: QueuedPodInfo, state: CycleState, assumed: PodInfo, host: str
    ) -> CycleResult | None:
        """Upstream's Reserve step of assumeAndReserve: None when every Reserve plugin
        agreed, else the failed attempt (``_fail_after_assume``)."""
        st = self._timed("Reserve", self.framework.run_reserve, state, assumed, host)
        if st.is_success():
            return None
        if not st.is_rejected():
            message = f"running Reserve plugin {st.plugin}: {st.message()}"
            st = Status(Code.ERROR, (message,), st.plugin)
        return self._fail_after_assume(qpi, state, assumed, host, st)

    def _fail_after_assume(
        self, qpi: QueuedPodInfo, state: CycleState, assumed: PodInfo, host: str, st: Status
    ) -> CycleResult:
        """A Reserve or Permit plugin turned the assumed pod down: Unreserve runs on every
        Reserve plugin, the assumed pod is forgotten, and the attempt fails: a rejection as
        "unschedulable" on that node (the plugin's hints decide when it comes back; no
        PostFilter), anything else as an error. Either way the nomination is cleared, as
        upstream's clearNominatedNode."""
        fw = self.framework
        if fw.reserve_plugins:
            self._timed("Unreserve", fw.run_unreserve, state, assumed, host)
        self.cache.forget_pod(assumed.key)
        pod = qpi.pod
        if st.is_rejected():
            qpi.unschedulable_plugins = {st.plugin} if st.plugin else set()
            statuses = {host: st}
            message = fit_error_message(1, statuses)
            self._record_failure(qpi, REASON_UNSCHEDULABLE, message, "")
            return CycleResult(
                pod,
                "unschedulable",
                message=message,
                nominated_node="",
                node_statuses=statuses,
            )
        qpi.errored = True
        message = st.message()
        self._record_failure(qpi, REASON_SCHEDULER_ERROR, message, "")
        return CycleResult(pod, "error", message=message, nominated_node="")

    def _activate(self, state: CycleState) -> None:
        """Upstream's PodsToActivate: the pods plugins named go to activeQ now."""
        if state.pods_to_activate:
            keys = list(state.pods_to_activate)
            state.pods_to_activate.clear()
            self.queue.activate(keys)

    def _permit(
        self, qpi: QueuedPodInfo, state: CycleState, assumed: PodInfo, host: str
    ) -> tuple[CycleResult | None, WaitingPod | None]:
        """Upstream's Permit step of prepareForBindingCycle: (None, None) when every Permit
        plugin allowed the pod; (None, the waiting pod) when some asked to wait (the pod
        stays in flight, its queue events kept, until the wait ends: ``_waited``). A
        rejection or an error fails the attempt as in ``_reserve``, after Unreserve."""
        fw = self.framework
        st, timeouts = self._timed("Permit", fw.run_permit, state, assumed, host)
        if st.code is Code.WAIT:
            wp = fw.waiting_pods.add(assumed, timeouts, self.clock.now())
            wp.on_done(lambda outcome: self._waited(qpi, wp, outcome))
            return None, wp
        if st.is_success():
            return None, None
        return self._fail_after_assume(qpi, state, assumed, host, st), None

    def _waited(self, qpi: QueuedPodInfo, wp: WaitingPod, outcome: Status) -> None:
        """The wait at Permit ended. Allowed: the pod's cycle is over for the queue (upstream
        calls Done after WaitOnPermit). Stopped: the binder reports it (``on_bind_result``)
        and the pod goes back to the queue from flight, its in-flight events considered."""
        if self.observer is not None:
            self.observer.permit_wait(CODE_NAMES[outcome.code], self.clock.now() - wp.since)
        if outcome.is_success():
            self.queue.done(qpi.pod.key)

    @staticmethod
    def _enter_pre_bind(fw: Framework, uid: str, cancel: Callable[[str], object]) -> PodInPreBind:
        entry = PodInPreBind(cancel)
        fw.pods_in_pre_bind[uid] = entry
        return entry

    async def _timed_pre_bind_async(
        self, fw: Framework, state: CycleState, pod: PodInfo, node: str
    ) -> Status:
        """``run_pre_bind_async``, observed as PreBind (its wall time, awaits included, as
        upstream's duration covers a plugin that waits)."""
        t0 = time.perf_counter()
        st = await fw.run_pre_bind_async(state, pod, node)
        if self.observer is not None:
            self.observer.extension_point(
                "PreBind", CODE_NAMES[st.code], time.perf_counter() - t0, pod.scheduler_name
            )
        return st

    async def _bind_step(
        self,
        fw: Framework,
        binders: Sequence[Extender],
        state: CycleState,
        pod: PodInfo,
        node: str,
    ) -> Status:
        """Upstream's bind: an interested binder extender binds (an ignorable one that
        fails passes the turn on), else the Bind plugins, else DefaultBinder (SKIP)."""
        for ext in binders:
            try:
                await ext.bind(pod, node)
            except ExtenderError as e:
                if ext.ignorable:
                    _extender_log("extender_skipped", extender=ext.name, pod=pod.key, error=str(e))
                    continue
                return Status.error(str(e))
            return Status()
        if fw.bind_plugins:
            return await self._timed_bind_async(fw, state, pod, node)
        return Status(Code.SKIP)

    async def _timed_bind_async(
        self, fw: Framework, state: CycleState, pod: PodInfo, node: str
    ) -> Status:
        """``run_bind_async``, observed as Bind (the Bind plugins before DefaultBinder; the
        Binding call itself is the binder's)."""
        t0 = time.perf_counter()
        st = await fw.run_bind_async(state, pod, node)
        if self.observer is not None:
            self.observer.extension_point(
                "Bind", CODE_NAMES[st.code], time.perf_counter() - t0, pod.scheduler_name
            )
        return st

    def _permit_timeout(self, wp: WaitingPod | None) -> Callable[[], float | None]:
        def remaining() -> float | None:
            deadline = wp.next_deadline() if wp is not None else None
            return None if deadline is None else max(0.0, deadline - self.clock.now())

        return remaining

    def expire_waiting(self) -> int:
        """Reject the pods whose wait at Permit timed out (by the core's clock)."""
        return self.waiting_pods.expire(self.clock.now())

    def _timed(
        self,
        point: str,
        run: Callable[[CycleState, PodInfo, str], _R],
        state: CycleState,
        pod: PodInfo,
        node: str,
    ) -> _R:
        """``run(state, pod, node)``, observed as upstream's extension point duration, with
        the returned status's code name (Permit returns it first in a pair; "Success" for a
        point that returns nothing)."""
        if self.observer is None:
            return run(state, pod, node)
        t0 = time.perf_counter()
        result = run(state, pod, node)
        st = result[0] if isinstance(result, tuple) else result
        code = CODE_NAMES[st.code] if isinstance(st, Status) else "Success"
        self.observer.extension_point(point, code, time.perf_counter() - t0, pod.scheduler_name)
        return result

    def _run_pre_enqueue(self, pod: PodInfo, gating: str = "") -> Status | None:
        """The PreEnqueue checks, timed as upstream's runPreEnqueuePluginsForPod (extension
        point ``PreEnqueue``, with the status of the plugin that keeps the pod out)."""
        obs = self.observer
        fw = self.framework_for(pod)
        if obs is None:
            return fw.run_pre_enqueue(pod, gating)
        t0 = time.perf_counter()
        st = fw.run_pre_enqueue(pod, gating)
        code = "Success" if st is None else CODE_NAMES[st.code]
        obs.extension_point("PreEnqueue", code, time.perf_counter() - t0, pod.scheduler_name)
        return st

    def _schedule_pod(self, state: CycleState, pod: PodInfo) -> tuple[str, int, int]:
        n = self.snapshot.num_nodes()
        if n == 0:
            raise _NoNodesError(ERR_NO_NODES)
        batch = self.batches.get(pod.scheduler_name) if self.batches else None
        signature = self.framework.sign_pod(pod) if batch is not None else None
        feasible, rows, diagnosis = self._find_feasible(state, pod, batch, signature)
        if not feasible:
            raise _FitError(diagnosis)
        evaluated = len(diagnosis.node_to_status) + len(feasible)
        if len(feasible) == 1:
            if batch is not None:
                batch.store(signature, feasible[0].name, None, self.cycle, others=0)
            return feasible[0].name, evaluated, 1
        self._pre_score(state, pod, feasible, rows)
        kept = _Scores() if signature is not None else None
        host = self._score_and_select(state, pod, feasible, rows, None, kept)
        if batch is not None:
            candidates = None if kept is None else self._candidates(feasible, rows, host, kept)
            batch.store(signature, host, candidates, self.cycle, others=len(feasible) - 1)
        return host, evaluated, len(feasible)

    def _candidates(
        self, feasible: Sequence[NodeInfo], rows: IntpArray | None, host: str, kept: _Scores
    ) -> Candidates | None:
        """The feasible nodes other than ``host`` as OpportunisticBatching keeps them, from
        the scores ``_score_and_select`` left in ``kept`` (None if a score is not an int
        that fits int64: nothing is kept then). O(1) but for the node-by-node path: the
        names, tie keys and order are made when the next pod asks for a hint."""
        totals = kept.totals
        columns: dict[str, Int64Array] = {}
        for name, col in kept.raw.items():
            if col is None:
                return None
            columns[name] = col
        if totals is None:
            return None
        snapshot = self.snapshot
        if rows is None:  # the node-by-node path: every feasible node is listed
            rows = np.array([snapshot.position(ni.name) for ni in feasible], dtype=np.intp)
            chosen = next(i for i, ni in enumerate(feasible) if ni.name == host)
        else:
            chosen = int(np.flatnonzero(rows == snapshot.position(host))[0])
        return Candidates.kept(
            feasible, rows, chosen, columns, totals, snapshot.layout(), self._tie_keys
        )

    def _tie_keys(self, n: int) -> Int64Array:
        """Upstream's Randomizer: a random key per kept node, to break ties among them. Its
        generator is seeded from the core's rng on first use, so that a seeded core draws
        the same keys every run."""
        if self._tie_draw is None:
            self._tie_draw = np.random.default_rng(self.rng.getrandbits(64))
        keys: Int64Array = self._tie_draw.integers(1, 2**62, size=n, dtype=np.int64)
        return keys

    async def _schedule_pod_async(self, state: CycleState, pod: PodInfo) -> tuple[str, int, int]:
        """``_schedule_pod`` with the extenders (upstream's schedulePod with
        findNodesThatPassExtenders and prioritizeNodes' extender part)."""
        if self.snapshot.num_nodes() == 0:
            raise _NoNodesError(ERR_NO_NODES)
        interested = [e for e in self.extenders if e.is_interested(pod)]
        pre_result, diagnosis = self._pre_filter(state, pod)
        feasible: Sequence[NodeInfo] = []
        rows: IntpArray | None = None
        if pre_result is not False:
            nominated = self._nominated_fit(state, pod)
            if nominated is not None:
                feasible = await self._extenders_filter(pod, interested, [nominated], diagnosis)
            if not feasible:
                found, rows, diagnosis = self._filter_all(state, pod, pre_result, diagnosis)
                feasible = await self._extenders_filter(pod, interested, found, diagnosis)
                if len(feasible) != len(found):
                    # Extenders rejected nodes: any cluster event may change their mind.
                    diagnosis.unschedulable_plugins.add(EXTENDER_NAME)
                    if rows is not None:
                        kept = {ni.name for ni in feasible}
                        rows = rows[[i for i, ni in enumerate(found) if ni.name in kept]]
        if not feasible:
            raise _FitError(diagnosis)
        evaluated = len(diagnosis.node_to_status) + len(feasible)
        if len(feasible) == 1:
            return feasible[0].name, evaluated, 1
        self._pre_score(state, pod, feasible, rows)
        extra = await self._extenders_prioritize(pod, interested, feasible)
        return self._score_and_select(state, pod, feasible, rows, extra), evaluated, len(feasible)

    def _pre_score(
        self, state: CycleState, pod: PodInfo, feasible: Sequence[NodeInfo], rows: IntpArray | None
    ) -> None:
        obs = self.observer
        t0 = time.perf_counter()
        state.feasible_rows = rows
        st = self.framework.run_pre_score(state, pod, feasible, self.snapshot)
        if obs is not None:
            status = "Success" if st.is_success() else "Error"
            obs.extension_point("PreScore", status, time.perf_counter() - t0, pod.scheduler_name)
        if not st.is_success():
            raise _CycleError(f"running PreScore plugin {st.plugin}: {st.message()}")

    def _score_and_select(
        self,
        state: CycleState,
        pod: PodInfo,
        feasible: Sequence[NodeInfo],
        rows: IntpArray | None,
        extra: Mapping[str, int] | None,
        kept: _Scores | None = None,
    ) -> str:
        """Score (the bulk totals when the plugins give them), add the extenders' scores
        (``extra``, by node name), and draw the host among the best. ``kept``, when
        given, gets each plugin's raw scores and the totals, in ``feasible``'s order, for
        OpportunisticBatching."""
        fw = self.framework
        t0 = time.perf_counter()
        host = ""
        if rows is not None:
            raw: dict[str, Int64Array | None] | None = None if kept is None else {}
            totals = fw.run_score_batch(state, pod, self.snapshot, rows, raw)
            if totals is not None:
                if extra:
                    totals = totals + np.array(
                        [extra.get(ni.name, 0) for ni in feasible], dtype=np.int64
                    )
                host = self._select_host_batch(feasible, totals)
                if kept is not None and raw is not None:
                    kept.raw, kept.totals = raw, totals
        if not host:
            raw_lists: dict[str, list[int]] | None = None if kept is None else {}
            scores = fw.run_score(state, pod, feasible, raw_lists)
            if extra:
                scores = [NodeScore(ns.name, ns.score + extra.get(ns.name, 0)) for ns in scores]
            host = self._select_host(scores)
            if kept is not None and raw_lists is not None:
                kept.raw = {k: int64_column(v) for k, v in raw_lists.items()}
                kept.totals = int64_column([ns.score for ns in scores])
        if self.observer is not None:
            self.observer.extension_point(
                "Score", "Success", time.perf_counter() - t0, pod.scheduler_name
            )
        return host

    async def _extenders_filter(
        self,
        pod: PodInfo,
        extenders: Sequence[Extender],
        nodes: Sequence[NodeInfo],
        diagnosis: Diagnosis,
    ) -> Sequence[NodeInfo]:
        """Upstream's findNodesThatPassExtenders: each filtering extender in turn narrows
        ``nodes``; the nodes it turns down get its message as their status."""
        for ext in extenders:
            if not nodes:
                break
            if not ext.is_filter():
                continue
            try:
                result = await ext.filter(pod, nodes)
            except ExtenderError as e:
                if ext.ignorable:
                    _extender_log("extender_skipped", extender=ext.name, pod=pod.key, error=str(e))
                    continue
                raise _CycleError(str(e)) from e
            by_name = {ni.name: ni for ni in nodes}
            unknown = [n for n in result.nodes if n not in by_name]
            if unknown:
                message = (
                    f"extender {ext.name!r} claims a filtered node {unknown[0]!r} which is "
                    "not found in the input node list"
                )
                if ext.ignorable:
                    _extender_log("extender_skipped", extender=ext.name, pod=pod.key, error=message)
                    continue
                raise _CycleError(message)
            statuses = diagnosis.node_to_status
            for name, message in result.failed_and_unresolvable.items():
                statuses[name] = Status.unresolvable(message)
            for name, message in result.failed.items():
                if name not in result.failed_and_unresolvable:
                    statuses[name] = Status.unschedulable(message)
            kept = set(result.nodes)
            nodes = [ni for ni in nodes if ni.name in kept]
        return nodes

    async def _extenders_preempt(
        self, pod: PodInfo, candidates: list[Candidate]
    ) -> list[Candidate] | Status:
        """Upstream's callExtenders: each interested extender that supports preemption
        narrows the candidates (and may change their victims), in turn."""
        current = {c.node_name: c for c in candidates}
        for ext in self.extenders:
            if not ext.supports_preemption() or not ext.is_interested(pod):
                continue
            try:
                chosen = self._extender_candidates(
                    ext, await ext.process_preemption(pod, list(current.values()))
                )
            except ExtenderError as e:
                if ext.ignorable:
                    _extender_log("extender_skipped", extender=ext.name, pod=pod.key, error=str(e))
                    continue
                return Status.error(str(e))
            for node, cand in list(chosen.items()):
                if not cand.victims:
                    if ext.ignorable:
                        del chosen[node]
                        continue
                    return Status.error(f'expected at least one victim pod on node "{node}"')
            current = chosen
            if not current:
                break
        return list(current.values())

    def _extender_candidates(
        self, ext: Extender, answer: Mapping[str, tuple[Sequence[str], int]]
    ) -> dict[str, Candidate]:
        """An extender's preemption answer as candidates, its victims found by UID on
        their nodes in this cycle's snapshot (upstream's convertToVictims)."""
        out: dict[str, Candidate] = {}
        for node, (uids, pdb_violations) in answer.items():
            ni = self.snapshot.get(node)
            if ni is None or ni.node is None:
                raise ExtenderError(f"extender {ext.name}: node {node!r} is not in the cluster")
            by_uid = {p.uid: p for p in ni.pods.values()}
            victims = []
            for uid in uids:
                victim = by_uid.get(uid)
                if victim is None:
                    raise ExtenderError(
                        f"extender: {ext.name} claims to preempt pod (UID: {uid}) on node: "
                        f"{node}, but the pod is not found on that node"
                    )
                victims.append(victim)
            out[node] = Candidate(node, most_important_first(victims), pdb_violations)
        return out

    async def _extenders_prioritize(
        self, pod: PodInfo, extenders: Sequence[Extender], nodes: Sequence[NodeInfo]
    ) -> dict[str, int]:
        """Upstream's prioritizeNodes, extender part: every prioritizing extender at once;
        each score scaled to the plugins' range and weighted, summed by node name. An
        extender that fails gives no score."""
        calls = [e for e in extenders if e.is_prioritizer()]
        if not calls:
            return {}
        answers = await asyncio.gather(
            *(e.prioritize(pod, nodes) for e in calls), return_exceptions=True
        )
        feasible = {ni.name for ni in nodes}
        extra: dict[str, int] = {}
        scale = MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY
        for ext, answer in zip(calls, answers, strict=True):
            if isinstance(answer, BaseException):
                if not isinstance(answer, ExtenderError):
                    raise answer
                _extender_log(
                    "extender_prioritize_failed", "debug", extender=ext.name, error=str(answer)
                )
                continue
            for name, score in answer:
                if name in feasible:
                    extra[name] = extra.get(name, 0) + score * ext.weight * scale
        return extra

    def _select_host(self, scores: list[NodeScore]) -> str:
        """The node of the best score ("" when there is none, or none scored 0 or more),
        one drawn uniformly at random among equals: a single ``randrange`` over them
        (the reservoir sampling this replaced drew the same distribution once per tie)."""
        if not scores:
            return ""
        top = max(ns.score for ns in scores)
        if top < 0:
            return ""
        best = [ns.name for ns in scores if ns.score == top]
        return best[0] if len(best) == 1 else best[self.rng.randrange(len(best))]

    def _select_host_batch(self, nodes: Sequence[NodeInfo], totals: Int64Array) -> str:
        """``_select_host`` over a column of totals: the same host, the same one draw."""
        if not len(totals):
            return ""
        top = int(totals.max())
        if top < 0:
            return ""
        best = np.flatnonzero(totals == top)
        k = len(best)
        return nodes[int(best[0] if k == 1 else best[self.rng.randrange(k)])].name

    def _find_feasible(
        self,
        state: CycleState,
        pod: PodInfo,
        batch: OpportunisticBatch | None = None,
        signature: object = None,
    ) -> tuple[Sequence[NodeInfo], IntpArray | None, Diagnosis]:
        """PreFilter, the nominated node (or else ``batch``'s hint for a pod with
        ``signature``), then Filter from ``next_start_node_index`` until enough feasible
        nodes are found. Also returns the feasible nodes' rows in the snapshot when the
        bulk path found them (None otherwise)."""
        pre_result, diagnosis = self._pre_filter(state, pod)
        if pre_result is False:
            return [], None, diagnosis
        nominated_name = self.queue.nominator.nominated_node(pod.key) or pod.nominated_node_name
        if batch is not None:
            hint = batch.node_hint(
                state, pod, signature, self.cycle, self.snapshot, nominated=bool(nominated_name)
            )
            nominated_name = nominated_name or hint
        nominated = self._nominated_fit(state, pod, nominated_name)
        if nominated is not None:
            return [nominated], None, diagnosis
        return self._filter_all(state, pod, pre_result, diagnosis)

    def _pre_filter(
        self, state: CycleState, pod: PodInfo
    ) -> tuple[PreFilterResult | Literal[False] | None, Diagnosis]:
        """PreFilter: (its result, the diagnosis so far); the result is False when it
        rejected the pod (every node then has its status)."""
        fw = self.framework
        snap = self.snapshot
        nodes = snap.node_info_list
        diagnosis = Diagnosis(num_all_nodes=len(nodes))
        obs = self.observer
        t0 = time.perf_counter()
        pre_result, st = fw.run_pre_filter(state, pod, snap)
        if obs is not None:  # upstream's RunPreFilterPlugins
            obs.extension_point(
                "PreFilter", CODE_NAMES[st.code], time.perf_counter() - t0, pod.scheduler_name
            )
        if not st.is_success():
            if st.code == Code.ERROR:
                raise _CycleError(f"running PreFilter plugin {st.plugin}: {st.message()}")
            diagnosis.pre_filter_msg = st.message()
            for ni in nodes:
                diagnosis.node_to_status[ni.name] = st
            if st.plugin:
                diagnosis.unschedulable_plugins.add(st.plugin)
            return False, diagnosis
        return pre_result, diagnosis

    def _nominated_fit(
        self, state: CycleState, pod: PodInfo, nominated: str | None = None
    ) -> NodeInfo | None:
        """The pod's nominated node (or ``nominated``: the node named instead, "" for
        none) when it still passes the Filter plugins (taken then without looking
        further), else None."""
        fw = self.framework
        obs = self.observer
        if nominated is None:
            nominated = self.queue.nominator.nominated_node(pod.key) or pod.nominated_node_name
        if nominated:
            nominated_info = self.snapshot.get(nominated)
            if nominated_info is not None and nominated_info.node is not None:
                t0 = time.perf_counter()
                st = fw.run_filter_with_nominated_pods(state, pod, nominated_info)
                fw.count_filter_run(state, st)
                if obs is not None:  # upstream's evaluateNominatedNode filters it on its own
                    code = "Error" if st.code == Code.ERROR else "Success"
                    obs.extension_point(
                        "Filter", code, time.perf_counter() - t0, pod.scheduler_name
                    )
                if st.is_success():
                    return nominated_info
                if st.code == Code.ERROR:
                    raise _CycleError(f"running Filter plugin {st.plugin}: {st.message()}")
        return None

    def _filter_all(
        self,
        state: CycleState,
        pod: PodInfo,
        pre_result: PreFilterResult | None,
        diagnosis: Diagnosis,
    ) -> tuple[Sequence[NodeInfo], IntpArray | None, Diagnosis]:
        """Filter over the nodes PreFilter left, from ``next_start_node_index``."""
        fw = self.framework
        snap = self.snapshot
        nodes = snap.node_info_list
        obs = self.observer
        restricted = pre_result is not None and pre_result.node_names is not None
        if pre_result is not None and pre_result.node_names is not None:
            # Upstream's schedule_one findNodesThatFitPod: nodes outside the PreFilter result
            # get one status naming the plugins that restricted the set, which also become
            # the pod's unschedulable plugins (their queueing hints decide its requeue).
            allowed = pre_result.node_names
            plugins = sorted(pre_result.plugins)
            absent = Status.unresolvable(f"node(s) didn't satisfy plugin(s) [{' '.join(plugins)}]")
            for ni in nodes:
                if ni.name not in allowed:
                    diagnosis.node_to_status[ni.name] = absent
            if len(allowed) < len(nodes):
                diagnosis.unschedulable_plugins.update(plugins)
            nodes = [ni for ni in nodes if ni.name in allowed]
        total = len(nodes)
        if total == 0:
            return [], None, diagnosis
        want = num_feasible_nodes_to_find(self.profile_config.percentage_of_nodes_to_score, total)
        if not fw.score_plugins and not self._extenders_look:
            # Nothing would tell feasible nodes apart (no Score plugin, no extender that
            # filters or scores): take the first (upstream).
            want = 1
        start = self.next_start_node_index % total
        # Upstream's findNodesThatPassFilters times the Filter point over all the nodes it
        # checks: "Success" whether or not one fits, "Error" when a plugin failed.
        t0 = time.perf_counter()
        code = "Error"
        try:
            plan = fw.filter_plan(state, pod, snap) if self.vectorized else None
            rows: IntpArray | None = None
            feasible: Sequence[NodeInfo]
            if plan is None:
                feasible, processed = self._filter_nodes(state, pod, nodes, start, want, diagnosis)
            else:
                sure, residual = plan
                if restricted:
                    positions = [snap.position(ni.name) for ni in nodes]
                    base = np.array(positions, dtype=np.intp)
                else:
                    base = np.arange(total, dtype=np.intp)
                feasible, rows, processed = self._filter_nodes_in_bulk(
                    state, pod, nodes, base, sure, residual, start, want, diagnosis
                )
            code = "Success"
        finally:
            if obs is not None:
                obs.extension_point("Filter", code, time.perf_counter() - t0, pod.scheduler_name)
        fw.count_filter(state, len(feasible), diagnosis.rejected_by)
        self.next_start_node_index = (start + processed) % total
        return feasible, rows, diagnosis

    def _filter_nodes(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: list[NodeInfo],
        start: int,
        want: int,
        diagnosis: Diagnosis,
    ) -> tuple[list[NodeInfo], int]:
        """Node by node from ``start`` (wrapping) until ``want`` fit: (feasible, processed)."""
        total = len(nodes)
        feasible: list[NodeInfo] = []
        processed = 0
        run = self.framework.run_filter_with_nominated_pods
        for i in range(total):
            ni = nodes[(start + i) % total]
            processed += 1
            st = run(state, pod, ni)
            if st.code == Code.SUCCESS:
                feasible.append(ni)
                if len(feasible) >= want:
                    break
            else:
                _record_rejection(diagnosis, ni.name, st)
        return feasible, processed

    def _filter_nodes_in_bulk(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: list[NodeInfo],
        base: IntpArray,
        sure: BoolArray,
        residual: list[FilterPlugin],
        start: int,
        want: int,
        diagnosis: Diagnosis,
    ) -> tuple[Sequence[NodeInfo], IntpArray, int]:
        """``_filter_nodes`` with the framework's ``filter_plan``: (feasible, their snapshot
        rows, processed). ``base[j]`` is the snapshot row of ``nodes[j]``.

        In visiting order (position p = the p-th node from ``start``), a node is accepted
        without a call when it surely passes, has no nominated pods and no residual plugin
        is left. Every other node is called, in order, with the residual plugins (sure, no
        nominated pods) or the full two-pass filter, until the accepted ones before the next
        call already make ``want``. Runtime: O(nodes) numpy plus O(called nodes) calls."""
        fw = self.framework
        snap = self.snapshot
        total = len(nodes)
        order = np.arange(start, start + total, dtype=np.intp)
        order %= total
        rows = base[order]
        direct = sure[rows]
        nominated = self.queue.nominator.nodes_with_nominated_pods()
        if nominated:
            has_nominated = np.zeros(len(sure), dtype=np.bool_)
            for name in nominated:
                r = snap.position(name)
                if r is not None:
                    has_nominated[r] = True
            direct &= ~has_nominated[rows]
        accepted = direct if not residual else np.zeros(total, dtype=np.bool_)
        to_call = np.flatnonzero(~accepted)
        if not len(to_call) or int(to_call[0]) >= want:
            # The first ``want`` positions are all accepted (or every node is): no call, and
            # what the loop below would conclude, without its two passes over every node.
            processed = min(want, total)
            return _FeasibleNodes(nodes, order[:processed].tolist()), rows[:processed], processed
        ok = accepted.copy()
        accepted_upto = np.cumsum(accepted)  # accepted in positions 0..p
        called_ok = 0
        limit = total  # positions before this are decided
        run = fw.run_filter_with_nominated_pods
        for p in to_call.tolist():
            found = int(accepted_upto[p]) + called_ok  # feasible before position p
            if found >= want:
                limit = p
                break
            ni = nodes[int(order[p])]
            if direct[p]:
                st = fw.run_filter_plugins(state, pod, ni, residual)
            else:
                st = run(state, pod, ni)
            if st.code == Code.SUCCESS:
                ok[p] = True
                called_ok += 1
                if found + 1 >= want:
                    limit = p + 1
                    break
            else:
                _record_rejection(diagnosis, ni.name, st)
        ok_upto = np.cumsum(ok[:limit])
        processed = limit
        if limit and int(ok_upto[-1]) >= want:
            processed = int(np.searchsorted(ok_upto, want)) + 1
        positions = np.flatnonzero(ok[:processed])
        feasible = _FeasibleNodes(nodes, order[positions].tolist())
        return feasible, rows[positions], processed

    # ================================================================== failures
    def _handle_fit_error(
        self,
        qpi: QueuedPodInfo,
        state: CycleState,
        diagnosis: Diagnosis,
        post_filtered: tuple[PostFilterResult | None, Status, float] | None = None,
    ) -> CycleResult:
        """``post_filtered``: the PostFilter run already made (result, status, seconds),
        by ``schedule_one_async`` when extenders take part in preemption."""
        pod = qpi.pod
        fw = self.framework
        # No PostFilter: clear any nomination. PostFilter without a result: keep it (e.g. the
        # pod waits for its victims to go). A result: its node, "" to clear (upstream).
        nominating: str | None = ""
        outcome = "unschedulable"
        victims: tuple[PodInfo, ...] = ()
        if fw.post_filter_plugins:
            if post_filtered is None:
                t0 = time.perf_counter()
                result, st = fw.run_post_filter(state, pod, diagnosis.node_to_status)
                seconds = time.perf_counter() - t0
            else:
                result, st, seconds = post_filtered
            if self.observer is not None:
                status = "Success" if st.is_success() else "Unschedulable"
                self.observer.extension_point("PostFilter", status, seconds, pod.scheduler_name)
            # Upstream records the PostFilter message whatever its code, success included.
            diagnosis.post_filter_msg = st.message()
            nominating = None if result is None else result.nominated_node_name
            last = self.evaluator.last_candidate
            if nominating and last is not None and last.node_name == nominating:
                outcome = "preempting"
                victims = last.victims
        qpi.unschedulable_plugins = set(diagnosis.unschedulable_plugins)
        message = fit_error_message(
            diagnosis.num_all_nodes,
            diagnosis.node_to_status,
            pre_filter_msg=diagnosis.pre_filter_msg,
            post_filter_msg=diagnosis.post_filter_msg,
        )
        self._record_failure(qpi, REASON_UNSCHEDULABLE, message, nominating)
        return CycleResult(
            pod,
            outcome,
            node=nominating or "",
            message=message,
            victims=victims,
            nominated_node=nominating,
            node_statuses=diagnosis.node_to_status,
        )

    def _record_failure(
        self, qpi: QueuedPodInfo, reason: str, message: str, nominating: str | None
    ) -> None:
        pod = qpi.pod
        nom = self.queue.nominator
        if nominating is not None:
            if nominating:
                nom.add_nominated_pod(pod_with(pod, nominated_node_name=nominating), nominating)
            else:
                nom.delete_nominated_pod_if_exists(pod.key)
        self.queue.add_unschedulable_if_not_present(qpi)
        self.recorder.failed(pod, reason=reason, message=message, nominated_node=nominating)

    # ================================================================== binding results
    def on_bind_result(self, key: str, outcome: str, message: str = "", plugin: str = "") -> None:
        """The binder's report. ``plugin``: the Permit plugin that rejected the pod, with
        ``BindOutcome.PERMIT``."""
        b = self._binding.pop(key, None)
        if b is None:
            return
        pod = b.qpi.pod
        if outcome == BindOutcome.OK:
            self.cache.finish_binding(key)
            if self.observer is not None:
                self.observer.pod_scheduled(
                    b.qpi.attempts,
                    max(0.0, self.clock.now() - b.qpi.enqueued_at),
                    b.qpi.was_flushed,
                )
            self.recorder.scheduled(pod, b.node)
            if b.state is not None and b.framework.post_bind_plugins:
                bound = pod_with(pod, node_name=b.node)
                self._timed("PostBind", b.framework.run_post_bind, b.state, bound, b.node)
            if b.state is not None:
                self._activate(b.state)
            return
        self._unwind_binding(b, outcome, message, plugin)

    def _unwind_binding(self, b: _Binding, outcome: str, message: str, plugin: str = "") -> None:
        """The one path for failures after assume: Unreserve, forget, then requeue unless
        pointless."""
        key = b.qpi.pod.key
        if b.state is not None and b.framework.reserve_plugins:
            assumed = pod_with(b.qpi.pod, node_name=b.node)
            self._timed("Unreserve", b.framework.run_unreserve, b.state, assumed, b.node)
        self.cache.forget_pod(key)
        freed = pod_with(b.qpi.pod, node_name=b.node)
        if outcome == BindOutcome.PERMIT:
            # Upstream: unschedulable for the rejecting Permit plugin, as a FitError on the
            # node; the pod leaves flight first (its in-flight events decide between
            # backoff and the unschedulable pods), then the room it held is announced to
            # the other pods only, or that event would send it straight to backoff.
            st = Status(Code.UNSCHEDULABLE, (message,), plugin)
            b.qpi.unschedulable_plugins = {plugin} if plugin else set()
            self._record_failure(
                b.qpi, REASON_UNSCHEDULABLE, fit_error_message(1, {b.node: st}), ""
            )
            self.queue.move_all_to_active_or_backoff(
                ClusterEvent("AssignedPod", "Delete"), freed, None, skip=key
            )
            return
        self.queue.move_all_to_active_or_backoff(ClusterEvent("AssignedPod", "Delete"), freed, None)
        if outcome in (BindOutcome.GONE, BindOutcome.CONFLICT):
            # Deleted, or already bound: the watch delivers the truth; never retry blindly.
            return
        # Back off and retry (upstream: a failure after Permit never makes the pod
        # unschedulable for a plugin's hints, whatever its reason).
        b.qpi.errored = True
        if outcome == BindOutcome.REJECTED:
            self._record_failure(b.qpi, REASON_UNSCHEDULABLE, message, "")
        elif outcome == BindOutcome.PRE_BIND:
            self._record_failure(b.qpi, REASON_SCHEDULER_ERROR, message, "")
        else:
            self._record_failure(b.qpi, REASON_SCHEDULER_ERROR, f"binding rejected: {message}", "")

    def in_binding(self) -> int:
        return len(self._binding)
