#!/usr/bin/env python3
"""simulate at production scale: objects/s for JSON Lists and multi-document YAML, and the
time and peak memory of a large cluster dump, end to end (``py-scheduler simulate`` as a
process: reading, decoding, loading the cache, scheduling, printing).

A script that measures and reports, never a test. It writes synthetic dumps in the shape of
``kubectl get nodes,pods,pdb,priorityclasses,replicasets -A -o json|yaml`` (4-cpu nodes,
30 bound pods per node of 100m / 128Mi owned by ReplicaSets, which are in the dump too,
pending pods of 100m), runs
``py-scheduler simulate -o json`` on each, and prints a Markdown table (and --json).

Usage:
    python benchmarks/simulate_bench.py [--sizes 1000x30x1000,5000x30x1000] [--runs 3]
        [--formats json,yaml] [--phases] [--json FILE]

``--phases`` adds, per dump, the seconds of each step of a simulation (imports, reading and
decoding the files, parsing the objects, loading the cache and queue, scheduling, output)
from as many runs of a child that takes simulate's steps one by one (median per step).

The size ``NxPxQ`` is N nodes, P bound pods per node, Q pending pods. The issue's goals:
>= 20,000 objects/s (JSON) and >= 5,000 objects/s (YAML) at 1000x30x1000 (32,000 objects);
5000 nodes / 150,000 pods simulated in under 60 s.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
TS = "2026-01-01T00:00:00Z"


def _node(i: int) -> dict[str, Any]:
    name = f"node-{i}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"node-uid-{i}",
            "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": f"z{i % 3}"},
        },
        "spec": {},
        "status": {
            "allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"},
            "capacity": {"cpu": "4", "memory": "32Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _pod(name: str, node: str | None, app: str) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "creationTimestamp": TS,
            "labels": {"app": app, "pod-template-hash": "5d9c"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"{app}-5d9c",
                    "uid": f"rs-{app}",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "schedulerName": "py-scheduler",
            "containers": [
                {
                    "name": "app",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                }
            ],
        },
        "status": {"phase": "Pending"},
    }
    if node:
        pod["spec"]["nodeName"] = node
        pod["status"] = {
            "phase": "Running",
            "startTime": TS,
            "podIP": "10.0.0.1",
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "True"},
            ],
        }
    return pod


def _replicaset(app: str) -> dict[str, Any]:
    """The ReplicaSet the pods of ``app`` name as owner: system default spreading selects
    their peers through it (upstream's DefaultSelector), as in a real dump."""
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": f"{app}-5d9c", "namespace": "default", "uid": f"rs-{app}"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": app, "pod-template-hash": "5d9c"}},
        },
    }


def objects(nodes: int, per_node: int, pending: int) -> list[dict[str, Any]]:
    apps = [f"app-{j}" for j in range(min(per_node, 50))]
    apps += [f"new-{k}" for k in range(min(pending, 20))]
    out = [_replicaset(app) for app in apps]
    out += [_node(i) for i in range(nodes)]
    for i in range(nodes):
        for j in range(per_node):
            out.append(_pod(f"bound-{i}-{j}", f"node-{i}", f"app-{j % 50}"))
    out += [_pod(f"pending-{k}", None, f"new-{k % 20}") for k in range(pending)]
    return out


def write(path: Path, objs: list[dict[str, Any]], fmt: str) -> None:
    if fmt == "json":
        path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}))
    else:
        path.write_text(yaml.dump_all(objs, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper)))


def child_env(cache_dir: Path) -> dict[str, str]:
    """The environment of the measured runs: bytecode cached (under ``cache_dir``), as in an
    installed package. pip compiles a package's modules when it installs it, but the
    editable install of a checkout has no bytecode, and with PYTHONDONTWRITEBYTECODE set (as
    on these machines) every run would compile our modules again (~0.1 s of each run)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(cache_dir)
    return env


def run_once(path: Path, env: dict[str, str] | None = None) -> dict[str, float]:
    exe = Path(sys.executable).parent / "py-scheduler"
    cmd = [str(exe), "simulate", "-f", str(path), "-o", "json"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, check=False, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"simulate failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
    out = json.loads(proc.stdout)
    placed = sum(1 for v in out["placements"].values() if v)
    return {
        "wall_s": wall,
        "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "peak_rss_mib": after.ru_maxrss / 1024,  # the largest child so far (Linux: KiB)
        "placed": placed,
    }


# ``scheduler.simulate.main`` without what-if options, each step timed through
# ``simulate(step=...)`` (the collector handled as main does: off while reading and loading,
# on once the cache is loaded, with what exists frozen).
PHASES_SCRIPT = """
import time
t0 = time.perf_counter()
import gc, json, sys
from scheduler.config import load_config
from scheduler.decode import load_documents
from scheduler.simulate import simulate
marks = {"import": time.perf_counter()}
gc.disable()
config = load_config(None)
docs = load_documents([sys.argv[1]])
marks["read_decode"] = time.perf_counter()

