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


def test_cycles_of_every_kind_import_no_module() -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert out.stdout.split() == []
