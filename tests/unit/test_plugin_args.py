"""Upstream's plugin args, read from the configuration and acted on by the scheduler core:
NodeAffinity's addedAffinity, PodTopologySpread's defaultConstraints and defaultingType,
InterPodAffinity's hardPodAffinityWeight and ignorePreferredTermsOfExistingPods,
NodeResourcesBalancedAllocation's resources and NodeResourcesFit's ignoredResourceGroups.
Each decision is checked with the vectorised cycle and the node-by-node one."""

from __future__ import annotations

import random
from typing import Any

import pytest

from scheduler.clock import FakeClock
from scheduler.config import SchedulerConfig, parse_config
from scheduler.framework.plugins.noderesources.balanced_allocation import BalancedAllocation
from scheduler.framework.plugins.noderesources.fit import NodeResourcesFit
from scheduler.schedule_one import CycleResult, SchedulerCore
from scheduler.types import ServiceInfo
from tests.builders import make_node, make_pod
from tests.unit.fakes import RecordingBinder, RecordingRecorder

VECTORIZED = pytest.mark.parametrize(
    "vectorized", [pytest.param(True, id="vectorised"), pytest.param(False, id="node by node")]
)


def _config(*plugin_config: dict[str, Any], **profile: Any) -> SchedulerConfig:
    return parse_config({"profiles": [{"pluginConfig": list(plugin_config), **profile}]})


def _core(cfg: SchedulerConfig, vectorized: bool, *nodes: Any) -> SchedulerCore:
    core = SchedulerCore(
        cfg,
        FakeClock(),
        RecordingBinder(),
        RecordingRecorder(),
        rng=random.Random(0),
        vectorized=vectorized,
    )
    for n in nodes:
        core.on_node_add(n.record())
    return core


def _schedule(core: SchedulerCore, pod: Any) -> CycleResult:
    core.on_pod_add(pod.info())
    r = core.schedule_one()
    assert r is not None
    return r


def _node(name: str, **labels: str) -> Any:
    b = make_node(name).alloc(cpu="4", memory="8Gi", pods=110)
    for k, v in labels.items():
        b.label(k, v)
    return b


def _pod(name: str, cpu: str = "1", **labels: str) -> Any:
    b = make_pod(name).req(cpu=cpu, memory="1Gi")
    for k, v in labels.items():
        b.label(k, v)
    return b


OURS_ONLY = {
    "name": "NodeAffinity",
    "args": {
        "addedAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["ours"]}]}
                ]
            }
        }
    },
}


@VECTORIZED
def test_added_affinity_keeps_every_pod_on_the_nodes_it_names(vectorized: bool) -> None:
    core = _core(
        _config(OURS_ONLY),
        vectorized,
        _node("a", pool="ours"),
        _node("b", pool="theirs"),
        _node("c"),
    )
    for i in range(4):
        r = _schedule(core, _pod(f"p{i}"))
        assert (r.outcome, r.node) == ("assumed", "a")
    # a is full; b and c have room but are not the profile's, whatever the pod asks.
    r = _schedule(core, _pod("more"))
    assert r.outcome == "unschedulable"
    assert "1 node(s) didn't match scheduler-enforced node affinity" not in r.message
    assert "2 node(s) didn't match scheduler-enforced node affinity" in r.message
    assert "1 Insufficient cpu" in r.message
    r = _schedule(core, _pod("to-b").node_selector(pool="theirs"))
    assert r.outcome == "unschedulable"
    # The added affinity is checked first: b fails it, not the pod's own selector.
    assert "2 node(s) didn't match scheduler-enforced node affinity" in r.message
    assert "1 node(s) didn't match Pod's node affinity/selector" in r.message

    # c joins the pool: the waiting pod "more" is tried again and lands there; the
    # snapshot's mask of the added terms follows the label change.
    core.on_node_update(_node("c").record(), _node("c", pool="ours").record())
    assert isinstance(core.clock, FakeClock)
    core.clock.step(10)  # past both pods' backoff
    core.flush()
    placed = []
    while (r := core.schedule_one()) is not None:
        placed.append((r.pod.name, r.outcome, r.node))
    assert ("more", "assumed", "c") in placed
    assert ("to-b", "assumed", "c") not in placed
    core.snapshot.check_invariants()


