"""NodeResourcesFit: the filter (reasons and codes), LeastAllocated / MostAllocated /
RequestedToCapacityRatio scores and the queueing hints.

Case names and numbers mirror upstream's noderesources fit_test.go, least_allocated_test.go,
most_allocated_test.go and requested_to_capacity_ratio_test.go. Upstream's node there has
allocatable cpu 10m, memory 20, pods 32, example.com/aaa 5, ephemeral-storage 20 and
hugepages-2Mi 5, and holds one pod with the "existing" requests.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from scheduler.framework.interface import Code, CycleState, QueueingHint
from scheduler.framework.plugins.noderesources.fit import (
    LEAST_ALLOCATED,
    MOST_ALLOCATED,
    REQUESTED_TO_CAPACITY_RATIO,
    InsufficientResource,
    NodeResourcesFit,
    ResourceSpec,
    insufficient_resources,
)
from scheduler.types import NodeInfo, NodeRecord, PodInfo
from tests.builders import make_node, make_pod

EXT_A = "example.com/aaa"
EXT_B = "example.com/bbb"
K8S_IO_A = "kubernetes.io/something"
K8S_IO_B = "subdomain.kubernetes.io/something"
HUGE_A = "hugepages-2Mi"

_names = itertools.count()


def res(cpu: int = 0, mem: int = 0, **scalar: int) -> dict[str, Any]:
    """Upstream's framework.Resource{MilliCPU, Memory, ScalarResources} as a request list."""
    names = {"ext_a": EXT_A, "ext_b": EXT_B, "io_a": K8S_IO_A, "io_b": K8S_IO_B, "huge": HUGE_A}
    out: dict[str, Any] = {"cpu": f"{cpu}m", "memory": str(mem)}
    out.update({names[k]: str(v) for k, v in scalar.items()})
    return out


def upod(
    *containers: dict[str, Any],
    inits: tuple[dict[str, Any], ...] = (),
    overhead: dict[str, str] | None = None,
    pod_level: dict[str, str] | None = None,
    node: str = "",
) -> PodInfo:
    """Upstream's newResourcePod / newResourceInitPod / newResourceOverheadPod."""
    b = make_pod(f"p{next(_names)}").requests(*containers)
    for i in inits:
        b.init_container(i)
    if overhead:
        b.overhead(**overhead)
    if pod_level:
        b.pod_requests(**pod_level)
    if node:
        b.node(node)
    return b.info()


def upstream_node(existing: dict[str, Any] | None, *, pods: int = 32) -> NodeInfo:
    alloc = {"cpu": "10m", "memory": "20", "pods": pods, "ephemeral-storage": "20"}
    alloc.update({EXT_A: "5", HUGE_A: "5"})
    nb = make_node("n1").alloc(**alloc)
    return nb.info(upod(existing, node="n1")) if existing is not None else nb.info()


def ir(name: str, requested: int, used: int, capacity: int, unresolvable: bool = False) -> Any:
    return InsufficientResource(
        name, f"Insufficient {name}", requested, used, capacity, unresolvable
    )


UNSCHED = Code.UNSCHEDULABLE
UNRESOLVABLE = Code.UNSCHEDULABLE_AND_UNRESOLVABLE


