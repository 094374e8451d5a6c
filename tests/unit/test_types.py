"""Parsing of raw API objects into typed records, effective requests, and NodeInfo sums.

Request cases named after upstream mirror component-helpers resource/helpers_test.go
(TestPodResourceRequests, TestPodLevelResourceRequests) and the scheduler's framework
types_test.go (TestPodInfoCalculateResources, TestCalculatePodResourcesWithResize).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from scheduler.types import (
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    SYSTEM_CLUSTER_CRITICAL,
    SYSTEM_NODE_CRITICAL,
    HostPort,
    LabelSelector,
    LabelSelectorRequirement,
    NodeInfo,
    ParseError,
    PodInfo,
    PriorityClassInfo,
    Resource,
    Taint,
    UnknownPriorityClassError,
    node_from_dict,
    pdb_from_dict,
    pod_from_dict,
    pod_with,
)
from tests.builders import EPOCH, PodBuilder, make_node, make_pdb, make_pod, make_priority_class

Mi = 2**20
Gi = 2**30
M = 10**6
G = 10**9
CRITICAL_ANNOTATION = "scheduler.alpha.kubernetes.io/critical-pod"


def _epoch(seconds: float) -> float:
    return (EPOCH + dt.timedelta(seconds=seconds)).timestamp()


# --------------------------------------------------------------------------- priority


HIGH = make_priority_class("high", 1000, policy="Never")
LOW = make_priority_class("low", 10)
DEFAULT = make_priority_class("default", 5, global_default=True)
CLASSES = {c.name: c for c in (HIGH, LOW, DEFAULT)}


@pytest.mark.parametrize(
    ("builder", "global_default", "want"),
    [
        pytest.param(
            make_pod("p").priority(7).priority_class("high"), DEFAULT, 7, id="spec.priority wins"
        ),
        pytest.param(make_pod("p").priority_class("high"), DEFAULT, 1000, id="class value"),
        pytest.param(make_pod("p"), DEFAULT, 5, id="globalDefault class without a class name"),
        pytest.param(make_pod("p"), None, 0, id="no class and no default: 0"),
        pytest.param(
            make_pod("p").priority_class("system-node-critical"),
            None,
            SYSTEM_NODE_CRITICAL,
            id="system-node-critical resolves without a class object",
        ),
        pytest.param(
            make_pod("p").priority_class("system-cluster-critical"),
            None,
            SYSTEM_CLUSTER_CRITICAL,
            id="system-cluster-critical resolves without a class object",
        ),
        pytest.param(
            make_pod("p", "kube-system").annotation(CRITICAL_ANNOTATION, ""),
            None,
            SYSTEM_CLUSTER_CRITICAL,
            id="legacy critical-pod annotation in kube-system",
        ),
        pytest.param(
            # As the old admission plugin: the annotation chose the class before the default.
            make_pod("p", "kube-system").annotation(CRITICAL_ANNOTATION, ""),
            DEFAULT,
            SYSTEM_CLUSTER_CRITICAL,
            id="legacy critical-pod annotation comes before globalDefault",
        ),
        pytest.param(
            make_pod("p").annotation(CRITICAL_ANNOTATION, ""),
            None,
            0,
            id="critical-pod annotation outside kube-system means nothing",
        ),
        pytest.param(
            make_pod("p", "kube-system").annotation(CRITICAL_ANNOTATION, "").priority_class("low"),
            None,
            10,
            id="a class name beats the critical-pod annotation",
        ),
    ],
)
def test_priority_resolution(
    builder: PodBuilder, global_default: PriorityClassInfo | None, want: int
) -> None:
    assert builder.info(classes=CLASSES, global_default=global_default).priority == want


def test_unknown_priority_class_raises_naming_pod_and_class() -> None:
    with pytest.raises(UnknownPriorityClassError) as exc:
        make_pod("p", "ns").priority_class("nope").info(classes=CLASSES)
    assert (exc.value.pod, exc.value.class_name) == ("ns/p", "nope")
    assert "nope" in str(exc.value) and "ns/p" in str(exc.value)


@pytest.mark.parametrize(
    ("builder", "global_default", "want"),
    [
        pytest.param(make_pod("p"), None, "PreemptLowerPriority", id="default"),
        pytest.param(make_pod("p").priority_class("high"), None, "Never", id="from the class"),
        pytest.param(
            make_pod("p").priority_class("high").preemption_policy("PreemptLowerPriority"),
            None,
            "PreemptLowerPriority",
            id="spec wins over the class",
        ),
        pytest.param(
            make_pod("p"),
            make_priority_class("d", 1, global_default=True, policy="Never"),
            "Never",
            id="from the globalDefault class",
        ),
        pytest.param(make_pod("p").priority(3), None, "PreemptLowerPriority", id="with priority"),
    ],
)
def test_preemption_policy(
    builder: PodBuilder, global_default: PriorityClassInfo | None, want: str
) -> None:
    assert builder.info(classes=CLASSES, global_default=global_default).preemption_policy == want


# --------------------------------------------------------------------------- effective requests

RA = "Always"


def _pod(
    *,
    containers: list[dict[str, Any]] = (),  # type: ignore[assignment]
    inits: list[tuple[dict[str, Any], bool]] = (),  # type: ignore[assignment]
    overhead: dict[str, str] | None = None,
    pod_level: dict[str, str] | None = None,
) -> PodBuilder:
    """A pod whose containers are named c, c1, ... and init containers i0, i1, ..."""
    b = make_pod("p")
    if containers:
        b.req(**containers[0])
        for c in containers[1:]:
            b.container(c)
    for reqs, sidecar in inits:
        b.init_container(reqs, sidecar=sidecar)
    if overhead:
        b.overhead(**overhead)
    if pod_level:
        b.pod_requests(**pod_level)
    return b


@pytest.mark.parametrize(
    ("builder", "want"),
    [
        # --- helpers_test.go TestPodResourceRequests (the scheduler includes overhead).
        pytest.param(
            _pod(containers=[{"cpu": "1"}], inits=[({"cpu": "4"}, False)]),
            Resource(milli_cpu=4000),
            id="nil options, larger init container",
        ),
        pytest.param(
            _pod(containers=[{"cpu": "2"}, {"cpu": "3"}], inits=[({"cpu": "2"}, False)]),
            Resource(milli_cpu=5000),
            id="nil options, larger containers",
        ),
        pytest.param(
            _pod(
                containers=[{"cpu": "2"}, {"cpu": "3"}],
                inits=[({"cpu": "2"}, False)],
                overhead={"cpu": "1", "memory": "1Gi"},
            ),
            Resource(milli_cpu=6000, memory=Gi),
            id="pod overhead included",
        ),
        pytest.param(
            _pod(containers=[{"cpu": "1"}], inits=[({"cpu": "1"}, True)]),
            Resource(milli_cpu=2000),
            id="restartable init container",
        ),
        pytest.param(
            _pod(
                containers=[{"cpu": "1"}],
                inits=[
                    ({"cpu": "5"}, False),
                    ({"cpu": "1"}, True),
                    ({"cpu": "2"}, True),
                    ({"cpu": "3"}, True),
                ],
            ),
            Resource(milli_cpu=7000),
            id="multiple restartable init containers",
        ),
        pytest.param(
            _pod(
                containers=[{"cpu": "1"}],
                inits=[
                    ({"cpu": "5"}, False),
                    ({"cpu": "1"}, True),
                    ({"cpu": "2"}, True),
                    ({"cpu": "5"}, False),
                    ({"cpu": "3"}, True),
                ],
            ),
            Resource(milli_cpu=8000),
            id="multiple restartable and regular init containers",
        ),
        pytest.param(
            _pod(
                containers=[{"cpu": "100"}], inits=[({"cpu": "10"}, True), ({"cpu": "200"}, False)]
            ),
            Resource(milli_cpu=210_000),
            id="restartable-init, init and regular",
        ),
        # --- helpers_test.go TestPodLevelResourceRequests.
        pytest.param(_pod(), Resource(), id="nil"),
        pytest.param(
            _pod(pod_level={"memory": "2Mi"}),
            Resource(memory=2 * Mi),
            id="pod level memory resource with SkipPodLevelResources false",
        ),
        pytest.param(
            _pod(containers=[{"cpu": "2m"}], pod_level={"memory": "2Mi"}),
            Resource(milli_cpu=2, memory=2 * Mi),
            id="pod level memory and container level cpu resources with "
            "SkipPodLevelResources false",
        ),
        pytest.param(
            _pod(containers=[{"memory": "3Mi"}], pod_level={"storage": "2Mi"}),
            Resource(memory=3 * Mi),
            id="pod level unsupported resources set at pod-level with SkipPodLevelResources false",
        ),
        pytest.param(
            _pod(
                containers=[{"memory": "3Mi", "cpu": "2m"}],
                pod_level={"memory": "6Mi", "cpu": "8m"},
            ),
            Resource(milli_cpu=8, memory=6 * Mi),
            id="both container-level and pod-level resources set with SkipPodLevelResources false",
        ),
        pytest.param(
            _pod(
                containers=[{"memory": "3Mi", "cpu": "2m"}],
                inits=[({"memory": "5Mi", "cpu": "4m"}, True)],
            ),
            Resource(milli_cpu=6, memory=8 * Mi),
            id="container-level resources and sidecar container set with "
            "SkipPodLevelResources false",
        ),
        pytest.param(
            _pod(
                containers=[{"memory": "3Mi", "cpu": "2m"}],
                inits=[
                    ({"memory": "5Mi", "cpu": "4m"}, True),
                    ({"memory": "6Mi", "cpu": "8m"}, False),
                ],
            ),
            Resource(milli_cpu=12, memory=11 * Mi),
            id="container-level resources, init and sidecar container set with "
            "SkipPodLevelResources false",
        ),
        pytest.param(
            _pod(
                containers=[{"memory": "3Mi", "cpu": "2m"}],
                inits=[
                    ({"memory": "5Mi", "cpu": "4m"}, True),
                    ({"memory": "6Mi", "cpu": "8m"}, False),
                ],
                pod_level={"memory": "15Mi", "cpu": "18m"},
            ),
            Resource(milli_cpu=18, memory=15 * Mi),
            id="pod-level resources, container-level resources, init and sidecar container set "
            "with SkipPodLevelResources false",
        ),
        pytest.param(
            _pod(pod_level={"memory": "10Mi", "hugepages-2Mi": "2Mi"}),
            Resource(memory=10 * Mi, scalar={"hugepages-2Mi": 2 * Mi}),
            id="pod-level resources, hugepage request/limit single page size",
        ),
        pytest.param(
            _pod(
                containers=[{"hugepages-2Mi": "6Mi"}],
                pod_level={"cpu": "1", "hugepages-2Mi": "10Mi"},
            ),
            Resource(milli_cpu=1000, scalar={"hugepages-2Mi": 10 * Mi}),
            id="pod-level resources, container-level resources, hugepage request/limit "
            "single page size",
        ),
        pytest.param(
            _pod(
                containers=[{"memory": "4Mi", "hugepages-1Gi": "1Gi"}],
                pod_level={"cpu": "1", "hugepages-2Mi": "10Mi"},
            ),
            Resource(
                milli_cpu=1000,
                memory=4 * Mi,
                scalar={"hugepages-2Mi": 10 * Mi, "hugepages-1Gi": Gi},
            ),
            id="pod-level resources, container-level resources, hugepage request/limit multiple "
            "page sizes between pod-level and container-level",
        ),
        # --- ours: the other resource kinds.
        pytest.param(
            make_pod("p").req(cpu="1", ephemeral_storage="1Gi", gpu=2),
            Resource(milli_cpu=1000, ephemeral_storage=Gi, scalar={"nvidia.com/gpu": 2}),
            id="ephemeral-storage and extended resources",
        ),
        pytest.param(
            make_pod("p").req(cpu="0.5m").container({"cpu": "0.5m"}),
            Resource(milli_cpu=1),
            id="quantities are summed exactly and rounded once",
        ),
    ],
)
def test_effective_requests(builder: PodBuilder, want: Resource) -> None:
    assert builder.info().requests == want


CPU500 = {"cpu": "500m", "memory": "500M"}
CPU700 = {"cpu": "700m", "memory": "800M"}


def _resized(
    *,
    requests: dict[str, str],
    status: dict[str, str],
    condition: str = "",
    pod_level: dict[str, str] | None = None,
    pod_status: dict[str, str] | None = None,
    init: tuple[dict[str, str], dict[str, str]] | None = None,
    sidecar: tuple[dict[str, str], dict[str, str]] | None = None,
) -> PodBuilder:
    """As types_test.go TestCalculatePodResourcesWithResize's preparePodInfo."""
    b = make_pod("p").req(**requests).container_status("c", actual=status)
    if pod_level is not None:
        b.pod_requests(**pod_level)
    if pod_status is not None:
        b.status_resources(actual=pod_status)
    if init is not None:
        b.init_container(init[0]).container_status("i0", actual=init[1], init=True)
    if sidecar is not None:
        name = f"i{1 if init is not None else 0}"
        b.init_container(sidecar[0], sidecar=True).container_status(
            name, actual=sidecar[1], init=True
        )
    if condition == "InProgress":
        b.condition("PodResizeInProgress")
    elif condition:
        b.condition("PodResizePending", reason=condition)
    return b


