"""PodTopologySpread: PreFilter/Filter, the incremental extensions, scoring and hints.

Case names follow upstream's filtering_test.go / scoring_test.go where a case mirrors one.
Upstream's "service" selector for system defaulting is approximated by a shared
ReplicaSet owner (see the plugin's module docstring).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from scheduler.backend.cache.snapshot import Snapshot
from scheduler.framework.interface import Code, CycleState, QueueingHint, Status
from scheduler.framework.plugins import names
from scheduler.framework.plugins.podtopologyspread import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
    LABEL_HOSTNAME,
    PodTopologySpread,
)
from scheduler.types import (
    LabelSelector,
    NodeInfo,
    NodeRecord,
    PodInfo,
    TopologySpreadConstraint,
    node_from_dict,
    pod_from_dict,
)
from tests.builders import make_pod

OK = Code.SUCCESS
UNSCHED = Code.UNSCHEDULABLE
UNRESOLVABLE = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
_STATE_KEY = "PreFilter" + names.POD_TOPOLOGY_SPREAD

# --------------------------------------------------------------------------- builders


def sc(
    max_skew: int,
    key: str,
    when: str = "DoNotSchedule",
    *,
    sel: str | dict[str, Any] | None = "foo",
    min_domains: int | None = None,
    affinity_policy: str | None = None,
    taints_policy: str | None = None,
) -> dict[str, Any]:
    """A spread constraint; ``sel`` names a label that must exist (upstream's fooSelector),
    or is a raw selector, or None for a null selector."""
    c: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when}
    if isinstance(sel, str):
        c["labelSelector"] = {"matchExpressions": [{"key": sel, "operator": "Exists"}]}
    elif sel is not None:
        c["labelSelector"] = sel
    if min_domains is not None:
        c["minDomains"] = min_domains
    if affinity_policy:
        c["nodeAffinityPolicy"] = affinity_policy
    if taints_policy:
        c["nodeTaintsPolicy"] = taints_policy
    return c


def incoming(
    *label_keys: str,
    constraints: Sequence[dict[str, Any]] = (),
    ns: str = "default",
    node_selector: Mapping[str, str] | None = None,
    node_affinity: dict[str, Any] | None = None,
    owner: tuple[str, str] | None = None,
    tolerations: Sequence[dict[str, str]] = (),
) -> PodInfo:
    b = make_pod("p", ns)
    for k in label_keys:
        b.label(k, "")
    for c in constraints:
        b.spread(c)
    if node_selector:
        b.node_selector(**node_selector)
    if node_affinity:
        b.affinity({"nodeAffinity": node_affinity})
    for t in tolerations:
        b.toleration(**t)
    return _owned(b.obj(), owner)


def ep(
    name: str,
    node: str,
    *label_keys: str,
    ns: str = "default",
    terminating: bool = False,
    owner: tuple[str, str] | None = None,
) -> PodInfo:
    """An existing pod on ``node`` with the given labels (empty values)."""
    b = make_pod(name, ns).node(node)
    for k in label_keys:
        b.label(k, "")
    if terminating:
        b.terminating()
    return _owned(b.obj(), owner)


def _owned(obj: dict[str, Any], owner: tuple[str, str] | None) -> PodInfo:
    if owner is not None:
        obj["metadata"]["ownerReferences"] = [
            {"kind": owner[0], "name": owner[1], "uid": owner[1], "controller": True}
        ]
    return pod_from_dict(obj)


def n(name: str, *, taint: bool = False, **labels: str) -> NodeRecord:
    """A node with exactly these labels; ``host`` stands for kubernetes.io/hostname."""
    if "host" in labels:
        labels[LABEL_HOSTNAME] = labels.pop("host")
    spec = (
        {"taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]}
        if taint
        else {}
    )
    return node_from_dict(
        {
            "metadata": {"name": name, "labels": labels},
            "spec": spec,
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
        }
    )


def snapshot(nodes: Sequence[NodeRecord], pods: Sequence[PodInfo] = ()) -> Snapshot:
    infos = {x.name: NodeInfo(x) for x in nodes}
    for p in pods:
        if p.node_name in infos:
            infos[p.node_name].add_pod(p)
    return Snapshot.from_node_infos(list(infos.values()))


def run_filter(plugin: PodTopologySpread, pod: PodInfo, snap: Snapshot) -> dict[str, Code]:
    state = CycleState()
    _, pre = plugin.pre_filter(state, pod, snap)
    assert pre.is_success(), pre
    return {ni.name: plugin.filter(state, pod, ni).code for ni in snap.node_info_list}


FOUR_NODES = [
    n("node-a", zone="zone1", node="node-a"),
    n("node-b", zone="zone1", node="node-b"),
    n("node-x", zone="zone2", node="node-x"),
    n("node-y", zone="zone2", node="node-y"),
]
SPREAD_2_1_0_3 = [
    ep("p-a1", "node-a", "foo"),
    ep("p-a2", "node-a", "foo"),
    ep("p-b1", "node-b", "foo"),
    ep("p-y1", "node-y", "foo"),
    ep("p-y2", "node-y", "foo"),
    ep("p-y3", "node-y", "foo"),
]
FOO_NODES = [
    n("node-a", node="node-a", foo=""),
    n("node-b", node="node-b", foo=""),
    n("node-x", node="node-x", foo=""),
    n("node-y", node="node-y"),
]
FOO_NODES_TAINTED_Y = [*FOO_NODES[:3], n("node-y", node="node-y", taint=True)]
ONE_ONE_ZERO_ONE = [
    ep("p-b1", "node-a", "foo"),
    ep("p-b2", "node-b", "foo"),
    ep("p-y1", "node-y", "foo"),
]
NODE_AFFINITY_FOO = {
    "requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "foo", "operator": "In", "values": [""]}]}
        ]
    }
}


def _codes(a: Code, b: Code, x: Code, y: Code) -> dict[str, Code]:
    return {"node-a": a, "node-b": b, "node-x": x, "node-y": y}


# --------------------------------------------------------------------------- filter


@pytest.mark.parametrize(
    ("pod", "nodes", "pods", "want"),
    [
        pytest.param(
            incoming("foo", constraints=[sc(1, "zone")]),
            FOUR_NODES,
            [],
            _codes(OK, OK, OK, OK),
            id="no existing pods",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(1, "zone", sel="bar")]),
            FOUR_NODES,
            [],
            _codes(OK, OK, OK, OK),
            id="no existing pods, incoming pod doesn't match itself",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(1, "zone")]),
            FOUR_NODES,
            [
                ep("p-a1", "node-a", "foo", ns="ns1"),
                ep("p-b1", "node-a", "foo", ns="ns2"),
                ep("p-x1", "node-x", "foo"),
                ep("p-y1", "node-y", "foo"),
            ],
            _codes(OK, OK, UNSCHED, UNSCHED),
            id="existing pods in a different namespace do not count",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(1, "zone", sel=None)]),
            FOUR_NODES,
            [ep("p-x1", "node-x", "foo"), ep("p-y1", "node-y", "foo")],
            _codes(OK, OK, OK, OK),
            id="existing pods do not match null selector",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(1, "zone")]),
            FOUR_NODES,
            [
                ep("p-a1", "node-a", "foo"),
                ep("p-a2", "node-a", "foo"),
                ep("p-b1", "node-b", "foo"),
                ep("p-y1", "node-y", "foo"),
                ep("p-y2", "node-y", "foo"),
                ep("p-y3", "node-y", "foo"),
            ],
            _codes(OK, OK, OK, OK),
            id="pods spread across zones as 3/3, all nodes fit",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(1, "zone")]),
            [
                n("node-a", zone="zone1", node="node-a"),
                n("node-b", zon="zone1", node="node-b"),
                n("node-x", zone="zone2", node="node-x"),
                n("node-y", zone="zone2", node="node-y"),
            ],
            [
                ep("p-a1", "node-a", "foo"),
                ep("p-b1", "node-b", "foo"),
                ep("p-x1", "node-x", "foo"),
                ep("p-y1", "node-y", "foo"),
            ],
            _codes(OK, UNRESOLVABLE, UNSCHED, UNSCHED),
            id="pods spread across zones as 1/2 due to absence of label 'zone' on node-b",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(1, "rack")]),
            [n("node-a", zone="zone1", node="node-a"), n("node-x", zone="zone2", node="node-x")],
            [],
            {"node-a": UNRESOLVABLE, "node-x": UNRESOLVABLE},
            id="pod cannot be scheduled as all nodes don't have label 'rack'",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(1, "node")]),
            FOUR_NODES,
            SPREAD_2_1_0_3,
            _codes(UNSCHED, UNSCHED, OK, UNSCHED),
            id="pods spread across nodes as 2/1/0/3, only node-x fits",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(2, "node")]),
            FOUR_NODES,
            SPREAD_2_1_0_3,
            _codes(UNSCHED, OK, OK, UNSCHED),
            id="pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit",
        ),
        pytest.param(
            incoming("bar", constraints=[sc(1, "node")]),
            FOUR_NODES,
            SPREAD_2_1_0_3,
            _codes(UNSCHED, OK, OK, UNSCHED),
            id="pods spread across nodes as 2/1/0/3, but pod doesn't match itself",
        ),
        pytest.param(
            incoming(
                "foo",
                constraints=[sc(1, "node")],
                node_affinity={
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "node",
                                        "operator": "In",
                                        "values": ["node-a", "node-y"],
                                    }
                                ]
                            }
                        ]
                    }
                },
            ),
            FOUR_NODES,
            SPREAD_2_1_0_3,
            _codes(OK, OK, OK, UNSCHED),
            id="incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence node-a fits",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(1, "node")]),
            [n("node-a", node="node-a"), n("node-b", node="node-b")],
            [ep("p-a", "node-a", "foo", terminating=True), ep("p-b", "node-b", "foo")],
            {"node-a": OK, "node-b": UNSCHED},
            id="terminating Pods should be excluded",
        ),
        pytest.param(
            incoming(
                "foo",
                constraints=[sc(1, "zone")],
                node_affinity={
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "node", "operator": "NotIn", "values": ["node-b"]}
                                ]
                            }
                        ]
                    }
                },
            ),
            FOUR_NODES,
            [ep("p-b1", "node-b", "foo"), ep("p-b2", "node-b", "foo"), ep("p-y1", "node-y", "foo")],
            _codes(OK, OK, UNSCHED, UNSCHED),
            id="incoming pod has nodeAffinity, pods spread as 0/~2~/0/1, hence node-a fits",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(2, "node", min_domains=4)]),
            [n("node-a", node="node-a"), n("node-b", node="node-b"), n("node-c", node="node-c")],
            [
                ep("p-a1", "node-a", "foo"),
                ep("p-a2", "node-a", "foo"),
                ep("p-b1", "node-b", "foo"),
                ep("p-b2", "node-b", "foo"),
                ep("p-c1", "node-c", "foo"),
            ],
            {"node-a": UNSCHED, "node-b": UNSCHED, "node-c": OK},
            id="pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains < "
            "minDomains, then the third node fits",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(2, "node", min_domains=2)]),
            [n("node-a", node="node-a"), n("node-b", node="node-b"), n("node-c", node="node-c")],
            [
                ep("p-a1", "node-a", "foo"),
                ep("p-a2", "node-a", "foo"),
                ep("p-b1", "node-b", "foo"),
                ep("p-b2", "node-b", "foo"),
                ep("p-c1", "node-c", "foo"),
            ],
            {"node-a": OK, "node-b": OK, "node-c": OK},
            id="pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains > "
            "minDomains, then the all nodes fit",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(2, "zone", min_domains=3)]),
            FOUR_NODES,
            [ep("p-b1", "node-a", "foo"), ep("p-b2", "node-b", "foo"), ep("p-y1", "node-y", "foo")],
            _codes(UNSCHED, UNSCHED, OK, OK),
            id="pods spread across zone as 2/1, maxSkew is 2 and the number of domains < "
            "minDomains, then the third and fourth nodes fit",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(2, "zone", min_domains=1)]),
            FOUR_NODES,
            [ep("p-b1", "node-a", "foo"), ep("p-b2", "node-b", "foo"), ep("p-y1", "node-y", "foo")],
            _codes(OK, OK, OK, OK),
            id="pods spread across zone as 2/1, maxSkew is 2 and the number of domains > "
            "minDomains, then the all nodes fit",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(1, "node")], node_selector={"foo": ""}),
            FOO_NODES,
            ONE_ONE_ZERO_ONE,
            _codes(UNSCHED, UNSCHED, OK, OK),
            id="NodeAffinityPolicy honored with labelSelectors",
        ),
        pytest.param(
            incoming(
                "foo",
                constraints=[sc(1, "node", affinity_policy="Ignore")],
                node_selector={"foo": ""},
            ),
            FOO_NODES,
            ONE_ONE_ZERO_ONE,
            _codes(UNSCHED, UNSCHED, OK, UNSCHED),
            id="NodeAffinityPolicy ignored with labelSelectors",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(1, "node")], node_affinity=NODE_AFFINITY_FOO),
            FOO_NODES,
            ONE_ONE_ZERO_ONE,
            _codes(UNSCHED, UNSCHED, OK, OK),
            id="NodeAffinityPolicy honored with nodeAffinity",
        ),
        pytest.param(
            incoming(
                "foo",
                constraints=[sc(1, "node", affinity_policy="Ignore")],
                node_affinity=NODE_AFFINITY_FOO,
            ),
            FOO_NODES,
            ONE_ONE_ZERO_ONE,
            _codes(UNSCHED, UNSCHED, OK, UNSCHED),
            id="NodeAffinityPolicy ignored with nodeAffinity",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(1, "node", taints_policy="Honor")]),
            FOO_NODES_TAINTED_Y,
            ONE_ONE_ZERO_ONE,
            _codes(UNSCHED, UNSCHED, OK, OK),
            id="NodeTaintsPolicy honored",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(1, "node")]),
            FOO_NODES_TAINTED_Y,
            ONE_ONE_ZERO_ONE,
            _codes(UNSCHED, UNSCHED, OK, UNSCHED),
            id="NodeTaintsPolicy ignored",
        ),
        pytest.param(
            incoming(
                "foo",
                constraints=[sc(1, "node", taints_policy="Honor")],
                tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}],
            ),
            FOO_NODES_TAINTED_Y,
            ONE_ONE_ZERO_ONE,
            _codes(UNSCHED, UNSCHED, OK, UNSCHED),
            id="NodeTaintsPolicy honored with tolerated taints",
        ),
        # ------------------------------------------------------------ multiple constraints
        pytest.param(
            incoming("foo", constraints=[sc(1, "zone"), sc(1, "node")]),
            FOUR_NODES,
            SPREAD_2_1_0_3,
            _codes(UNSCHED, UNSCHED, OK, UNSCHED),
            id="two Constraints on zone and node, spreads = [3/3, 2/1/0/3]",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(1, "zone"), sc(1, "node")]),
            FOUR_NODES,
            [*SPREAD_2_1_0_3, ep("p-y4", "node-y", "foo")],
            _codes(UNSCHED, UNSCHED, UNSCHED, UNSCHED),
            id="two Constraints on zone and node, spreads = [3/4, 2/1/0/4]",
        ),
        pytest.param(
            incoming("foo", "bar", constraints=[sc(1, "zone"), sc(1, "node", sel="bar")]),
            FOUR_NODES,
            [ep("p-a1", "node-a", "foo"), ep("p-y1", "node-y", "bar")],
            _codes(UNSCHED, UNSCHED, OK, UNSCHED),
            id="Constraints hold different labelSelectors, spreads = [1/0, 1/0/0/1]",
        ),
        pytest.param(
            incoming("foo", "bar", constraints=[sc(1, "zone"), sc(1, "node", sel="bar")]),
            FOUR_NODES,
            [ep("p-a1", "node-a", "foo"), ep("p-x1", "node-x", "bar"), ep("p-y1", "node-y", "bar")],
            _codes(UNSCHED, UNSCHED, UNSCHED, UNSCHED),
            id="Constraints hold different labelSelectors, spreads = [1/0, 0/0/1/1]",
        ),
        pytest.param(
            incoming("foo", "bar", constraints=[sc(1, "zone"), sc(1, "node", sel="bar")]),
            FOUR_NODES,
            [
                ep("p-a1", "node-a", "foo"),
                ep("p-a2", "node-a", "foo", "bar"),
                ep("p-y1", "node-y", "foo"),
                ep("p-y2", "node-y", "foo", "bar"),
                ep("p-y3", "node-y", "foo"),
            ],
            _codes(UNSCHED, OK, UNSCHED, UNSCHED),
            id="Constraints hold different labelSelectors, spreads = [2/3, 1/0/0/1]",
        ),
        pytest.param(
            incoming("bar", constraints=[sc(1, "zone"), sc(1, "node", sel="bar")]),
            FOUR_NODES,
            [ep("p-a1", "node-a", "foo"), ep("p-x1", "node-x", "bar"), ep("p-y1", "node-y", "bar")],
            _codes(OK, OK, UNSCHED, UNSCHED),
            id="Constraints hold different labelSelectors but pod doesn't match itself on 'zone' "
            "constraint",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(1, "zone"), sc(1, "node")]),
            [*FOUR_NODES[:2], n("node-x", zone="zone2"), FOUR_NODES[3]],
            [ep("p-a1", "node-a", "foo"), ep("p-y3", "node-y", "foo")],
            _codes(UNSCHED, OK, UNRESOLVABLE, UNSCHED),
            id="two Constraints on zone and node, absence of label 'node' on node-x, spreads = "
            "[1/1, 1/0/0/1]",
        ),
        pytest.param(
            incoming(
                "foo",
                constraints=[sc(1, "zone"), sc(1, "node", affinity_policy="Ignore")],
                node_selector={"foo": ""},
            ),
            [
                n("node-a", zone="zone1", node="node-a", foo=""),
                n("node-b", zone="zone1", node="node-b", foo=""),
                n("node-x", zone="zone2", node="node-x", foo=""),
                n("node-y", zone="zone2", node="node-y"),
            ],
            [ep("p-a1", "node-a", "foo"), ep("p-b1", "node-b", "foo"), ep("p-y1", "node-y", "foo")],
            _codes(UNSCHED, UNSCHED, OK, UNSCHED),
            id="two node inclusion Constraints, zone: honor/ignore, node: ignore/ignore",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(1, "zone", taints_policy="Honor"), sc(1, "node")]),
            [
                n("node-a", zone="zone1", node="node-a", foo=""),
                n("node-b", zone="zone1", node="node-b", foo=""),
                n("node-x", zone="zone2", node="node-x", foo=""),
                n("node-y", zone="zone2", node="node-y", taint=True),
            ],
            [ep("p-a1", "node-a", "foo"), ep("p-b1", "node-b", "foo"), ep("p-y1", "node-y", "foo")],
            _codes(UNSCHED, UNSCHED, OK, UNSCHED),
            id="two node inclusion Constraints, zone: honor/honor, node: honor/ignore",
        ),
        pytest.param(
            incoming("foo", "bar", constraints=[sc(1, "zone", sel="bar"), sc(1, "zone")]),
            FOUR_NODES,
            [
                ep("p-a1", "node-a", "foo", "bar"),
                ep("p-a2", "node-a", "foo"),
                ep("p-b1", "node-b", "foo", "bar"),
                ep("p-y1", "node-y", "foo"),
                ep("p-y2", "node-y", "foo", "bar"),
                ep("p-y3", "node-y", "foo"),
            ],
            _codes(UNSCHED, UNSCHED, OK, OK),
            id="two Constraints on zone, spreads = [3/3, 2/1]",
        ),
        pytest.param(
            incoming("foo", "bar", constraints=[sc(1, "zone", sel="bar"), sc(1, "zone")]),
            FOUR_NODES,
            [
                ep("p-a1", "node-a", "foo", "bar"),
                ep("p-a2", "node-a", "foo"),
                ep("p-b1", "node-b", "foo", "bar"),
                ep("p-y1", "node-y", "foo"),
                ep("p-y2", "node-y", "foo", "bar"),
                ep("p-y3", "node-y", "foo"),
                ep("p-y4", "node-y", "foo"),
            ],
            _codes(UNSCHED, UNSCHED, UNSCHED, UNSCHED),
            id="two Constraints on zone, spreads = [3/4, 2/1]",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(1, "zone", sel={})]),
            FOUR_NODES,
            SPREAD_2_1_0_3,
            _codes(OK, OK, OK, OK),
            id="an empty label selector counts no existing pods (as upstream's count)",
        ),
    ],
)
def test_filter(
    pod: PodInfo, nodes: list[NodeRecord], pods: list[PodInfo], want: dict[str, Code]
) -> None:
    assert run_filter(PodTopologySpread(), pod, snapshot(nodes, pods)) == want


def test_filter_reasons() -> None:
    plugin = PodTopologySpread()
    snap = snapshot(
        [n("node-a", zone="zone1"), n("node-b", zone="zone2"), n("node-c")],
        [ep("p-a1", "node-a", "foo")],
    )
    pod = incoming("foo", constraints=[sc(1, "zone")])
    state = CycleState()
    plugin.pre_filter(state, pod, snap)
    a, b, c = (plugin.filter(state, pod, ni) for ni in snap.node_info_list)
    assert a == Status(Code.UNSCHEDULABLE, (ERR_REASON_CONSTRAINTS_NOT_MATCH,), plugin.name)
    assert b.is_success()
    assert c == Status(
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON_NODE_LABEL_NOT_MATCH,), plugin.name
    )


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param(incoming("foo"), id="skip if not specified"),
        pytest.param(
            incoming("foo", constraints=[sc(1, "zone", "ScheduleAnyway")]),
            id="soft spreadConstraints should be bypassed",
        ),
        pytest.param(
            incoming("foo", owner=("ReplicaSet", "rs1")),
            id="system default constraints are ScheduleAnyway only",
        ),
    ],
)
def test_pre_filter_skips(pod: PodInfo) -> None:
    _, st = PodTopologySpread().pre_filter(CycleState(), pod, snapshot(FOUR_NODES))
    assert st.is_skip()


def test_filter_without_prefilter_state_is_an_error() -> None:
    snap = snapshot(FOUR_NODES)
    st = PodTopologySpread().filter(CycleState(), incoming("foo"), snap.node_info_list[0])
    assert st.code == Code.ERROR


def test_default_do_not_schedule_constraints_select_pods_of_the_same_owner() -> None:
    rack = TopologySpreadConstraint(
        max_skew=1,
        topology_key="rack",
        when_unsatisfiable="DoNotSchedule",
        label_selector=None,
        min_domains=1,
        node_affinity_policy="Honor",
        node_taints_policy="Ignore",
    )
    plugin = PodTopologySpread([rack], system_defaulting=False)
    rs = ("ReplicaSet", "rs1")
    nodes = [n("n1", rack="r1"), n("n2", rack="r2")]
    pods = [
        ep("mine", "n1", owner=rs),
        ep("other-owner", "n2", owner=("ReplicaSet", "rs2")),
        ep("other-owner-2", "n2", owner=("ReplicaSet", "rs2")),
    ]
    assert run_filter(plugin, incoming(owner=rs), snapshot(nodes, pods)) == {
        "n1": UNSCHED,
        "n2": OK,
    }
    # Owned by a Job: upstream's DefaultSelector ignores Jobs, so no default constraint.
    _, st = plugin.pre_filter(CycleState(), incoming(owner=("Job", "j1")), snapshot(nodes, pods))
    assert st.is_skip()


def test_owner_counts_follow_the_pods_of_a_node() -> None:
    """A node's pods are grouped by owner once per version of the node (any pod change
    forgets the grouping, and the counts, as the invariants check)."""
    rack = TopologySpreadConstraint(1, "rack", "DoNotSchedule", None, 1, "Honor", "Ignore")
    plugin = PodTopologySpread([rack], system_defaulting=False)
    rs = ("ReplicaSet", "rs1")
    infos = [NodeInfo(n("n1", rack="r1")), NodeInfo(n("n2", rack="r2"))]
    infos[0].add_pod(ep("mine", "n1", owner=rs))
    infos[1].add_pod(ep("other", "n2", owner=("ReplicaSet", "rs2")))
    pod = incoming(owner=rs)
    assert run_filter(plugin, pod, Snapshot.from_node_infos(infos)) == {"n1": UNSCHED, "n2": OK}
    assert infos[1].owner_pods is not None, "grouped on first use"
    infos[1].add_pod(ep("mine-2", "n2", owner=rs))
    infos[1].add_pod(ep("mine-3", "n2", owner=rs))
    assert run_filter(plugin, pod, Snapshot.from_node_infos(infos)) == {"n1": OK, "n2": UNSCHED}
    infos[1].remove_pod("default/mine-2")
    infos[1].remove_pod("default/mine-3")
    assert run_filter(plugin, pod, Snapshot.from_node_infos(infos)) == {"n1": UNSCHED, "n2": OK}
    for ni in infos:
        ni.check_invariants()


def default_constraint(
    max_skew: int = 1, key: str = "zone", selector: LabelSelector | None = None
) -> TopologySpreadConstraint:
    return TopologySpreadConstraint(
        max_skew=max_skew,
        topology_key=key,
        when_unsatisfiable="ScheduleAnyway",
        label_selector=selector,
        min_domains=1,
        node_affinity_policy="Honor",
        node_taints_policy="Ignore",
    )


@pytest.mark.parametrize(
    ("constraints", "system_defaulting", "match"),
    [
        pytest.param(
            [default_constraint()],
            True,
            "must be empty",
            id="System defaulting with explicit defaults",
        ),
        pytest.param([default_constraint(0)], False, "maxSkew", id="maxSkew must be positive"),
        pytest.param(
            [default_constraint(selector=LabelSelector())],
            False,
            "labelSelector",
            id="default constraints may not carry a selector",
        ),
        pytest.param(
            [default_constraint(), default_constraint(2)],
            False,
            "duplicate",
            id="one default per topology key and action",
        ),
    ],
)
def test_constructor_validates_defaults(
    constraints: list[TopologySpreadConstraint], system_defaulting: bool, match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        PodTopologySpread(constraints, system_defaulting)


# --------------------------------------------------------------------------- extensions


def _domains(state: CycleState) -> list[dict[str, int]]:
    s = state.read(_STATE_KEY)
    for d in s.domains:
        d.check_invariants()
    return [dict(d.counts) for d in s.domains]


def _minimums(state: CycleState) -> list[int]:
    return [d.minimum for d in state.read(_STATE_KEY).domains]


def _pre_filter(plugin: PodTopologySpread, pod: PodInfo, snap: Snapshot) -> CycleState:
    state = CycleState()
    _, st = plugin.pre_filter(state, pod, snap)
    assert st.is_success()
    return state


TWO_NODES = [n("node-a", zone="zone1", node="node-a"), n("node-b", zone="zone1", node="node-b")]


@pytest.mark.parametrize(
    ("pod", "nodes", "existing", "added", "want"),
    [
        pytest.param(
            incoming("foo", constraints=[sc(1, "node")]),
            TWO_NODES,
            [],
            ep("p-a1", "node-a", "foo"),
            [{"node-a": 1, "node-b": 0}],
            id="node a and b both impact current min match",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(1, "node")]),
            TWO_NODES,
            [ep("p-b1", "node-b", "foo")],
            ep("p-a1", "node-a", "foo"),
            [{"node-a": 1, "node-b": 1}],
            id="only node a impacts current min match",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(1, "node")]),
            TWO_NODES,
            [ep("p-b1", "node-b", "foo")],
            ep("p-a1", "node-a", "foo", ns="ns1"),
            [{"node-a": 0, "node-b": 1}],
            id="add a pod in a different namespace doesn't change topologyKeyToMinPodsMap",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(1, "node")]),
            TWO_NODES,
            [ep("p-b1", "node-b", "foo")],
            ep("p-b2", "node-b", "foo"),
            [{"node-a": 0, "node-b": 2}],
            id="add pod on non-critical node won't trigger re-calculation",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(1, "zone"), sc(1, "node")]),
            [*TWO_NODES, n("node-x", zone="zone2", node="node-x")],
            [ep("p-x1", "node-x", "foo")],
            ep("p-a1", "node-a", "foo"),
            [{"zone1": 1, "zone2": 1}, {"node-a": 1, "node-b": 0, "node-x": 1}],
            id="node a and x both impact topologyKeyToMinPodsMap on zone and node",
        ),
        pytest.param(
            incoming(
                "foo",
                constraints=[sc(1, "zone")],
                node_affinity={
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "foo", "operator": "NotIn", "values": ["bar"]}
                                ]
                            }
                        ]
                    }
                },
            ),
            [
                n("node-a", zone="zone1", node="node-a", foo="bar"),
                n("node-b", zone="zone2", node="node-b", foo=""),
            ],
            [ep("p-a2", "node-a", "foo"), ep("p-b1", "node-b", "foo")],
            ep("p-a1", "node-a", "foo"),
            [{"zone2": 1}],
            id="add a pod when scheduling node affinity unmatched pod with NodeInclusionPolicy "
            "enabled",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(1, "node", taints_policy="Honor")]),
            [*TWO_NODES, n("node-t", node="node-t", zone="zone1", taint=True)],
            [],
            ep("p-t1", "node-t", "foo"),
            [{"node-a": 0, "node-b": 0}],
            id="add a pod on a node whose taint the incoming pod does not tolerate (taints "
            "honored)",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(1, "node")]),
            TWO_NODES,
            [],
            ep("p-a1", "node-a", "foo", terminating=True),
            [{"node-a": 0, "node-b": 0}],
            id="add a terminating pod doesn't count, as in the full count",
        ),
    ],
)
def test_pre_filter_state_add_pod(
    pod: PodInfo,
    nodes: list[NodeRecord],
    existing: list[PodInfo],
    added: PodInfo,
    want: list[dict[str, int]],
) -> None:
    """add_pod yields exactly the state PreFilter computes with the pod present; remove_pod
    undoes it; the clone taken before is untouched."""
    plugin = PodTopologySpread()
    without = snapshot(nodes, existing)
    state = _pre_filter(plugin, pod, without)
    before = _domains(state)
    clone = state.clone()
    target = without.get(added.node_name)
    assert target is not None
    assert plugin.add_pod(clone, pod, added, target).is_success()
    assert _domains(clone) == want
    recomputed = _pre_filter(plugin, pod, snapshot(nodes, [*existing, added]))
    assert _domains(clone) == _domains(recomputed)
    assert _minimums(clone) == _minimums(recomputed)
    assert _domains(state) == before, "the original state must not change"
    assert plugin.remove_pod(clone, pod, added, target).is_success()
    assert _domains(clone) == before


@pytest.mark.parametrize("seed", range(20))
def test_random_add_remove_sequences_match_recount(seed: int) -> None:
    """Any sequence of add_pod/remove_pod, on any nodes, keeps counts and minimum equal to
    a fresh PreFilter (upstream's two critical paths only promise this for one node)."""
    rng = random.Random(seed)
    zones = ["z1", "z2", "z3"]
    nodes = [
        n(f"n{i}", zone=rng.choice(zones), node=f"n{i}", taint=rng.random() < 0.2) for i in range(6)
    ]
    pod = incoming(
        "foo",
        "bar",
        constraints=[
            sc(1, "zone", min_domains=rng.choice([1, 4])),
            sc(2, "node", sel="bar", taints_policy="Honor"),
        ],
    )
    present: dict[str, PodInfo] = {}
    for i in range(rng.randrange(0, 10)):
        p = ep(f"e{i}", rng.choice(nodes).name, *rng.sample(["foo", "bar", "baz"], 2))
        present[p.name] = p
    plugin = PodTopologySpread()
    snap = snapshot(nodes, list(present.values()))
    state = _pre_filter(plugin, pod, snap)
    for step in range(30):
        if present and rng.random() < 0.5:
            victim = present.pop(rng.choice(sorted(present)))
            ni = snap.get(victim.node_name)
            assert ni is not None
            plugin.remove_pod(state, pod, victim, ni)
        else:
            p = ep(f"new{step}", rng.choice(nodes).name, *rng.sample(["foo", "bar", "baz"], 2))
            present[p.name] = p
            ni = snap.get(p.node_name)
            assert ni is not None
            plugin.add_pod(state, pod, p, ni)
        fresh = _pre_filter(plugin, pod, snapshot(nodes, list(present.values())))
        assert _domains(state) == _domains(fresh)
        assert _minimums(state) == _minimums(fresh)
        for ni in snapshot(nodes, list(present.values())).node_info_list:
            assert plugin.filter(state, pod, ni) == plugin.filter(fresh, pod, ni)


# --------------------------------------------------------------------------- score


def run_score(
    plugin: PodTopologySpread,
    pod: PodInfo,
    nodes: list[NodeRecord],
    failed: list[NodeRecord],
    pods: list[PodInfo],
) -> list[int]:
    snap = snapshot([*nodes, *failed], pods)
    filtered = [ni for ni in snap.node_info_list if ni.name in {x.name for x in nodes}]
    state = CycleState()
    st = plugin.pre_score(state, pod, filtered, snap)
    assert st.is_success(), st
    scores = [plugin.score(state, pod, ni) for ni in filtered]
    plugin.normalize_scores(state, pod, scores)
    return scores


def hosts(*names_: str) -> list[NodeRecord]:
    return [n(x, host=x) for x in names_]


def foo_pods(**per_node: int) -> list[PodInfo]:
    """foo-labelled pods: foo_pods(node_a=2) puts p-a1, p-a2 on node-a."""
    out = []
    for key, count in per_node.items():
        node_name = key.replace("_", "-")
        out += [ep(f"p-{node_name[-1]}{i + 1}", node_name, "foo") for i in range(count)]
    return out


ANYWAY = "ScheduleAnyway"
RS = ("ReplicaSet", "rs1")


@pytest.mark.parametrize(
    ("pod", "nodes", "failed", "pods", "want"),
    [
        pytest.param(
            incoming("foo", constraints=[sc(1, LABEL_HOSTNAME, ANYWAY)]),
            hosts("node-a", "node-b"),
            [],
            [],
            [100, 100],
            id="one constraint on node, no existing pods",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(1, LABEL_HOSTNAME, ANYWAY)]),
            hosts("node-a"),
            hosts("node-b"),
            foo_pods(node_a=2, node_b=1),
            [100],
            id="one constraint on node, only one node is candidate",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(1, LABEL_HOSTNAME, ANYWAY)]),
            hosts("node-a", "node-b"),
            [],
            foo_pods(node_a=1, node_b=1),
            [100, 100],
            id="one constraint on node, all nodes have the same number of matching pods",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(1, LABEL_HOSTNAME, ANYWAY)]),
            hosts("node-a", "node-b", "node-c", "node-d"),
            [],
            foo_pods(node_a=2, node_b=1, node_d=3),
            [20, 60, 100, 0],
            id="one constraint on node, all 4 nodes are candidates",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(1, LABEL_HOSTNAME, ANYWAY, sel=None)]),
            hosts("node-a", "node-b", "node-c", "node-d"),
            [],
            foo_pods(node_a=2, node_b=1, node_d=3),
            [100, 100, 100, 100],
            id="one constraint on node, null selector",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(2, LABEL_HOSTNAME, ANYWAY)]),
            hosts("node-a", "node-b", "node-c", "node-d"),
            [],
            foo_pods(node_a=2, node_b=1, node_d=3),
            [33, 66, 100, 16],
            id="one constraint on node, all 4 nodes are candidates, maxSkew=2",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(3, LABEL_HOSTNAME, ANYWAY)]),
            hosts("node-a", "node-b", "node-c", "node-d"),
            [],
            foo_pods(node_a=4, node_b=3, node_c=2, node_d=1),
            [44, 66, 77, 100],
            id="one constraint on node, all 4 nodes are candidates, maxSkew=3",
        ),
        pytest.param(
            incoming("foo", owner=RS),
            hosts("node-a", "node-b", "node-c", "node-d"),
            [],
            [
                ep(p.name, p.node_name, "foo", owner=RS)
                for p in foo_pods(node_a=4, node_b=3, node_c=2, node_d=1)
            ],
            [44, 66, 77, 100],
            id="system defaulting, nodes don't have zone, pods match service",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(1, LABEL_HOSTNAME, ANYWAY)]),
            hosts("node-a", "node-b", "node-x"),
            hosts("node-y"),
            foo_pods(node_a=4, node_b=2, node_x=1, node_y=3),
            [33, 83, 100],
            id="one constraint on node, 3 out of 4 nodes are candidates",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(1, LABEL_HOSTNAME, ANYWAY)]),
            [n("node-a", host="node-a"), n("node-b", n="node-b"), n("node-x", host="node-x")],
            hosts("node-y"),
            foo_pods(node_a=4, node_b=2, node_x=1, node_y=3),
            [16, 0, 100],
            id="one constraint on node, 3 out of 4 nodes are candidates, one node doesn't match "
            "topology key",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(1, "zone", ANYWAY)]),
            [
                n("node-a", zone="zone1", host="node-a"),
                n("node-b", zone="zone1", host="node-b"),
                n("node-x", zone="zone2", host="node-x"),
            ],
            [n("node-y", zone="zone2", host="node-y")],
            foo_pods(node_a=4, node_b=2, node_x=1, node_y=3),
            [75, 75, 100],
            id="one constraint on zone, 3 out of 4 nodes are candidates",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(1, "zone", ANYWAY), sc(1, LABEL_HOSTNAME, ANYWAY)]),
            [n("node-a", zone="zone1", host="node-a"), n("node-x", zone="zone2", host="node-x")],
            [n("node-b", zone="zone1", host="node-b"), n("node-y", zone="zone2", host="node-y")],
            foo_pods(node_a=2, node_b=1, node_x=2, node_y=4),
            [100, 63],
            id="two Constraints on zone and node, 2 out of 4 nodes are candidates",
        ),
        pytest.param(
            incoming(
                "foo",
                "bar",
                constraints=[sc(1, "zone", ANYWAY), sc(1, "zone", ANYWAY, sel="bar")],
            ),
            [n("node-a", zone="zone1"), n("node-x", zone="zone2")],
            [n("node-b", zone="zone1"), n("node-y", zone="zone2")],
            [
                ep("p-a1", "node-a", "foo", "bar"),
                ep("p-a2", "node-a", "foo"),
                ep("p-b1", "node-b", "foo", "bar"),
                ep("p-y1", "node-y", "foo"),
                ep("p-y2", "node-y", "foo", "bar"),
                ep("p-y3", "node-y", "foo"),
            ],
            [85, 100],
            id="two Constraints on zone, 2 out of 4 nodes are candidates",
        ),
        pytest.param(
            incoming(
                "foo",
                "bar",
                constraints=[sc(1, "zone", ANYWAY), sc(1, LABEL_HOSTNAME, ANYWAY, sel="bar")],
            ),
            [
                n("node-a", zone="zone1", host="node-a"),
                n("node-b", zone="zone1", host="node-b"),
                n("node-x", zone="zone2", host="node-x"),
                n("node-y", zone="zone2", host="node-y"),
            ],
            [],
            [
                ep("p-a1", "node-a", "foo"),
                ep("p-b1", "node-b", "foo", "bar"),
                ep("p-y1", "node-y", "foo"),
                ep("p-y2", "node-y", "bar"),
            ],
            [60, 20, 100, 60],
            id="two Constraints on zone and node, with different labelSelectors",
        ),
        pytest.param(
            incoming(
                "foo",
                "bar",
                constraints=[sc(1, "zone", ANYWAY), sc(1, LABEL_HOSTNAME, ANYWAY, sel="bar")],
            ),
            [
                n("node-a", zone="zone1", host="node-a"),
                n("node-b", zone="zone1", host="node-b"),
                n("node-x", zone="zone2", host="node-x"),
                n("node-y", zone="zone2", host="node-y"),
            ],
            [],
            [
                ep("p-b1", "node-b", "bar"),
                ep("p-x1", "node-x", "foo"),
                ep("p-y1", "node-y", "foo", "bar"),
            ],
            [100, 60, 40, 0],
            id="two Constraints on zone and node, with different labelSelectors, some nodes have "
            "0 pods",
        ),
        pytest.param(
            incoming(
                "foo",
                "bar",
                constraints=[sc(1, "zone", ANYWAY), sc(1, LABEL_HOSTNAME, ANYWAY, sel="bar")],
            ),
            [
                n("node-a", zone="zone1", host="node-a"),
                n("node-b", zone="zone1", host="node-b"),
                n("node-x", zone="zone2", host="node-x"),
            ],
            [n("node-y", zone="zone2", host="node-y")],
            [
                ep("p-a1", "node-a", "foo"),
                ep("p-b1", "node-b", "foo", "bar"),
                ep("p-y1", "node-y", "foo"),
                ep("p-y2", "node-y", "bar"),
            ],
            [50, 25, 100],
            id="two Constraints on zone and node, with different labelSelectors, 3 out of 4 nodes "
            "are candidates",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(1, LABEL_HOSTNAME, ANYWAY)]),
            hosts("node-a", "node-b"),
            [],
            [
                ep("p-a1", "node-a", "foo", ns="ns1"),
                ep("p-a2", "node-a", "foo"),
                ep("p-b1", "node-b", "foo"),
                ep("p-b2", "node-b", "foo"),
            ],
            [100, 33],
            id="existing pods in a different namespace do not count",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(1, LABEL_HOSTNAME, ANYWAY)]),
            hosts("node-a", "node-b"),
            [],
            [ep("p-a", "node-a", "foo", terminating=True), ep("p-b", "node-b", "foo")],
            [100, 0],
            id="terminating Pods should be excluded",
        ),
        pytest.param(
            incoming("foo", constraints=[sc(2, "node", ANYWAY, min_domains=10)]),
            [n("node-a", node="node-a"), n("node-b", node="node-b"), n("node-c", node="node-c")],
            [],
            [
                ep("p-a1", "node-a", "foo"),
                ep("p-a2", "node-a", "foo"),
                ep("p-b1", "node-b", "foo"),
                ep("p-b2", "node-b", "foo"),
                ep("p-c1", "node-c", "foo"),
            ],
            [75, 75, 100],
            id="minDomains has no effect when ScheduleAnyway",
        ),
    ],
)
def test_pod_topology_spread_score(
    pod: PodInfo,
    nodes: list[NodeRecord],
    failed: list[NodeRecord],
    pods: list[PodInfo],
    want: list[int],
) -> None:
    assert run_score(PodTopologySpread(), pod, nodes, failed, pods) == want


