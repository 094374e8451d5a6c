"""``py-scheduler simulate``: run the live scheduler's own core over a cluster dump, offline.

Same SchedulerCore, same queue order, same plugins, same preemption: only the ports differ.
Bindings succeed at once; a preemption deletes its victims at once (graceful termination
treated as complete); time is a FakeClock that jumps over backoff waits. The run ends when
no queued pod can make progress: nothing in activeQ, and nothing in backoffQ that the
cluster changed for since its last attempt.

Input: YAML documents (multi-document and/or ``kind: List``) of Node, Pod,
PodDisruptionBudget and PriorityClass; other kinds are ignored with a note on stderr.
Output contract (JSON): {"decisions": [...], "placements": {...}, "evicted": [...]}; see
docs/simulate.md. Exit 2 with one line naming file, document index and field on bad input.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from scheduler.clock import FakeClock
from scheduler.config import ConfigError, SchedulerConfig, load_config
from scheduler.framework.interface import Status
from scheduler.framework.preemption import Candidate
from scheduler.schedule_one import BindOutcome, SchedulerCore
from scheduler.types import (
    ParseError,
    PDBInfo,
    PodInfo,
    PriorityClassInfo,
    UnknownPriorityClassError,
    global_default_class,
    node_from_dict,
    pdb_from_dict,
    pod_from_dict,
    priority_class_from_dict,
)

__all__ = ["InputError", "SimulationResult", "load_documents", "main", "simulate"]

KINDS = ("Node", "Pod", "PodDisruptionBudget", "PriorityClass")


class InputError(ValueError):
    """Bad input: the message names the file, the document index and the field."""


@dataclass
class Document:
    source: str
    index: int
    obj: dict[str, Any]

    @property
    def where(self) -> str:
        return f"{self.source}: document {self.index}"


def _walk(docs: Any, source: str, counter: list[int]) -> Iterator[Document]:
    for raw in docs:
        idx = counter[0]
        counter[0] += 1
        if raw is None:
            continue
        if not isinstance(raw, dict):
            raise InputError(
                f"{source}: document {idx}: expected a mapping, got {type(raw).__name__}"
            )
        if raw.get("kind") == "List" or (raw.get("kind", "").endswith("List") and "items" in raw):
            items = raw.get("items") or []
            if not isinstance(items, list):
                raise InputError(f"{source}: document {idx}: items: expected a list")
            for j, item in enumerate(items):
                if not isinstance(item, dict):
                    raise InputError(f"{source}: document {idx}: items[{j}]: expected a mapping")
                yield Document(source, idx, {**item, "_item": j})
        else:
            yield Document(source, idx, raw)


def load_documents(paths: Sequence[str]) -> list[Document]:
    out: list[Document] = []
    for path in paths:
        try:
            text = Path(path).read_text() if path != "-" else sys.stdin.read()
        except OSError as e:
            raise InputError(f"{path}: cannot read: {e.strerror}") from e
        try:
            docs = list(yaml.safe_load_all(text))
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark is not None else ""
            raise InputError(f"{path}: not valid YAML{where}: {getattr(e, 'problem', e)}") from e
        out.extend(_walk(docs, path, [0]))
    return out


# ------------------------------------------------------------------------- PDB status


def _scaled(value: int | str, total: int, *, round_up: bool) -> int:
    if isinstance(value, int):
        return value
    pct = int(value[:-1])
    x = pct * total / 100
    return math.ceil(x) if round_up else math.floor(x)


def derive_pdb_status(pdb: PDBInfo, bound: Sequence[PodInfo]) -> PDBInfo:
    """disruptionsAllowed as the disruption controller computes it from spec and pods.
    One approximation: for percentages and maxUnavailable the controller scales by the
    owning controllers' replica counts; a dump has no controllers, so the matching bound
    pods stand in for the expected count."""
    sel = pdb.selector
    if sel is None or sel.is_empty():
        matching: list[PodInfo] = []
    else:
        matching = [p for p in bound if p.namespace == pdb.namespace and sel.matches(p.labels)]
    expected = len(matching)
    healthy = sum(1 for p in matching if not p.terminating)
    if pdb.max_unavailable is not None:
        desired = max(0, expected - _scaled(pdb.max_unavailable, expected, round_up=True))
    elif pdb.min_available is not None:
        desired = _scaled(pdb.min_available, expected, round_up=True)
    else:
        desired = 0  # neither field set: the controller requires no healthy pods
    allowed = max(0, healthy - desired)
    return replace(pdb, disruptions_allowed=allowed, has_status=True)


# ------------------------------------------------------------------------- ports


@dataclass
class _SimPorts:
    binds: list[tuple[PodInfo, str]] = field(default_factory=list)
    preemptions: list[tuple[PodInfo, Candidate, list[PodInfo]]] = field(default_factory=list)

    def bind(self, pod: PodInfo, node_name: str) -> None:
        self.binds.append((pod, node_name))

    def scheduled(self, pod: PodInfo, node_name: str) -> None:
        return None

    def failed(
        self, pod: PodInfo, *, reason: str, message: str, nominated_node: str | None
    ) -> None:
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


def simulate(
    documents: Sequence[Document], config: SchedulerConfig, *, seed: int = 0
) -> SimulationResult:
    notes: list[str] = []
    clock = FakeClock(0.0)
    ports = _SimPorts()
    core = SchedulerCore(
        config, clock, binder=ports, recorder=ports, actions=ports, rng=random.Random(seed)
    )
    decisions: list[dict[str, Any]] = []
    # Pass 1: priority classes first (pods need them), then the rest in document order.
    classes: dict[str, PriorityClassInfo] = {}
    for d in documents:
        if d.obj.get("kind") == "PriorityClass":
            try:
                pc = priority_class_from_dict(d.obj)
            except ParseError as e:
                raise InputError(f"{d.where}: {e}") from e
            classes[pc.name] = pc
            core.on_priority_class_set(pc)
    default = global_default_class(classes.values())
    pending: list[PodInfo] = []
    bound: list[PodInfo] = []
    pdbs: list[PDBInfo] = []
    for d in documents:
        kind = d.obj.get("kind")
        try:
            if kind == "Node":
                core.on_node_add(node_from_dict(d.obj))
            elif kind == "Pod":
                try:
                    pod = pod_from_dict(d.obj, classes=classes, global_default=default)
                except UnknownPriorityClassError as e:
                    spec = d.obj.get("spec") or {}
                    if not spec.get("nodeName") and (
                        (spec.get("schedulerName") or "default-scheduler") == config.scheduler_name
                    ):
                        decisions.append({"pod": e.pod, "outcome": "error", "message": str(e)})
                    else:
                        notes.append(f"{d.where}: {e}; pod ignored")
                    continue
                if pod.node_name:
                    if not pod.terminal:
                        bound.append(pod)
                elif core.responsible_for(pod) and not pod.terminal and not pod.terminating:
                    pending.append(pod)
            elif kind == "PodDisruptionBudget":
                pdbs.append(pdb_from_dict(d.obj))
            elif kind != "PriorityClass":
                notes.append(f"{d.where}: kind {kind!r} ignored")
        except ParseError as e:
            raise InputError(f"{d.where}: {e}") from e
    for p in bound:
        core.on_pod_add(p)
    for pdb in pdbs:
        core.on_pdb_set(pdb if pdb.has_status else derive_pdb_status(pdb, bound))
    for p in pending:
        core.queue.add(p, timestamp=p.creation_time)

    placements: dict[str, str | None] = {p.key: None for p in pending}
    for dec in decisions:
        placements[dec["pod"]] = None
    evicted: list[str] = []
    generation = 0
    last_attempt: dict[str, int] = {}
    budget = 50 * (len(pending) + 1) + 1000
    while budget > 0:
        budget -= 1
        result = core.schedule_one()
        if result is None:
            # Nothing active: jump over backoff only for pods the cluster changed for.
            waiting = core.queue.pending_pods()["backoff"]
            if not any(last_attempt.get(p.key, -1) < generation for p in waiting):
                break
            nxt = core.queue.next_backoff_expiry()
            if nxt is not None and nxt > clock.now():
                clock.set(nxt)
            core.queue.flush_backoff_completed()
            continue
        key = result.pod.key
        last_attempt[key] = generation
        if result.outcome == "skipped":
            continue
        if result.outcome == "assumed":
            decisions.append({"pod": key, "outcome": "scheduled", "node": result.node})
        elif result.outcome == "preempting":
            decisions.append(
                {
                    "pod": key,
                    "outcome": "preempting",
                    "node": result.node,
                    "victims": [v.key for v in result.victims],
                }
            )
        elif result.outcome == "unschedulable":
            decisions.append({"pod": key, "outcome": "unschedulable", "message": result.message})
        else:
            decisions.append({"pod": key, "outcome": "error", "message": result.message})
        # Apply side effects outside the cycle, as the API server would.
        for pod, node in ports.binds:
            core.on_bind_result(pod.key, BindOutcome.OK)
            core.on_pod_update(None, replace(pod, node_name=node, phase="Running"))
            placements[pod.key] = node
            generation += 1
        ports.binds.clear()
        for _preemptor, cand, lower in ports.preemptions:
            for p in lower:
                core.queue.nominator.delete_nominated_pod_if_exists(p.key)
            core.queue.activate(p.key for p in lower)
            for v in cand.victims:
                core.on_pod_delete(v)
                evicted.append(v.key)
                if v.key in placements:
                    placements[v.key] = None  # a pod placed earlier in this run, evicted
                generation += 1
        ports.preemptions.clear()
        core.flush()
    else:
        notes.append("simulation stopped after its attempt budget; some pods may still loop")
    return SimulationResult(decisions, placements, evicted, notes)


# ------------------------------------------------------------------------- CLI


def _text(result: SimulationResult) -> str:
    lines = [f"{'POD':40} {'OUTCOME':14} {'NODE':20} DETAIL"]
    for d in result.decisions:
        detail = d.get("message") or (
            "victims: " + ", ".join(d["victims"]) if d.get("victims") else ""
        )
        lines.append(f"{d['pod']:40} {d['outcome']:14} {d.get('node', '') or '-':20} {detail}")
    lines.append("")
    lines.append("placements:")
    for pod, node in result.placements.items():
        lines.append(f"  {pod:40} {node or '(pending)'}")
    lines.append("evicted: " + (", ".join(result.evicted) if result.evicted else "(none)"))
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
    except ConfigError as e:
        print(f"py-scheduler simulate: invalid configuration: {e}", file=sys.stderr)
        return 2
    try:
        docs = load_documents(args.files)
        result = simulate(docs, config, seed=args.seed)
    except InputError as e:
        print(f"py-scheduler simulate: {e}", file=sys.stderr)
        return 2
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    output = args.output or ("text" if sys.stdout.isatty() else "json")
    if output == "json":
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(_text(result))
    return 0
