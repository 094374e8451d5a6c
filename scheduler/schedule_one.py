"""SchedulerCore: cluster events in, one scheduling cycle at a time, decisions out.

This is the synchronous heart shared by the live scheduler (scheduler.py, fed by kopf
through operator.py) and by ``simulate`` (fed from YAML). It owns the cache, the queue, the
snapshot and the framework, and talks to the world only through three ports:

- ``Binder.bind(pod, node)``: start binding; the outcome comes back later through
  ``on_bind_result`` (the live binder is asynchronous; simulate's is immediate).
- ``Recorder``: ``scheduled`` / ``failed`` (status patch + event in the live scheduler).
- ``PreemptionActions`` (framework/preemption.py): carry out a preemption decision.

One cycle (``schedule_one``): pop -> update snapshot -> PreFilter -> Filter (the nominated
node first, then nodes from a rotating offset until enough feasible ones are found) ->
PreScore/Score -> select host (ties at random) -> assume -> bind. When no node fits:
PostFilter (preemption), then one failure path records the reason, updates the nomination
and returns the pod to the queue. Every failure after ``assume_pod`` unwinds through
``_unwind_binding`` (forget, requeue). Nothing awaits inside a cycle, so no locks.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

from scheduler.backend.cache import Cache, Snapshot
from scheduler.backend.queue import PriorityQueue, QueuedPodInfo
from scheduler.clock import Clock
from scheduler.config import SchedulerConfig
from scheduler.framework.interface import (
    ClusterEvent,
    Code,
    CycleState,
    Diagnosis,
    NodeScore,
    Status,
)
from scheduler.framework.plugins.registry import build_framework
from scheduler.framework.preemption import PreemptionActions, fit_error_message
from scheduler.types import (
    NodeInfo,
    NodeRecord,
    PDBInfo,
    PodInfo,
    PriorityClassInfo,
)

__all__ = [
    "BindOutcome",
    "Binder",
    "CycleResult",
    "Recorder",
    "SchedulerCore",
    "num_feasible_nodes_to_find",
]

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
ERR_NO_NODES = "no nodes available to schedule pods"

# Reasons of the PodScheduled=False condition, as upstream.
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_SCHEDULER_ERROR = "SchedulerError"


class Binder(Protocol):
    def bind(self, pod: PodInfo, node_name: str) -> None: ...


class Recorder(Protocol):
    def scheduled(self, pod: PodInfo, node_name: str) -> None: ...

    def failed(
        self, pod: PodInfo, *, reason: str, message: str, nominated_node: str | None
    ) -> None:
        """``nominated_node``: None leaves the pod's nomination as it is; "" clears it."""
        ...


class BindOutcome:
    OK = "ok"
    CONFLICT = "conflict"  # 409: already bound (by us earlier, or by someone else)
    GONE = "gone"  # 404: the pod was deleted
    ERROR = "error"  # anything else after retries


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


class _FitError(Exception):
    def __init__(self, diagnosis: Diagnosis) -> None:
        super().__init__("fit error")
        self.diagnosis = diagnosis


class _CycleError(Exception):
    pass


class _NoNodesError(Exception):
    """Upstream's ErrNoNodesAvailable: a rejection (reason Unschedulable), not an error."""