@pytest.mark.parametrize(
    ("pod", "existing", "code", "want"),
    [
        pytest.param(
            upod(), res(10, 20), Code.SUCCESS, [], id="no resources requested always fits"
        ),
        pytest.param(
            upod(res(1, 1)),
            res(10, 20),
            UNSCHED,
            [ir("cpu", 1, 10, 10), ir("memory", 1, 20, 20)],
            id="too many resources fails",
        ),
        pytest.param(
            upod(res(1, 1), inits=(res(3, 1),)),
            res(8, 19),
            UNSCHED,
            [ir("cpu", 3, 8, 10)],
            id="too many resources fails due to init container cpu",
        ),
        pytest.param(
            upod(res(1, 1), inits=(res(3, 1), res(2, 1))),
            res(8, 19),
            UNSCHED,
            [ir("cpu", 3, 8, 10)],
            id="too many resources fails due to highest init container cpu",
        ),
        pytest.param(
            upod(res(1, 1), inits=(res(1, 3),)),
            res(9, 19),
            UNSCHED,
            [ir("memory", 3, 19, 20)],
            id="too many resources fails due to init container memory",
        ),
        pytest.param(
            upod(res(1, 1), inits=(res(1, 3), res(1, 2))),
            res(9, 19),
            UNSCHED,
            [ir("memory", 3, 19, 20)],
            id="too many resources fails due to highest init container memory",
        ),
        pytest.param(
            upod(res(1, 1), inits=(res(1, 1),)),
            res(9, 19),
            Code.SUCCESS,
            [],
            id="init container fits because it's the max, not sum, of containers and "
            "init containers",
        ),
        pytest.param(
            upod(res(1, 1), inits=(res(1, 1), res(1, 1))),
            res(9, 19),
            Code.SUCCESS,
            [],
            id="multiple init containers fit because it's the max, not sum, of containers and "
            "init containers",
        ),
        pytest.param(upod(res(1, 1)), res(5, 5), Code.SUCCESS, [], id="both resources fit"),
        pytest.param(
            upod(res(2, 1)),
            res(9, 5),
            UNSCHED,
            [ir("cpu", 2, 9, 10)],
            id="one resource memory fits",
        ),
        pytest.param(
            upod(res(1, 2)),
            res(5, 19),
            UNSCHED,
            [ir("memory", 2, 19, 20)],
            id="one resource cpu fits",
        ),
        pytest.param(upod(res(5, 1)), res(5, 19), Code.SUCCESS, [], id="equal edge case"),
        pytest.param(
            upod(res(4, 1), inits=(res(5, 1),)),
            res(5, 19),
            Code.SUCCESS,
            [],
            id="equal edge case for init container",
        ),
        pytest.param(upod(res(ext_a=1)), res(), Code.SUCCESS, [], id="extended resource fits"),
        pytest.param(
            upod(res(), inits=(res(ext_a=1),)),
            res(),
            Code.SUCCESS,
            [],
            id="extended resource fits for init container",
        ),
        pytest.param(
            upod(res(1, 1, ext_a=10)),
            res(0, 0, ext_a=0),
            UNRESOLVABLE,
            [ir(EXT_A, 10, 0, 5, True)],
            id="extended resource capacity enforced",
        ),
        pytest.param(
            upod(res(), inits=(res(1, 1, ext_a=10),)),
            res(0, 0, ext_a=0),
            UNRESOLVABLE,
            [ir(EXT_A, 10, 0, 5, True)],
            id="extended resource capacity enforced for init container",
        ),
        pytest.param(
            upod(res(1, 1, ext_a=1)),
            res(0, 0, ext_a=5),
            UNSCHED,
            [ir(EXT_A, 1, 5, 5)],
            id="extended resource allocatable enforced",
        ),
        pytest.param(
            upod(res(), inits=(res(1, 1, ext_a=1),)),
            res(0, 0, ext_a=5),
            UNSCHED,
            [ir(EXT_A, 1, 5, 5)],
            id="extended resource allocatable enforced for init container",
        ),
        pytest.param(
            upod(res(1, 1, ext_a=3), res(1, 1, ext_a=3)),
            res(0, 0, ext_a=2),
            UNRESOLVABLE,
            [ir(EXT_A, 6, 2, 5, True)],
            id="extended resource allocatable enforced for multiple containers",
        ),
        pytest.param(
            upod(res(), inits=(res(1, 1, ext_a=3), res(1, 1, ext_a=3))),
            res(0, 0, ext_a=2),
            Code.SUCCESS,
            [],
            id="extended resource allocatable admits multiple init containers",
        ),
        pytest.param(
            upod(res(), inits=(res(1, 1, ext_a=6), res(1, 1, ext_a=3))),
            res(0, 0, ext_a=2),
            UNRESOLVABLE,
            [ir(EXT_A, 6, 2, 5, True)],
            id="extended resource allocatable enforced for multiple init containers",
        ),
        pytest.param(
            upod(res(1, 1, ext_b=1)),
            res(),
            UNRESOLVABLE,
            [ir(EXT_B, 1, 0, 0, True)],
            id="extended resource allocatable enforced for unknown resource",
        ),
        pytest.param(
            upod(res(), inits=(res(1, 1, ext_b=1),)),
            res(),
            UNRESOLVABLE,
            [ir(EXT_B, 1, 0, 0, True)],
            id="extended resource allocatable enforced for unknown resource for init container",
        ),
        pytest.param(
            upod(res(1, 1, io_a=10)),
            res(),
            UNRESOLVABLE,
            [ir(K8S_IO_A, 10, 0, 0, True)],
            id="kubernetes.io resource capacity enforced",
        ),
        pytest.param(
            upod(res(), inits=(res(1, 1, io_b=10),)),
            res(),
            UNRESOLVABLE,
            [ir(K8S_IO_B, 10, 0, 0, True)],
            id="kubernetes.io resource capacity enforced for init container",
        ),
        pytest.param(
            upod(res(1, 1, huge=10)),
            res(0, 0, huge=0),
            UNRESOLVABLE,
            [ir(HUGE_A, 10, 0, 5, True)],
            id="hugepages resource capacity enforced",
        ),
        pytest.param(
            upod(res(), inits=(res(1, 1, huge=10),)),
            res(0, 0, huge=0),
            UNRESOLVABLE,
            [ir(HUGE_A, 10, 0, 5, True)],
            id="hugepages resource capacity enforced for init container",
        ),
        pytest.param(
            upod(res(1, 1, huge=3), res(1, 1, huge=3)),
            res(0, 0, huge=2),
            UNRESOLVABLE,
            [ir(HUGE_A, 6, 2, 5, True)],
            id="hugepages resource allocatable enforced for multiple containers",
        ),
        pytest.param(
            upod(res(1, 1), overhead={"cpu": "3m", "memory": "13"}),
            res(5, 5),
            Code.SUCCESS,
            [],
            id="resources + pod overhead fits",
        ),
        pytest.param(
            upod(res(1, 1), overhead={"cpu": "1m", "memory": "15"}),
            res(5, 5),
            UNSCHED,
            [ir("memory", 16, 5, 20)],
            id="requests + overhead does not fit for memory",
        ),
        pytest.param(
            upod(res(1, 1, ext_a=0)),
            res(0, 0, ext_a=6),
            Code.SUCCESS,
            [],
            id="skip checking extended resource request with quantity zero via resource groups",
        ),
        pytest.param(
            upod(res(1, 1), pod_level={"cpu": "1m", "memory": "2"}),
            res(5, 5),
            Code.SUCCESS,
            [],
            id="both pod-level and container-level resources fit",
        ),
        pytest.param(
            upod(res(1, 1), pod_level={"cpu": "7m", "memory": "2"}),
            res(5, 5),
            UNSCHED,
            [ir("cpu", 7, 5, 10)],
            id="pod-level cpu resource not fit",
        ),
        pytest.param(
            upod(res(1, 1), pod_level={"cpu": "3m", "memory": "2"}),
            res(5, 19),
            UNSCHED,
            [ir("memory", 2, 19, 20)],
            id="pod-level memory resource not fit",
        ),
        pytest.param(
            upod(pod_level={"cpu": "3m", "memory": "2", HUGE_A: "5"}),
            None,
            Code.SUCCESS,
            [],
            id="pod-level hugepages resource fit",
        ),
        pytest.param(
            upod(res(1, 1, huge=3), pod_level={"cpu": "3m", "memory": "2", HUGE_A: "5"}),
            None,
            Code.SUCCESS,
            [],
            id="both pod-level and container-level hugepages resource fit",
        ),
        pytest.param(
            upod(pod_level={"cpu": "3m", "memory": "2", HUGE_A: "10"}),
            None,
            UNRESOLVABLE,
            [ir(HUGE_A, 10, 0, 5, True)],
            id="pod-level hugepages resource not fit",
        ),
        pytest.param(
            upod(res(1, 1), inits=(res(1, 1),), pod_level={"cpu": "3m", "memory": "2"}),
            res(5, 19),
            UNSCHED,
            [ir("memory", 2, 19, 20)],
            id="one pod-level cpu resource fits and all init and non-init containers resources fit",
        ),
        # --- TestStorageRequests.
        pytest.param(
            upod(res(1, 1)),
            res(2, 10),
            Code.SUCCESS,
            [],
            id="empty storage requested, and pod fits",
        ),
        pytest.param(
            upod({"ephemeral-storage": "25"}),
            res(2, 2),
            UNRESOLVABLE,
            [ir("ephemeral-storage", 25, 0, 20, True)],
            id="storage ephemeral local storage request exceeds allocatable",
        ),
        pytest.param(
            upod({"ephemeral-storage": "5"}),
            {**res(2, 2), "ephemeral-storage": "10"},
            Code.SUCCESS,
            [],
            id="ephemeral local storage is sufficient",
        ),
        pytest.param(upod({"ephemeral-storage": "10"}), res(2, 2), Code.SUCCESS, [], id="pod fits"),
    ],
)
def test_filter(
    pod: PodInfo, existing: dict[str, Any] | None, code: Code, want: list[InsufficientResource]
) -> None:
    ni = upstream_node(existing)
    assert insufficient_resources(pod.requests, ni) == want
    st = NodeResourcesFit().filter(CycleState(), pod, ni)
    assert st.code == code
    assert st.reasons == tuple(w.reason for w in want)
    if want:
        assert st.plugin == "NodeResourcesFit"