def test_system_defaults_keep_zoneless_nodes() -> None:
    """Upstream "system default constraints and a replicaset": nodes without a zone are not
    ignored by the system defaults; they still spread by hostname."""
    nodes = [
        n("node-a", host="node-a", **{"topology.kubernetes.io/zone": "mars"}),
        n("node-b", host="node-b", **{"topology.kubernetes.io/zone": "mars"}),
        n("node-c", host="node-c"),
        n("node-d", host="node-d"),
    ]
    pods = [ep("p-a1", "node-a", owner=RS), ep("p-c1", "node-c", owner=RS)]
    scores = run_score(PodTopologySpread(), incoming(owner=RS), nodes, [], pods)
    assert all(s > 0 for s in scores), scores
    assert scores[1] > scores[0] and scores[3] > scores[2]


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param(incoming("foo"), id="the pod doesn't have soft topology spread Constraints"),
        pytest.param(
            incoming("foo", owner=("Job", "j1")),
            id="default constraints and an owner upstream's DefaultSelector ignores",
        ),
    ],
)
def test_pre_score_skip(pod: PodInfo) -> None:
    state = CycleState()
    snap = snapshot(hosts("node-a"))
    assert PodTopologySpread().pre_score(state, pod, snap.node_info_list, snap).is_skip()
    assert names.POD_TOPOLOGY_SPREAD in state.skip_score_plugins


