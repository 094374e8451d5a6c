"""``py-scheduler simulate``: run the live scheduler's own core over a cluster dump, offline.

Same SchedulerCore, same queue order, same plugins, same preemption: only the ports differ.
A binding succeeds at once; a preemption deletes its victims at once (graceful termination
treated as complete). The clock stands still at the dump's latest timestamp, so backoff
never expires by itself; instead, whenever activeQ is empty, the loop sends back to activeQ
every waiting pod that the cluster changed for since its last attempt:

- a pod in backoffQ (a queueing hint moved it there after a bind or a deletion);
- any unschedulable pod if a pod was deleted after its last attempt (the contract: any
  deletion gives every unschedulable pod another try, hints or not).

The run ends when activeQ is empty and no waiting pod qualifies. It always ends: every
retry needs a bind or a deletion since the pod's last attempt, a pod binds at most once,
and a preemption deletes at least one pod.

Data flow: YAML files -> ``load_documents`` (Documents that know their file, document
number and List item) -> ``simulate`` (typed records, one SchedulerCore, the loop above) ->
``SimulationResult`` -> JSON or a text table. Bad input raises ``InputError`` whose message
names the file, the document (numbered from 1, counting every ``---`` document, empty ones
too) and the field.

Decisions come in processing order. A pending pod naming an unknown PriorityClass is
rejected as it is loaded (the live scheduler rejects it when its watch delivers the pod,
before any cycle), so its "error" decision precedes the cycles' decisions.

PDBs: ``status.disruptionsAllowed`` when the input has it, else derived from the spec and
the matching bound pods as the disruption controller does; the run keeps them current as
the controller would: a derived one is recomputed after every bind and deletion, a given
one loses one allowed disruption per deleted healthy pod it selects.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from scheduler.backend.queue import BACKOFF_Q, GATED_Q, UNSCHEDULABLE_Q
from scheduler.clock import FakeClock
from scheduler.config import (
    ConfigError,
    SchedulerConfig,
    extenders_note,
    load_config,
    with_feature_gates,
)
from scheduler.decode import Document, InputError, ObjectDecoder, load_documents
from scheduler.draapi import DraObject
from scheduler.framework.interface import Status
from scheduler.framework.preemption import Candidate
from scheduler.schedule_one import (
    BindingCycle,
    BindOutcome,
    CycleResult,
    SchedulerCore,
    binding_step_outcome,
)
from scheduler.types import (
    NodeRecord,
    ParseError,
    PDBInfo,
    PodInfo,
    PriorityClassInfo,
    SelectorObject,
    ServiceInfo,
    UnknownPriorityClassError,
    VolumeObject,
    pod_with,
)

__all__ = [
    "Document",
    "InputError",
    "SimulationResult",
    "derive_pdb_status",
    "load_documents",
    "main",
    "simulate",
]

# The selectors of system default spreading (upstream's DefaultSelector) come with them.
SELECTOR_KINDS = ("Service", "ReplicationController", "ReplicaSet", "StatefulSet")
# VolumeBinding's.
VOLUME_KINDS = (
    "PersistentVolumeClaim",
    "PersistentVolume",
    "StorageClass",
    "CSINode",
    "CSIDriver",
    "VolumeAttachment",
    "CSIStorageCapacity",
)
# DynamicResources'.
DRA_KINDS = ("ResourceClaim", "ResourceSlice", "DeviceClass", "DeviceTaintRule")
KINDS = (
    "Node",
    "Pod",
    "PodDisruptionBudget",
    "PriorityClass",
    "Namespace",
    *SELECTOR_KINDS,
    *VOLUME_KINDS,
    *DRA_KINDS,
)
DUMP_COMMAND = (
    "kubectl get namespaces,nodes,pods,pdb,priorityclasses,services,replicationcontrollers,"
    "replicasets,statefulsets,pvc,pv,storageclasses,csinodes,csidrivers,volumeattachments,"
    "csistoragecapacities -A -o json"
)
T = TypeVar("T")


# ------------------------------------------------------------------------- PDB status


def _scaled(value: int | str, total: int) -> int:
    """Upstream's ``GetScaledValueFromIntOrPercent`` rounding up, in exact integers."""
    if isinstance(value, int):
        return value
    pct = int(value[:-1])
    return -(-pct * total // 100)


def _controller_selects(pdb: PDBInfo, pod: PodInfo) -> bool:
    """The disruption controller's selection: same namespace and the selector matches; no
    selector selects nothing, an empty one selects every pod of the namespace (policy/v1).
    (Preemption is stricter, see ``framework.preemption.pdb_matches``.)"""
    return (
        pdb.selector is not None
        and pod.namespace == pdb.namespace
        and pdb.selector.matches(pod.labels)
    )


def derive_pdb_status(pdb: PDBInfo, bound: Sequence[PodInfo]) -> PDBInfo:
    """``disruptionsAllowed`` as the disruption controller computes it from the spec.

    Healthy pods: the matching bound pods not being deleted and not listed in
    ``status.disruptedPods``. maxUnavailable: desired = expected - maxUnavailable (scaled
    up); minAvailable: an integer as it is, a percentage of the expected count scaled up;
    neither: nothing may be disrupted. Allowed = healthy - desired, at least 0, and 0 when
    no pod matches. One approximation: for percentages and maxUnavailable the controller
    takes the expected count from the owning controllers' replicas; a dump has no
    controllers, so the matching bound pods stand in for it."""
    matching = [p for p in bound if _controller_selects(pdb, p)]
    expected = len(matching)
    healthy = sum(1 for p in matching if not p.terminating and p.name not in pdb.disrupted_pods)
    if pdb.max_unavailable is not None:
        desired = max(0, expected - _scaled(pdb.max_unavailable, expected))
    elif pdb.min_available is not None:
        desired = _scaled(pdb.min_available, expected)
    else:
        expected = desired = 0
    allowed = healthy - desired if expected > 0 else 0
    return replace(pdb, disruptions_allowed=max(0, allowed), has_status=True)


# ------------------------------------------------------------------------- ports


def _await(cycle: BindingCycle) -> Status | None:
    """PreBind with an async plugin: awaited on a loop of its own (imported here: most runs
    never need asyncio)."""
    import asyncio

    return asyncio.run(cycle.finish_async())


@dataclass
class _SimPorts:
    """Binder, Recorder and PreemptionActions of the simulation: they only remember what
    the cycle asked for; the loop applies it after the cycle, as the API server would."""

    binds: list[tuple[PodInfo, str, BindingCycle | None]] = field(default_factory=list)
    preemptions: list[tuple[PodInfo, Candidate, list[PodInfo]]] = field(default_factory=list)

    def bind(self, pod: PodInfo, node_name: str, cycle: BindingCycle | None = None) -> None:
        self.binds.append((pod, node_name, cycle))

    def scheduled(self, pod: PodInfo, node_name: str) -> None:
        return None

    def failed(
        self, pod: PodInfo, *, reason: str, message: str, nominated_node: str | None
    ) -> None:
        return None

    def skipped_deleting(self, pod: PodInfo) -> None:
        return None

    def prepare_candidate(
        self, preemptor: PodInfo, candidate: Candidate, lower_nominated: Sequence[PodInfo]
    ) -> Status:
        self.preemptions.append((preemptor, candidate, list(lower_nominated)))
        return Status()


@dataclass
class SimulationResult:
    decisions: list[dict[str, Any]]
    placements: dict[str, str | None]
    evicted: list[str]
    notes: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"decisions": self.decisions, "placements": self.placements, "evicted": self.evicted}