def test_skip_checking_ignored_extended_resource() -> None:
    pod = upod(res(1, 1, ext_b=1))
    st = NodeResourcesFit(ignored_resources=[EXT_B]).filter(CycleState(), pod, upstream_node(res()))
    assert st.is_success()


@pytest.mark.parametrize(
    ("pod", "existing"),
    [
        pytest.param(
            upod(),
            res(10, 20),
            id="even without specified resources, predicate fails when there's no space for "
            "additional pod",
        ),
        pytest.param(
            upod(res(1, 1)),
            res(5, 5),
            id="even if both resources fit, predicate fails when there's no space for "
            "additional pod",
        ),
        pytest.param(
            upod(res(5, 1)),
            res(5, 19),
            id="even for equal edge case, predicate fails when there's no space for additional pod",
        ),
        pytest.param(
            upod(res(5, 1), inits=(res(5, 1),)),
            res(5, 19),
            id="even for equal edge case, predicate fails when there's no space for additional pod "
            "due to init container",
        ),
    ],
)
def test_too_many_pods(pod: PodInfo, existing: dict[str, Any]) -> None:
    st = NodeResourcesFit().filter(CycleState(), pod, upstream_node(existing, pods=1))
    assert (st.code, st.reasons) == (UNSCHED, ("Too many pods",))