@pytest.mark.parametrize(
    ("builder", "cpu", "memory"),
    [
        pytest.param(
            _resized(requests=CPU500, status=CPU500), 500, 500 * M, id="Pod with no pending resize"
        ),
        pytest.param(
            _resized(
                requests=CPU500,
                status={"cpu": "700m", "memory": "500M"},
                pod_level={"cpu": "700m", "memory": "500M"},
                pod_status=CPU500,
            ),
            700,
            500 * M,
            id="Pod with pod-level resources no pending resize",
        ),
        pytest.param(
            _resized(requests=CPU500, status=CPU500, condition="InProgress"),
            500,
            500 * M,
            id="Pod with resize in progress",
        ),
        pytest.param(
            _resized(requests=CPU700, status=CPU500, condition="Deferred"),
            700,
            800 * M,
            id="Pod with deferred resize",
        ),
        pytest.param(
            _resized(
                requests=CPU500,
                status=CPU500,
                pod_level=CPU700,
                pod_status=CPU500,
                condition="Deferred",
            ),
            700,
            800 * M,
            id="Pod with pod-level resources and with deferred resize",
        ),
        pytest.param(
            _resized(requests=CPU700, status=CPU500, condition="Infeasible"),
            500,
            500 * M,
            id="Pod with infeasible resize",
        ),
        pytest.param(
            _resized(requests=CPU500, status=CPU500, init=(CPU700, CPU700)),
            700,
            800 * M,
            id="Pod with init container and no pending resize",
        ),
        pytest.param(
            _resized(
                requests=CPU500, status=CPU500, init=(CPU700, CPU700), sidecar=(CPU700, CPU700)
            ),
            1200,
            1300 * M,
            id="Pod with sider container and no pending resize",
        ),
    ],
)
def test_requests_of_resized_pods(builder: PodBuilder, cpu: int, memory: int) -> None:
    pod = builder.info()
    assert (pod.requests.milli_cpu, pod.requests.memory) == (cpu, memory)
    assert (pod.non_zero_milli_cpu, pod.non_zero_memory) == (cpu, memory)


