"""``py-scheduler explain NAMESPACE/POD``: why a pod is pending, or why it is where it is.

Read-only. It LISTs the cluster through a ``Lister`` (``kind -> items``; the CLI plugs in
``scheduler.kube``; tests a dict), loads the objects into a SchedulerCore exactly as the
live scheduler's watches do, takes one snapshot, and asks the framework about one pod:

- every node's Filter verdict, with the two-pass nominated-pods filter (the plugin that
  rejected the node, its reasons, and whether preemption could change that);
- the feasible nodes' scores, per plugin (normalised score x weight) and in total;
- for a pending pod that fits nowhere: what preemption would do now, through
  ``Evaluator.decide`` (the very code of the PostFilter, minus its actions): the node,
  the victims with their priorities and the PDBs covering them, and for every other
  candidate node the ``pick_one_node_for_preemption`` criterion it lost at
  (``pick_one_node_for_preemption_steps``), plus the FailedScheduling message the
  scheduler would record;
- for a bound pod: the same verdicts and scores with the pod taken off its node, so that
  its own node is compared on equal terms ("would it fit there now, and where else").

It differs from a scheduling cycle on purpose in three ways, each said in its notes: it
filters every node (a cycle stops after enough feasible ones), it scores even a single
feasible node, and the preemption dry run starts at the first potential node (a cycle
starts at a random one, which only matters for ties and for clusters above the
candidate limit). It never writes: its ports refuse every call.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from scheduler.clock import RealClock
from scheduler.config import SchedulerConfig, extenders_note
from scheduler.decode import ObjectDecoder
from scheduler.draapi import DraObject
from scheduler.framework.interface import CODE_NAMES, Code, CycleState, Status
from scheduler.framework.plugins.defaultpreemption import prefixed
from scheduler.framework.preemption import (
    Candidate,
    PreemptionDecision,
    fit_error_message,
    pdb_matches,
    pick_one_node_for_preemption_steps,
)
from scheduler.schedule_one import SchedulerCore, num_feasible_nodes_to_find
from scheduler.types import (
    NodeInfo,
    ParseError,
    PDBInfo,
    PodInfo,
    SelectorObject,
    ServiceInfo,
    UnknownPriorityClassError,
    VolumeObject,
)

__all__ = ["LIST_KINDS", "ExplainError", "Explanation", "Lister", "explain"]

T = TypeVar("T")

Lister = Callable[[str], list[dict[str, Any]]]
# What explain LISTs, in load order (classes before the pods that name them).
LIST_KINDS = (
    "priorityclasses",
    "namespaces",
    "nodes",
    "poddisruptionbudgets",
    "pods",
    "services",
    "replicationcontrollers",
    "replicasets",
    "statefulsets",
    "persistentvolumeclaims",
    "persistentvolumes",
    "storageclasses",
    "csinodes",
    "csidrivers",
    "volumeattachments",
    "csistoragecapacities",
    "resourceclaims",
    "resourceslices",
    "deviceclasses",
    "devicetaintrules",
)
# The selectors of system default spreading: list kind -> object kind.
SELECTOR_LISTS = {
    "services": "Service",
    "replicationcontrollers": "ReplicationController",
    "replicasets": "ReplicaSet",
    "statefulsets": "StatefulSet",
}


class ExplainError(ValueError):
    """The pod cannot be explained: a bad name, or no such pod."""


# ------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class NodeVerdict:
    node: str
    fits: bool
    code: str
    plugin: str
    reasons: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "fits": self.fits,
            "code": self.code,
            "plugin": self.plugin,
            "reasons": list(self.reasons),
        }


@dataclass(frozen=True, slots=True)
class PluginScore:
    plugin: str
    score: int
    weight: int

    @property
    def weighted(self) -> int:
        return self.score * self.weight


@dataclass(frozen=True, slots=True)
class NodeScores:
    node: str
    plugins: tuple[PluginScore, ...]

    @property
    def total(self) -> int:
        return sum(p.weighted for p in self.plugins)

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "plugins": [
                {"plugin": p.plugin, "score": p.score, "weight": p.weight, "weighted": p.weighted}
                for p in self.plugins
            ],
            "total": self.total,
        }


@dataclass(frozen=True, slots=True)
class Victim:
    pod: str
    priority: int
    pdbs: tuple[tuple[str, int], ...]  # (PDB key, its disruptionsAllowed) covering the pod
    scheduler: str = ""  # the victim's spec.schedulerName
    # The PDBs this eviction would violate: their allowance is spent by earlier victims.
    violated_pdbs: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "priority": self.priority,
            "schedulerName": self.scheduler,
            "pdbs": [{"name": k, "disruptionsAllowed": n} for k, n in self.pdbs],
            "violates": list(self.violated_pdbs),
        }


@dataclass(frozen=True, slots=True)
class CandidateNode:
    """A node where preemption would work, with the facts pickOne compares."""

    node: str
    victims: tuple[Victim, ...]
    num_pdb_violations: int
    highest_victim_priority: int
    victim_priority_sum: int
    earliest_start_of_highest: str
    lost_at: str  # "" for the chosen node

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "victims": [v.to_json() for v in self.victims],
            "numPdbViolations": self.num_pdb_violations,
            "highestVictimPriority": self.highest_victim_priority,
            "victimPrioritySum": self.victim_priority_sum,
            "earliestStartOfHighestPriorityVictims": self.earliest_start_of_highest,
            "lostAt": self.lost_at or None,
        }


@dataclass(frozen=True, slots=True)
class Preemption:
    """What preemption would do now. ``outcome``: "disabled", "not eligible", "not
    helpful", "error" or "would preempt"."""

    outcome: str
    message: str = ""  # the PostFilter message, as the scheduler words it
    chosen: CandidateNode | None = None
    others: tuple[CandidateNode, ...] = ()
    # Nodes that are no candidate, with the reason (filter or dry-run verdict).
    not_candidates: tuple[tuple[str, str], ...] = ()
    decided_by: str = ""  # the pickOneNodeForPreemption criterion that settled the choice
    warnings: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "message": self.message,
            "decidedBy": self.decided_by or None,
            "warnings": list(self.warnings),
            "node": self.chosen.node if self.chosen else None,
            "victims": [v.to_json() for v in self.chosen.victims] if self.chosen else [],
            "numPdbViolations": self.chosen.num_pdb_violations if self.chosen else 0,
            "candidates": [c.to_json() for c in self.others],
            "notCandidates": [{"node": n, "reason": r} for n, r in self.not_candidates],
        }