@dataclass
class _Input:
    """The typed records of the documents, in document order."""

    classes: dict[str, PriorityClassInfo] = field(default_factory=dict)
    nodes: dict[str, NodeRecord] = field(default_factory=dict)
    bound: dict[str, PodInfo] = field(default_factory=dict)
    pending: dict[str, PodInfo] = field(default_factory=dict)
    pdbs: dict[str, PDBInfo] = field(default_factory=dict)
    selectors: list[tuple[str, ServiceInfo | SelectorObject]] = field(default_factory=list)
    volumes: list[VolumeObject] = field(default_factory=list)
    dra: list[DraObject] = field(default_factory=list)
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)  # name -> labels
    placements: dict[str, str | None] = field(default_factory=dict)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seen: dict[tuple[str, str], Document] = field(default_factory=dict)


def _parse(documents: Sequence[Document], config: SchedulerConfig) -> _Input:
    inp = _Input()
    decoder = ObjectDecoder()
    # Every object is checked for duplicates; PriorityClasses go first (pods need them).
    for d in documents:
        kind = d.kind
        if kind not in KINDS:
            continue
        first = inp.seen.setdefault((kind, d.name), d)
        if first is not d and first.where != d.where:  # (the same file twice is no duplicate)
            raise InputError(f"{d.where}: {kind} {d.name}: duplicate of {first.where}")
        if kind == "PriorityClass":
            pc = _guarded(d, decoder.priority_class)
            inp.classes[pc.name] = pc
    for d in documents:
        kind = d.kind
        if kind == "Node":
            node = _guarded(d, decoder.node)
            inp.nodes[node.name] = node
        elif kind == "Pod":
            _parse_pod(d, config, inp, decoder)
        elif kind == "PodDisruptionBudget":
            pdb = _guarded(d, decoder.pdb)
            inp.pdbs[pdb.key] = pdb
        elif kind == "Namespace":
            name, labels = _guarded(d, decoder.namespace)
            inp.namespaces[name] = labels
        elif kind == "Service":
            inp.selectors.append((kind, _guarded(d, decoder.service)))
        elif kind in SELECTOR_KINDS:
            inp.selectors.append((kind, _guarded(d, decoder.selector_object(kind))))
        elif kind == "PersistentVolumeClaim":
            inp.volumes.append(_guarded(d, decoder.pvc))
        elif kind == "PersistentVolume":
            inp.volumes.append(_guarded(d, decoder.pv))
        elif kind == "StorageClass":
            inp.volumes.append(_guarded(d, decoder.storage_class))
        elif kind == "CSINode":
            inp.volumes.append(_guarded(d, decoder.csi_node))
        elif kind == "CSIDriver":
            inp.volumes.append(_guarded(d, decoder.csi_driver))
        elif kind == "VolumeAttachment":
            inp.volumes.append(_guarded(d, decoder.volume_attachment))
        elif kind == "CSIStorageCapacity":
            inp.volumes.append(_guarded(d, decoder.csi_storage_capacity))
        elif kind == "ResourceClaim":
            inp.dra.append(_guarded(d, decoder.resource_claim))
        elif kind == "ResourceSlice":
            inp.dra.append(_guarded(d, decoder.resource_slice))
        elif kind == "DeviceClass":
            inp.dra.append(_guarded(d, decoder.device_class))
        elif kind == "DeviceTaintRule":
            inp.dra.append(_guarded(d, decoder.device_taint_rule))
        elif kind != "PriorityClass":
            inp.notes.append(f"{d.where}: kind {kind!r} ignored")
    if not inp.selectors:
        owned = sum(
            1
            for p in (*inp.bound.values(), *inp.pending.values())
            if p.owner_kind_uid and p.owner_kind_uid[0] in SELECTOR_KINDS
        )
        if owned:
            inp.notes.append(
                f"{owned} pod(s) are owned by ReplicaSets, ReplicationControllers or "
                "StatefulSets, but the input has no Services, ReplicationControllers, "
                "ReplicaSets or StatefulSets: system default topology spreading selects pods "
                "through those objects (as kube-scheduler), so it applies to none here; "
                f"dump them too: {DUMP_COMMAND}"
            )
    for pod in inp.bound.values():
        if pod.node_name not in inp.nodes:
            inp.notes.append(
                f"pod {pod.key} runs on node {pod.node_name}, which is not in the input"
            )
    return inp


