"""OpportunisticBatching in the live scheduler, against the real API server: pods of one
template, queued together, share the first one's search (each next pod takes the best
node left as its hint), as kube-scheduler 1.35+ does by default; ``--feature-gates
OpportunisticBatching=false`` turns it off. The profile spreads with PodTopologySpread's
``List`` and no default constraints: with upstream's default constraints no pod is signed,
so the default profile never batches (tests/unit/test_batching.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.kit import Kit

LIST_NO_DEFAULTS = {
    "profiles": [
        {"pluginConfig": [{"name": "PodTopologySpread", "args": {"defaultingType": "List"}}]}
    ]
}


@pytest.mark.parametrize("gate", ["on", "off"])
def test_pods_of_one_template_share_one_search(kit: Kit, spawn_scheduler: Any, gate: str) -> None:
    name = f"batch-{gate}-{kit.ns}"[:60]
    nodes = kit.nodes(6, cpu="1", memory="4Gi")
    # Created before the scheduler starts: its first listing queues all six at once, so
    # their cycles follow one another (a hint is given only to the pod of the next cycle,
    # within 0.5 s of the search it comes from).
    pods = [f"web-{i}" for i in range(6)]
    for pod in pods:
        kit.create(pod, cpu="1", memory="1Gi", scheduler=name, labels={"app": "web"})
    args = ["--feature-gates", "OpportunisticBatching=false"] if gate == "off" else []
    sched = spawn_scheduler(name=name, config=LIST_NO_DEFAULTS, extra_args=args)
    where = {pod: kit.wait_bound(pod) for pod in pods}
    assert sorted(where.values()) == sorted(nodes), where  # one pod a node
    assert kit.overcommitted(nodes) == {}
    assert sched.metric("scheduler_schedule_attempts_total", {"result": "scheduled"}) == 6

    def attempts(result: str) -> float:
        labels = {"profile": name, "result": result}
        return sched.metric("scheduler_batch_attempts_total", labels)

    if gate == "off":
        assert attempts("no_hint") == attempts("hint_used") == 0
        return
    # The first pod searched every node; the next ones were given hints, each the best
    # node left, and took them (all six in a row unless the machine stalled a cycle past
    # the kept scores' half second: then a pod searches again and keeps its own).
    used = attempts("hint_used")
    assert used >= 1
    assert used + attempts("no_hint") + attempts("hint_not_used") == 6
    assert attempts("hint_not_used") == 0