def num_feasible_nodes_to_find(percentage: int, num_all_nodes: int) -> int:
    """Upstream's adaptive percentageOfNodesToScore."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    if percentage == 0:
        percentage = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    return max(num_all_nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


@dataclass
class _Binding:
    qpi: QueuedPodInfo
    node: str


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

    def __post_init__(self) -> None:
        self.cache = Cache()
        self.snapshot = Snapshot()
        self.pdbs: dict[str, PDBInfo] = {}
        self.priority_classes: dict[str, PriorityClassInfo] = {}
        # The queue owns the nominator; the framework reads it for the two-pass filter.
        self.queue = PriorityQueue(
            self.clock,
            initial_backoff=self.config.pod_initial_backoff_seconds,
            max_backoff=self.config.pod_max_backoff_seconds,
            max_unschedulable_duration=self.config.pod_max_in_unschedulable_seconds,
            on_ready=self.on_ready,
            on_incoming=self.on_incoming,
        )
        self.framework, self.evaluator = build_framework(
            self.config,
            snapshot=self.snapshot,
            nominator=self.queue.nominator,
            pdbs=lambda: list(self.pdbs.values()),
            actions=self.actions,
            rng=self.rng,
            namespace_labels=self.namespace_labels,
        )
        self.queue.hints = dict(self.framework.hints)
        self.next_start_node_index = 0
        self._binding: dict[str, _Binding] = {}

    # ================================================================== cluster events
    def responsible_for(self, pod: PodInfo) -> bool:
        return pod.scheduler_name == self.config.scheduler_name

    def on_pod_add(self, pod: PodInfo) -> None:
        if pod.node_name:
            if pod.terminal:
                self._remove_assigned(pod.key)
                return
            self.queue.delete(pod.key)
            self.cache.add_pod(pod)
            self.queue.move_all_to_active_or_backoff(ClusterEvent("AssignedPod", "Add"), None, pod)
        elif self.responsible_for(pod) and not pod.terminating and not pod.terminal:
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
        if not self.responsible_for(new):
            return
        if new.terminating or new.terminal:
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
        self.queue.delete(pod.key)
        # A pod deleted while its binding is in flight must not come back to the queue when
        # that binding fails (upstream finds it gone from the informer and drops it).
        self._binding.pop(pod.key, None)
        if pod.node_name or self.cache.get_pod(pod.key) is not None:
            self._remove_assigned(pod.key)

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
        self.cache.remove_node(name)

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

    # ================================================================== periodic work
    def flush(self) -> None:
        """Backoff and unschedulable-timeout flushes plus assumed-pod expiry (the live loop
        calls this every second, as upstream's flushers)."""
        self.queue.flush_backoff_completed()
        self.queue.flush_unschedulable_left_over()
        for pod in self.cache.cleanup_assumed_pods(self.clock.now()):
            b = self._binding.pop(pod.key, None)
            if b is not None:
                self.queue.add_unschedulable_if_not_present(b.qpi)

    # ================================================================== one cycle
    def schedule_one(self) -> CycleResult | None:
        qpi = self.queue.pop()
        if qpi is None:
            return None
        pod = qpi.pod
        if pod.terminating or self.cache.get_pod(pod.key) is not None:
            self.queue.done(pod.key)
            return CycleResult(pod, "skipped")
        self.cache.update_snapshot(self.snapshot)
        state = CycleState()
        try:
            host, evaluated, feasible = self._schedule_pod(state, pod)
        except _FitError as fe:
            return self._handle_fit_error(qpi, state, fe.diagnosis)
        except _NoNodesError:
            # No rejecting plugin: the queue retries it after backoff (or on any event).
            self._record_failure(qpi, REASON_UNSCHEDULABLE, ERR_NO_NODES, "")
            return CycleResult(pod, "unschedulable", message=ERR_NO_NODES, nominated_node="")
        except _CycleError as e:
            # As upstream, an error clears the nomination (clearNominatedNode).
            qpi.errored = True
            self._record_failure(qpi, REASON_SCHEDULER_ERROR, str(e), "")
            return CycleResult(pod, "error", message=str(e), nominated_node="")
        # Assume: the pod counts on the host from now on; its nomination is spent.
        assumed = self.cache.assume_pod(pod, host)
        self.queue.nominator.delete_nominated_pod_if_exists(pod.key)
        self.queue.done(pod.key)
        self._binding[pod.key] = _Binding(qpi, host)
        self.binder.bind(assumed, host)
        return CycleResult(
            pod,
            "assumed",
            node=host,
            evaluated_nodes=evaluated,
            feasible_nodes=feasible,
            attempts=qpi.attempts,
        )

    def _schedule_pod(self, state: CycleState, pod: PodInfo) -> tuple[str, int, int]:
        n = self.snapshot.num_nodes()
        if n == 0:
            raise _NoNodesError(ERR_NO_NODES)
        feasible, diagnosis = self._find_nodes_that_fit(state, pod)
        if not feasible:
            raise _FitError(diagnosis)
        evaluated = len(diagnosis.node_to_status) + len(feasible)
        if len(feasible) == 1:
            return feasible[0].name, evaluated, 1
        fw = self.framework
        st = fw.run_pre_score(state, pod, feasible, self.snapshot)
        if not st.is_success():
            raise _CycleError(f"running PreScore plugin {st.plugin}: {st.message()}")
        scores = fw.run_score(state, pod, feasible)
        return self._select_host(scores), evaluated, len(feasible)

    def _select_host(self, scores: list[NodeScore]) -> str:
        best = ""
        best_score = -1
        ties = 0
        for ns in scores:
            name, score = ns.name, ns.score
            if score > best_score:
                best, best_score, ties = name, score, 1
            elif score == best_score:
                ties += 1
                if self.rng.randrange(ties) == 0:  # reservoir sampling: uniform among ties
                    best = name
        return best

    def _find_nodes_that_fit(
        self, state: CycleState, pod: PodInfo
    ) -> tuple[list[NodeInfo], Diagnosis]:
        fw = self.framework
        snap = self.snapshot
        nodes = snap.node_info_list
        diagnosis = Diagnosis(num_all_nodes=len(nodes))
        pre_result, st = fw.run_pre_filter(state, pod, snap)
        if not st.is_success():
            if st.code == Code.ERROR:
                raise _CycleError(f"running PreFilter plugin {st.plugin}: {st.message()}")
            diagnosis.pre_filter_msg = st.message()
            for ni in nodes:
                diagnosis.node_to_status[ni.name] = st
            if st.plugin:
                diagnosis.unschedulable_plugins.add(st.plugin)
            return [], diagnosis
        # The nominated node first: if it still fits, take it without looking further.
        nominated = self.queue.nominator.nominated_node(pod.key) or pod.nominated_node_name
        if nominated:
            nominated_info = snap.get(nominated)
            if nominated_info is not None and nominated_info.node is not None:
                st = fw.run_filter_with_nominated_pods(state, pod, nominated_info)
                if st.is_success():
                    return [nominated_info], diagnosis
                if st.code == Code.ERROR:
                    raise _CycleError(f"running Filter plugin {st.plugin}: {st.message()}")
        if pre_result is not None and pre_result.node_names is not None:
            allowed = pre_result.node_names
            for ni in nodes:
                if ni.name not in allowed:
                    diagnosis.node_to_status[ni.name] = Status.unresolvable(
                        "node(s) didn't satisfy plugin(s) [PreFilter]"
                    )
            nodes = [ni for ni in nodes if ni.name in allowed]
        total = len(nodes)
        if total == 0:
            return [], diagnosis
        want = num_feasible_nodes_to_find(self.config.percentage_of_nodes_to_score, total)
        if not fw.score_plugins:
            want = 1  # nothing would tell feasible nodes apart: take the first (upstream)
        feasible: list[NodeInfo] = []
        start = self.next_start_node_index % total
        processed = 0
        run = fw.run_filter_with_nominated_pods
        for i in range(total):
            ni = nodes[(start + i) % total]
            processed += 1
            st = run(state, pod, ni)
            if st.code == Code.SUCCESS:
                feasible.append(ni)
                if len(feasible) >= want:
                    break
            elif st.code == Code.ERROR:
                raise _CycleError(f"running Filter plugin {st.plugin}: {st.message()}")
            else:
                diagnosis.node_to_status[ni.name] = st
                if st.plugin:
                    diagnosis.unschedulable_plugins.add(st.plugin)
        self.next_start_node_index = (start + processed) % total
        return feasible, diagnosis

    # ================================================================== failures
    def _handle_fit_error(
        self, qpi: QueuedPodInfo, state: CycleState, diagnosis: Diagnosis
    ) -> CycleResult:
        pod = qpi.pod
        fw = self.framework
        # No PostFilter: clear any nomination. PostFilter without a result: keep it (e.g. the
        # pod waits for its victims to go). A result: its node, "" to clear (upstream).
        nominating: str | None = ""
        outcome = "unschedulable"
        victims: tuple[PodInfo, ...] = ()
        if fw.post_filter_plugins:
            result, st = fw.run_post_filter(state, pod, diagnosis.node_to_status)
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
        )

    def _record_failure(
        self, qpi: QueuedPodInfo, reason: str, message: str, nominating: str | None
    ) -> None:
        pod = qpi.pod
        nom = self.queue.nominator
        if nominating is not None:
            if nominating:
                nom.add_nominated_pod(replace(pod, nominated_node_name=nominating), nominating)
            else:
                nom.delete_nominated_pod_if_exists(pod.key)
        self.queue.add_unschedulable_if_not_present(qpi)
        self.recorder.failed(pod, reason=reason, message=message, nominated_node=nominating)

    # ================================================================== binding results
    def on_bind_result(self, key: str, outcome: str, message: str = "") -> None:
        b = self._binding.pop(key, None)
        if b is None:
            return
        pod = b.qpi.pod
        if outcome == BindOutcome.OK:
            self.cache.finish_binding(key, self.clock.now())
            self.recorder.scheduled(pod, b.node)
            return
        self._unwind_binding(b, outcome, message)

    def _unwind_binding(self, b: _Binding, outcome: str, message: str) -> None:
        """The one path for failures after assume: forget, then requeue unless pointless."""
        key = b.qpi.pod.key
        self.cache.forget_pod(key)
        self.queue.move_all_to_active_or_backoff(
            ClusterEvent("AssignedPod", "Delete"), replace(b.qpi.pod, node_name=b.node), None
        )
        if outcome in (BindOutcome.GONE, BindOutcome.CONFLICT):
            # Deleted, or already bound: the watch delivers the truth; never retry blindly.
            return
        b.qpi.errored = True
        self._record_failure(b.qpi, REASON_SCHEDULER_ERROR, f"binding rejected: {message}", "")

    def in_binding(self) -> int:
        return len(self._binding)