def _parse_pod(d: Document, config: SchedulerConfig, inp: _Input, decoder: ObjectDecoder) -> None:
    spec = d.obj.get("spec") or {}
    ours = (spec.get("schedulerName") or "default-scheduler") in config.scheduler_names
    if not spec.get("nodeName") and not ours:
        return  # another scheduler's pending pod: not ours to place, and takes no room
    try:
        pod = _guarded(d, decoder.pod)
    except UnknownPriorityClassError as e:
        # As the live scheduler: a pending pod of ours is rejected (an "error" decision);
        # any other pod is left out of the cache.
        if spec.get("nodeName"):
            inp.notes.append(f"{d.where}: {e}; pod ignored")
        else:
            message = f"no PriorityClass with name {e.class_name} was found"
            inp.decisions.append({"pod": e.pod, "outcome": "error", "message": message})
            inp.placements[e.pod] = None
        return
    if pod.node_name:
        if not pod.terminal:
            inp.bound[pod.key] = pod
    elif not pod.terminal and not pod.terminating:
        inp.pending[pod.key] = pod
        inp.placements[pod.key] = None


def _guarded(d: Document, parse: Callable[[Mapping[str, Any]], T]) -> T:
    """Run a decoder on a document; its errors become InputErrors that say where."""
    try:
        return parse(d.obj)
    except ParseError as e:
        raise InputError(f"{d.where}: {e}") from e