@pytest.mark.parametrize(
    ("builder", "cpu"),
    [
        pytest.param(
            make_pod("p")
            .req(cpu="4")
            .container_status("c", actual={"cpu": "2"})
            .condition("PodResizePending", reason="Infeasible"),
            2000,
            id="resized, infeasible",
        ),
        pytest.param(
            make_pod("p")
            .req(cpu="6")
            .container_status("c", allocated={"cpu": "4"}, actual={"cpu": "2"})
            .condition("PodResizePending", reason="Infeasible"),
            4000,
            id="resized, infeasible & in-progress",
        ),
        pytest.param(
            make_pod("p").req(cpu="4").container_status("c", actual={"cpu": "2"}),
            4000,
            id="resized, no resize status",
        ),
        pytest.param(
            make_pod("p")
            .init_container({"cpu": "4"}, sidecar=True)
            .container_status("i0", actual={"cpu": "2"}, init=True)
            .condition("PodResizePending", reason="Infeasible"),
            2000,
            id="resized, restartable init container, infeasible",
        ),
        pytest.param(
            make_pod("p")
            .init_container({"cpu": "4"}, sidecar=True)
            .container_status("i0", actual={"cpu": "2"}, init=True),
            4000,
            id="resized, restartable init container, no resize status",
        ),
        pytest.param(
            make_pod("p")
            .req(cpu="1")
            .container({"cpu": "2"})
            .container_status("c", allocated={"cpu": "2"})
            .container_status("c1", allocated={"cpu": "1"}),
            3000,
            id="aggregate request resolves max of sums instead of sum of maxes",
        ),
        pytest.param(
            make_pod("p")
            .req(cpu="1")
            .container({"cpu": "2"})
            .status_resources(allocated={"cpu": "5"}, actual={"cpu": "4"}),
            5000,
            id="pod-level status maps replace the container statuses",
        ),
    ],
)
def test_requests_with_status_resources(builder: PodBuilder, cpu: int) -> None:
    assert builder.info().requests.milli_cpu == cpu


