"""Queueing hints under load (run under callgrind, round 40).

U pending pods of 64 CPUs fail on a one-node cluster (NodeResourcesFit rejects them), then
the node's labels are updated E times: each Node/Update runs Fit's hint for every one of
them, and it says QueueSkip (the node is still too small), so U x E hint calls and no move.
Arguments: U, E, OBS (1: the live scheduler's Metrics as the core's observer, so the calls
are timed). RUN=0 in the environment skips the updates (the baseline)."""

from __future__ import annotations

import os
import random
import sys

sys.path.insert(0, os.path.join(os.environ.get("SRC", "."), "benchmarks"))

import core_bench

from scheduler.clock import FakeClock
from scheduler.config import SchedulerConfig
from scheduler.metrics import Metrics
from scheduler.schedule_one import SchedulerCore
from scheduler.types import node_from_dict

u, e, obs = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
ports = core_bench._Ports()
core = SchedulerCore(
    SchedulerConfig(),
    FakeClock(0.0),
    binder=ports,
    recorder=ports,
    actions=None,
    rng=random.Random(1),
    observer=Metrics() if obs else None,
)
base = node_from_dict(core_bench._node(0))
core.on_node_add(base)
for i in range(u):
    core.queue.add(core_bench._pod(f"big-{i}", cpu="64", memory="1Gi", owner=""))
while core.schedule_one() is not None:
    pass
assert len(core.queue.pending_pods()["unschedulable"]) == u, core.queue.counts()
if os.environ.get("RUN", "1") == "1":
    old = base
    for i in range(e):
        raw = core_bench._node(0)
        raw["metadata"]["labels"]["round"] = str(i)
        new = node_from_dict(raw)
        core.on_node_update(old, new)
        old = new
    if obs and hasattr(core.queue, "take_hint_times"):
        # What the scrape (or the flush loop, each second) does with the timings.
        core.observer.fold_hint_times(core.queue.take_hint_times())  # type: ignore[union-attr]
assert len(core.queue.pending_pods()["unschedulable"]) == u