def _start_time(inp: _Input) -> float:
    """The simulation's "now": just after the latest timestamp of the dump."""
    stamps = [p.creation_time for p in (*inp.bound.values(), *inp.pending.values())]
    stamps += [p.start_time for p in inp.bound.values()]
    return max(stamps, default=0.0) + 1.0


class _Simulation:
    def __init__(self, inp: _Input, config: SchedulerConfig, seed: int) -> None:
        self.inp = inp
        self.clock = FakeClock(_start_time(inp))
        self.ports = _SimPorts()
        self.core = SchedulerCore(
            config,
            self.clock,
            binder=self.ports,
            recorder=self.ports,
            actions=self.ports,
            rng=random.Random(seed),
            namespace_labels=lambda ns: inp.namespaces.get(ns, {}),
        )
        # Time stands still here: the retry policy of the module docstring decides when a
        # pod of backoffQ goes again (it is this clock's PopFromBackoffQ), not the queue.
        self.core.queue.pop_from_backoff = False
        self.bound = dict(inp.bound)
        self.decisions = list(inp.decisions)
        self.placements = dict(inp.placements)
        self.evicted: list[str] = []
        self.generation = 0  # bumps on every bind and every deletion
        self.deleted_at = 0  # the generation of the last deletion
        self.last_attempt: dict[str, int] = {}
        # Binding cycles waiting at Permit, in the order their pods were assumed.
        self.held: list[tuple[PodInfo, str, BindingCycle | None]] = []
        self.expired_at = -1  # the generation at the last Permit timeout
        self.notes: list[str] = extenders_note(config)

    def load(self) -> None:
        core = self.core
        for pc in self.inp.classes.values():
            core.on_priority_class_set(pc)
        for node in self.inp.nodes.values():
            core.on_node_add(node)
        for kind, rec in self.inp.selectors:
            core.on_selector_object_set(kind, rec)
        for vol in self.inp.volumes:
            core.on_volume_object_set(vol)
        for obj in self.inp.dra:
            core.on_dra_object_set(obj)
        for pod in self.inp.bound.values():
            core.on_pod_add(pod)
        self._sync_pdbs(deleted=())
        for pod in self.inp.pending.values():
            # Equal priorities go by creation time, then by document order (the queue's seq).
            core.queue.add(pod, timestamp=pod.creation_time)

    def run(self) -> None:
        pods = len(self.inp.pending)
        # The bound of the module docstring, with room to spare; reaching it is a bug.
        limit = (pods + 1) * (4 * pods + 2 * len(self.bound) + 4)
        for _ in range(limit):
            result = self.core.schedule_one()
            if result is None:
                if not self._retry_waiting() and not self._expire_held():
                    self._report_gated()
                    return
                continue
            key = result.pod.key
            self.last_attempt[key] = self.generation
            if result.outcome == "skipped":
                continue
            self.decisions.append(_decision(result))
            self._apply_binds()
            self._apply_preemptions()
        raise RuntimeError(f"simulation did not settle after {limit} cycles")

    def _report_gated(self) -> None:
        """One "gated" decision per pod a PreEnqueue plugin still keeps out of the queue at
        the end (they never ran a cycle), naming the plugin and its message."""
        queue = self.core.queue
        for pod in queue.pending_pods()[GATED_Q]:
            st = queue.gated_by(pod)
            if st is not None:
                self.decisions.append(
                    {
                        "pod": pod.key,
                        "outcome": "gated",
                        "plugin": st.plugin,
                        "message": st.message(),
                    }
                )

    def _retry_waiting(self) -> bool:
        waiting = self.core.queue.pending_pods()
        keys = [
            p.key for p in waiting[BACKOFF_Q] if self.last_attempt.get(p.key, -1) < self.generation
        ]
        keys += [
            p.key
            for p in waiting[UNSCHEDULABLE_Q]
            if self.last_attempt.get(p.key, -1) < self.deleted_at
        ]
        if not keys:
            return False
        self.core.queue.activate(keys)
        return True

    def _apply_binds(self) -> None:
        """The binding cycles, as the live binder runs them (no nominatedNodeName to write
        here): PreBindPreFlight, the wait at Permit, PreBind, the Binding. A pod held at
        Permit stays in ``held`` until a later cycle's plugin allows or rejects it, or its
        timeout passes (``_expire_held``); pods held earlier go first."""
        core = self.core
        binds, self.ports.binds = self.ports.binds, []
        changed = False
        for pod, node, cycle in binds:
            if cycle is not None:
                failed, _ = cycle.begin()
                if failed is not None:
                    self._binding_failed(pod, failed, binding_step_outcome(failed))
                    continue
            self.held.append((pod, node, cycle))
        still: list[tuple[PodInfo, str, BindingCycle | None]] = []
        for pod, node, cycle in self.held:
            if cycle is not None and cycle.waiting is not None:
                outcome = cycle.waiting.outcome
                if outcome is None:
                    still.append((pod, node, cycle))
                    continue
                failed = cycle.permitted(outcome)
                if failed is not None:
                    at_permit = binding_step_outcome(failed, at_permit=True)
                    self._binding_failed(pod, failed, at_permit)
                    continue
            if cycle is not None:
                failed = cycle.finish() if cycle.pre_bind_async is None else _await(cycle)
                if failed is not None:
                    self._binding_failed(pod, failed, binding_step_outcome(failed))
                    continue
            core.on_bind_result(pod.key, BindOutcome.OK)
            running = pod_with(pod, node_name=node, phase="Running", start_time=self.clock.now())
            core.on_pod_update(None, running)
            self.bound[pod.key] = running
            self.placements[pod.key] = node
            self.generation += 1
            changed = True
        self.held = still
        if changed:
            self._sync_pdbs(deleted=())

    def _binding_failed(self, pod: PodInfo, failed: Status, outcome: str) -> None:
        """No Binding: the core unreserves and requeues the pod; the cycle's "scheduled"
        decision did not hold, so it is replaced by what stopped it."""
        self.core.on_bind_result(pod.key, outcome, failed.message(), failed.plugin)
        kind = "unschedulable" if failed.is_rejected() else "error"
        for i in range(len(self.decisions) - 1, -1, -1):
            if self.decisions[i]["pod"] == pod.key:
                self.decisions[i] = {"pod": pod.key, "outcome": kind, "message": failed.message()}
                break

    def _expire_held(self) -> bool:
        """Nothing else to do while pods wait at Permit: let the virtual clock run to the
        earliest timeout and reject what timed out. False when nobody waits, and when no
        pod bound since the previous timeout: the room a timeout frees would go round the
        same pods, each waiting and timing out in turn (a group that cannot complete), so
        the run stops there, with a note."""
        waiting = self.core.waiting_pods
        deadline = waiting.next_deadline()
        if deadline is None:
            return False
        progress = self.generation != self.expired_at
        self.expired_at = self.generation
        self.clock.set(max(deadline, self.clock.now()))
        self.core.expire_waiting()
        self._apply_binds()
        if progress:
            return True
        self.notes.append(
            "pods kept timing out at Permit with no pod bound in between: the simulation "
            "stopped after the second such timeout"
        )
        return False

    def _apply_preemptions(self) -> None:
        core = self.core
        preemptions, self.ports.preemptions = self.ports.preemptions, []
        deleted: list[PodInfo] = []
        for _preemptor, cand, lower in preemptions:
            # As the live scheduler's prepare_candidate: lower-priority pods nominated to
            # the node lose their nomination and look again at once.
            for p in lower:
                core.queue.nominator.delete_nominated_pod_if_exists(p.key)
            core.queue.activate(p.key for p in lower)
            for v in cand.victims:
                core.on_pod_delete(v)
                self.bound.pop(v.key, None)
                deleted.append(v)
                self.evicted.append(v.key)
                if v.key in self.placements:
                    self.placements[v.key] = None  # placed earlier in this run, now evicted
                self.generation += 1
                self.deleted_at = self.generation
        if deleted:
            self._sync_pdbs(deleted=deleted)

    def _sync_pdbs(self, *, deleted: Sequence[PodInfo]) -> None:
        if not self.inp.pdbs:
            return  # nothing to keep current (and no list of every bound pod to build)
        bound = list(self.bound.values())
        for key, spec in self.inp.pdbs.items():
            current = self.core.pdbs.get(key)
            if not spec.has_status:
                self.core.on_pdb_set(derive_pdb_status(spec, bound))
            elif current is None:
                self.core.on_pdb_set(spec)
            else:
                gone = sum(
                    1
                    for p in deleted
                    if _controller_selects(spec, p)
                    and not p.terminating
                    and p.name not in spec.disrupted_pods
                )
                if gone:
                    allowed = max(0, current.disruptions_allowed - gone)
                    self.core.on_pdb_set(replace(current, disruptions_allowed=allowed))