def test_per_resource_three_way_maximum() -> None:
    pod = (
        make_pod("p")
        .req(cpu="30m", memory="20M", ephemeral_storage="10G")
        .container_status(
            "c",
            allocated={"cpu": "20m", "memory": "10M", "ephemeral-storage": "30G"},
            actual={"cpu": "10m", "memory": "30M", "ephemeral-storage": "20G"},
        )
        .info()
    )
    assert pod.requests == Resource(milli_cpu=30, memory=30 * M, ephemeral_storage=30 * G)


@pytest.mark.parametrize(
    ("builder", "cpu", "memory"),
    [
        # --- types_test.go TestPodInfoCalculateResources.
        pytest.param(
            make_pod("p"),
            DEFAULT_MILLI_CPU_REQUEST,
            DEFAULT_MEMORY_REQUEST,
            id="requestless container",
        ),
        pytest.param(
            make_pod("p")
            .req(cpu="500m", memory="500M")
            .container({"cpu": "700m", "memory": "800M"}),
            1200,
            1300 * M,
            id="2X container with requests",
        ),
        pytest.param(
            make_pod("p").init_container({}).pod_requests(memory="1200M"),
            DEFAULT_MILLI_CPU_REQUEST,
            1200 * M,
            id="1X container with pod-level memory requests",
        ),
        pytest.param(
            make_pod("p").init_container({}).pod_requests(cpu="500m"),
            500,
            DEFAULT_MEMORY_REQUEST,
            id="1X container with pod-level cpu requests",
        ),
        pytest.param(
            make_pod("p")
            .req(cpu="500m", memory="500M")
            .init_container({"cpu": "500m", "memory": "500M"}, sidecar=True)
            .pod_requests(cpu="1200m", memory="1200M"),
            1200,
            1200 * M,
            id="1X container and 1X sidecar container with pod-level requests",
        ),
        # --- ours.
        pytest.param(
            make_pod("p").container().container(),
            3 * DEFAULT_MILLI_CPU_REQUEST,
            3 * DEFAULT_MEMORY_REQUEST,
            id="defaults count per container",
        ),
        pytest.param(
            make_pod("p").req(cpu="0", memory="0"),
            0,
            0,
            id="an explicit zero request is not missing",
        ),
        pytest.param(
            make_pod("p").req(cpu="1").init_container({"memory": "1Gi"}),
            1000,
            Gi,
            id="defaults apply to init containers too, then the max",
        ),
        pytest.param(
            make_pod("p").overhead(cpu="250m", memory="1Mi"),
            DEFAULT_MILLI_CPU_REQUEST + 250,
            DEFAULT_MEMORY_REQUEST + Mi,
            id="overhead adds to the non-zero requests",
        ),
    ],
)
def test_non_zero_requests(builder: PodBuilder, cpu: int, memory: int) -> None:
    pod = builder.info()
    assert (pod.non_zero_milli_cpu, pod.non_zero_memory) == (cpu, memory)


# --------------------------------------------------------------------------- other pod fields


def test_host_ports_from_containers_and_sidecars_only() -> None:
    pod = (
        make_pod("p")
        .host_port(80)
        .host_port(53, protocol="UDP", ip="10.0.0.1")
        .init_host_port(8080, sidecar=False)
        .init_host_port(9090, sidecar=True)
        .info()
    )
    assert set(pod.host_ports) == {
        HostPort("0.0.0.0", "TCP", 80),
        HostPort("10.0.0.1", "UDP", 53),
        HostPort("0.0.0.0", "TCP", 9090),
    }


def test_container_port_without_host_port_is_not_a_host_port() -> None:
    o = make_pod("p").obj()
    o["spec"]["containers"][0]["ports"] = [
        {"containerPort": 80},
        {"containerPort": 81, "hostPort": 0},
    ]
    assert pod_from_dict(o).host_ports == ()


@pytest.mark.parametrize(
    ("builder", "target", "by_preemption"),
    [
        pytest.param(make_pod("p"), False, False, id="no condition"),
        pytest.param(make_pod("p").terminating(), False, False, id="terminating, no condition"),
        pytest.param(
            make_pod("p").terminating(by_preemption=True),
            True,
            True,
            id="terminating by preemption",
        ),
        pytest.param(
            make_pod("p")
            .terminating()
            .condition("DisruptionTarget", reason="EvictionByEvictionAPI"),
            True,
            False,
            id="evicted by the eviction API",
        ),
        pytest.param(
            make_pod("p").condition("DisruptionTarget", reason="PreemptionByScheduler"),
            True,
            False,
            id="condition without a deletion timestamp",
        ),
        pytest.param(
            make_pod("p")
            .terminating()
            .condition("DisruptionTarget", status="False", reason="PreemptionByScheduler"),
            False,
            False,
            id="condition status False",
        ),
    ],
)
def test_disruption_target(builder: PodBuilder, target: bool, by_preemption: bool) -> None:
    pod = builder.info()
    assert pod.disruption_target is target
    assert pod.terminating_by_preemption is by_preemption


def test_start_time_falls_back_to_creation_timestamp() -> None:
    assert make_pod("p").created(10).info().start_time == _epoch(10)
    started = make_pod("p").created(10).started(25).info()
    assert (started.start_time, started.creation_time) == (_epoch(25), _epoch(10))


def test_defaults_of_a_minimal_pod() -> None:
    pod = pod_from_dict({"metadata": {"name": "p"}})
    assert (pod.namespace, pod.key, pod.scheduler_name, pod.phase) == (
        "default",
        "default/p",
        "default-scheduler",
        "Pending",
    )
    assert pod.requests == Resource()
    assert pod.required_node_affinity is None


