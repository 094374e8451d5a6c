"""In-process benchmarks of the pure core (no API server): a script that measures and
reports, never a test.

1. Scheduling throughput: N nodes (4 cpu, 32Gi, 110 pods) each holding 10 bound pods,
   then P pending pods (100m / 500Mi, upstream scheduler_perf's default pod) scheduled
   through the real SchedulerCore path with an immediate no-op binder. Reports pods/s and
   the per-cycle p50/p99, for N = 100, 1000, 5000; once with pods without an owner, once
   with every pod owned by one of 20 ReplicaSets (system default topology spreading).
2. Memory per bound pod: tracemalloc over building a cache of N x 10 pods.
3. One preemption decision at 5000 nodes x 10 low-priority pods (350m each), the
   preemptor (1 cpu) needing 3 victims on any node: p50/p99 of the PostFilter.

``--scalar`` runs the node-by-node Filter/Score and dry run (``SchedulerCore(vectorized=
False)``) instead of the bulk numpy paths, to compare the two (their results are the same).
``--config FILE`` runs every part under that KubeSchedulerConfiguration (plugin sets and
args) instead of the defaults.

Usage: python benchmarks/core_bench.py [--sizes 100,1000,5000] [--pods 2000] [--json FILE]
                                       [--scalar] [--config FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import platform
import random
import sys
import time
import tracemalloc
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduler.clock import FakeClock
from scheduler.config import ConfigError, SchedulerConfig, load_config
from scheduler.draapi import (
    device_class_from_dict,
    resource_claim_from_dict,
    resource_slice_from_dict,
)
from scheduler.framework.interface import CycleState, Status
from scheduler.framework.preemption import Candidate
from scheduler.schedule_one import BindOutcome, SchedulerCore
from scheduler.types import (
    PodInfo,
    SelectorObject,
    node_from_dict,
    pod_from_dict,
    selector_object_from_dict,
)


class _Ports:
    def __init__(self) -> None:
        self.core: SchedulerCore | None = None
        self.pending: list[tuple[PodInfo, str]] = []
        self.cycles: list[Any] = []  # binding cycles (pods with PreBind work: claims)

    def bind(self, pod: PodInfo, node_name: str, cycle: Any = None) -> None:
        self.pending.append((pod, node_name))
        if cycle is not None:
            self.cycles.append(cycle)

    def scheduled(self, pod: PodInfo, node_name: str) -> None:
        return None

    def failed(
        self, pod: PodInfo, *, reason: str, message: str, nominated_node: str | None
    ) -> None:
        return None

    def skipped_deleting(self, pod: PodInfo) -> None:
        return None

    def prepare_candidate(
        self, preemptor: PodInfo, candidate: Candidate, lower_nominated: Any
    ) -> Status:
        return Status()


def _node(i: int) -> dict[str, Any]:
    name = f"node-{i}"
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"}},
    }


def _pod(
    name: str,
    *,
    cpu: str,
    memory: str,
    node: str = "",
    priority: int = 0,
    start: int = 0,
    owner: str = "",
    extra: dict[str, str] | None = None,
) -> PodInfo:
    spec: dict[str, Any] = {
        "schedulerName": "py-scheduler",
        "priority": priority,
        "containers": [
            {
                "name": "c",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": cpu, "memory": memory, **(extra or {})}},
            }
        ],
    }
    if node:
        spec["nodeName"] = node
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "bench",
        "uid": name,
        "creationTimestamp": f"2026-01-01T00:{start // 60 % 60:02d}:{start % 60:02d}Z",
    }
    if owner:  # a ReplicaSet's pod: system default topology spreading applies
        meta["labels"] = {"app": owner}
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": owner,
                "uid": f"rs-{owner}",
                "controller": True,
            }
        ]
    return pod_from_dict(
        {"metadata": meta, "spec": spec, "status": {"phase": "Running" if node else "Pending"}}
    )


VECTORIZED = True  # --scalar sets it False
UPSTREAM_SELECTOR = True  # --owner-approximation sets it False
CONFIG = SchedulerConfig()  # --config replaces it


def _replica_set(name: str) -> SelectorObject:
    """The ReplicaSet that owns ``_pod(owner=name)`` pods: selector app=<name>."""
    return selector_object_from_dict(
        {
            "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": "bench", "uid": f"rs-{name}"},
            "spec": {"selector": {"matchLabels": {"app": name}}},
        }
    )


def build(
    nodes: int,
    per_node: int,
    *,
    cpu: str = "100m",
    memory: str = "500Mi",
    priority: int = 0,
    owners: int = 0,
) -> tuple[SchedulerCore, _Ports]:
    ports = _Ports()
    core = SchedulerCore(
        CONFIG,
        FakeClock(0.0),
        binder=ports,
        recorder=ports,
        actions=ports,
        rng=random.Random(1),
        vectorized=VECTORIZED,
        upstream_default_selector=UPSTREAM_SELECTOR,
    )
    ports.core = core
    for k in range(owners):  # the ReplicaSets, for upstream's default spreading selector
        core.on_selector_object_set("ReplicaSet", _replica_set(f"rs-{k}"))
    for i in range(nodes):
        core.on_node_add(node_from_dict(_node(i)))
    k = 0
    for i in range(nodes):
        for j in range(per_node):
            core.on_pod_add(
                _pod(
                    f"b-{i}-{j}",
                    cpu=cpu,
                    memory=memory,
                    node=f"node-{i}",
                    priority=priority,
                    start=j,
                    owner=f"rs-{k % owners}" if owners else "",
                )
            )
            k += 1
    # As the live scheduler does once its informers have synced (kube/live.py settle_heap):
    # the cache's records go to the collector's permanent generation.
    gc.collect()
    gc.freeze()
    return core, ports


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def _drain(core: SchedulerCore, ports: _Ports) -> tuple[list[float], float]:
    """Cycles until the queue is empty, each bound at once (a binding cycle's PreBind run
    first, for pods that have one); each cycle's seconds, and the whole."""
    loop: asyncio.AbstractEventLoop | None = None
    cycles: list[float] = []
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        r = core.schedule_one()
        if r is None:
            break
        if ports.cycles:
            loop = loop or asyncio.new_event_loop()
            for cycle in ports.cycles:
                cycle.begin()
                loop.run_until_complete(cycle.finish_async())
            ports.cycles.clear()
        for pod, node in ports.pending:
            core.on_bind_result(pod.key, BindOutcome.OK)
            core.on_pod_update(None, replace(pod, node_name=node, phase="Running"))
        ports.pending.clear()
        cycles.append(time.perf_counter() - t0)
    total = time.perf_counter() - start
    if loop is not None:
        loop.close()
    return cycles, total