def _decision(result: CycleResult) -> dict[str, Any]:
    key, outcome = result.pod.key, result.outcome
    if outcome == "assumed":
        return {"pod": key, "outcome": "scheduled", "node": result.node}
    if outcome == "preempting":
        return {
            "pod": key,
            "outcome": "preempting",
            "node": result.node,
            "victims": [v.key for v in result.victims],
        }
    if outcome == "unschedulable":
        return {"pod": key, "outcome": "unschedulable", "message": result.message}
    return {"pod": key, "outcome": "error", "message": result.message}


def simulate(
    documents: Sequence[Document],
    config: SchedulerConfig,
    *,
    seed: int = 0,
    loaded: Callable[[], None] | None = None,
    step: Callable[[str], None] | None = None,
) -> SimulationResult:
    """Run the scheduler over the documents. Raises InputError on bad input.

    ``placements`` holds every pending input pod of the profiles (those they rejected
    too), in document order: its node at the end of the run, or None. ``evicted``: the
    victims of every preemption, in order. ``loaded`` is called once the cache and the
    queue are filled, before the first cycle; ``step`` (a benchmark's timer) after each
    step with its name: "parse", "load", "schedule". Runtime: one scheduling cycle per
    attempt."""
    done = step or (lambda _name: None)
    inp = _parse(documents, config)
    done("parse")
    sim = _Simulation(inp, config, seed)
    sim.load()
    done("load")
    if loaded is not None:
        loaded()
    sim.run()
    done("schedule")
    return SimulationResult(sim.decisions, sim.placements, sim.evicted, inp.notes + sim.notes)