def test_node_affinity_and_tolerations_are_parsed() -> None:
    pod = (
        make_pod("p")
        .node_selector(disk="ssd")
        .affinity(
            {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "zone", "operator": "In", "values": ["a"]}
                                ]
                            }
                        ]
                    },
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 3,
                            "preference": {
                                "matchExpressions": [{"key": "x", "operator": "Exists"}]
                            },
                        }
                    ],
                }
            }
        )
        .toleration("k", "v", "NoSchedule")
        .toleration(operator="Exists")
        .info()
    )
    assert pod.node_selector == {"disk": "ssd"}
    assert pod.required_node_affinity is not None
    (term,) = pod.required_node_affinity
    assert [(r.key, r.operator, r.values) for r in term.match_expressions] == [
        ("zone", "In", ("a",))
    ]
    assert [(w, t.match_expressions[0].key) for w, t in pod.preferred_node_affinity] == [(3, "x")]
    assert [(t.key, t.operator, t.value, t.effect) for t in pod.tolerations] == [
        ("k", "Equal", "v", "NoSchedule"),
        ("", "Exists", "", ""),
    ]


# --------------------------------------------------------------------------- parse errors


def _set(obj: dict[str, Any], path: str, v: Any) -> dict[str, Any]:
    cur = obj
    *head, last = path.split(".")
    for part in head:
        if part.endswith("]"):
            name, idx = part[:-1].split("[")
            cur = cur[name][int(idx)]
        else:
            cur = cur.setdefault(part, {})
    cur[last] = v
    return obj


@pytest.mark.parametrize(
    ("obj", "field_path"),
    [
        pytest.param(
            _set(
                make_pod("p").obj(), "spec.containers[0].resources", {"requests": {"cpu": "lots"}}
            ),
            "spec.containers[0].resources.requests.cpu",
            id="bad cpu quantity",
        ),
        pytest.param(
            _set(make_pod("p").obj(), "spec.overhead", {"memory": "1 Gi"}),
            "spec.overhead.memory",
            id="bad overhead quantity",
        ),
        pytest.param(
            _set(make_pod("p").obj(), "spec.resources", {"requests": {"cpu": "x"}}),
            "spec.resources.requests.cpu",
            id="bad pod-level quantity",
        ),
        pytest.param(
            make_pod("p").container_status("c", allocated={"memory": "?"}).obj(),
            "status.containerStatuses[0].allocatedResources.memory",
            id="bad allocated quantity",
        ),
        pytest.param(
            _set(make_pod("p").obj(), "spec.priority", "high"),
            "spec.priority",
            id="priority not int",
        ),
        pytest.param(
            make_pod("p").preemption_policy("Sometimes").obj(),
            "spec.preemptionPolicy",
            id="bad preemptionPolicy",
        ),
        pytest.param(
            make_pod("p").toleration("k", operator="Maybe").obj(),
            "spec.tolerations[0].operator",
            id="bad toleration operator",
        ),
        pytest.param(
            make_pod("p")
            .affinity(
                {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "a", "operator": "Is"}]}
                            ]
                        }
                    }
                }
            )
            .obj(),
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
            ".nodeSelectorTerms[0].matchExpressions[0].operator",
            id="bad node selector operator",
        ),
        pytest.param(
            make_pod("p")
            .affinity(
                {
                    "podAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "labelSelector": {
                                    "matchExpressions": [{"key": "a", "operator": "Gt"}]
                                },
                                "topologyKey": "zone",
                            }
                        ]
                    }
                }
            )
            .obj(),
            "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
            ".labelSelector.matchExpressions[0].operator",
            id="label selectors have no Gt",
        ),
        pytest.param(
            _set(make_pod("p").obj(), "metadata.creationTimestamp", "yesterday"),
            "metadata.creationTimestamp",
            id="bad timestamp",
        ),
        pytest.param(_set(make_pod("p").obj(), "metadata.name", ""), "metadata.name", id="no name"),
        pytest.param(
            _set(make_pod("p").obj(), "metadata.generation", "7"),
            "metadata.generation",
            id="generation not an integer",
        ),
        pytest.param(
            _set(make_pod("p").obj(), "spec.containers[0].restartPolicyRules", {"a": 1}),
            "spec.containers[0].restartPolicyRules",
            id="restart rules not a list",
        ),
        pytest.param(
            _set(make_pod("p").obj(), "spec.containers[0].restartPolicyRules", ["x"]),
            "spec.containers[0].restartPolicyRules[0]",
            id="a restart rule not a map",
        ),
        pytest.param(
            _set(make_pod("p").obj(), "spec.containers[0].volumeMounts", "data"),
            "spec.containers[0].volumeMounts",
            id="volume mounts not a list",
        ),
        pytest.param(
            _set(
                make_pod("p").obj(),
                "spec.ephemeralContainers",
                [{"name": "d", "volumeMounts": [["x"]]}],
            ),
            "spec.ephemeralContainers[0].volumeMounts[0]",
            id="an ephemeral container's mount not a map",
        ),
    ],
)
def test_pod_parse_errors_name_object_and_field(obj: dict[str, Any], field_path: str) -> None:
    with pytest.raises(ParseError) as exc:
        pod_from_dict(obj)
    assert exc.value.field_path == field_path
    assert exc.value.obj.startswith("Pod default/")
    assert field_path in str(exc.value)


# --------------------------------------------------------------------------- nodes


def test_node_from_dict() -> None:
    node = (
        make_node("n1")
        .alloc(cpu="3500m", memory="7Gi", pods=30, ephemeral_storage="10Gi", gpu=4)
        .label("zone", "a")
        .taint("dedicated", "gpu", "NoSchedule")
        .taint("soft", effect="PreferNoSchedule")
        .unschedulable()
        .image("nginx:1.25", 100 * Mi)
        .record()
    )
    assert node.name == "n1"
    assert node.allocatable == Resource(
        milli_cpu=3500,
        memory=7 * Gi,
        ephemeral_storage=10 * Gi,
        allowed_pod_number=30,
        scalar={"nvidia.com/gpu": 4},
    )
    assert node.labels == {"kubernetes.io/hostname": "n1", "zone": "a"}
    assert node.taints == (
        Taint("dedicated", "gpu", "NoSchedule"),
        Taint("soft", "", "PreferNoSchedule"),
    )
    assert node.unschedulable is True
    assert node.images == {"nginx:1.25": 100 * Mi}


