"""NodeResourcesBalancedAllocation: the 1.37 score 50 + (50 + with - without) // 2 on the
real (not non-zero) requests, and the best-effort skip. Case names and numbers mirror
upstream's noderesources/balanced_allocation_test.go; upstream's makeNode there takes cpu in
millicores and memory in bytes."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from scheduler.backend.cache.snapshot import Snapshot
from scheduler.framework.interface import CycleState
from scheduler.framework.plugins.noderesources.balanced_allocation import (
    BalancedAllocation,
    balanced_score,
)
from scheduler.framework.plugins.noderesources.fit import ResourceSpec
from scheduler.types import NodeInfo, PodInfo
from tests.builders import make_node, make_pod

_names = itertools.count()
GPU = "nvidia.com/gpu"
WITH_GPU = (ResourceSpec("cpu"), ResourceSpec("memory"), ResourceSpec(GPU))


def cm(cpu: str, mem: str, gpu: str = "") -> dict[str, str]:
    out = {"cpu": cpu, "memory": mem}
    if gpu:
        out[GPU] = gpu
    return out


def cpu_only(cpu: str) -> dict[str, str]:
    return {"cpu": cpu}


def pod(*containers: dict[str, str], node: str = "") -> PodInfo:
    b = make_pod(f"p{next(_names)}").requests(*containers)
    if node:
        b.node(node)
    return b.info()


def make(name: str, milli_cpu: int, memory: int, gpu: int = 0, *pods: PodInfo) -> NodeInfo:
    alloc: dict[str, Any] = {"cpu": f"{milli_cpu}m", "memory": str(memory)}
    if gpu:
        alloc[GPU] = str(gpu)
    return make_node(name).alloc(**alloc).info(*pods)


TWO = (cm("1000m", "2000"), cm("2000m", "3000"))
CPU_TWO = (cpu_only("1000m"), cpu_only("2000m"))


@pytest.mark.parametrize(
    ("incoming", "nodes", "resources", "want"),
    [
        pytest.param(
            pod(*TWO),
            [make("node1", 4000, 10000), make("node2", 6000, 10000)],
            None,
            [68, 75],
            id="nothing scheduled, resources requested, differently sized nodes",
        ),
        pytest.param(
            pod(*TWO),
            [
                make("node1", 10000, 20000, 0, pod(*CPU_TWO, node="node1")),
                make("node2", 10000, 20000, 0, pod(*TWO, node="node2")),
            ],
            None,
            [73, 74],
            id="resources requested, pods scheduled with resources",
        ),
        pytest.param(
            pod(*TWO),
            [
                make("node1", 10000, 20000, 0, pod(*CPU_TWO, node="node1")),
                make("node2", 10000, 50000, 0, pod(*TWO, node="node2")),
            ],
            None,
            [73, 70],
            id="resources requested, pods scheduled with resources, differently sized nodes",
        ),
        pytest.param(
            pod({"memory": "2000"}, {"memory": "3000"}),
            [make("node1", 3000, 5000, 0, pod(*CPU_TWO, node="node1")), make("node2", 3000, 5000)],
            None,
            [100, 50],
            id="resources requested, pods scheduled with resources, nodes to reach min/max score",
        ),
        pytest.param(
            pod(*CPU_TWO),
            [
                make("node1", 6000, 10000, 0, pod(*CPU_TWO, node="node1")),
                make("node2", 6000, 10000, 0, pod(*TWO, node="node2")),
            ],
            None,
            [62, 62],
            id="requested resources at node capacity",
        ),
        pytest.param(
            pod(cm("0", "0", "1")),
            [
                make(
                    "node1",
                    3500,
                    40000,
                    8,
                    pod(cm("1000m", "2000"), cm("2000m", "3000", "3"), node="node1"),
                ),
                make("node2", 3500, 40000, 8, pod(*TWO, node="node2")),
            ],
            WITH_GPU,
            [75, 76],
            id="scalar resource is included in the score computation if pod requests the "
            "scalar resource",
        ),
        pytest.param(
            pod(*TWO),
            [make("node1", 3500, 40000, 8), make("node2", 3500, 40000)],
            WITH_GPU,
            [56, 56],
            id="scalar resource is not included in the score computation if pod doesn't "
            "request the "
            "scalar resource",
        ),
    ],
)
def test_score(
    incoming: PodInfo,
    nodes: list[NodeInfo],
    resources: tuple[ResourceSpec, ...] | None,
    want: list[int],
) -> None:
    plugin = BalancedAllocation(resources) if resources else BalancedAllocation()
    state = CycleState()
    assert plugin.pre_score(state, incoming, nodes, Snapshot.from_node_infos(nodes)).is_success()
    assert plugin.name not in state.skip_score_plugins
    got = [plugin.score(state, incoming, ni) for ni in nodes]
    normalized = list(got)
    plugin.normalize_scores(state, incoming, normalized)
    assert got == normalized == want


@pytest.mark.parametrize(
    ("incoming", "skipped"),
    [
        pytest.param(pod(), True, id="nothing scheduled, nothing requested, skip in PreScore"),
        pytest.param(
            make_pod("p").info(), True, id="a container without requests is best-effort too"
        ),
        pytest.param(
            make_pod("p").req(gpu=1).info(),
            True,
            id="a request for a resource that is not scored is best-effort",
        ),
        pytest.param(
            make_pod("p").req(ephemeral_storage="1Gi").info(),
            True,
            id="ephemeral storage alone is best-effort for cpu/memory scoring",
        ),
        pytest.param(make_pod("p").req(cpu="1m").info(), False, id="any cpu request is scored"),
    ],
)
def test_best_effort_pods_are_skipped(incoming: PodInfo, skipped: bool) -> None:
    state = CycleState()
    BalancedAllocation().pre_score(state, incoming, [], Snapshot())
    assert (BalancedAllocation.name in state.skip_score_plugins) is skipped


@pytest.mark.parametrize(
    ("requested", "allocatable", "want"),
    [
        pytest.param([0, 0], [100, 100], 100, id="empty and balanced"),
        pytest.param([50, 0], [100, 100], 75, id="two fractions: std is half the difference"),
        pytest.param([200, 0], [100, 100], 50, id="fractions cap at 1"),
        pytest.param([50, 0, 0], [100, 100, 0], 75, id="zero allocatable is skipped"),
        pytest.param([30, 60, 90], [100, 100, 100], 75, id="three fractions: population std"),
        pytest.param([50], [100], 100, id="one fraction: std 0"),
    ],
)
def test_balanced_resource_score(requested: list[int], allocatable: list[int], want: int) -> None:
    assert balanced_score(requested, allocatable) == want


def test_score_formula_is_the_change_in_balance() -> None:
    """50 + (50 + with - without) // 2, as upstream 1.37: 75 when the pod changes nothing."""
    ni = make("n", 4000, 4000, 0, pod(cm("2000m", "2000"), node="n"))
    plugin = BalancedAllocation()
    state = CycleState()
    balanced = pod(cm("1000m", "1000"))
    assert plugin.score(state, balanced, ni) == 75
    lopsided = pod(cm("2000m", "0"))  # with: |1 - 0.5| / 2 = 0.25 -> 75; without: 100
    assert plugin.score(state, lopsided, ni) == 50 + (50 + 75 - 100) // 2