@pytest.mark.parametrize(
    ("regular", "sidecar", "code"),
    [
        pytest.param(None, None, Code.SUCCESS, id="allow pod with restartable init containers"),
        pytest.param(
            {"cpu": "1m"},
            {"cpu": "1m"},
            Code.SUCCESS,
            id="allow pod if the total requested resources do not exceed the node's allocatable "
            "resources",
        ),
        pytest.param(
            {"cpu": "1m"},
            {"cpu": "2m"},
            UNRESOLVABLE,
            id="not allow pod if the total requested resources do exceed the node's allocatable "
            "resources",
        ),
    ],
)
def test_restartable_init_containers(
    regular: dict[str, str] | None, sidecar: dict[str, str] | None, code: Code
) -> None:
    b = make_pod("p").requests(regular or {}).init_container(sidecar, sidecar=True)
    ni = make_node("n1").alloc(cpu="2m", memory="0", pods=1).info()
    st = NodeResourcesFit().filter(CycleState(), b.info(), ni)
    assert st.code == code
    if code != Code.SUCCESS:
        assert st.reasons == ("Insufficient cpu",)


def test_request_above_total_allocatable_is_unresolvable_only_for_that_resource() -> None:
    ni = (
        make_node("n1")
        .alloc(cpu="4", memory="8Gi", pods=110)
        .info(make_pod("busy").req(cpu="3", memory="1Gi").node("n1").info())
    )
    preemptable = make_pod("p").req(cpu="2").info()
    assert NodeResourcesFit().filter(CycleState(), preemptable, ni).code == UNSCHED
    hopeless = make_pod("p").req(cpu="2", memory="9Gi").info()
    st = NodeResourcesFit().filter(CycleState(), hopeless, ni)
    assert (st.code, st.reasons) == (UNRESOLVABLE, ("Insufficient cpu", "Insufficient memory"))