def bench_throughput(nodes: int, pods: int, *, owned: bool = False) -> dict[str, Any]:
    """``owned``: the pending pods belong to ReplicaSets (20 of them, as do the bound pods),
    so that PodTopologySpread's system default constraints count matching pods."""
    core, ports = build(nodes, 10, owners=20 if owned else 0)
    for i in range(pods):
        owner = f"rs-{i % 20}" if owned else ""
        core.queue.add(_pod(f"p-{i}", cpu="100m", memory="500Mi", owner=owner))
    cycles, total = _drain(core, ports)
    return {
        "nodes": nodes,
        "pods": pods,
        "owned": owned,
        "pods_per_second": round(len(cycles) / total, 1),
        # The first cycle builds the snapshot (and, for owned pods, its pods-by-label index).
        "first_cycle_ms": round(cycles[0] * 1000, 1) if cycles else None,
        "cycle_p50_ms": round(pct(cycles, 0.5) * 1000, 3),
        "cycle_p99_ms": round(pct(cycles, 0.99) * 1000, 3),
    }


DRIVER = "gpu.bench.example.com"


EXTENDED = "example.com/gpu"


def bench_dra(nodes: int, pods: int, devices: int = 8, *, extended: bool = False) -> dict[str, Any]:
    """Pods with one ResourceClaim each (one device of a class whose CEL selector reads
    the driver and an attribute) on nodes that each publish a ResourceSlice of ``devices``
    devices: DynamicResources allocates on every node Filter visits, Reserve holds the
    device, and PreBind (no API server: the assumption becomes the claim) writes it.
    ``extended``: the pods ask for the extended resource the class backs instead (each
    gets a claim of its own, made in Filter, created in PreBind)."""
    from scheduler.framework.plugins.dracel import load_cel

    load_cel()  # as the live scheduler does at start
    core, ports = build(nodes, 10)
    selector = f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].model == "a100"'
    core.on_dra_object_set(
        device_class_from_dict(
            {
                "metadata": {"name": "gpu"},
                "spec": {
                    "selectors": [{"cel": {"expression": selector}}],
                    **({"extendedResourceName": EXTENDED} if extended else {}),
                },
            }
        )
    )
    for i in range(nodes):
        node = f"node-{i}"
        devs = [
            {
                "name": f"gpu-{d}",
                "attributes": {"model": {"string": "a100"}, "index": {"int": d}},
                "capacity": {"memory": {"value": "40Gi"}},
            }
            for d in range(devices)
        ]
        core.on_dra_object_set(
            resource_slice_from_dict(
                {
                    "metadata": {"name": f"{node}-gpus"},
                    "spec": {
                        "driver": DRIVER,
                        "nodeName": node,
                        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                        "devices": devs,
                    },
                }
            )
        )
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu"}}
    for i in range(pods):
        if extended:
            core.queue.add(_pod(f"p-{i}", cpu="100m", memory="500Mi", extra={EXTENDED: "1"}))
            continue
        core.on_dra_object_set(
            resource_claim_from_dict(
                {
                    "metadata": {"name": f"c-{i}", "namespace": "bench", "uid": f"c-{i}"},
                    "spec": {"devices": {"requests": [request]}},
                }
            )
        )
        pod = _pod(f"p-{i}", cpu="100m", memory="500Mi")
        claims = (("gpu", f"c-{i}", "", None),)
        core.queue.add(replace(pod, resource_claims=claims))
    # As the live scheduler does once its informers have synced (slices and claims too).
    gc.collect()
    gc.freeze()
    cycles, total = _drain(core, ports)
    allocated = sum(1 for c in core.dra.claims.values() if core.dra.claim(c.key).allocation)  # type: ignore[union-attr]
    return {
        "nodes": nodes,
        "pods": pods,
        "extended": extended,
        "devices_per_node": devices,
        "allocated_claims": allocated,
        "pods_per_second": round(len(cycles) / total, 1),
        "first_cycle_ms": round(cycles[0] * 1000, 1) if cycles else None,
        "cycle_p50_ms": round(pct(cycles, 0.5) * 1000, 3),
        "cycle_p99_ms": round(pct(cycles, 0.99) * 1000, 3),
    }