@VECTORIZED
def test_added_preferred_affinity_adds_to_every_pod_s_score(vectorized: bool) -> None:
    prefer_a = {
        "name": "NodeAffinity",
        "args": {
            "addedAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 50,
                        "preference": {
                            "matchExpressions": [
                                {"key": "pool", "operator": "In", "values": ["ours"]}
                            ]
                        },
                    }
                ]
            }
        },
    }
    nodes = (_node("a", pool="ours"), _node("b", pool="theirs"))
    # Without the args, LeastAllocated spreads two pods over both nodes.
    plain = _core(_config(), vectorized, *nodes)
    assert {_schedule(plain, _pod(f"p{i}")).node for i in range(2)} == {"a", "b"}
    core = _core(_config(prefer_a), vectorized, *nodes)
    assert [_schedule(core, _pod(f"p{i}")).node for i in range(2)] == ["a", "a"]
    # A pod's own preference adds to the profile's: 100 for b outweighs 50 for a.
    own = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "preference": {
                        "matchExpressions": [
                            {"key": "pool", "operator": "In", "values": ["theirs"]}
                        ]
                    },
                }
            ]
        }
    }
    assert _schedule(core, _pod("wants-b").affinity(own)).node == "b"


ZONE_LIST = {
    "name": "PodTopologySpread",
    "args": {
        "defaultingType": "List",
        "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
        ],
    },
}


@VECTORIZED
def test_list_default_constraints_spread_the_pods_a_service_selects(vectorized: bool) -> None:
    nodes = (
        _node("a1", zone="a"),
        _node("a2", zone="a"),
        make_node("b1").alloc(cpu="1", memory="8Gi", pods=110).label("zone", "b"),
    )
    core = _core(_config(ZONE_LIST), vectorized, *nodes)
    core.on_selector_object_set("Service", ServiceInfo("default", "web", (("app", "web"),)))
    zones = []
    for i in range(3):
        r = _schedule(core, _pod(f"web-{i}", app="web"))
        assert r.outcome == "assumed", r.message
        zones.append(r.node[0])
    assert sorted(zones) == ["a", "a", "b"]
    # b1 is full: a third pod in zone a would make the skew 2.
    r = _schedule(core, _pod("web-3", app="web"))
    assert r.outcome == "unschedulable"
    assert "2 node(s) didn't match pod topology spread constraints" in r.message
    # A pod no Service (or controller) selects gets no default constraint.
    assert _schedule(core, _pod("other", app="other")).outcome == "assumed"


@VECTORIZED
def test_list_defaulting_without_constraints_does_not_spread(vectorized: bool) -> None:
    """System defaulting spreads a Service's pods by hostname (ScheduleAnyway); ``List``
    with no constraints leaves them to the other scores: with MostAllocated they pack."""
    most = {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}
    for spread, want in (
        ({"name": "PodTopologySpread", "args": {"defaultingType": "List"}}, 1),
        ({"name": "PodTopologySpread", "args": {}}, 2),
    ):
        core = _core(_config(most, spread), vectorized, _node("a"), _node("b"))
        core.on_selector_object_set("Service", ServiceInfo("default", "web", (("app", "web"),)))
        nodes = {_schedule(core, _pod(f"w{i}", cpu="100m", app="web")).node for i in range(2)}
        assert len(nodes) == want, (spread, nodes)


def _required_affinity_to_web() -> dict[str, Any]:
    term = {
        "labelSelector": {"matchLabels": {"app": "web"}},
        "topologyKey": "kubernetes.io/hostname",
    }
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def _preferred_affinity_to_web() -> dict[str, Any]:
    term = {
        "labelSelector": {"matchLabels": {"app": "web"}},
        "topologyKey": "kubernetes.io/hostname",
    }
    return {
        "podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "podAffinityTerm": term}
            ]
        }
    }


def _host(name: str) -> Any:
    return _node(name).label("kubernetes.io/hostname", name)