# ------------------------------------------------------------------------- what-if


@dataclass(frozen=True)
class WhatIf:
    """Changes to try against the plain run: nodes to cordon, nodes to drain (cordon, then
    evict their pods as the Eviction API would), and pods to add."""

    cordon: tuple[str, ...] = ()
    drain: tuple[str, ...] = ()
    add: tuple[Document, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.cordon or self.drain or self.add)


def _evict(inp: _Input, config: SchedulerConfig, node: str) -> list[dict[str, Any]]:
    """Drain one (already cordoned) node: each pod on it is evicted unless a PDB blocks it,
    as the Eviction API decides (every PDB selecting the pod must allow a disruption; a pod
    with more than one PDB cannot be evicted). DaemonSet pods are left, as
    ``kubectl drain --ignore-daemonsets``. An evicted pod owned by a controller comes back
    as a pending replacement, placed by this profile; other evicted pods are gone."""
    report: list[dict[str, Any]] = []
    bound = list(inp.bound.values())
    allowed = {
        key: (pdb if pdb.has_status else derive_pdb_status(pdb, bound)).disruptions_allowed
        for key, pdb in inp.pdbs.items()
    }
    for pod in [p for p in bound if p.node_name == node]:
        owner_kind = pod.owner_kind_uid[0] if pod.owner_kind_uid else ""
        row: dict[str, Any] = {"node": node, "pod": pod.key}
        if owner_kind == "DaemonSet":
            report.append({**row, "outcome": "skipped", "reason": "DaemonSet pod"})
            continue
        pdbs = [k for k, pdb in inp.pdbs.items() if _controller_selects(pdb, pod)]
        if len(pdbs) > 1:
            report.append({**row, "outcome": "blocked", "pdb": pdbs, "reason": "more than one PDB"})
            continue
        if pdbs and allowed[pdbs[0]] <= 0:
            report.append(
                {**row, "outcome": "blocked", "pdb": pdbs, "reason": "PDB allows no disruption"}
            )
            continue
        for k in pdbs:
            allowed[k] -= 1
            if inp.pdbs[k].has_status:  # as the disruption controller would report it
                inp.pdbs[k] = replace(inp.pdbs[k], disruptions_allowed=allowed[k])
        del inp.bound[pod.key]
        row.update(outcome="evicted", pdb=pdbs)
        if pod.owner_kind_uid is not None:
            replacement = replace(
                pod,
                name=f"{pod.name}-replacement",
                key=f"{pod.namespace}/{pod.name}-replacement",
                uid=f"{pod.uid}-replacement",
                node_name="",
                nominated_node_name="",
                phase="Pending",
                scheduler_name=(
                    pod.scheduler_name
                    if pod.scheduler_name in config.scheduler_names
                    else config.scheduler_name
                ),
            )
            inp.pending[replacement.key] = replacement
            inp.placements[replacement.key] = None
            row["replacement"] = replacement.key
        report.append(row)
    return report