# --------------------------------------------------------------------------- scores


def score_all(
    plugin: NodeResourcesFit,
    pod: PodInfo,
    nodes: list[tuple[str, dict[str, Any]]],
    existing: dict[str, list[dict[str, Any] | None]] | None = None,
) -> list[int]:
    """Score each node holding its existing pods: a request list makes a one-container pod,
    None a pod without containers (upstream's bare ``st.MakePod().Node(n)``)."""
    out = []
    for name, alloc in nodes:
        pods = [
            upod(node=name) if r is None else upod(r, node=name)
            for r in (existing or {}).get(name, [])
        ]
        ni = make_node(name).alloc(**alloc).info(*pods)
        out.append(plugin.score(CycleState(), pod, ni))
    scores = list(out)
    plugin.normalize_scores(CycleState(), pod, scores)
    assert scores == out  # no normalisation: already 0..100
    return out


CM = {"cpu": "4000", "memory": "10000"}
C6M = {"cpu": "6000", "memory": "10000"}
BIG = {"cpu": "10000", "memory": "20000"}
TWO = (res(1_000_000, 2000), res(2_000_000, 3000))  # cpu 1000 + 2000, memory 2000 + 3000
EXT = "abc.com/xyz"
EXTENDED_SET = (ResourceSpec("cpu"), ResourceSpec("memory"), ResourceSpec(EXT))