# --------------------------------------------------------------------------- queueing hints


def _hints(plugin: PodTopologySpread) -> dict[tuple[str, str], Any]:
    return {(r.event.resource, r.event.action): r.hint for r in plugin.events_to_register()}


def test_assigned_pod_hints() -> None:
    hints = _hints(PodTopologySpread())
    pod = incoming("foo", constraints=[sc(1, "zone")])
    add, update, delete = (hints[("AssignedPod", a)] for a in ("Add", "Update", "Delete"))
    match = ep("m", "n1", "foo")
    other = ep("o", "n1", "bar")
    assert add(pod, None, match) is QueueingHint.QUEUE
    assert add(pod, None, other) is QueueingHint.SKIP
    assert add(pod, None, ep("m2", "n1", "foo", ns="elsewhere")) is QueueingHint.SKIP
    assert delete(pod, match, None) is QueueingHint.QUEUE
    assert delete(pod, other, None) is QueueingHint.SKIP
    assert update(pod, other, ep("o", "n1", "foo")) is QueueingHint.QUEUE
    assert update(pod, match, match) is QueueingHint.SKIP
    assert update(pod, match, ep("m", "n1", "foo", terminating=True)) is QueueingHint.QUEUE


def test_node_hints() -> None:
    hints = _hints(PodTopologySpread())
    pod = incoming("foo", constraints=[sc(1, "zone")])
    add, update, delete = (hints[("Node", a)] for a in ("Add", "Update", "Delete"))
    zoned = n("x", zone="z1")
    assert add(pod, None, zoned) is QueueingHint.QUEUE
    assert add(pod, None, n("x")) is QueueingHint.SKIP
    assert delete(pod, zoned, None) is QueueingHint.QUEUE
    assert delete(pod, n("x"), None) is QueueingHint.SKIP
    assert update(pod, n("x"), zoned) is QueueingHint.QUEUE
    assert update(pod, zoned, n("x", zone="z2")) is QueueingHint.QUEUE
    assert update(pod, zoned, n("x", zone="z1", other="y")) is QueueingHint.SKIP
    assert update(pod, zoned, n("x", zone="z1", taint=True)) is QueueingHint.QUEUE