def _apply_what_if(inp: _Input, config: SchedulerConfig, what_if: WhatIf) -> list[dict[str, Any]]:
    for flag, names in (("--cordon", what_if.cordon), ("--drain", what_if.drain)):
        for name in names:
            if name not in inp.nodes:
                raise InputError(f"{flag} {name}: no node of that name in the input")
            inp.nodes[name] = replace(inp.nodes[name], unschedulable=True)
    report: list[dict[str, Any]] = []
    for name in what_if.drain:
        report.extend(_evict(inp, config, name))
    return report


@dataclass
class WhatIfResult:
    baseline: SimulationResult
    changed: SimulationResult
    drain: list[dict[str, Any]]

    def diff(self) -> dict[str, Any]:
        before, after = self.baseline.placements, self.changed.placements
        moved = [
            {"pod": pod, "before": before.get(pod), "after": after.get(pod)}
            for pod in dict.fromkeys([*before, *after])
            if before.get(pod) != after.get(pod)
        ]
        was, now = set(self.baseline.evicted), set(self.changed.evicted)
        return {
            "placements": moved,
            "preempted": {
                "added": [p for p in self.changed.evicted if p not in was],
                "removed": [p for p in self.baseline.evicted if p not in now],
            },
            "drained": [r["pod"] for r in self.drain if r["outcome"] == "evicted"],
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline.to_json(),
            "whatIf": self.changed.to_json(),
            "drain": self.drain,
            "diff": self.diff(),
        }


def simulate_what_if(
    documents: Sequence[Document],
    config: SchedulerConfig,
    what_if: WhatIf,
    *,
    seed: int = 0,
    loaded: Callable[[], None] | None = None,
) -> WhatIfResult:
    """The plain run and the run with ``what_if`` applied, from the same input. ``loaded``
    is called before the first cycle of each run."""
    baseline = simulate(documents, config, seed=seed, loaded=loaded)
    inp = _parse([*documents, *what_if.add], config)
    drain = _apply_what_if(inp, config, what_if)
    sim = _Simulation(inp, config, seed)
    sim.load()
    if loaded is not None:
        loaded()
    sim.run()
    changed = SimulationResult(sim.decisions, sim.placements, sim.evicted, inp.notes + sim.notes)
    return WhatIfResult(baseline, changed, drain)


def what_if_text(result: WhatIfResult) -> str:
    d = result.diff()
    lines = ["WHAT-IF: DRAIN"]
    if result.drain:
        rows = [("NODE", "POD", "OUTCOME", "DETAIL")]
        for r in result.drain:
            detail = r.get("reason", "")
            if r.get("pdb"):
                detail = (detail + " " if detail else "") + "pdb: " + ", ".join(r["pdb"])
            if r.get("replacement"):
                detail = (detail + "; " if detail else "") + "replacement " + r["replacement"]
            rows.append((r["node"], r["pod"], r["outcome"], detail))
        lines += _table(rows)
    else:
        lines.append("(no node drained)")
    lines += ["", "WHAT-IF: PLACEMENTS THAT CHANGE"]
    if d["placements"]:
        lines += _table(
            [("POD", "BEFORE", "AFTER")]
            + [(m["pod"], m["before"] or "-", m["after"] or "-") for m in d["placements"]]
        )
    else:
        lines.append("(none)")
    lines += ["", "WHAT-IF: PREEMPTIONS"]
    lines += [f"+ {p}" for p in d["preempted"]["added"]]
    lines += [f"- {p}" for p in d["preempted"]["removed"]]
    if not d["preempted"]["added"] and not d["preempted"]["removed"]:
        lines.append("(no change)")
    lines += ["", "(the run with the changes)", to_text(result.changed)]
    return "\n".join(lines)