def test_node_allocatable_else_capacity() -> None:
    o = make_node("n").obj()
    o["status"] = {"capacity": {"cpu": "2", "memory": "1Gi", "pods": "10"}}
    assert node_from_dict(o).allocatable == Resource(2000, Gi, 0, 10)
    o["status"]["allocatable"] = {"cpu": "1500m", "pods": "5"}
    assert node_from_dict(o).allocatable == Resource(1500, 0, 0, 5)


@pytest.mark.parametrize(
    ("mutate", "field_path"),
    [
        pytest.param(
            lambda o: o["spec"].update(taints=[{"key": "k", "effect": "Sometimes"}]),
            "spec.taints[0].effect",
            id="bad taint effect",
        ),
        pytest.param(
            lambda o: o["spec"].update(taints=[{"effect": "NoSchedule"}]),
            "spec.taints[0].key",
            id="taint without key",
        ),
        pytest.param(
            lambda o: o["status"]["allocatable"].update(cpu="four"),
            "status.allocatable.cpu",
            id="bad allocatable",
        ),
        pytest.param(
            lambda o: o.update(status={"capacity": {"memory": "1 Gi"}}),
            "status.capacity.memory",
            id="bad capacity",
        ),
        pytest.param(
            lambda o: o["status"].update(declaredFeatures="RestartAllContainersOnContainerExits"),
            "status.declaredFeatures",
            id="declared features not a list",
        ),
        pytest.param(
            lambda o: o["status"].update(declaredFeatures=[1]),
            "status.declaredFeatures",
            id="a declared feature not a string",
        ),
    ],
)
def test_node_parse_errors(mutate: Any, field_path: str) -> None:
    o = make_node("n1").obj()
    mutate(o)
    with pytest.raises(ParseError) as exc:
        node_from_dict(o)
    assert (exc.value.obj, exc.value.field_path) == ("Node n1", field_path)


# --------------------------------------------------------------------------- PDBs


def test_pdb_from_dict() -> None:
    pdb = make_pdb(
        "web", match_labels={"app": "web"}, allowed=1, min_available="50%", disrupted=("p1",)
    )
    assert pdb.key == "default/web"
    assert pdb.selector is not None and pdb.selector.matches({"app": "web", "x": "y"})
    assert not pdb.selector.matches({"app": "db"})
    assert (pdb.disruptions_allowed, pdb.disrupted_pods, pdb.min_available) == (
        1,
        frozenset({"p1"}),
        "50%",
    )
    assert pdb.has_status


def test_pdb_without_status_or_selector() -> None:
    o = {"metadata": {"name": "x", "namespace": "ns"}, "spec": {"maxUnavailable": "1"}}
    pdb = pdb_from_dict(o)
    assert (pdb.selector, pdb.has_status, pdb.disruptions_allowed, pdb.max_unavailable) == (
        None,
        False,
        0,
        1,
    )


@pytest.mark.parametrize(
    ("obj", "field_path"),
    [
        pytest.param(
            {"metadata": {"name": "x"}, "spec": {"minAvailable": "half"}},
            "spec.minAvailable",
            id="bad minAvailable",
        ),
        pytest.param(
            {"metadata": {"name": "x"}, "status": {"disruptionsAllowed": "1"}},
            "status.disruptionsAllowed",
            id="disruptionsAllowed not int",
        ),
        pytest.param({"metadata": {}}, "metadata.name", id="no name"),
    ],
)
def test_pdb_parse_errors(obj: dict[str, Any], field_path: str) -> None:
    with pytest.raises(ParseError) as exc:
        pdb_from_dict(obj)
    assert exc.value.field_path == field_path
    assert exc.value.obj.startswith("PodDisruptionBudget default/")


# --------------------------------------------------------------------------- NodeInfo


def _pods() -> list[PodInfo]:
    return [
        make_pod("a").req(cpu="1", memory="1Gi").host_port(80).info(),
        make_pod("b").req(cpu="500m", gpu=1).info(),
        make_pod("c")
        .affinity(
            {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {"x": "y"}}, "topologyKey": "zone"}
                    ]
                }
            }
        )
        .info(),
    ]


def test_node_info_add_remove_keeps_sums() -> None:
    ni = make_node("n1").info()
    a, b, c = _pods()
    for p in (a, b, c):
        ni.add_pod(p, generation=3)
        ni.check_invariants()
    assert ni.requested == Resource(milli_cpu=1500, memory=Gi, scalar={"nvidia.com/gpu": 1})
    assert ni.non_zero_cpu == 1000 + 500 + DEFAULT_MILLI_CPU_REQUEST
    assert ni.non_zero_mem == Gi + 2 * DEFAULT_MEMORY_REQUEST
    assert ni.used_ports == {("0.0.0.0", "TCP", 80): 1}
    assert (ni.pods_with_affinity, ni.pods_with_required_anti_affinity) == (1, 1)
    assert ni.generation == 3

    assert ni.remove_pod("default/b", generation=4) is b
    ni.check_invariants()
    assert ni.requested == Resource(milli_cpu=1000, memory=Gi)  # the gpu entry is gone
    assert ni.remove_pod("default/b", generation=5) is None
    assert ni.generation == 4  # a no-op leaves the generation alone

    ni.add_pod(a, generation=6)  # re-adding a pod replaces it
    ni.check_invariants()
    assert len(ni.pods) == 2 and ni.used_ports == {("0.0.0.0", "TCP", 80): 1}

    for key in list(ni.pods):
        ni.remove_pod(key)
        ni.check_invariants()
    assert ni.requested == Resource() and ni.used_ports == {}
    assert (ni.non_zero_cpu, ni.non_zero_mem, ni.pods_with_affinity) == (0, 0, 0)