def bench_memory(nodes: int, per_node: int = 10) -> dict[str, Any]:
    """Python heap (tracemalloc) held by the core per node and per bound pod: nodes are
    added first, then their pods, and each step's growth is divided by its count."""
    tracemalloc.start()
    s0 = tracemalloc.take_snapshot()
    core, _ = build(nodes, 0)
    s1 = tracemalloc.take_snapshot()
    for i in range(nodes):
        for j in range(per_node):
            core.on_pod_add(
                _pod(f"b-{i}-{j}", cpu="100m", memory="500Mi", node=f"node-{i}", start=j)
            )
    s2 = tracemalloc.take_snapshot()
    tracemalloc.stop()
    node_bytes = sum(d.size_diff for d in s1.compare_to(s0, "filename"))
    pod_bytes = sum(d.size_diff for d in s2.compare_to(s1, "filename"))
    pods = core.cache.pod_count()
    return {
        "nodes": nodes,
        "bound_pods": pods,
        "bytes_per_node": round(node_bytes / nodes),
        "bytes_per_bound_pod": round(pod_bytes / pods),
    }


def bench_preemption(nodes: int, runs: int) -> dict[str, Any]:
    # 10 pods x 350m = 3.5 of 4 cpu used; a 1.5-cpu preemptor needs 3 victims anywhere.
    core, _ = build(nodes, 10, cpu="350m", memory="1Gi", priority=0)
    core.cache.update_snapshot(core.snapshot)
    pre = _pod("preemptor", cpu="1500m", memory="1Gi", priority=1000)
    state = CycleState()
    fw = core.framework
    fw.run_pre_filter(state, pre, core.snapshot)
    statuses = {ni.name: fw.run_filter(state, pre, ni) for ni in core.snapshot.node_info_list}
    times: list[float] = []
    victims = 0
    for _ in range(runs):
        t0 = time.perf_counter()
        result, status = fw.run_post_filter(state.clone(), pre, statuses)
        times.append(time.perf_counter() - t0)
        assert status.is_success(), status
        cand = core.evaluator.last_candidate
        assert cand is not None and result is not None
        victims = len(cand.victims)
    return {
        "nodes": nodes,
        "pods_per_node": 10,
        "victims": victims,
        "decision_p50_ms": round(pct(times, 0.5) * 1000, 2),
        "decision_p99_ms": round(pct(times, 0.99) * 1000, 2),
        "runs": runs,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,1000,5000")
    ap.add_argument("--pods", type=int, default=2000)
    ap.add_argument("--preemption-runs", type=int, default=30)
    ap.add_argument(
        "--dra-pods",
        type=int,
        default=500,
        help="pods with a ResourceClaim each, per size (0: none)",
    )
    ap.add_argument("--json", help="write the raw results here")
    ap.add_argument(
        "--config",
        help="a KubeSchedulerConfiguration for every run (its first profile schedules the "
        "pods, and must be named py-scheduler); default: every default",
    )
    ap.add_argument("--scalar", action="store_true", help="node-by-node paths, no numpy")
    ap.add_argument(
        "--owner-approximation",
        action="store_true",
        help="default spreading selects by controller owner (no ReplicaSet objects)",
    )
    args = ap.parse_args()
    global VECTORIZED, UPSTREAM_SELECTOR, CONFIG
    if args.config:
        try:
            CONFIG = load_config(args.config)
        except ConfigError as e:
            ap.error(str(e))
        if CONFIG.scheduler_name != "py-scheduler":
            ap.error(f"{args.config}: the first profile must be named py-scheduler")
    VECTORIZED = not args.scalar
    UPSTREAM_SELECTOR = not args.owner_approximation
    sizes = [int(s) for s in args.sizes.split(",") if s]
    out: dict[str, Any] = {
        "machine": {
            "python": platform.python_version(),
            "cpu": platform.processor() or platform.machine(),
        },
        "date": time.strftime("%Y-%m-%d"),
        "vectorized": VECTORIZED,
        "upstream_default_selector": UPSTREAM_SELECTOR,
        "config": args.config or "",
        "throughput": [],
    }
    for n in sizes:
        for owned in (False, True):
            r = bench_throughput(n, args.pods if not owned else min(args.pods, 500), owned=owned)
            out["throughput"].append(r)
            what = "owned by ReplicaSets" if owned else "no owner"
            print(
                f"throughput  nodes={n:5d} pods={r['pods']} ({what}): "
                f"{r['pods_per_second']:8.1f} pods/s "
                f"p50={r['cycle_p50_ms']} ms p99={r['cycle_p99_ms']} ms "
                f"first={r['first_cycle_ms']} ms",
                flush=True,
            )
        if args.dra_pods > 0:
            for extended in (False, True):
                d = bench_dra(n, args.dra_pods, extended=extended)
                out.setdefault("dra", []).append(d)
                what = f"{EXTENDED}: 1 each" if extended else "one claim each"
                print(
                    f"dra         nodes={n:5d} pods={d['pods']} ({what}, "
                    f"{d['allocated_claims']} allocated): {d['pods_per_second']:8.1f} pods/s "
                    f"p50={d['cycle_p50_ms']} ms p99={d['cycle_p99_ms']} ms "
                    f"first={d['first_cycle_ms']} ms",
                    flush=True,
                )
    big = max(sizes)
    out["memory"] = bench_memory(big)
    print(
        f"memory      {out['memory']['bytes_per_bound_pod']} bytes of Python heap per bound "
        f"pod ({out['memory']['bound_pods']} pods), {out['memory']['bytes_per_node']} per node "
        f"({out['memory']['nodes']} nodes)",
        flush=True,
    )
    if args.preemption_runs > 0:
        out["preemption"] = p = bench_preemption(big, args.preemption_runs)
        print(
            f"preemption  nodes={big} victims={p['victims']}: p50={p['decision_p50_ms']} ms "
            f"p99={p['decision_p99_ms']} ms over {p['runs']} decisions",
            flush=True,
        )
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