# ------------------------------------------------------------------------- CLI


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return [
        "  ".join([*(c.ljust(w) for c, w in zip(r, widths, strict=False)), r[-1]]).rstrip()
        for r in rows
    ]


def to_text(result: SimulationResult) -> str:
    """A table of the decisions with their reasons, then where every pod ended up."""
    rows = [("#", "POD", "OUTCOME", "NODE", "DETAIL")]
    for i, d in enumerate(result.decisions, 1):
        if d["outcome"] == "preempting":
            detail = "victims: " + ", ".join(d["victims"])
        else:
            detail = d.get("message", "")
        rows.append((str(i), d["pod"], d["outcome"], d.get("node") or "-", detail))
    lines = ["DECISIONS", *_table(rows), "", "PLACEMENTS"]
    if result.placements:
        lines += _table(
            [("POD", "NODE")]
            + [
                (pod, node or ("(evicted)" if pod in result.evicted else "(not placed)"))
                for pod, node in result.placements.items()
            ]
        )
    else:
        lines.append("(no pending pods)")
    lines += ["", "EVICTED", *(result.evicted or ["(none)"])]
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    try:
        config = with_feature_gates(load_config(args.config), args.feature_gates)
    except ConfigError as e:
        print(f"py-scheduler simulate: invalid configuration: {e}", file=sys.stderr)
        return 2
    progress = _Progress()
    # Reading and decoding a dump make millions of objects that last the whole run and no
    # cyclic garbage: the garbage collector would only rescan them, again and again (a fifth
    # of the run at 32,000 objects). It is off until the cache is loaded; then what exists
    # is frozen out of its view and it runs as usual for the cycles. Restored on return.
    was_enabled = gc.isenabled()
    gc.disable()

    def loaded() -> None:
        gc.freeze()
        if was_enabled:
            gc.enable()

    try:
        docs = load_documents(args.files, progress=progress)
        added = tuple(load_documents(args.add, progress=progress)) if args.add else ()
        progress.done()
        what_if = WhatIf(tuple(args.cordon or ()), tuple(args.drain or ()), added)
        if what_if:
            wi = simulate_what_if(docs, config, what_if, seed=args.seed, loaded=loaded)
            notes, payload, text = wi.changed.notes, wi.to_json(), what_if_text
        else:
            result = simulate(docs, config, seed=args.seed, loaded=loaded)
            notes, payload, text = result.notes, result.to_json(), to_text  # type: ignore[assignment]
    except InputError as e:
        progress.done()
        print(f"py-scheduler simulate: {e}", file=sys.stderr)
        return 2
    finally:
        gc.unfreeze()
        if was_enabled:
            gc.enable()
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    output = args.output or ("text" if sys.stdout.isatty() else "json")
    if output == "json":
        print(json.dumps(payload, indent=2))
    else:
        print(text(wi if what_if else result))  # type: ignore[arg-type]
    return 0


class _Progress:
    """Object counts on stderr for inputs that take more than a couple of seconds to read
    (never on stdout, which carries the result)."""

    def __init__(self, after: float = 2.0) -> None:
        import time

        self._time = time.monotonic
        self._start = self._time()
        self._after = after
        self._shown = False

    def __call__(self, source: str, objects: int) -> None:
        if self._time() - self._start < self._after:
            return
        self._shown = True
        end = "\r" if sys.stderr.isatty() else "\n"
        print(f"reading {source}: {objects} objects", end=end, file=sys.stderr, flush=True)

    def done(self) -> None:
        if self._shown and sys.stderr.isatty():
            print(file=sys.stderr)
        self._shown = False