def test_node_info_clone_is_independent() -> None:
    ni = make_node("n1").info(*_pods())
    c = ni.clone()
    c.check_invariants()
    assert c.pods == ni.pods and c.requested == ni.requested and c.generation == ni.generation
    c.remove_pod("default/a")
    c.add_pod(make_pod("d").req(cpu="2").host_port(443).info())
    c.check_invariants()
    ni.check_invariants()
    assert set(ni.pods) == {"default/a", "default/b", "default/c"}
    assert ni.requested.milli_cpu == 1500
    assert ("0.0.0.0", "TCP", 443) not in ni.used_ports


def test_node_info_check_invariants_catches_drift() -> None:
    ni = make_node("n1").info(*_pods())
    ni.requested.milli_cpu += 1
    with pytest.raises(AssertionError, match="requested"):
        ni.check_invariants()


def test_node_info_without_node() -> None:
    ni = NodeInfo()
    assert (ni.name, ni.allocatable) == ("", Resource())
    ni.set_node(make_node("n2").record(), 9)
    assert (ni.name, ni.generation) == ("n2", 9)


# --------------------------------------------------------------------------- requests memo


def _memo_cases() -> list[Any]:
    return [
        pytest.param(make_pod("p").req(cpu="100m", memory="128Mi"), id="plain"),
        pytest.param(make_pod("p").req(cpu=2, gpu=1), id="integer quantities"),
        pytest.param(make_pod("p"), id="no requests"),
        pytest.param(
            make_pod("p").req(cpu="1").init_container({"cpu": "2"}).overhead(cpu="10m"),
            id="init container and overhead",
        ),
        pytest.param(
            make_pod("p").req(cpu="1").init_container({"cpu": "1"}, sidecar=True),
            id="sidecar",
        ),
        pytest.param(make_pod("p").req(cpu="1").pod_requests(cpu="3"), id="pod-level"),
        pytest.param(
            _resized(requests=CPU700, status=CPU500, condition="Infeasible"), id="infeasible"
        ),
        pytest.param(
            make_pod("p").req(cpu="1").container_status("c", allocated={"cpu": "2"}),
            id="allocated resources",
        ),
        pytest.param(
            make_pod("p").req(cpu="1").status_resources(allocated=CPU500, actual=CPU700),
            id="pod-level status",
        ),
    ]


@pytest.mark.parametrize("builder", _memo_cases())
def test_requests_memo_equals_uncached(builder: PodBuilder) -> None:
    from scheduler import types

    obj = builder.obj()
    types._REQUESTS_CACHE.clear()
    want = types._compute_pod_requests(obj["spec"], obj["status"], "Pod default/p")
    first = types._pod_requests(obj["spec"], obj["status"], "Pod default/p")
    assert types._REQUESTS_CACHE, "the result is remembered"
    second = types._pod_requests(obj["spec"], obj["status"], "Pod default/p")
    assert first == want
    assert second == want
    assert first[0] is not second[0], "every caller gets its own Resource"


def test_requests_memo_is_mutation_safe() -> None:
    from scheduler import types

    obj = make_pod("p").req(cpu="1", gpu=1).obj()
    types._REQUESTS_CACHE.clear()
    got, _, _ = types._pod_requests(obj["spec"], obj["status"], "Pod default/p")
    got.add(Resource(milli_cpu=5, scalar={"nvidia.com/gpu": 3}))
    again, _, _ = types._pod_requests(obj["spec"], obj["status"], "Pod default/p")
    assert again == Resource(milli_cpu=1000, scalar={"nvidia.com/gpu": 1})


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param(
            make_pod("p").req(cpu="1"),
            make_pod("p").req(cpu="1").container_status("c", allocated={"cpu": "2"}),
            id="a status changes the key",
        ),
        pytest.param(
            make_pod("p").req(cpu="1").init_container({"cpu": "2"}),
            make_pod("p").req(cpu="1").init_container({"cpu": "2"}, sidecar=True),
            id="sidecar or not",
        ),
        pytest.param(
            make_pod("p").req(cpu="1"),
            make_pod("p").req(cpu="1").status_resources(actual={}),
            id="an empty status.resources is not an absent one",
        ),
    ],
)
def test_requests_memo_tells_inputs_apart(first: PodBuilder, second: PodBuilder) -> None:
    from scheduler import types

    a, b = first.obj(), second.obj()
    assert types._requests_key(a["spec"], a["status"]) != types._requests_key(
        b["spec"], b["status"]
    )


def test_requests_memo_never_takes_a_bool_for_a_quantity() -> None:
    """True == 1 in Python: a bool is left to the uncached path, which rejects it."""
    good = make_pod("p").req(cpu=1).info()
    assert good.requests.milli_cpu == 1000
    with pytest.raises(ParseError, match="booleans are not quantities"):
        pod_from_dict(make_pod("p").req(cpu=True).obj())  # type: ignore[arg-type]


def test_timestamps_are_remembered_by_their_text_and_errors_are_not() -> None:
    from scheduler import types

    types._TIMESTAMPS.clear()
    text = "2026-01-01T00:00:00Z"
    want = types._parse_timestamp(text, "metadata.creationTimestamp", "Pod default/p")
    assert types._timestamp(text, "metadata.creationTimestamp", "Pod default/p") == want
    assert dict(types._TIMESTAMPS) == {text: want}
    assert types._timestamp(text, "status.startTime", "Pod default/q") == want
    for _ in range(2):
        with pytest.raises(ParseError, match=r"status\.startTime: invalid timestamp 'yesterday'"):
            types._timestamp("yesterday", "status.startTime", "Pod default/p")
    assert "yesterday" not in types._TIMESTAMPS