@dataclass
class Explanation:
    pod: str
    state: str  # "pending" | "bound" | "rejected"
    priority: int = 0
    scheduler_name: str = ""
    node: str = ""
    nominated_node: str = ""
    notes: list[str] = field(default_factory=list)
    pre_filter: Status = field(default_factory=Status)
    nodes: list[NodeVerdict] = field(default_factory=list)
    scores: list[NodeScores] = field(default_factory=list)
    would_pick: list[str] = field(default_factory=list)
    preemption: Preemption | None = None
    message: str = ""  # the FailedScheduling message a cycle would record now

    def to_json(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "state": self.state,
            "priority": self.priority,
            "schedulerName": self.scheduler_name,
            "node": self.node or None,
            "nominatedNode": self.nominated_node or None,
            "notes": list(self.notes),
            "preFilter": {
                "code": CODE_NAMES[self.pre_filter.code],
                "plugin": self.pre_filter.plugin,
                "message": self.pre_filter.message(),
            },
            "nodes": [v.to_json() for v in self.nodes],
            "scores": [s.to_json() for s in self.scores],
            "wouldPick": list(self.would_pick),
            "preemption": self.preemption.to_json() if self.preemption else None,
            "message": self.message or None,
        }

    def to_text(self) -> str:
        return _text(self)


# ------------------------------------------------------------------------- ports


class _ReadOnly:
    """Binder, Recorder and PreemptionActions that refuse: explain never writes."""

    def bind(self, pod: PodInfo, node_name: str, cycle: object = None) -> None:
        raise RuntimeError("explain never binds")

    def scheduled(self, pod: PodInfo, node_name: str) -> None:
        raise RuntimeError("explain never records")

    def failed(
        self, pod: PodInfo, *, reason: str, message: str, nominated_node: str | None
    ) -> None:
        raise RuntimeError("explain never records")

    def skipped_deleting(self, pod: PodInfo) -> None:
        raise RuntimeError("explain never records")

    def prepare_candidate(
        self, preemptor: PodInfo, candidate: Candidate, lower_nominated: Sequence[PodInfo]
    ) -> Status:
        raise RuntimeError("explain never preempts")


