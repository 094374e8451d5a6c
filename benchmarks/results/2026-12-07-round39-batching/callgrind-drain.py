"""Build core_bench's cluster and drain N pending pods (run under callgrind, round 39).

Arguments: CONFIG (``default`` or a KubeSchedulerConfiguration file), ``plain`` or
``owned`` (pods owned by 20 ReplicaSets in turn), N, the number of nodes, and the pods'
CPU request (default 100m). ``SRC`` names the checkout whose ``benchmarks/`` to use."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("SRC", "."), "benchmarks"))

import core_bench

from scheduler.config import load_config

cfg, kind, n, nodes = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
cpu = sys.argv[5] if len(sys.argv) > 5 else "100m"
if cfg != "default":
    core_bench.CONFIG = load_config(cfg)
core, ports = core_bench.build(nodes, 10, owners=20 if kind == "owned" else 0)
for i in range(n):
    owner = f"rs-{i % 20}" if kind == "owned" else ""
    core.queue.add(core_bench._pod(f"p-{i}", cpu=cpu, memory="500Mi", owner=owner))
core_bench._drain(core, ports)