# --------------------------------------------------------------------------- vectorised PreScore
# PreScore's per-domain counts come from numpy over the snapshot's per-node match counts and
# label codes (kept current as nodes change). This is the node-by-node loop they replaced,
# kept as the oracle, over random clusters, before and after nodes change.


def _reference_counts(
    plugin: PodTopologySpread, pod: PodInfo, filtered: Sequence[NodeInfo], snap: Snapshot
) -> list[dict[str, int]]:
    from scheduler.framework.plugins.nodeaffinity import pod_matches_node
    from scheduler.framework.plugins.podtopologyspread import _count_pods, _has_all_keys

    constraints = plugin._constraints(pod, "ScheduleAnyway")
    require_all = bool(pod.topology_spread_constraints) or not plugin.system_defaulted
    counts: list[dict[str, int]] = [{} for _ in constraints]
    for ni in filtered:
        assert ni.node is not None
        if require_all and not _has_all_keys(ni.node.labels, constraints):
            continue
        for i, c in enumerate(constraints):
            if c.topology_key != LABEL_HOSTNAME:
                counts[i].setdefault(ni.node.labels.get(c.topology_key, ""), 0)
    for ni in snap.node_info_list:
        node = ni.node
        assert node is not None
        if require_all and not _has_all_keys(node.labels, constraints):
            continue
        ok = pod_matches_node(pod, node)
        for i, c in enumerate(constraints):
            domain = node.labels.get(c.topology_key, "")
            if domain in counts[i] and c.includes_node(pod, node, ok):
                counts[i][domain] += _count_pods(ni.pods.values(), c, pod.namespace)
    return counts