@pytest.mark.parametrize(
    ("pod", "nodes", "existing", "resources", "least", "most"),
    [
        pytest.param(
            upod(),
            [CM, CM],
            {},
            None,
            [100, 100],
            [0, 0],
            id="nothing scheduled, nothing requested",
        ),
        pytest.param(
            upod(*TWO),
            [CM, C6M],
            {},
            None,
            [37, 50],
            [62, 50],
            id="nothing scheduled, resources requested, differently sized nodes",
        ),
        pytest.param(
            upod(),
            [CM, CM],
            {"node1": [None, None], "node2": [None, None]},
            None,
            [100, 100],
            None,
            id="no resources requested, pods scheduled",
        ),
        pytest.param(
            upod(),
            [BIG, BIG],
            {
                "node1": [res(3_000_000, 0), res(3_000_000, 0)],
                "node2": [res(3_000_000, 0), res(3_000_000, 5000)],
            },
            None,
            [70, 57],
            [30, 42],
            id="no resources requested, pods scheduled with resources",
        ),
        pytest.param(
            upod(*TWO),
            [BIG, BIG],
            {"node1": [res(3_000_000, 0)], "node2": [res(3_000_000, 5000)]},
            None,
            [57, 45],
            [42, 55],
            id="resources requested, pods scheduled with resources",
        ),
        pytest.param(
            upod(*TWO),
            [BIG, {"cpu": "10000", "memory": "50000"}],
            {"node1": [res(3_000_000, 0)], "node2": [res(3_000_000, 5000)]},
            None,
            [57, 60],
            None,
            id="resources requested, pods scheduled with resources, differently sized nodes",
        ),
        pytest.param(
            upod(res(3_000_000, 0)),
            [CM, CM],
            {"node1": [res(3_000_000, 0)], "node2": [res(3_000_000, 5000)]},
            None,
            [50, 25],
            None,
            id="requested resources exceed node capacity",
        ),
        pytest.param(
            upod(),
            [{}, {}],
            {"node1": [res(3_000_000, 0)], "node2": [res(3_000_000, 5000)]},
            None,
            [0, 0],
            None,
            id="zero node resources, pods scheduled with resources",
        ),
        pytest.param(
            upod(*TWO),
            [CM, C6M],
            {},
            (ResourceSpec("memory", 2), ResourceSpec("cpu", 1)),
            [41, 50],
            [58, 50],
            id="nothing scheduled, resources requested with different weight on CPU and memory, "
            "differently sized nodes",
        ),
        pytest.param(
            upod(*TWO),
            [C6M, {**C6M, EXT: "4"}],
            {},
            EXTENDED_SET,
            [50, 50],
            [50, 50],
            id="bypass extended resource if the pod does not request",
        ),
        pytest.param(
            upod({"cpu": "3000", "memory": "5000", EXT: "2"}),
            [{**C6M, EXT: "4"}, {**C6M, EXT: "10"}],
            {},
            EXTENDED_SET,
            [50, 60],
            [50, 40],
            id="honor extended resource if the pod requests",
        ),
        pytest.param(
            upod({"cpu": "3000", "memory": "4000"}),
            [C6M, {**C6M, EXT: "4"}],
            {},
            (ResourceSpec(EXT, 2), ResourceSpec("cpu"), ResourceSpec("memory")),
            [55, 55],
            [45, 45],
            id="if the node doesn't have a resource",
        ),
        pytest.param(
            upod({"cpu": "2000", "memory": "4000"}, {"cpu": "3000", "memory": "5000"}),
            [{"cpu": "5000", "memory": "10000"}, {"cpu": "10000", "memory": "9000"}],
            {},
            None,
            None,
            [95, 75],
            id="resources requested equal node capacity",
        ),
        pytest.param(
            make_pod("p").requests({}).info(),
            [{"cpu": "250m", "memory": "1000Mi"}, {"cpu": "250m", "memory": "1000Mi"}],
            {"node1": [{}, {}]},
            None,
            None,
            [80, 30],
            id="no resources requested, pods scheduled, nonzero request for resource",
        ),
    ],
)
def test_least_and_most_allocated(
    pod: PodInfo,
    nodes: list[dict[str, Any]],
    existing: dict[str, list[dict[str, Any] | None]],
    resources: tuple[ResourceSpec, ...] | None,
    least: list[int] | None,
    most: list[int] | None,
) -> None:
    named = [(f"node{i + 1}", n) for i, n in enumerate(nodes)]
    kw: dict[str, Any] = {"resources": resources} if resources else {}
    if least is not None:
        assert (
            score_all(NodeResourcesFit(strategy=LEAST_ALLOCATED, **kw), pod, named, existing)
            == least
        )
    if most is not None:
        assert (
            score_all(NodeResourcesFit(strategy=MOST_ALLOCATED, **kw), pod, named, existing) == most
        )


LEAST_SHAPE = ((0, 10), (100, 0))


@pytest.mark.parametrize(
    ("pod", "nodes", "existing", "want"),
    [
        pytest.param(
            upod(),
            [CM, CM],
            {"node1": [None, None]},
            [100, 100],
            id="nothing scheduled, nothing requested (default - least requested nodes "
            "have priority)",
        ),
        pytest.param(
            upod(*TWO),
            [CM, C6M],
            {"node1": [None, None]},
            [38, 50],
            id="nothing scheduled, resources requested, differently sized nodes (default - least "
            "requested nodes have priority)",
        ),
        pytest.param(
            upod(),
            [CM, C6M],
            {"node1": [res(3_000_000, 5000)], "node2": [res(3_000_000, 5000)]},
            [38, 50],
            id="no resources requested, pods scheduled with resources (default - least requested "
            "nodes have priority)",
        ),
    ],
)
def test_requested_to_capacity_ratio(
    pod: PodInfo,
    nodes: list[dict[str, Any]],
    existing: dict[str, list[dict[str, Any] | None]],
    want: list[int],
) -> None:
    plugin = NodeResourcesFit(strategy=REQUESTED_TO_CAPACITY_RATIO, shape=LEAST_SHAPE)
    named = [(f"node{i + 1}", n) for i, n in enumerate(nodes)]
    assert score_all(plugin, pod, named, existing) == want