@pytest.mark.parametrize(
    "builder",
    [
        pytest.param(make_pod("p"), id="minimal pod"),
        pytest.param(
            make_pod("p")
            .req(cpu="1", memory="1Gi")
            .label("app", "web")
            .node("n1")
            .nominated("n2")
            .priority(7)
            .node_selector(disk="ssd")
            .affinity(
                {
                    "podAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {"labelSelector": {"matchLabels": {"a": "b"}}, "topologyKey": "z"}
                        ]
                    },
                    "podAntiAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "weight": 5,
                                "podAffinityTerm": {
                                    "labelSelector": {"matchLabels": {"a": "b"}},
                                    "topologyKey": "h",
                                },
                            }
                        ]
                    },
                }
            )
            .toleration("k", "v", "NoSchedule")
            .host_port(8080)
            .spread({"maxSkew": 1, "topologyKey": "z", "whenUnsatisfiable": "DoNotSchedule"})
            .started(5)
            .terminating(by_preemption=True)
            .gates("g")
            .image_volume("img:1"),
            id="pod using every field",
        ),
    ],
)
def test_decoded_pod_is_an_ordinary_frozen_pod_info(builder: PodBuilder) -> None:
    """pod_from_dict builds its PodInfo through a draft (types._PodInfoDraft): the result
    has every field set, equals what PodInfo(...) builds from the same values, and is
    frozen like any PodInfo."""
    import dataclasses

    pod = builder.info()
    assert type(pod) is PodInfo
    values = {f.name: getattr(pod, f.name) for f in dataclasses.fields(PodInfo)}
    assert pod == PodInfo(**values)
    with pytest.raises(dataclasses.FrozenInstanceError):
        pod.name = "other"  # type: ignore[misc]
    assert dataclasses.replace(pod, name="q").key == pod.key  # key is a field like any other


def test_pod_with_is_dataclasses_replace() -> None:
    """pod_with (the hot path's replace) equals dataclasses.replace for a change of any one
    field and of several, shares the values it does not change, leaves the original alone,
    returns an ordinary frozen PodInfo and refuses a name that is no field."""
    import dataclasses

    pod = (
        make_pod("p")
        .req(cpu="1", memory="1Gi")
        .label("app", "web")
        .toleration("k", "v", "NoSchedule")
        .started(5)
        .info()
    )
    before = dataclasses.replace(pod)
    other = make_pod("q", "ns2").node("n9").nominated("n8").priority(3).terminating().info()
    for f in dataclasses.fields(PodInfo):
        value = getattr(other, f.name)
        changed = pod_with(pod, **{f.name: value})
        assert changed == dataclasses.replace(pod, **{f.name: value}), f.name
        assert getattr(changed, f.name) is value
    several = pod_with(pod, node_name="n1", phase="Running", start_time=9.0)
    assert several == dataclasses.replace(pod, node_name="n1", phase="Running", start_time=9.0)
    assert several.labels is pod.labels and several.requests is pod.requests
    assert pod == before and pod.node_name == ""
    assert type(several) is PodInfo
    with pytest.raises(dataclasses.FrozenInstanceError):
        several.node_name = "x"  # type: ignore[misc]
    with pytest.raises(TypeError, match="no field 'nodeName'"):
        pod_with(pod, nodeName="n1")


def test_generation_and_the_pod_scheduled_condition_are_read() -> None:
    obj = make_pod("p").obj()
    assert (pod_from_dict(obj).generation, pod_from_dict(obj).pod_scheduled) == (0, "")
    obj["metadata"]["generation"] = 7
    obj["status"]["conditions"] = [
        {"type": "Ready", "status": "True"},
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"},
    ]
    pod = pod_from_dict(obj)
    assert (pod.generation, pod.pod_scheduled) == (7, "False")


WEB = {"matchLabels": {"app": "web"}}
HASH_IN = {"key": "pod-template-hash", "operator": "In", "values": ["abc"]}


@pytest.mark.parametrize(
    ("selector", "keys", "want"),
    [
        pytest.param(
            WEB,
            ["pod-template-hash"],
            LabelSelector(
                (("app", "web"),),
                (LabelSelectorRequirement("pod-template-hash", "In", frozenset({"abc"})),),
            ),
            id="folded in, as the scheduler does for a selector the API server left alone",
        ),
        pytest.param(
            {**WEB, "matchExpressions": [HASH_IN]},
            ["pod-template-hash"],
            LabelSelector(
                (("app", "web"),),
                (LabelSelectorRequirement("pod-template-hash", "In", frozenset({"abc"})),),
            ),
            id="already folded in by the API server: not twice",
        ),
        pytest.param(
            WEB, ["missing"], LabelSelector((("app", "web"),)), id="a key the pod lacks: nothing"
        ),
        pytest.param(None, ["pod-template-hash"], None, id="no selector: still selects nothing"),
    ],
)
def test_spread_constraint_match_label_keys(
    selector: dict[str, Any] | None, keys: list[str], want: LabelSelector | None
) -> None:
    """Upstream's filterTopologySpreadConstraints folds matchLabelKeys into the selector
    (``key In (the pod's value)``); since 1.34 the API server does it at creation."""
    constraint: dict[str, Any] = {
        "maxSkew": 1,
        "topologyKey": "zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "matchLabelKeys": keys,
    }
    if selector is not None:
        constraint["labelSelector"] = selector
    pod = make_pod("p").label("app", "web").label("pod-template-hash", "abc").spread(constraint)
    (got,) = pod.info().topology_spread_constraints
    assert got.label_selector == want


def test_match_label_keys_must_be_a_list() -> None:
    constraint = {
        "maxSkew": 1,
        "topologyKey": "zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": WEB,
        "matchLabelKeys": "app",
    }
    with pytest.raises(ParseError) as e:
        make_pod("p").label("app", "web").spread(constraint).info()
    assert "spec.topologySpreadConstraints[0].matchLabelKeys" in str(e.value)