def _random_cluster(rng: random.Random) -> tuple[list[NodeRecord], list[PodInfo]]:
    nodes = []
    for i in range(rng.randint(1, 12)):
        labels: dict[str, str] = {"host": f"h{i}"}
        zone = rng.choice(["a", "b", "", None])
        if zone is not None:
            labels["zone"] = zone
        if rng.random() < 0.5:
            labels["disk"] = rng.choice(["ssd", "hdd"])
        nodes.append(n(f"node-{i}", taint=rng.random() < 0.2, **labels))
    pods = []
    for j in range(rng.randint(0, 40)):
        obj = make_pod(f"e{j}", namespace=rng.choice(["default", "other"])).node(
            rng.choice(nodes).name
        )
        if rng.random() < 0.7:
            obj.label("app", rng.choice(["web", "db"]))
        if rng.random() < 0.1:
            obj.terminating()
        pods.append(
            _owned(obj.obj(), rng.choice([("ReplicaSet", "rs-1"), ("ReplicaSet", "rs-2"), None]))
        )
    return nodes, pods


@pytest.mark.parametrize("seed", range(60))
def test_vectorised_pre_score_counts_equal_the_node_by_node_loop(seed: int) -> None:
    from scheduler.framework.plugins.podtopologyspread import _PRE_SCORE_KEY

    rng = random.Random(seed)
    nodes, pods = _random_cluster(rng)
    snap = snapshot(nodes, pods)
    b = make_pod("incoming").label("app", rng.choice(["web", "db"]))
    if rng.random() < 0.3:
        b.node_selector(disk="ssd")
    if rng.random() < 0.5:
        b.spread(
            {
                "maxSkew": 1,
                "topologyKey": rng.choice(["zone", LABEL_HOSTNAME]),
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": "web"}},
                "nodeTaintsPolicy": rng.choice(["Honor", "Ignore"]),
                "nodeAffinityPolicy": rng.choice(["Honor", "Ignore"]),
            }
        )
        b.spread(
            {
                "maxSkew": 2,
                "topologyKey": "zone",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
            }
        )
    pod = _owned(b.obj(), ("ReplicaSet", rng.choice(["rs-1", "rs-2"])))
    plugin = PodTopologySpread()
    filtered = [ni for ni in snap.node_info_list if rng.random() < 0.7] or snap.node_info_list
    for _round in range(2):
        state = CycleState()
        if plugin.pre_score(state, pod, filtered, snap).is_skip():
            return
        assert state.read(_PRE_SCORE_KEY).counts == _reference_counts(plugin, pod, filtered, snap)
        # Score and NormalizeScore in bulk equal them node by node.
        rows = np.array([snap.position(ni.name) for ni in filtered], dtype=np.intp)
        bulk = plugin.score_batch(state, pod, snap, rows)
        one_by_one = [plugin.score(state, pod, ni) for ni in filtered]
        if bulk is not None:
            assert bulk.tolist() == one_by_one
            plugin.normalize_scores(state, pod, one_by_one)
            assert plugin.normalize_scores_batch(state, pod, bulk).tolist() == one_by_one
        # A node changes (a pod bound to it): its rows are refreshed in place.
        i = rng.randrange(len(snap.node_info_list))
        old = snap.node_info_list[i]
        new = old.clone()
        new.add_pod(ep(f"late-{_round}", old.name, "web"))
        snap.node_info_map[new.name] = new
        snap.swap_in(new)
        filtered = [snap.node_info_map[ni.name] for ni in filtered]