# ------------------------------------------------------------------------- loading


def _parse_ref(ref: str, default_namespace: str = "default") -> tuple[str, str]:
    """NAMESPACE/POD, or POD in ``default_namespace`` (kubectl's context namespace)."""
    if "/" not in ref and ref:
        return default_namespace, ref
    ns, sep, name = ref.partition("/")
    if not sep or not ns or not name or "/" in name:
        raise ExplainError(f"expected [NAMESPACE/]POD, got {ref!r}")
    return ns, name


def _key_of(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"


@dataclass
class _Cluster:
    core: SchedulerCore
    decoder: ObjectDecoder
    notes: list[str]


def _load(
    objects: Mapping[str, list[dict[str, Any]]], config: SchedulerConfig, target: str
) -> _Cluster:
    """Everything but the target pod, as the live scheduler's watches would load it:
    objects it cannot parse are left out (and counted in a note)."""
    labels: dict[str, dict[str, str]] = {}
    core = SchedulerCore(
        config,
        RealClock(),
        binder=_ReadOnly(),
        recorder=_ReadOnly(),
        actions=_ReadOnly(),
        rng=random.Random(0),
        namespace_labels=lambda ns: labels.get(ns, {}),
    )
    skipped: dict[str, int] = {}
    decoder = ObjectDecoder()

    def decoded(kind: str, decode: Callable[[dict[str, Any]], T], obj: dict[str, Any]) -> T | None:
        try:
            return decode(obj)
        except (ParseError, UnknownPriorityClassError):
            skipped[kind] = skipped.get(kind, 0) + 1
            return None

    for obj in objects.get("priorityclasses", []):
        pc = decoded("PriorityClass", decoder.priority_class, obj)
        if pc is not None:
            core.on_priority_class_set(pc)
    for obj in objects.get("namespaces", []):
        ns = decoded("Namespace", decoder.namespace, obj)
        if ns is not None:
            labels[ns[0]] = ns[1]
    for obj in objects.get("nodes", []):
        node = decoded("Node", decoder.node, obj)
        if node is not None:
            core.on_node_add(node)
    for obj in objects.get("poddisruptionbudgets", []):
        pdb = decoded("PodDisruptionBudget", decoder.pdb, obj)
        if pdb is not None:
            core.on_pdb_set(pdb)
    for plural, kind in SELECTOR_LISTS.items():
        decode: Callable[[dict[str, Any]], ServiceInfo | SelectorObject] = (
            decoder.service if kind == "Service" else decoder.selector_object(kind)
        )
        for obj in objects.get(plural, []):
            rec = decoded(kind, decode, obj)
            if rec is not None:
                core.on_selector_object_set(kind, rec)
    volume_lists: tuple[tuple[str, str, Callable[[dict[str, Any]], VolumeObject]], ...] = (
        ("persistentvolumeclaims", "PersistentVolumeClaim", decoder.pvc),
        ("persistentvolumes", "PersistentVolume", decoder.pv),
        ("storageclasses", "StorageClass", decoder.storage_class),
        ("csinodes", "CSINode", decoder.csi_node),
        ("csidrivers", "CSIDriver", decoder.csi_driver),
        ("volumeattachments", "VolumeAttachment", decoder.volume_attachment),
        ("csistoragecapacities", "CSIStorageCapacity", decoder.csi_storage_capacity),
    )
    for plural, kind, decode_volume in volume_lists:
        for obj in objects.get(plural, []):
            vol = decoded(kind, decode_volume, obj)
            if vol is not None:
                core.on_volume_object_set(vol)
    dra_lists: tuple[tuple[str, str, Callable[[dict[str, Any]], DraObject]], ...] = (
        ("resourceclaims", "ResourceClaim", decoder.resource_claim),
        ("resourceslices", "ResourceSlice", decoder.resource_slice),
        ("deviceclasses", "DeviceClass", decoder.device_class),
        ("devicetaintrules", "DeviceTaintRule", decoder.device_taint_rule),
    )
    for plural, kind, decode_dra in dra_lists:
        for obj in objects.get(plural, []):
            dra_obj = decoded(kind, decode_dra, obj)
            if dra_obj is not None:
                core.on_dra_object_set(dra_obj)
    for obj in objects.get("pods", []):
        if _key_of(obj) == target:
            continue
        pod = decoded("Pod", decoder.pod, obj)
        if pod is not None:
            core.on_pod_add(pod)  # bound: the cache; pending and ours: the queue and nominator
    notes = [
        f"{n} {kind} object(s) could not be parsed and were left out, as the scheduler does"
        for kind, n in skipped.items()
    ]
    notes.extend(extenders_note(config))
    core.cache.update_snapshot(core.snapshot)
    return _Cluster(core, decoder, notes)


# ------------------------------------------------------------------------- explain


def explain(
    ref: str, lister: Lister, config: SchedulerConfig, *, default_namespace: str = "default"
) -> Explanation:
    """Explain pod ``ref`` ("namespace/name") in the cluster ``lister`` shows.
    Raises ExplainError for a bad name or a missing pod."""
    ns, name = _parse_ref(ref, default_namespace)
    key = f"{ns}/{name}"
    objects = {kind: lister(kind) for kind in LIST_KINDS}
    raw = next((o for o in objects["pods"] if _key_of(o) == key), None)
    if raw is None:
        raise ExplainError(f"pod {key} not found")
    cluster = _load(objects, config, key)
    try:
        pod = cluster.decoder.pod(raw)
    except (ParseError, UnknownPriorityClassError) as e:
        # The live scheduler rejects such a pod when its watch delivers it.
        return Explanation(
            key,
            "rejected",
            notes=[*cluster.notes, f"the scheduler cannot use this pod: {e}"],
        )
    out = Explanation(
        key,
        "bound" if pod.node_name else "pending",
        priority=pod.priority,
        scheduler_name=pod.scheduler_name,
        node=pod.node_name,
        nominated_node="" if pod.node_name else pod.nominated_node_name,
        notes=list(cluster.notes),
    )
    core = cluster.core
    if not core.responsible_for(pod):
        names = config.scheduler_names
        out.notes.append(
            f"schedulerName is {pod.scheduler_name!r}, not {names[0]!r}: this profile would "
            "not schedule it; shown as if it did"
            if len(names) == 1
            else f"schedulerName is {pod.scheduler_name!r}, not one of the profiles "
            f"({', '.join(map(repr, names))}): none would schedule it; shown as profile "
            f"{names[0]!r} would"
        )
    core.use_profile_of(pod)
    if pod.terminal:
        out.notes.append(f"the pod has finished (phase {pod.phase}); nothing to schedule")
    elif pod.terminating:
        out.notes.append(
            "the pod is being deleted: when its turn in the queue comes the scheduler skips "
            "it (a 'skip schedule deleting pod' warning), no cycle runs for it"
        )
    gate = None if pod.node_name else core.framework.run_pre_enqueue(pod)
    if gate is not None:
        out.notes.append(
            f"PreEnqueue plugin {gate.plugin} keeps the pod out of the scheduling queue "
            f"({gate.message()}): no cycle runs for it until an update, an event that "
            "plugin's queueing hints accept, or the 5-minute re-check lets it in; below, what "
            "it would meet then"
        )
    if pod.node_name:
        out.notes.append(
            f"the pod is taken off {pod.node_name} for the comparison: the verdicts and "
            "scores are those of placing it afresh"
        )
        if core.snapshot.get(pod.node_name) is None:
            out.notes.append(f"its node {pod.node_name} is not in the cluster")
        # Placed afresh: as pending (spec.nodeName would rule every other node out).
        pod = replace(pod, node_name="", nominated_node_name="")
    _run(core, pod, out)
    return out


def _run(core: SchedulerCore, pod: PodInfo, out: Explanation) -> None:
    fw = core.framework
    snap = core.snapshot
    nodes = snap.node_info_list
    state = CycleState()
    pre_result, pre = fw.run_pre_filter(state, pod, snap)
    out.pre_filter = pre
    statuses: dict[str, Status] = {}
    feasible: list[NodeInfo] = []
    for ni in nodes:
        if not pre.is_success():
            st = pre
        elif (
            pre_result is not None
            and pre_result.node_names is not None
            and (ni.name not in pre_result.node_names)
        ):
            # As schedule_one: named after the plugins that restricted the node set.
            plugins = " ".join(sorted(pre_result.plugins))
            st = Status.unresolvable(f"node(s) didn't satisfy plugin(s) [{plugins}]")
        else:
            st = fw.run_filter_with_nominated_pods(state, pod, ni)
        if st.is_success():
            feasible.append(ni)
        else:
            statuses[ni.name] = st
        out.nodes.append(
            NodeVerdict(ni.name, st.is_success(), CODE_NAMES[st.code], st.plugin, st.reasons)
        )
    out.nodes.sort(key=lambda v: v.node)
    if not nodes:
        out.notes.append("the cluster has no nodes")
    want = num_feasible_nodes_to_find(core.profile_config.percentage_of_nodes_to_score, len(nodes))
    if feasible and want < len(nodes):
        out.notes.append(
            f"a scheduling cycle stops after finding {want} feasible node(s) of {len(nodes)} "
            "(percentageOfNodesToScore), starting where the last cycle stopped; explain "
            "filters them all"
        )
    errors = [(name, st) for name, st in statuses.items() if st.code == Code.ERROR]
    if errors:
        # A cycle stops at the first error (SchedulerError): no scores, no preemption.
        name, st = errors[0]
        where = "PreFilter" if not pre.is_success() else f"Filter on node {name}"
        out.notes.append(
            f"{where}: plugin {st.plugin} failed: {st.message()}; a cycle would stop "
            "with this error"
        )
    elif feasible:
        _score(core, state, pod, feasible, out)
    elif out.state == "pending":
        _preemption(core, state, pod, statuses, out)


def _score(
    core: SchedulerCore,
    state: CycleState,
    pod: PodInfo,
    feasible: list[NodeInfo],
    out: Explanation,
) -> None:
    fw = core.framework
    st = fw.run_pre_score(state, pod, feasible, core.snapshot)
    if not st.is_success():
        out.notes.append(f"PreScore plugin {st.plugin} failed: {st.message()}; no scores")
        return
    per_plugin = fw.run_score_plugins(state, pod, feasible)
    scores = [
        NodeScores(
            ni.name, tuple(PluginScore(ps.plugin, ps.scores[i], ps.weight) for ps in per_plugin)
        )
        for i, ni in enumerate(feasible)
    ]
    scores.sort(key=lambda s: (-s.total, s.node))
    out.scores = scores
    if out.state != "pending":
        return
    nominated = pod.nominated_node_name
    if nominated and any(ni.name == nominated for ni in feasible):
        out.would_pick = [nominated]
        out.notes.append(
            f"the pod is nominated to {nominated}, which fits: a cycle takes it without scoring"
        )
    elif len(feasible) == 1:
        out.would_pick = [feasible[0].name]
        out.notes.append("one node fits: a cycle takes it without scoring")
    else:
        best = scores[0].total
        out.would_pick = sorted(s.node for s in scores if s.total == best)
        if len(out.would_pick) > 1:
            out.notes.append("the best score is a tie: a cycle picks one of them at random")
    # VolumeBinding's and DynamicResources' Reserve only assume what their Filter chose;
    # they never turn a pod down.
    reserving = [p.name for p in core.framework.reserve_plugins if p.name not in _IN_TREE_BINDING]
    if reserving:
        out.notes.append(
            f"Reserve plugin(s) {', '.join(reserving)} decide once the node is chosen; explain "
            "does not run them (they keep state of their own): a rejection there leaves the "
            "pod pending although a node fits, and its FailedScheduling event says why"
        )
    permitting = [p.name for p in core.framework.permit_plugins]
    if permitting:
        out.notes.append(
            f"Permit plugin(s) {', '.join(permitting)} decide after Reserve; explain does not "
            "run them: they may hold the pod on its node (waiting, e.g. for the rest of its "
            "group) or reject it"
        )
    binding = [
        p.name
        for p in core.framework.pre_bind_plugins + core.framework.bind_plugins
        if p.name not in _IN_TREE_BINDING  # their PreBind writes what their Filter chose
    ]
    if binding:
        out.notes.append(
            f"PreBind/Bind plugin(s) {', '.join(dict.fromkeys(binding))} run in the binding; "
            "explain does not run them: they may fail the binding (the pod is then retried), "
            "and a Bind plugin may bind the pod itself instead of DefaultBinder"
        )


_IN_TREE_BINDING = ("VolumeBinding", "DynamicResources")


def _preemption(
    core: SchedulerCore,
    state: CycleState,
    pod: PodInfo,
    statuses: dict[str, Status],
    out: Explanation,
) -> None:
    fw = core.framework
    num_nodes = core.snapshot.num_nodes()
    pre_msg = "" if out.pre_filter.is_success() else out.pre_filter.message()
    if num_nodes == 0:
        out.message = "no nodes available to schedule pods"
        return
    if not fw.post_filter_plugins:
        out.preemption = Preemption("disabled", "preemption is disabled in this profile")
        out.message = fit_error_message(num_nodes, statuses, pre_filter_msg=pre_msg)
        return
    decision = core.evaluator.decide(state, pod, statuses, offset=0)
    message = prefixed(decision.status).message()
    out.message = fit_error_message(
        num_nodes, statuses, pre_filter_msg=pre_msg, post_filter_msg=message
    )
    out.preemption = _describe(core, decision, statuses, message)


def _describe(
    core: SchedulerCore,
    decision: PreemptionDecision,
    statuses: Mapping[str, Status],
    message: str,
) -> Preemption:
    if decision.best is not None:
        outcome = "would preempt"
    elif decision.status.code == Code.ERROR:
        outcome = "error"
    elif decision.result is not None:
        outcome = "not helpful"
    else:
        outcome = "not eligible"
    pdbs = list(core.pdbs.values())
    best, steps = pick_one_node_for_preemption_steps(decision.candidates)
    lost_at: dict[str, str] = {}
    for step in steps:
        for node, _ in step.scores:
            if node not in step.kept:
                lost_at.setdefault(node, step.criterion)
    described = []
    for c in decision.candidates:
        top = max(v.priority for v in c.victims)
        earliest = min(v.start_time for v in c.victims if v.priority == top)
        described.append(
            CandidateNode(
                c.node_name,
                _victims_of(c, pdbs),
                c.num_pdb_violations,
                top,
                sum(v.priority for v in c.victims),
                _rfc3339(earliest),
                lost_at.get(c.node_name, ""),
            )
        )
    chosen = next((c for c in described if best and c.node == best.node_name), None)
    others = tuple(c for c in described if c is not chosen)
    candidates = {c.node_name for c in decision.candidates}
    not_candidates: list[tuple[str, str]] = []
    for ni in core.snapshot.node_info_list:
        name = ni.name
        if name in candidates:
            continue
        if name not in statuses:
            continue  # it fits (only for a bound pod's own comparison; not here)
        st = decision.node_statuses.get(name)
        if name not in decision.potential:
            reason = f"preemption cannot help: {statuses[name].message()}"
        elif st is not None:
            reason = st.message()
        elif outcome in ("not eligible", "error"):
            reason = "not evaluated: " + (message or "no dry run")
        else:
            reason = "not evaluated: the dry run stopped once it had enough candidates"
        not_candidates.append((name, reason))
    not_candidates.sort()
    decided_by = steps[-1].criterion if best is not None and steps else ""
    warnings = []
    if chosen is not None:
        for v in chosen.victims:
            if v.scheduler and v.scheduler not in core.profiles:
                warnings.append(
                    f"victim {v.pod} belongs to scheduler {v.scheduler}; DefaultPreemption's "
                    "victimSchedulerNames limits victims to the schedulers it names"
                )
    return Preemption(
        outcome,
        message,
        chosen,
        others,
        tuple(not_candidates),
        decided_by,
        tuple(warnings),
    )


def _victims_of(c: Candidate, pdbs: Sequence[PDBInfo]) -> tuple[Victim, ...]:
    """The candidate's victims with their PDBs; a PDB counts as violated by the victims past
    its allowance, in victim order (as upstream's filterPodsWithPDBViolation counts)."""
    left = {p.key: p.disruptions_allowed for p in pdbs}
    out = []
    for v in c.victims:
        covering = [p for p in pdbs if pdb_matches(p, v)]
        violated = []
        for p in covering:
            left[p.key] -= 1
            if left[p.key] < 0:
                violated.append(p.key)
        out.append(
            Victim(
                v.key,
                v.priority,
                tuple((p.key, p.disruptions_allowed) for p in covering),
                v.scheduler_name,
                tuple(violated),
            )
        )
    return tuple(out)


def _rfc3339(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ------------------------------------------------------------------------- text


def _table(rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return [
        indent + "  ".join([*(c.ljust(w) for c, w in zip(r, widths, strict=False)), r[-1]]).rstrip()
        for r in rows
    ]


def _victims_text(vs: Sequence[Victim]) -> str:
    parts = []
    for v in vs:
        pdb = "".join(f", PDB {k} allows {n}" for k, n in v.pdbs)
        violates = "".join(f", would violate PDB {k}" for k in v.violated_pdbs)
        parts.append(f"{v.pod} (priority {v.priority}{pdb}{violates})")
    return ", ".join(parts)


def _text(e: Explanation) -> str:
    if e.state == "rejected":
        return "\n".join([f"Pod {e.pod}: rejected", *(f"  note: {n}" for n in e.notes)])
    head = f"Pod {e.pod} (priority {e.priority}, schedulerName {e.scheduler_name}): "
    if e.state == "bound":
        head += f"bound to {e.node}"
    else:
        head += "pending" + (f", nominated to {e.nominated_node}" if e.nominated_node else "")
    lines = [head]
    lines += [f"  note: {n}" for n in e.notes]
    lines += ["", f"FILTERS ({len(e.nodes)} nodes)"]
    if not e.pre_filter.is_success():
        lines.append(f"  PreFilter {e.pre_filter.plugin}: {e.pre_filter.message()}")
    if e.nodes:
        rows: list[tuple[str, ...]] = [("NODE", "VERDICT", "PLUGIN", "REASON")]
        for v in e.nodes:
            verdict = "fits" if v.fits else v.code
            rows.append((v.node, verdict, v.plugin or "-", ", ".join(v.reasons)))
        lines += _table(rows)
    if e.scores:
        plugins = [p.plugin for p in e.scores[0].plugins]
        lines += ["", "SCORES (normalised score x weight = weighted)"]
        rows = [("NODE", *plugins, "TOTAL")]
        for s in e.scores:
            cells = [f"{p.score}x{p.weight}={p.weighted}" for p in s.plugins]
            rows.append((s.node, *cells, str(s.total)))
        lines += _table(rows)
    if e.would_pick:
        lines += ["", "WOULD PICK: " + " or ".join(e.would_pick)]
    if e.state == "bound":
        own = next((v for v in e.nodes if v.node == e.node), None)
        if own is not None:
            verdict = "fits there now" if own.fits else f"would not fit there now: {own.code}"
            lines += ["", f"ON {e.node}: {verdict}"]
    p = e.preemption
    if p is not None:
        lines += ["", f"PREEMPTION: {p.outcome}"]
        if p.message:
            lines.append(f"  {p.message}")
        if p.chosen is not None:
            lines.append(f"  node {p.chosen.node}; victims: {_victims_text(p.chosen.victims)}")
            if p.chosen.num_pdb_violations:
                lines.append(f"  PDB violations: {p.chosen.num_pdb_violations}")
            if p.decided_by:
                lines.append(f"  decided by: {p.decided_by}")
        for w in p.warnings:
            lines.append(f"  warning: {w}")
        ranked = ([p.chosen] if p.chosen is not None else []) + list(p.others)
        if ranked:
            # pickOneNodeForPreemption's criteria, in the order upstream applies them.
            rows = [
                (
                    "CANDIDATE",
                    "PDB VIOLATIONS",
                    "HIGHEST VICTIM PRIORITY",
                    "PRIORITY SUM",
                    "VICTIMS",
                    "EARLIEST START (HIGHEST)",
                    "LOST AT",
                )
            ]
            rows += [
                (
                    c.node,
                    str(c.num_pdb_violations),
                    str(c.highest_victim_priority),
                    str(c.victim_priority_sum),
                    str(len(c.victims)),
                    c.earliest_start_of_highest,
                    c.lost_at or "(chosen)",
                )
                for c in ranked
            ]
            lines += _table(rows)
            for c in ranked:
                lines.append(f"  {c.node} victims: {_victims_text(c.victims)}")
        if p.not_candidates:
            rows = [("NODE", "NOT A CANDIDATE BECAUSE")]
            rows += [(n, r) for n, r in p.not_candidates]
            lines += _table(rows)
    if e.message:
        lines += ["", "FailedScheduling message a cycle would record now:", f"  {e.message}"]
    return "\n".join(lines)