FOO, BAR = "intel.com/foo", "intel.com/bar"


def _bin_node(**ext: int) -> dict[str, Any]:
    return {
        "cpu": "4000m",
        "memory": str(10000 * 1024 * 1024),
        **{f"intel.com/{k}": str(v) for k, v in ext.items()},
    }


@pytest.mark.parametrize(
    ("pod", "existing", "want"),
    [
        pytest.param(upod(), {}, [0, 0], id="nothing scheduled, nothing requested"),
        pytest.param(
            upod({FOO: "2"}),
            {},
            [2, 5],
            id="resources requested, pods scheduled with less resources",
        ),
        pytest.param(
            upod({FOO: "2"}),
            {"node2": [{FOO: "2"}]},
            [2, 10],
            id="resources requested, pods scheduled with resources, on node with "
            "existing pod running ",
        ),
        pytest.param(
            upod({FOO: "4"}),
            {},
            [5, 10],
            id="resources requested, pods scheduled with more resources",
        ),
    ],
)
def test_resource_bin_packing_single_extended(
    pod: PodInfo, existing: dict[str, list[dict[str, Any]]], want: list[int]
) -> None:
    plugin = NodeResourcesFit(
        strategy=REQUESTED_TO_CAPACITY_RATIO,
        resources=(ResourceSpec(FOO),),
        shape=((0, 0), (100, 1)),
    )
    nodes = [("node1", _bin_node(foo=8)), ("node2", _bin_node(foo=4))]
    assert score_all(plugin, pod, nodes, existing) == want


@pytest.mark.parametrize(
    ("pod", "existing", "want"),
    [
        pytest.param(upod(), {}, [0, 0], id="nothing scheduled, nothing requested"),
        pytest.param(
            upod({FOO: "2", BAR: "2"}),
            {},
            [4, 3],
            id="resources requested, pods scheduled with less resources",
        ),
        pytest.param(
            upod({FOO: "2", BAR: "2"}),
            {"node2": [{FOO: "4", BAR: "2"}]},
            [4, 7],
            id="resources requested, pods scheduled with resources, on node with "
            "existing pod running ",
        ),
        pytest.param(
            upod({FOO: "4", BAR: "2"}),
            {},
            [5, 5],
            id="resources requested, pods scheduled with more resources",
        ),
    ],
)
def test_resource_bin_packing_multiple_extended(
    pod: PodInfo, existing: dict[str, list[dict[str, Any]]], want: list[int]
) -> None:
    plugin = NodeResourcesFit(
        strategy=REQUESTED_TO_CAPACITY_RATIO,
        resources=(ResourceSpec(FOO, 3), ResourceSpec(BAR, 5)),
        shape=((0, 0), (100, 1)),
    )
    nodes = [("node1", _bin_node(foo=8, bar=4)), ("node2", _bin_node(foo=4, bar=8))]
    assert score_all(plugin, pod, nodes, existing) == want


@pytest.mark.parametrize(
    ("shape", "points"),
    [
        pytest.param(
            ((10, 1), (90, 9)),
            [(0, 10), (10, 10), (15, 15), (40, 40), (90, 90), (100, 90)],
            id="two points",
        ),
        pytest.param(
            ((0, 2), (40, 10), (100, 0)),
            [(0, 20), (10, 40), (35, 90), (40, 100), (45, 92), (70, 50), (100, 0)],
            id="three points",
        ),
        pytest.param(((0, 2), (40, 2), (100, 2)), [(0, 20), (45, 20), (100, 20)], id="flat"),
        pytest.param(
            ((0, 10), (30, 0)), [(10, 67), (20, 34)], id="decreasing truncates toward zero"
        ),
    ],
)
def test_broken_linear_function(
    shape: tuple[tuple[int, int], ...], points: list[tuple[int, int]]
) -> None:
    """Upstream's TestBrokenLinearFunction shapes; the plugin scales scores by 10 before it
    interpolates (as upstream's requestedToCapacityRatioScorer), and Go's division truncates
    toward zero."""
    plugin = NodeResourcesFit(strategy=REQUESTED_TO_CAPACITY_RATIO, shape=shape)
    assert [(u, plugin._ratio(u, 100)) for u, _ in points] == points