@pytest.mark.parametrize(
    "selector",
    [
        pytest.param({"matchLabels": {"app": ""}}, id="matchLabels"),
        pytest.param(
            {"matchExpressions": [{"key": "app", "operator": "In", "values": [""]}]},
            id="In with one value",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
            id="no equality, every pod is read",
        ),
    ],
)
def test_label_counts_follow_the_pods_of_a_node(selector: dict[str, Any]) -> None:
    """With an equality requirement, only the pods carrying that label are read (grouped by
    label once per version of the node, forgotten on any pod change); the counts are those
    of a full scan."""
    plugin = PodTopologySpread([], system_defaulting=False)
    infos = [NodeInfo(n("n1", rack="r1")), NodeInfo(n("n2", rack="r2"))]
    infos[0].add_pod(ep("web-0", "n1", "app"))
    infos[1].add_pod(ep("other", "n2", "tier"))
    pod = incoming(
        "app",
        constraints=[
            {
                "maxSkew": 1,
                "topologyKey": "rack",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": selector,
            }
        ],
    )
    assert run_filter(plugin, pod, Snapshot.from_node_infos(infos)) == {"n1": UNSCHED, "n2": OK}
    grouped = "matchLabels" in selector or selector["matchExpressions"][0]["operator"] == "In"
    assert (infos[1].label_pods is not None) == grouped
    infos[1].add_pod(ep("web-1", "n2", "app"))
    infos[1].add_pod(ep("web-2", "n2", "app"))
    assert infos[1].label_pods is None, "any pod change forgets the grouping"
    assert run_filter(plugin, pod, Snapshot.from_node_infos(infos)) == {"n1": OK, "n2": UNSCHED}
    infos[1].remove_pod("default/web-1")
    infos[1].remove_pod("default/web-2")
    assert run_filter(plugin, pod, Snapshot.from_node_infos(infos)) == {"n1": UNSCHED, "n2": OK}
    for ni in infos:
        ni.check_invariants()


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("require_all", [True, False])
@pytest.mark.parametrize("feasible", ["every node", "some rows"])
def test_prescore_domains_from_columns_equal_the_node_loop(
    seed: int, require_all: bool, feasible: str
) -> None:
    """PreScore takes its ignored nodes and domains from the snapshot's label columns: over
    every node when all are feasible, and at the rows the core's filter found them at when
    it stopped early (percentageOfNodesToScore, ``CycleState.feasible_rows``). Either way,
    the same sets as the loop over those nodes, on random clusters (nodes with and without
    zone/rack labels, several values) and subsets in any order, empty included."""
    from scheduler.framework.plugins.podtopologyspread import (
        _Constraint,
        _domains_from_columns,
        _domains_from_nodes,
    )

    rng = random.Random(seed)
    nodes = []
    for i in range(rng.randint(1, 40)):
        labels = {"host": f"h{i}"}
        if rng.random() < 0.8:
            labels["zone"] = rng.choice(["a", "b", "c", ""])
        if rng.random() < 0.7:
            labels["rack"] = rng.choice(["r1", "r2"])
        nodes.append(n(f"n{i}", **labels))
    snap = snapshot(nodes, [])
    rows: list[int] | None = None
    some = snap.node_info_list
    if feasible == "some rows":
        rows = rng.sample(range(len(nodes)), rng.randint(0, len(nodes)))
        some = [snap.node_info_list[r] for r in rows]
    keys = rng.sample(["zone", "rack", LABEL_HOSTNAME], rng.randint(1, 3))
    constraints = [_Constraint(1, k, LabelSelector(), 1, True, False) for k in keys]

    def run(by_columns: bool) -> tuple[set[str], list[dict[str, int]]]:
        counts: list[dict[str, int]] = [{} for _ in constraints]
        spread = [(counts[i], k) for i, k in enumerate(keys) if k != LABEL_HOSTNAME]
        if not by_columns:
            return _domains_from_nodes(some, constraints, spread, require_all), counts
        at = None if rows is None else np.array(rows, dtype=np.intp)
        return _domains_from_columns(snap, constraints, spread, require_all, at), counts

    assert run(by_columns=True) == run(by_columns=False)