def loaded():
    gc.freeze()
    gc.enable()

def step(name):
    marks[name] = time.perf_counter()

result = simulate(docs, config, loaded=loaded, step=step)
text = json.dumps(result.to_json(), indent=2)
marks["output"] = time.perf_counter()
seconds, last = {}, t0
for name, at in marks.items():
    seconds[name], last = at - last, at
print(json.dumps(seconds))
"""


def phases_once(path: Path, env: dict[str, str]) -> dict[str, float]:
    cmd = [sys.executable, "-c", PHASES_SCRIPT, str(path)]
    proc = subprocess.run(cmd, capture_output=True, check=False, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"phases failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
    result: dict[str, float] = json.loads(proc.stdout)
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default="1000x30x1000,5000x30x1000")
    ap.add_argument("--formats", default="json,yaml")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--phases", action="store_true", help="also time each step (see above)")
    ap.add_argument("--json", help="write the raw results here")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="simbench-") as tmp:
        env = child_env(Path(tmp) / "pycache")
        warmed = False
        for size in args.sizes.split(","):
            n, p, q = (int(x) for x in size.split("x"))
            objs = objects(n, p, q)
            for fmt in args.formats.split(","):
                if fmt == "yaml" and len(objs) > 50_000:
                    continue  # the large size is measured as JSON (kubectl -o json)
                path = Path(tmp) / f"dump-{size}.{fmt}"
                write(path, objs, fmt)
                if not warmed:  # writes the bytecode cache; not counted
                    run_once(path, env)
                    warmed = True
                runs = [run_once(path, env) for _ in range(args.runs)]
                walls = sorted(r["wall_s"] for r in runs)
                median = walls[len(walls) // 2]
                row = {
                    "size": size,
                    "format": fmt,
                    "objects": len(objs),
                    "bytes": path.stat().st_size,
                    "wall_s_median": round(median, 2),
                    "wall_s_min": round(walls[0], 2),
                    "cpu_s_median": round(sorted(r["cpu_s"] for r in runs)[len(runs) // 2], 2),
                    "objects_per_s": round(len(objs) / median),
                    "peak_rss_mib": round(max(r["peak_rss_mib"] for r in runs)),
                    "placed": runs[0]["placed"],
                }
                if args.phases:
                    steps = [phases_once(path, env) for _ in range(args.runs)]
                    row["phases_s"] = {
                        k: round(sorted(st[k] for st in steps)[len(steps) // 2], 3)
                        for k in steps[0]
                    }
                rows.append(row)
                print(f"[simbench] {row}", file=sys.stderr, flush=True)
                path.unlink()
    print(
        "| size | format | objects | MB | wall s (median) | CPU s | objects/s "
        "| peak RSS MiB | placed |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(
            f"| {r['size']} | {r['format']} | {r['objects']} | {r['bytes'] / 1e6:.1f} | "
            f"{r['wall_s_median']} | {r['cpu_s_median']} | {r['objects_per_s']} | "
            f"{r['peak_rss_mib']} | {r['placed']} |"
        )
    timed = [r for r in rows if "phases_s" in r]
    if timed:
        steps = list(timed[0]["phases_s"])
        print()
        print("| size | format | " + " | ".join(f"{k} s" for k in steps) + " |")
        print("| --- | --- | " + " | ".join("---" for _ in steps) + " |")
        for r in timed:
            cells = " | ".join(str(r["phases_s"][k]) for k in steps)
            print(f"| {r['size']} | {r['format']} | {cells} |")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"host_cpus": os.cpu_count(), "rows": rows}, indent=2)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