def test_constructor_validates() -> None:
    with pytest.raises(ValueError, match=r"scoringStrategy\.type"):
        NodeResourcesFit(strategy="Random")
    with pytest.raises(ValueError, match="resources"):
        NodeResourcesFit(resources=())


# --------------------------------------------------------------------------- hints


def _hint(kind: str) -> Any:
    for reg in NodeResourcesFit().events_to_register():
        if f"{reg.event.resource}/{reg.event.action}" == kind:
            return reg.hint
    raise AssertionError(kind)


def _node(**alloc: str) -> NodeRecord:
    return make_node("n").alloc(pods=32, **alloc).record()


HINT_POD = upod({"memory": "2", EXT_A: "1"})


@pytest.mark.parametrize(
    ("pod", "old", "new", "want"),
    [
        pytest.param(
            upod({"memory": "2"}),
            None,
            _node(memory="1"),
            QueueingHint.SKIP,
            id="skip-queue-on-node-add-without-sufficient-resources",
        ),
        pytest.param(
            upod({EXT_A: "1"}),
            None,
            _node(**{EXT_B: "1"}),
            QueueingHint.SKIP,
            id="skip-queue-on-node-add-without-required-resource-type",
        ),
        pytest.param(
            HINT_POD,
            None,
            _node(memory="4", **{EXT_A: "2"}),
            QueueingHint.QUEUE,
            id="queue-on-node-add-with-sufficient-resources",
        ),
        pytest.param(
            HINT_POD,
            _node(memory="2", **{EXT_A: "2"}),
            _node(memory="2", **{EXT_A: "1", EXT_B: "2"}),
            QueueingHint.SKIP,
            id="skip-queue-on-node-unrelated-changes",
        ),
        pytest.param(
            HINT_POD,
            _node(memory="2", **{EXT_A: "1"}),
            _node(memory="2", **{EXT_A: "2"}),
            QueueingHint.QUEUE,
            id="queue-on-pod-requested-resources-increase",
        ),
        pytest.param(
            HINT_POD,
            _node(memory="4", **{EXT_A: "2"}),
            _node(memory="1", **{EXT_A: "2"}),
            QueueingHint.SKIP,
            id="skip-queue-on-node-changes-from-suitable-to-unsuitable",
        ),
        pytest.param(
            HINT_POD,
            _node(memory="1", **{EXT_A: "2"}),
            _node(memory="4", **{EXT_A: "2"}),
            QueueingHint.QUEUE,
            id="queue-on-node-changes-from-unsuitable-to-suitable",
        ),
        pytest.param(
            upod({"memory": "2"}),
            _node(memory="4", cpu="1"),
            _node(memory="4", cpu="2"),
            QueueingHint.SKIP,
            id="an allocatable the pod does not request grew",
        ),
        pytest.param(
            upod(),
            make_node("n").alloc(cpu="1", pods=1).record(),
            make_node("n").alloc(cpu="1", pods=2).record(),
            QueueingHint.QUEUE,
            id="more pods allowed",
        ),
        pytest.param(
            upod(),
            None,
            make_node("n").alloc(cpu="1", pods=0).record(),
            QueueingHint.SKIP,
            id="a node that takes no pods",
        ),
    ],
)
def test_node_change_hint(
    pod: PodInfo, old: NodeRecord | None, new: NodeRecord, want: QueueingHint
) -> None:
    action = "Add" if old is None else "Update"
    assert _hint(f"Node/{action}")(pod, old, new) is want


def test_assigned_pod_delete_hint() -> None:
    hint = _hint("AssignedPod/Delete")
    pod = upod({"cpu": "1"})
    assert hint(pod, upod({"cpu": "1"}, node="fake"), None) is QueueingHint.QUEUE
    assert hint(pod, None, None) is QueueingHint.SKIP
