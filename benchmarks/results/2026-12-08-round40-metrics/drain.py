"""Build core_bench's cluster and drain N pending pods (run under callgrind, round 40).

Arguments: N, the number of nodes, and OBS (1: the live scheduler's Metrics as the core's
observer, as in ``py-scheduler run``; 0: none, as core_bench). ``SRC`` names the checkout
whose ``benchmarks/`` to use."""

from __future__ import annotations

import functools
import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("SRC", "."), "benchmarks"))

import core_bench

from scheduler.metrics import Metrics

n, nodes, obs = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
if obs:
    core_bench.SchedulerCore = functools.partial(core_bench.SchedulerCore, observer=Metrics())
core, ports = core_bench.build(nodes, 10, owners=0)
assert (core.observer is not None) == obs
for i in range(n):
    core.queue.add(core_bench._pod(f"p-{i}", cpu="100m", memory="500Mi", owner=""))
core_bench._drain(core, ports)