@pytest.mark.parametrize(
    ("args", "existing", "want"),
    [
        pytest.param({}, _required_affinity_to_web(), "a", id="hard weight 1 (default)"),
        pytest.param(
            {"hardPodAffinityWeight": 0}, _required_affinity_to_web(), "b", id="hard weight 0"
        ),
        pytest.param({}, _preferred_affinity_to_web(), "a", id="existing preferred terms count"),
        pytest.param(
            {"ignorePreferredTermsOfExistingPods": True},
            _preferred_affinity_to_web(),
            "b",
            id="existing preferred terms ignored",
        ),
    ],
)
@VECTORIZED
def test_inter_pod_affinity_args(
    args: dict[str, Any], existing: dict[str, Any], want: str, vectorized: bool
) -> None:
    """A pod on a whose affinity (required or preferred) names app=web draws an incoming
    web pod to a, unless the args leave that term out; b is emptier otherwise."""
    cfg = _config({"name": "InterPodAffinity", "args": args})
    core = _core(cfg, vectorized, _host("a"), _host("b"))
    core.on_pod_add(_pod("fan", cpu="100m").affinity(existing).node("a").info())
    assert _schedule(core, _pod("web", app="web")).node == want


def _framework_plugins(cfg: SchedulerConfig) -> list[object]:
    fw = _core(cfg, True).framework
    plugins = [*fw.filter_plugins, *(w.plugin for w in fw.score_plugins)]
    return list({id(p): p for p in plugins}.values())


def test_balanced_allocation_has_its_own_resources() -> None:
    """Upstream's BalancedAllocation does not read NodeResourcesFit's scoring resources."""
    fit_gpu = {
        "name": "NodeResourcesFit",
        "args": {
            "scoringStrategy": {
                "resources": [{"name": "cpu"}, {"name": "memory"}, {"name": "example.com/gpu"}]
            }
        },
    }
    only_cpu = {"name": "NodeResourcesBalancedAllocation", "args": {"resources": [{"name": "cpu"}]}}
    for configs, fit_names, balanced_names in (
        ((fit_gpu,), ["cpu", "memory", "example.com/gpu"], ["cpu", "memory"]),
        ((fit_gpu, only_cpu), ["cpu", "memory", "example.com/gpu"], ["cpu"]),
    ):
        plugins = _framework_plugins(_config(*configs))
        (fit,) = (p for p in plugins if isinstance(p, NodeResourcesFit))
        (balanced,) = (p for p in plugins if isinstance(p, BalancedAllocation))
        assert [r.name for r in fit.resources] == fit_names
        assert [r.name for r in balanced.resources] == balanced_names


@VECTORIZED
def test_balanced_allocation_resources_decide(vectorized: bool) -> None:
    """Node a is cpu-heavy, b memory-heavy: a cpu-only pod balances b better by cpu and
    memory, while by cpu alone (every node's fraction the same std of zero) the balanced
    score ties and LeastAllocated's cpu-and-memory view picks a."""
    nodes = (_node("a"), _node("b"))
    for configs, want in (
        ((), "b"),
        (
            (
                {
                    "name": "NodeResourcesBalancedAllocation",
                    "args": {"resources": [{"name": "cpu"}]},
                },
            ),
            "a",
        ),
    ):
        core = _core(_config(*configs), vectorized, *nodes)
        core.on_pod_add(make_pod("cpu-heavy").req(cpu="2", memory="1Gi").node("a").info())
        core.on_pod_add(make_pod("mem-heavy").req(cpu="100m", memory="5Gi").node("b").info())
        r = _schedule(core, make_pod("cpu").req(cpu="1", memory="100Mi"))
        assert r.node == want, configs


def test_ignored_resource_groups_skip_extended_resources_only() -> None:
    cfg = _config(
        {
            "name": "NodeResourcesFit",
            "args": {
                "ignoredResources": ["hugepages-2Mi"],
                "ignoredResourceGroups": ["example.com"],
            },
        }
    )
    for pod, outcome in (
        (make_pod("ext").req(cpu="1", **{"example.com/fpga": "2"}), "assumed"),
        (make_pod("other").req(cpu="1", **{"other.io/fpga": "1"}), "unschedulable"),
        # hugepages are not an extended resource: never ignored (upstream).
        (make_pod("huge").req(cpu="1", memory="1Gi", **{"hugepages-2Mi": "2Mi"}), "unschedulable"),
    ):
        core = _core(cfg, True, _node("a"))
        assert _schedule(core, pod).outcome == outcome, pod