@pytest.mark.parametrize("seed", range(10))
def test_count_column_from_the_label_index_equals_a_full_count(seed: int) -> None:
    """A selector with an equality requirement builds its first column from the snapshot's
    pods-by-label index; when that requirement is the whole selector (matchLabels, or the
    ``In`` form upstream's DefaultSelector gives a ReplicaSet), only namespace and
    termination are checked. Either way the column equals ``_count_on`` on every node, on
    random clusters with pods of other namespaces, terminating pods and other labels."""
    from scheduler.framework.plugins.podtopologyspread import _Constraint, _count_column
    from scheduler.types import LabelSelectorRequirement

    rng = random.Random(seed)
    nodes = [n(f"n{i}", host=f"h{i}") for i in range(rng.randint(1, 12))]
    pods = []
    for j in range(rng.randint(0, 60)):
        b = make_pod(f"p{j}", rng.choice(["default", "default", "other"]))
        b.node(rng.choice(nodes).name)
        b.label("app", rng.choice(["web", "web", "db"]))
        if rng.random() < 0.5:
            b.label("tier", rng.choice(["front", "back"]))
        if rng.random() < 0.15:
            b.terminating()
        pods.append(pod_from_dict(b.obj()))
    snap = snapshot(nodes, pods)
    web_in = LabelSelectorRequirement("app", "In", frozenset({"web"}))
    selectors = [
        LabelSelector(match_labels=(("app", "web"),)),
        LabelSelector(match_expressions=(web_in,)),
        LabelSelector(match_labels=(("app", "web"),), match_expressions=(web_in,)),
        LabelSelector(
            match_labels=(("app", "web"),),
            match_expressions=(LabelSelectorRequirement("tier", "In", frozenset({"front"})),),
        ),
        LabelSelector(
            match_expressions=(web_in, LabelSelectorRequirement("tier", "Exists", frozenset()))
        ),
    ]
    for selector in selectors:
        c = _Constraint(1, LABEL_HOSTNAME, selector, 1, True, False)
        col = _count_column(snap, c, "default")
        full = [
            sum(c.counted(p, "default") for p in ni.pods.values()) for ni in snap.node_info_list
        ]
        assert col.tolist() == full, selector
