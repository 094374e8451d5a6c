"""Scheduling cycles import nothing: whatever a cycle needs is imported when the scheduler
starts. A module imported lazily by the first cycle that reaches it costs that cycle its
import (numpy 2's ``np.unique`` imports ``numpy.ma``: 10-30 ms in the first cycle of the
first pod with system default spreading after a start, round 27 in docs/benchmarks.md).

A fresh interpreter imports what ``py-scheduler run`` imports, then runs cycles of
benchmarks/core_bench.py's shapes (pods with and without ReplicaSet owners, so system
default spreading; preemption) and lists the modules that appeared meanwhile."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys
sys.path.insert(0, "benchmarks")
import scheduler.operator  # what `py-scheduler run` imports
import core_bench
before = set(sys.modules)
core_bench.bench_throughput(100, 50, owned=True)
core_bench.bench_throughput(100, 50)
core_bench.bench_preemption(50, 2)
print("\\n".join(sorted(set(sys.modules) - before)))
"""


def _new_modules(script: str) -> list[str]:
    """The modules a fresh interpreter running ``script`` lists (one per line)."""
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return out.stdout.split()


def test_cycles_of_every_kind_import_no_module() -> None:
    assert _new_modules(SCRIPT) == []


DRA_SCRIPT = """
import random, sys
import scheduler.operator  # what `py-scheduler run` imports
from scheduler.framework.plugins.dracel import load_cel
load_cel()  # as LiveScheduler does at start
from scheduler.clock import FakeClock
from scheduler.config import SchedulerConfig
from scheduler.draapi import (
    device_class_from_dict, resource_claim_from_dict, resource_slice_from_dict,
)
from scheduler.schedule_one import SchedulerCore
from scheduler.types import node_from_dict, pod_from_dict
from tests.unit.fakes import RecordingBinder, RecordingRecorder
core = SchedulerCore(
    SchedulerConfig(), FakeClock(), RecordingBinder(), RecordingRecorder(), rng=random.Random(0)
)
core.on_node_add(node_from_dict({
    "metadata": {"name": "n1"},
    "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
}))
core.on_dra_object_set(device_class_from_dict({"metadata": {"name": "gpu"}, "spec": {
    "selectors": [{"cel": {"expression": 'device.capacity["d"].m.compareTo(quantity("1")) >= 0'}}]
}}))
core.on_dra_object_set(resource_slice_from_dict({"metadata": {"name": "s"}, "spec": {
    "driver": "d", "nodeName": "n1", "pool": {"name": "n1"},
    "devices": [{"name": "x", "capacity": {"m": {"value": "2"}}}],
}}))
core.on_dra_object_set(resource_claim_from_dict({
    "metadata": {"name": "c", "namespace": "default"},
    "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}},
}))
before = set(sys.modules)
core.on_pod_add(pod_from_dict({
    "metadata": {"name": "p", "namespace": "default", "uid": "u"},
    "spec": {"schedulerName": "py-scheduler", "containers": [{"name": "c"}],
             "resourceClaims": [{"name": "r", "resourceClaimName": "c"}]},
}))
r = core.schedule_one()
assert r is not None and r.node == "n1", r
print("\\n".join(sorted(set(sys.modules) - before)))
"""


def test_a_cycle_that_evaluates_device_selectors_imports_no_module() -> None:
    assert _new_modules(DRA_SCRIPT) == []
