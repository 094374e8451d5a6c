"""InterPodAffinity: PreFilter/Filter, the incremental extensions, and scoring.

Case names follow upstream's filtering_test.go / scoring_test.go where a case mirrors one.
Upstream's default namespace "" is "default" here (the parser defaults it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from scheduler.backend.cache.snapshot import Snapshot
from scheduler.framework.interface import SUCCESS, Code, CycleState, QueueingHint, Status
from scheduler.framework.plugins import names
from scheduler.framework.plugins.interpodaffinity import (
    ERR_REASON_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
    InterPodAffinity,
)
from scheduler.types import NodeInfo, NodeRecord, PodInfo, node_from_dict
from tests.builders import make_pod

AFF = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON_AFFINITY_RULES_NOT_MATCH,))
ANTI = Status(Code.UNSCHEDULABLE, (ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,))
EXISTING = Status(Code.UNSCHEDULABLE, (ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,))
OK = SUCCESS

NAMESPACE_LABELS = {
    "subteam1.team1": {"team": "team1"},
    "subteam2.team1": {"team": "team1"},
    "subteam1.team2": {"team": "team2"},
    "subteam2.team2": {"team": "team2"},
}

TEAM1_SELECTOR = {"matchExpressions": [{"key": "team", "operator": "In", "values": ["team1"]}]}
NOT_TEAM1_SELECTOR = {
    "matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["team1"]}]
}


def ns_labels(namespace: str) -> Mapping[str, str]:
    return NAMESPACE_LABELS.get(namespace, {})


# --------------------------------------------------------------------------- builders


def term(
    key: str,
    op: str,
    values: Sequence[str] = (),
    *,
    topology: str = "",
    namespaces: Sequence[str] = (),
    ns_selector: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A PodAffinityTerm with one label-selector expression (upstream's PodAffinityIn &c.)."""
    expr: dict[str, Any] = {"key": key, "operator": op}
    if values:
        expr["values"] = list(values)
    t: dict[str, Any] = {"labelSelector": {"matchExpressions": [expr]}, "topologyKey": topology}
    if namespaces:
        t["namespaces"] = list(namespaces)
    if ns_selector is not None:
        t["namespaceSelector"] = ns_selector
    return t


def multi(*exprs: tuple[str, str, Sequence[str]], topology: str) -> dict[str, Any]:
    """A term whose label selector ANDs several expressions."""
    return {
        "labelSelector": {
            "matchExpressions": [
                {"key": k, "operator": op, **({"values": list(v)} if v else {})}
                for k, op, v in exprs
            ]
        },
        "topologyKey": topology,
    }


def weighted(weight: int, t: dict[str, Any]) -> dict[str, Any]:
    return {"weight": weight, "podAffinityTerm": t}


REQ = "requiredDuringSchedulingIgnoredDuringExecution"
PREF = "preferredDuringSchedulingIgnoredDuringExecution"


def pod(
    name: str = "p",
    *,
    ns: str = "default",
    labels: Mapping[str, str] | None = None,
    node: str = "",
    affinity: Sequence[dict[str, Any]] = (),
    anti: Sequence[dict[str, Any]] = (),
    preferred: Sequence[dict[str, Any]] = (),
    preferred_anti: Sequence[dict[str, Any]] = (),
) -> PodInfo:
    b = make_pod(name, ns)
    for k, v in (labels or {}).items():
        b.label(k, v)
    if node:
        b.node(node)
    spec: dict[str, Any] = {}
    if affinity or preferred:
        spec["podAffinity"] = {REQ: list(affinity), PREF: list(preferred)}
    if anti or preferred_anti:
        spec["podAntiAffinity"] = {REQ: list(anti), PREF: list(preferred_anti)}
    if spec:
        b.affinity(spec)
    return b.info()


def node(name: str, labels: Mapping[str, str]) -> NodeRecord:
    return node_from_dict(
        {
            "metadata": {"name": name, "labels": dict(labels)},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
        }
    )


def snapshot(nodes: Sequence[NodeRecord], pods: Sequence[PodInfo] = ()) -> Snapshot:
    """Pods on nodes that are not listed are left out (upstream keeps them off the list)."""
    infos = {n.name: NodeInfo(n) for n in nodes}
    for p in pods:
        if p.node_name in infos:
            infos[p.node_name].add_pod(p)
    return Snapshot.from_node_infos(list(infos.values()))


def bare(st: Status) -> Status:
    return Status(st.code, st.reasons)


def run_filter(
    plugin: InterPodAffinity, incoming: PodInfo, snap: Snapshot
) -> tuple[Status, list[Status]]:
    """PreFilter then Filter on every node, as the framework does."""
    state = CycleState()
    _, pre = plugin.pre_filter(state, incoming, snap)
    if not pre.is_success():
        return pre, []
    return pre, [bare(plugin.filter(state, incoming, ni)) for ni in snap.node_info_list]


# --------------------------------------------------------------------------- filter: one node

POD_LABEL = {"service": "securityscan"}
POD_LABEL2 = {"security": "S1"}
NODE1 = node("node1", {"region": "r1", "zone": "z11"})
EXISTING_POD = pod("existing", labels=POD_LABEL, node="node1")
SKIP = Status(Code.SKIP)


@pytest.mark.parametrize(
    ("incoming", "pods", "want_pre", "want"),
    [
        pytest.param(
            pod(),
            [],
            SKIP,
            None,
            id="A pod that has no required pod affinity scheduling rules can schedule onto a "
            "node with no existing pods",
        ),
        pytest.param(
            pod(
                labels=POD_LABEL2,
                affinity=[term("service", "In", ["securityscan", "value2"], topology="region")],
            ),
            [EXISTING_POD],
            OK,
            OK,
            id="satisfies with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity "
            "using In operator that matches the existing pod",
        ),
        pytest.param(
            pod(
                labels=POD_LABEL2,
                affinity=[term("service", "NotIn", ["securityscan3", "value3"], topology="region")],
            ),
            [EXISTING_POD],
            OK,
            OK,
            id="satisfies the pod with requiredDuringSchedulingIgnoredDuringExecution in "
            "PodAffinity using not in operator in labelSelector that matches the existing pod",
        ),
        pytest.param(
            pod(
                labels=POD_LABEL2,
                affinity=[
                    term("service", "In", ["securityscan", "value2"], namespaces=["DiffNameSpace"])
                ],
            ),
            [pod("e", ns="ns", labels=POD_LABEL, node="node1")],
            OK,
            AFF,
            id="Does not satisfy the PodAffinity with labelSelector because of diff Namespace",
        ),
        pytest.param(
            pod(
                labels=POD_LABEL,
                affinity=[term("service", "In", ["antivirusscan", "value2"])],
            ),
            [EXISTING_POD],
            OK,
            AFF,
            id="Doesn't satisfy the PodAffinity because of unmatching labelSelector with the "
            "existing pod",
        ),
        pytest.param(
            pod(
                labels=POD_LABEL2,
                affinity=[
                    multi(
                        ("service", "Exists", ()),
                        ("wrongkey", "DoesNotExist", ()),
                        topology="region",
                    ),
                    multi(
                        ("service", "In", ["securityscan"]),
                        ("service", "NotIn", ["WrongValue"]),
                        topology="region",
                    ),
                ],
            ),
            [EXISTING_POD],
            OK,
            OK,
            id="satisfies the PodAffinity with different label Operators in multiple "
            "RequiredDuringSchedulingIgnoredDuringExecution ",
        ),
        pytest.param(
            pod(
                labels=POD_LABEL2,
                affinity=[
                    multi(
                        ("service", "Exists", ()),
                        ("wrongkey", "DoesNotExist", ()),
                        topology="region",
                    ),
                    multi(
                        ("service", "In", ["securityscan2"]),
                        ("service", "NotIn", ["WrongValue"]),
                        topology="region",
                    ),
                ],
            ),
            [EXISTING_POD],
            OK,
            AFF,
            id="The labelSelector requirements(items of matchExpressions) are ANDed, the pod "
            "cannot schedule onto the node because one of the matchExpression item don't match.",
        ),
        pytest.param(
            pod(
                labels=POD_LABEL2,
                affinity=[term("service", "In", ["securityscan", "value2"], topology="region")],
                anti=[term("service", "In", ["antivirusscan", "value2"], topology="node")],
            ),
            [EXISTING_POD],
            OK,
            OK,
            id="satisfies the PodAffinity and PodAntiAffinity with the existing pod",
        ),
        pytest.param(
            pod(
                labels=POD_LABEL2,
                affinity=[term("service", "In", ["securityscan", "value2"], topology="region")],
                anti=[term("service", "In", ["antivirusscan", "value2"], topology="node")],
            ),
            [
                pod(
                    "e",
                    labels=POD_LABEL,
                    node="node1",
                    anti=[term("service", "In", ["antivirusscan", "value2"], topology="node")],
                )
            ],
            OK,
            OK,
            id="satisfies the PodAffinity and PodAntiAffinity and PodAntiAffinity symmetry with "
            "the existing pod",
        ),
        pytest.param(
            pod(
                labels=POD_LABEL2,
                affinity=[term("service", "In", ["securityscan", "value2"], topology="region")],
                anti=[term("service", "In", ["securityscan", "value2"], topology="zone")],
            ),
            [EXISTING_POD],
            OK,
            ANTI,
            id="satisfies the PodAffinity but doesn't satisfy the PodAntiAffinity with the "
            "existing pod",
        ),
        pytest.param(
            pod(
                labels=POD_LABEL,
                affinity=[term("service", "In", ["securityscan", "value2"], topology="region")],
                anti=[term("service", "In", ["antivirusscan", "value2"], topology="node")],
            ),
            [
                pod(
                    "e",
                    labels=POD_LABEL,
                    node="node1",
                    anti=[term("service", "In", ["securityscan", "value2"], topology="zone")],
                )
            ],
            OK,
            EXISTING,
            id="satisfies the PodAffinity and PodAntiAffinity but doesn't satisfy PodAntiAffinity "
            "symmetry with the existing pod",
        ),
        pytest.param(
            pod(
                labels=POD_LABEL,
                affinity=[term("service", "NotIn", ["securityscan", "value2"], topology="region")],
            ),
            [pod("e", labels={"service": "securityscan"}, node="node2")],
            OK,
            AFF,
            id="pod matches its own Label in PodAffinity and that matches the existing pod Labels",
        ),
        pytest.param(
            pod(labels=POD_LABEL),
            [
                pod(
                    "e",
                    labels=POD_LABEL,
                    node="node1",
                    anti=[term("service", "In", ["securityscan", "value2"], topology="zone")],
                )
            ],
            OK,
            EXISTING,
            id="verify that PodAntiAffinity from existing pod is respected when pod has no "
            "AntiAffinity constraints. doesn't satisfy PodAntiAffinity symmetry with the "
            "existing pod",
        ),
        pytest.param(
            pod(labels=POD_LABEL),
            [
                pod(
                    "e",
                    labels=POD_LABEL,
                    node="node1",
                    anti=[term("service", "NotIn", ["securityscan", "value2"], topology="zone")],
                )
            ],
            SKIP,
            None,
            id="verify that PodAntiAffinity from existing pod is respected when pod has no "
            "AntiAffinity constraints. satisfy PodAntiAffinity symmetry with the existing pod",
        ),
        pytest.param(
            pod(
                labels=POD_LABEL,
                anti=[
                    term("service", "Exists", topology="region"),
                    term("security", "Exists", topology="region"),
                ],
            ),
            [
                pod(
                    "e",
                    labels=POD_LABEL2,
                    node="node1",
                    anti=[term("security", "Exists", topology="zone")],
                )
            ],
            OK,
            ANTI,
            id="satisfies the PodAntiAffinity with existing pod but doesn't satisfy "
            "PodAntiAffinity symmetry with incoming pod",
        ),
        pytest.param(
            pod(
                labels=POD_LABEL,
                anti=[
                    term("service", "Exists", topology="zone"),
                    term("security", "Exists", topology="zone"),
                ],
            ),
            [
                pod(
                    "e",
                    labels=POD_LABEL2,
                    node="node1",
                    anti=[term("security", "Exists", topology="zone")],
                )
            ],
            OK,
            ANTI,
            id="PodAntiAffinity symmetry check a1: incoming pod and existing pod partially match "
            "each other on AffinityTerms",
        ),
        pytest.param(
            pod(labels=POD_LABEL2, anti=[term("security", "Exists", topology="zone")]),
            [
                pod(
                    "e",
                    labels=POD_LABEL,
                    node="node1",
                    anti=[
                        term("service", "Exists", topology="zone"),
                        term("security", "Exists", topology="zone"),
                    ],
                )
            ],
            OK,
            EXISTING,
            id="PodAntiAffinity symmetry check a2: incoming pod and existing pod partially match "
            "each other on AffinityTerms",
        ),
        pytest.param(
            pod(
                labels={"abc": "", "xyz": ""},
                anti=[
                    term("abc", "Exists", topology="zone"),
                    term("def", "Exists", topology="zone"),
                ],
            ),
            [
                pod(
                    "e",
                    labels={"def": "", "xyz": ""},
                    node="node1",
                    anti=[
                        term("abc", "Exists", topology="zone"),
                        term("def", "Exists", topology="zone"),
                    ],
                )
            ],
            OK,
            ANTI,
            id="PodAntiAffinity symmetry check b1: incoming pod and existing pod partially match "
            "each other on AffinityTerms",
        ),
        pytest.param(
            pod(
                labels={"def": "", "xyz": ""},
                anti=[
                    term("abc", "Exists", topology="zone"),
                    term("def", "Exists", topology="zone"),
                ],
            ),
            [
                pod(
                    "e",
                    labels={"abc": "", "xyz": ""},
                    node="node1",
                    anti=[
                        term("abc", "Exists", topology="zone"),
                        term("def", "Exists", topology="zone"),
                    ],
                )
            ],
            OK,
            ANTI,
            id="PodAntiAffinity symmetry check b2: incoming pod and existing pod partially match "
            "each other on AffinityTerms",
        ),
        pytest.param(
            pod(
                labels=POD_LABEL2,
                affinity=[
                    term(
                        "service",
                        "In",
                        ["securityscan", "value2"],
                        topology="region",
                        ns_selector=TEAM1_SELECTOR,
                    )
                ],
            ),
            [pod("e", ns="subteam1.team1", labels=POD_LABEL, node="node1")],
            OK,
            OK,
            id="affinity with NamespaceSelector",
        ),
        pytest.param(
            pod(
                labels=POD_LABEL2,
                affinity=[
                    term(
                        "service",
                        "In",
                        ["securityscan", "value2"],
                        topology="region",
                        ns_selector=TEAM1_SELECTOR,
                    )
                ],
            ),
            [pod("e", ns="subteam1.team2", labels=POD_LABEL, node="node1")],
            OK,
            AFF,
            id="affinity with non-matching NamespaceSelector",
        ),
        pytest.param(
            pod(
                ns="subteam1.team1",
                labels=POD_LABEL2,
                anti=[
                    term(
                        "service",
                        "In",
                        ["securityscan", "value2"],
                        topology="zone",
                        ns_selector=TEAM1_SELECTOR,
                    )
                ],
            ),
            [pod("e", ns="subteam2.team1", labels=POD_LABEL, node="node1")],
            OK,
            ANTI,
            id="anti-affinity with matching NamespaceSelector",
        ),
        pytest.param(
            pod(
                ns="subteam1.team1",
                labels=POD_LABEL2,
                anti=[
                    term(
                        "service",
                        "In",
                        ["securityscan", "value2"],
                        topology="zone",
                        ns_selector={},
                    )
                ],
            ),
            [pod("e", ns="subteam2.team1", labels=POD_LABEL, node="node1")],
            OK,
            ANTI,
            id="anti-affinity with matching all NamespaceSelector",
        ),
        pytest.param(
            pod(
                ns="subteam1.team1",
                labels=POD_LABEL2,
                anti=[
                    term(
                        "service",
                        "In",
                        ["securityscan", "value2"],
                        topology="zone",
                        ns_selector=TEAM1_SELECTOR,
                    )
                ],
            ),
            [pod("e", ns="subteam1.team2", labels=POD_LABEL, node="node1")],
            OK,
            OK,
            id="anti-affinity with non-matching NamespaceSelector",
        ),
        pytest.param(
            pod("incoming", ns="subteam1.team1", labels=POD_LABEL),
            [
                pod(
                    "e",
                    ns="other",
                    node="node1",
                    anti=[
                        term(
                            "service",
                            "Exists",
                            topology="zone",
                            ns_selector={"matchLabels": {"team": "team1"}},
                        )
                    ],
                )
            ],
            OK,
            EXISTING,
            id="existing pod's anti-affinity selects the incoming pod by its namespace's labels",
        ),
    ],
)
def test_required_affinity_single_node(
    incoming: PodInfo, pods: list[PodInfo], want_pre: Status, want: Status | None
) -> None:
    plugin = InterPodAffinity(namespace_labels=ns_labels)
    pre, got = run_filter(plugin, incoming, snapshot([NODE1], pods))
    assert bare(pre) == want_pre
    if want is not None:
        assert got == [want]


# --------------------------------------------------------------------------- filter: many nodes

RG_CHINA = {"region": "China"}
RG_CHINA_AZ1 = {"region": "China", "az": "az1"}
RG_INDIA = {"region": "India"}
ZONE_NODES = [
    node("nodeA", {"region": "r1", "zone": "z1", "hostname": "nodeA"}),
    node("nodeB", {"region": "r1", "zone": "z2", "hostname": "nodeB"}),
]


@pytest.mark.parametrize(
    ("incoming", "pods", "nodes", "want"),
    [
        pytest.param(
            pod(affinity=[term("foo", "In", ["bar"], topology="region")]),
            [pod("p1", labels={"foo": "bar"}, node="node1")],
            [node("node1", RG_CHINA), node("node2", RG_CHINA_AZ1), node("node3", RG_INDIA)],
            [OK, OK, AFF],
            id="A pod can be scheduled onto all the nodes that have the same topology key & label "
            "value with one of them has an existing pod that matches the affinity rules",
        ),
        pytest.param(
            pod(
                labels={"foo": "bar", "service": "securityscan"},
                affinity=[
                    term("foo", "In", ["bar"], topology="zone"),
                    term("service", "In", ["securityscan"], topology="zone"),
                ],
            ),
            [pod("p1", labels={"foo": "bar"}, node="nodeA")],
            [
                node("nodeA", {"zone": "az1", "hostname": "h1"}),
                node("nodeB", {"zone": "az2", "hostname": "h2"}),
            ],
            [OK, OK],
            id="The affinity rule is to schedule all of the pods of this collection to the same "
            "zone. The first pod of the collection should not be blocked from being scheduled "
            "onto any node, even there's no existing pod that matches the rule anywhere.",
        ),
        pytest.param(
            pod(
                labels={"foo": "bar", "service": "securityscan"},
                affinity=[
                    term("foo", "In", ["bar"], topology="zone"),
                    term("service", "In", ["securityscan"], topology="zone"),
                ],
            ),
            [pod("p1", labels={"foo": "bar"}, node="nodeA")],
            [
                node("nodeA", {"zoneLabel": "az1", "hostname": "h1"}),
                node("nodeB", {"zoneLabel": "az2", "hostname": "h2"}),
            ],
            [AFF, AFF],
            id="The first pod of the collection can only be scheduled on nodes labelled with the "
            "requested topology keys",
        ),
        pytest.param(
            pod(anti=[term("foo", "In", ["abc"], topology="region")]),
            [pod("p1", labels={"foo": "abc"}, node="nodeA")],
            [
                node("nodeA", {"region": "r1", "hostname": "nodeA"}),
                node("nodeB", {"region": "r1", "hostname": "nodeB"}),
            ],
            [ANTI, ANTI],
            id="NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod "
            "that matches the inter pod affinity rule. The pod can not be scheduled onto nodeA "
            "and nodeB.",
        ),
        pytest.param(
            pod(
                anti=[
                    term("foo", "In", ["abc"], topology="region"),
                    term("service", "In", ["securityscan"], topology="zone"),
                ]
            ),
            [pod("p1", labels={"foo": "abc", "service": "securityscan"}, node="nodeA")],
            ZONE_NODES,
            [ANTI, ANTI],
            id="This test ensures that anti-affinity matches a pod when any term of the "
            "anti-affinity rule matches a pod.",
        ),
        pytest.param(
            pod(anti=[term("foo", "In", ["abc"], topology="region")]),
            [pod("p1", labels={"foo": "abc"}, node="nodeA")],
            [node("nodeA", RG_CHINA), node("nodeB", RG_CHINA_AZ1), node("nodeC", RG_INDIA)],
            [ANTI, ANTI, OK],
            id="NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod "
            "that matches the inter pod affinity rule. The pod can not be scheduled onto nodeA "
            "and nodeB but can be scheduled onto nodeC",
        ),
        pytest.param(
            pod(
                ns="NS1",
                labels={"foo": "123"},
                anti=[term("foo", "In", ["bar"], topology="region")],
            ),
            [
                pod("p1", ns="NS1", labels={"foo": "bar"}, node="nodeA"),
                pod(
                    "p2",
                    ns="NS2",
                    node="nodeC",
                    anti=[term("foo", "In", ["123"], topology="region")],
                ),
            ],
            [node("nodeA", RG_CHINA), node("nodeB", RG_CHINA_AZ1), node("nodeC", RG_INDIA)],
            [ANTI, ANTI, OK],
            id="NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod "
            "that matches the inter pod affinity rule. The pod can not be scheduled onto nodeA, "
            "nodeB, but can be scheduled onto nodeC (NodeC has an existing pod that match the "
            "inter pod affinity rule but in different namespace)",
        ),
        pytest.param(
            pod(anti=[term("foo", "Exists", topology="invalid-node-label")], node=""),
            [pod("p1", labels={"foo": ""}, node="nodeA")],
            [
                node("nodeA", {"region": "r1", "zone": "z1", "hostname": "nodeA"}),
                node("nodeB", {"region": "r1", "zone": "z1", "hostname": "nodeB"}),
            ],
            [OK, OK],
            id="Test incoming pod's anti-affinity: even if labelSelector matches, we still check "
            "if topologyKey matches",
        ),
        pytest.param(
            pod(labels={"foo": "", "bar": ""}),
            [
                pod("p1", node="nodeA", anti=[term("foo", "Exists", topology="zone")]),
                pod("p2", node="nodeA", anti=[term("bar", "Exists", topology="region")]),
            ],
            ZONE_NODES,
            [EXISTING, EXISTING],
            id="Test existing pod's anti-affinity: incoming pod wouldn't considered as a fit as it "
            "violates each existingPod's terms on all nodes",
        ),
        pytest.param(
            pod(
                anti=[
                    term("foo", "Exists", topology="zone"),
                    term("bar", "Exists", topology="region"),
                ]
            ),
            [
                pod("p1", labels={"foo": ""}, node="nodeA"),
                pod("p2", labels={"bar": ""}, node="nodeB"),
            ],
            ZONE_NODES,
            [ANTI, ANTI],
            id="Test incoming pod's anti-affinity: incoming pod wouldn't considered as a fit as it "
            "at least violates one anti-affinity rule of existingPod",
        ),
        pytest.param(
            pod(labels={"foo": "", "bar": ""}),
            [
                pod(
                    "p1",
                    node="nodeA",
                    anti=[
                        term("foo", "Exists", topology="invalid-node-label"),
                        term("bar", "Exists", topology="zone"),
                    ],
                )
            ],
            ZONE_NODES,
            [EXISTING, OK],
            id="Test existing pod's anti-affinity: only when labelSelector and topologyKey both "
            "match, it's counted as a single term match - case when one term has invalid "
            "topologyKey",
        ),
        pytest.param(
            pod(
                anti=[
                    term("foo", "Exists", topology="invalid-node-label"),
                    term("bar", "Exists", topology="zone"),
                ]
            ),
            [pod("podA", labels={"foo": "", "bar": ""}, node="nodeA")],
            ZONE_NODES,
            [ANTI, OK],
            id="Test incoming pod's anti-affinity: only when labelSelector and topologyKey both "
            "match, it's counted as a single term match - case when one term has invalid "
            "topologyKey",
        ),
        pytest.param(
            pod(labels={"foo": "", "bar": ""}),
            [
                pod(
                    "p1",
                    node="nodeA",
                    anti=[
                        term("foo", "Exists", topology="region"),
                        term("bar", "Exists", topology="zone"),
                    ],
                )
            ],
            ZONE_NODES,
            [EXISTING, EXISTING],
            id="Test existing pod's anti-affinity: only when labelSelector and topologyKey both "
            "match, it's counted as a single term match - case when all terms have valid "
            "topologyKey",
        ),
        pytest.param(
            pod(labels={"foo": "", "bar": ""}),
            [
                pod(
                    "p1",
                    node="nodeA",
                    anti=[
                        term("foo", "Exists", topology="zone"),
                        term("labelA", "Exists", topology="zone"),
                    ],
                ),
                pod(
                    "p2",
                    node="nodeB",
                    anti=[
                        term("bar", "Exists", topology="zone"),
                        term("labelB", "Exists", topology="zone"),
                    ],
                ),
            ],
            [*ZONE_NODES, node("nodeC", {"region": "r1", "zone": "z3", "hostname": "nodeC"})],
            [EXISTING, EXISTING, OK],
            id="Test existing pod's anti-affinity: existingPod on nodeA and nodeB has at least one "
            "anti-affinity term matches incoming pod, so incoming pod can only be scheduled to "
            "nodeC",
        ),
        pytest.param(
            pod(
                affinity=[
                    term("foo", "Exists", topology="region"),
                    term("bar", "Exists", topology="zone"),
                ]
            ),
            [pod("pod1", labels={"foo": "", "bar": ""}, node="nodeA")],
            [
                node("nodeA", {"region": "r1", "zone": "z1", "hostname": "nodeA"}),
                node("nodeB", {"region": "r1", "zone": "z1", "hostname": "nodeB"}),
            ],
            [OK, OK],
            id="Test incoming pod's affinity: firstly check if all affinityTerms match, and then "
            "check if all topologyKeys match",
        ),
        pytest.param(
            pod(
                affinity=[
                    term("foo", "Exists", topology="region"),
                    term("bar", "Exists", topology="zone"),
                ]
            ),
            [
                pod("pod1", labels={"foo": ""}, node="nodeA"),
                pod("pod2", labels={"bar": ""}, node="nodeB"),
            ],
            ZONE_NODES,
            [AFF, AFF],
            id="Test incoming pod's affinity: firstly check if all affinityTerms match, and then "
            "check if all topologyKeys match, and the match logic should be satisfied on the same "
            "pod",
        ),
        pytest.param(
            pod(affinity=[term("foo", "Exists", topology="kubernetes.io/hostname")]),
            [pod("pod1", labels={"foo": ""}, node="nodeA")],
            [
                node("nodeA", {"kubernetes.io/hostname": "nodeA"}),
                node("nodeB", {"kubernetes.io/hostname": "nodeB"}),
            ],
            [OK, AFF],
            id="Test incoming pod's host-scoped affinity (fast path)",
        ),
        pytest.param(
            pod(anti=[term("foo", "Exists", topology="kubernetes.io/hostname")]),
            [pod("pod1", labels={"foo": ""}, node="nodeA")],
            [
                node("nodeA", {"kubernetes.io/hostname": "nodeA"}),
                node("nodeB", {"kubernetes.io/hostname": "nodeB"}),
            ],
            [ANTI, OK],
            id="Test incoming pod's host-scoped anti-affinity (fast path)",
        ),
        pytest.param(
            pod(
                labels={"app": "db"},
                affinity=[term("app", "In", ["db"], topology="zone")],
            ),
            [pod("other", labels={"app": "web"}, node="nodeA")],
            [*ZONE_NODES, node("nodeC", {"region": "r1"})],
            [OK, OK, AFF],
            id="self-affine first pod may go to any node carrying the topology key",
        ),
        pytest.param(
            pod(
                labels={"app": "db"},
                affinity=[term("app", "In", ["db"], topology="zone")],
            ),
            [pod("db-0", labels={"app": "db"}, node="nodeB")],
            ZONE_NODES,
            [AFF, OK],
            id="once one pod of a self-affine group exists the others must join its domain",
        ),
    ],
)
def test_required_affinity_multiple_nodes(
    incoming: PodInfo, pods: list[PodInfo], nodes: list[NodeRecord], want: list[Status]
) -> None:
    plugin = InterPodAffinity(namespace_labels=ns_labels)
    pre, got = run_filter(plugin, incoming, snapshot(nodes, pods))
    assert pre.is_success()
    assert got == want


def test_existing_anti_affinity_with_unknown_topology_key_skips_prefilter() -> None:
    """Upstream: "Test existing pod's anti-affinity: if an existing pod has a term with invalid
    topologyKey, labelSelector of the term is firstly checked, and then topologyKey of the
    term is also checked" — nothing to count, so PreFilter skips."""
    snap = snapshot(
        [node("nodeA", {"region": "r1", "zone": "z1"}), node("nodeB", {"region": "r1"})],
        [pod("p1", node="nodeA", anti=[term("foo", "Exists", topology="invalid-node-label")])],
    )
    _, pre = InterPodAffinity().pre_filter(CycleState(), pod(labels={"foo": ""}), snap)
    assert pre.is_skip()


def test_filter_statuses_name_the_plugin() -> None:
    snap = snapshot(ZONE_NODES, [pod("p1", labels={"foo": "abc"}, node="nodeA")])
    plugin = InterPodAffinity()
    incoming = pod(anti=[term("foo", "In", ["abc"], topology="zone")])
    state = CycleState()
    plugin.pre_filter(state, incoming, snap)
    st = plugin.filter(state, incoming, snap.node_info_list[0])
    assert st.plugin == names.INTER_POD_AFFINITY


def test_filter_without_prefilter_state_is_an_error() -> None:
    snap = snapshot(ZONE_NODES)
    st = InterPodAffinity().filter(CycleState(), pod(), snap.node_info_list[0])
    assert st.code == Code.ERROR


# --------------------------------------------------------------------------- extensions

LABEL1 = {"region": "r1", "zone": "z11"}
LABEL2 = {"region": "r1", "zone": "z12"}
LABEL3 = {"region": "r2", "zone": "z21"}
FOO_BAR = {"foo": "bar"}
ANTI_FOO_BAR = [term("foo", "In", ["bar"], topology="region")]
ANTI_COMPLEX = [
    term("foo", "In", ["bar", "buzz"], topology="region"),
    term("service", "NotIn", ["bar", "security", "test"], topology="zone"),
]
AFFINITY_COMPLEX = ANTI_COMPLEX
THREE_NODES = [node("nodeA", LABEL1), node("nodeB", LABEL2), node("nodeC", LABEL3)]


def _state(plugin: InterPodAffinity, incoming: PodInfo, snap: Snapshot) -> CycleState:
    state = CycleState()
    _, st = plugin.pre_filter(state, incoming, snap)
    assert st.is_success()
    return state


def _counts(state: CycleState) -> tuple[dict[Any, int], dict[Any, int], dict[Any, int]]:
    s = state.read("PreFilter" + names.INTER_POD_AFFINITY)
    return dict(s.existing_anti), dict(s.affinity), dict(s.anti)


@pytest.mark.parametrize(
    ("pending", "existing", "added", "want_anti", "want_affinity"),
    [
        pytest.param(
            pod("pending", labels=FOO_BAR, anti=ANTI_FOO_BAR),
            [
                pod("p1", labels=FOO_BAR, node="nodeA"),
                pod("p2", node="nodeC", anti=ANTI_FOO_BAR),
            ],
            pod("addedPod", labels=FOO_BAR, node="nodeB", anti=ANTI_FOO_BAR),
            {("region", "r1"): 2},
            {},
            id="preFilterState anti-affinity terms are updated correctly after adding and "
            "removing a pod",
        ),
        pytest.param(
            pod("pending", labels=FOO_BAR, anti=ANTI_COMPLEX),
            [
                pod("p1", labels=FOO_BAR, node="nodeA"),
                pod("p2", node="nodeC", anti=ANTI_FOO_BAR),
            ],
            pod("addedPod", labels=FOO_BAR, node="nodeA", anti=ANTI_COMPLEX),
            {("region", "r1"): 2, ("zone", "z11"): 2, ("zone", "z21"): 1},
            {},
            id="preFilterState anti-affinity terms are updated correctly after adding and "
            "removing a pod (complex terms)",
        ),
        pytest.param(
            pod("pending", labels=FOO_BAR, affinity=AFFINITY_COMPLEX),
            [
                pod("p1", labels=FOO_BAR, node="nodeA"),
                pod("p2", node="nodeC", anti=ANTI_FOO_BAR, affinity=AFFINITY_COMPLEX),
            ],
            pod("addedPod", labels=FOO_BAR, node="nodeA", anti=ANTI_COMPLEX),
            {},
            {("region", "r1"): 2, ("zone", "z11"): 2},
            id="preFilterState matching pod affinity and anti-affinity are updated correctly "
            "after adding and removing a pod",
        ),
    ],
)
def test_pre_filter_state_add_remove_pod(
    pending: PodInfo,
    existing: list[PodInfo],
    added: PodInfo,
    want_anti: dict[Any, int],
    want_affinity: dict[Any, int],
) -> None:
    """add_pod equals recomputing with the pod; remove_pod gets back to the original."""
    plugin = InterPodAffinity()
    without = snapshot(THREE_NODES, existing)
    with_added = snapshot(THREE_NODES, [*existing, added])
    everything = _counts(_state(plugin, pending, with_added))
    original = _state(plugin, pending, without)
    original_counts = _counts(original)

    state = original.clone()
    target = without.get(added.node_name)
    assert target is not None
    assert plugin.add_pod(state, pending, added, target).is_success()
    assert _counts(state) == everything
    assert _counts(state)[2] == want_anti
    assert _counts(state)[1] == want_affinity
    assert _counts(original) == original_counts, "the clone must not share counts"

    assert plugin.remove_pod(state, pending, added, target).is_success()
    assert _counts(state) == original_counts

    # Pure removal: from the state with every pod, remove the added one.
    state2 = _state(plugin, pending, with_added)
    assert plugin.remove_pod(state2, pending, added, target).is_success()
    assert _counts(state2) == original_counts


def test_extensions_let_a_nominated_pod_satisfy_affinity() -> None:
    """Through the two-pass filter, a nominated pod counts as if it were running."""
    plugin = InterPodAffinity()
    snap = snapshot(ZONE_NODES)
    incoming = pod(labels={"app": "web"}, affinity=[term("app", "In", ["db"], topology="zone")])
    state = _state(plugin, incoming, snap)
    node_b = snap.node_info_list[1]
    assert bare(plugin.filter(state, incoming, node_b)) == AFF
    nominated = pod("db-0", labels={"app": "db"}, node="nodeB")
    state2 = state.clone()
    info = node_b.clone()
    info.add_pod(nominated)
    plugin.pre_filter_extensions().add_pod(state2, incoming, nominated, info)
    assert plugin.filter(state2, incoming, info).is_success()
    assert bare(plugin.filter(state, incoming, node_b)) == AFF, "original state untouched"


# --------------------------------------------------------------------------- score

S1 = {"security": "S1"}
S2 = {"security": "S2"}
AZ1 = {"az": "az1"}
AZ2 = {"az": "az2"}
STAY_WITH_S1_IN_REGION = dict(
    preferred=[weighted(5, term("security", "In", ["S1"], topology="region"))]
)
STAY_WITH_S2_IN_REGION = dict(
    preferred=[weighted(6, term("security", "In", ["S2"], topology="region"))]
)
AFFINITY3 = dict(
    preferred=[
        weighted(
            8,
            multi(("security", "NotIn", ["S1"]), ("security", "In", ["S2"]), topology="region"),
        ),
        weighted(
            2,
            multi(("security", "Exists", ()), ("wrongkey", "DoesNotExist", ()), topology="region"),
        ),
    ]
)
HARD_AFFINITY = dict(
    affinity=[
        term("security", "In", ["S1", "value2"], topology="region"),
        multi(("security", "Exists", ()), ("wrongkey", "DoesNotExist", ()), topology="region"),
    ]
)
AWAY_FROM_S1_IN_AZ = dict(
    preferred_anti=[weighted(5, term("security", "In", ["S1"], topology="az"))]
)
AWAY_FROM_S2_IN_AZ = dict(
    preferred_anti=[weighted(5, term("security", "In", ["S2"], topology="az"))]
)
STAY_S1_REGION_AWAY_S2_AZ = dict(
    preferred=[weighted(8, term("security", "In", ["S1"], topology="region"))],
    preferred_anti=[weighted(5, term("security", "In", ["S2"], topology="az"))],
)
AFFINITY_NS_SELECTOR = dict(
    preferred=[
        weighted(
            5,
            term(
                "security",
                "In",
                ["S1"],
                topology="region",
                namespaces=["subteam2.team2"],
                ns_selector=TEAM1_SELECTOR,
            ),
        )
    ]
)
ANTI_AFFINITY_NS_SELECTOR = dict(preferred_anti=AFFINITY_NS_SELECTOR["preferred"])
AFFINITY_NEGATIVE_NS_SELECTOR = dict(
    preferred=[
        weighted(
            5, term("security", "In", ["S1"], topology="region", ns_selector=NOT_TEAM1_SELECTOR)
        )
    ]
)
ANTI_AFFINITY_NEGATIVE_NS_SELECTOR = dict(preferred_anti=AFFINITY_NEGATIVE_NS_SELECTOR["preferred"])


def run_score(
    plugin: InterPodAffinity, incoming: PodInfo, nodes: list[NodeRecord], pods: list[PodInfo]
) -> tuple[Status, list[int]]:
    snap = snapshot(nodes, pods)
    state = CycleState()
    st = plugin.pre_score(state, incoming, snap.node_info_list, snap)
    if not st.is_success():
        return st, []
    scores = [plugin.score(state, incoming, ni) for ni in snap.node_info_list]
    plugin.normalize_scores(state, incoming, scores)
    return st, scores


CHINA_INDIA_AZ1 = [node("node1", RG_CHINA), node("node2", RG_INDIA), node("node3", AZ1)]


@pytest.mark.parametrize(
    ("incoming", "pods", "nodes", "want"),
    [
        pytest.param(
            pod(labels=S1),
            [],
            CHINA_INDIA_AZ1,
            None,
            id="all nodes are same priority as Affinity is nil",
        ),
        pytest.param(
            pod(labels=S1, **STAY_WITH_S1_IN_REGION),
            [
                pod("e1", labels=S1, node="node1"),
                pod("e2", labels=S2, node="node2"),
                pod("e3", labels=S1, node="node3"),
            ],
            CHINA_INDIA_AZ1,
            [100, 0, 0],
            id="Affinity: pod that matches topology key & pods in nodes will get high score "
            "comparing to otherswhich doesn't match either pods in nodes or in topology key",
        ),
        pytest.param(
            pod(**STAY_WITH_S1_IN_REGION),
            [pod("e1", labels=S1, node="node1")],
            [node("node1", RG_CHINA), node("node2", RG_CHINA_AZ1), node("node3", RG_INDIA)],
            [100, 100, 0],
            id="All the nodes that have the same topology key & label value with one of them has "
            "an existing pod that match the affinity rules, have the same score",
        ),
        pytest.param(
            pod(labels=S1, **STAY_WITH_S2_IN_REGION),
            [
                pod("e1", labels=S2, node="node1"),
                pod("e2", labels=S2, node="node1"),
                pod("e3", labels=S2, node="node2"),
                pod("e4", labels=S2, node="node3"),
                pod("e5", labels=S2, node="node4"),
                pod("e6", labels=S2, node="node5"),
            ],
            [
                node("node1", RG_CHINA),
                node("node2", RG_INDIA),
                node("node3", RG_CHINA),
                node("node4", RG_CHINA),
                node("node5", RG_INDIA),
            ],
            [100, 0, 100, 100, 0],
            id="Affinity: nodes in one region has more matching pods comparing to other region, "
            "so the region which has more matches will get high score",
        ),
        pytest.param(
            pod(labels=S1, **AFFINITY3),
            [
                pod("e1", labels=S1, node="node1"),
                pod("e2", labels=S2, node="node2"),
                pod("e3", labels=S1, node="node3"),
            ],
            CHINA_INDIA_AZ1,
            [20, 100, 0],
            id="Affinity: different Label operators and values for pod affinity scheduling "
            "preference, including some match failures ",
        ),
        pytest.param(
            pod(labels=S2),
            [
                pod("e1", labels=S1, node="node1", **STAY_WITH_S1_IN_REGION),
                pod("e2", labels=S2, node="node2", **STAY_WITH_S2_IN_REGION),
            ],
            CHINA_INDIA_AZ1,
            [0, 100, 0],
            id="Affinity symmetry: considered only the preferredDuringSchedulingIgnoredDuring"
            "Execution in pod affinity symmetry",
        ),
        pytest.param(
            pod(ns="subteam1.team1", labels=S1),
            [
                pod("e1", labels=S1, node="node1", **AFFINITY_NS_SELECTOR),
                pod("e2", labels=S2, node="node2", **STAY_WITH_S2_IN_REGION),
            ],
            CHINA_INDIA_AZ1,
            [100, 0, 0],
            id="Affinity symmetry with namespace selector",
        ),
        pytest.param(
            pod(ns="subteam1.team1", labels=S1),
            [
                pod("e1", labels=S1, node="node1", **ANTI_AFFINITY_NS_SELECTOR),
                pod("e2", labels=S2, node="node2", **STAY_WITH_S2_IN_REGION),
            ],
            CHINA_INDIA_AZ1,
            [0, 100, 100],
            id="AntiAffinity symmetry with namespace selector",
        ),
        pytest.param(
            pod(labels=S1),
            [
                pod("e1", labels=S1, node="node1", **HARD_AFFINITY),
                pod("e2", labels=S2, node="node2", **HARD_AFFINITY),
            ],
            CHINA_INDIA_AZ1,
            [100, 100, 0],
            id="Affinity symmetry: considered RequiredDuringSchedulingIgnoredDuringExecution in "
            "pod affinity symmetry",
        ),
        pytest.param(
            pod(labels=S1, **AWAY_FROM_S1_IN_AZ),
            [pod("e1", labels=S1, node="node1"), pod("e2", labels=S2, node="node2")],
            [node("node1", AZ1), node("node2", RG_CHINA)],
            [0, 100],
            id="Anti Affinity: pod that does not match existing pods in node will get high score ",
        ),
        pytest.param(
            pod(labels=S1, **AWAY_FROM_S1_IN_AZ),
            [pod("e1", labels=S1, node="node1"), pod("e2", labels=S1, node="node2")],
            [node("node1", AZ1), node("node2", RG_CHINA)],
            [0, 100],
            id="Anti Affinity: pod that does not match topology key & match the pods in nodes will "
            "get higher score comparing to others ",
        ),
        pytest.param(
            pod(labels=S1, **AWAY_FROM_S1_IN_AZ),
            [
                pod("e1", labels=S1, node="node1"),
                pod("e2", labels=S1, node="node1"),
                pod("e3", labels=S2, node="node2"),
            ],
            [node("node1", AZ1), node("node2", RG_INDIA)],
            [0, 100],
            id="Anti Affinity: one node has more matching pods comparing to other node, so the "
            "node which has more unmatches will get high score",
        ),
        pytest.param(
            pod(labels=S2),
            [
                pod("e1", labels=S1, node="node1", **AWAY_FROM_S2_IN_AZ),
                pod("e2", labels=S2, node="node2", **AWAY_FROM_S1_IN_AZ),
            ],
            [node("node1", AZ1), node("node2", AZ2)],
            [0, 100],
            id="Anti Affinity symmetry: the existing pods in node which has anti affinity match "
            "will get high score",
        ),
        pytest.param(
            pod(labels=S1, **STAY_S1_REGION_AWAY_S2_AZ),
            [pod("e1", labels=S1, node="node1"), pod("e2", labels=S1, node="node2")],
            [node("node1", RG_CHINA), node("node2", AZ1)],
            [100, 0],
            id="Affinity and Anti Affinity: considered only preferredDuringSchedulingIgnoredDuring"
            "Execution in both pod affinity & anti affinity",
        ),
        pytest.param(
            pod(labels=S1, **STAY_S1_REGION_AWAY_S2_AZ),
            [
                pod("e1", labels=S1, node="node1"),
                pod("e2", labels=S1, node="node1"),
                pod("e3", labels=S1, node="node2"),
                pod("e4", labels=S1, node="node3"),
                pod("e5", labels=S1, node="node3"),
                pod("e6", labels=S1, node="node4"),
                pod("e7", labels=S1, node="node5"),
            ],
            [
                node("node1", RG_CHINA_AZ1),
                node("node2", RG_INDIA),
                node("node3", RG_CHINA),
                node("node4", RG_CHINA),
                node("node5", RG_INDIA),
            ],
            [100, 0, 100, 100, 0],
            id="Affinity and Anti Affinity: considering both affinity and anti-affinity, the pod "
            "to schedule and existing pods have the same labels",
        ),
        pytest.param(
            pod(labels=S1, **STAY_S1_REGION_AWAY_S2_AZ),
            [
                pod("e1", labels=S1, node="node1"),
                pod("e2", labels=S2, node="node2"),
                pod("e3", node="node3", **STAY_S1_REGION_AWAY_S2_AZ),
                pod("e4", node="node4", **AWAY_FROM_S1_IN_AZ),
            ],
            [
                node("node1", RG_CHINA),
                node("node2", AZ1),
                node("node3", RG_INDIA),
                node("node4", AZ2),
            ],
            [100, 0, 100, 0],
            id="Affinity and Anti Affinity and symmetry: considered only preferredDuringScheduling"
            "IgnoredDuringExecution in both pod affinity & anti affinity & symmetry",
        ),
        pytest.param(
            pod(labels=S1),
            [
                pod("e1", labels=S1, node="node1"),
                pod("e2", node="node2", **STAY_S1_REGION_AWAY_S2_AZ),
            ],
            [node("node1", RG_CHINA), node("node2", RG_CHINA)],
            [0, 0],
            id="Avoid panic when partial nodes in a topology don't have pods with affinity",
        ),
        pytest.param(
            pod(ns="subteam1.team1", labels=S1, **AFFINITY_NS_SELECTOR),
            [
                pod("e1", ns="subteam1.team1", labels=S1, node="node1"),
                pod("e2", ns="subteam1.team1", labels=S1, node="node1"),
                pod("e3", ns="subteam1.team2", labels=S1, node="node1"),
                pod("e4", ns="subteam2.team1", labels=S1, node="node2"),
            ],
            [node("node1", RG_CHINA), node("node2", RG_INDIA)],
            [100, 0],
            id="Affinity with pods matching NamespaceSelector",
        ),
        pytest.param(
            pod(ns="subteam1.team1", labels=S1, **AFFINITY_NS_SELECTOR),
            [
                pod("e1", ns="subteam1.team1", labels=S1, node="node1"),
                pod("e2", ns="subteam1.team1", labels=S1, node="node1"),
                pod("e3", ns="subteam2.team2", labels=S1, node="node1"),
                pod("e4", ns="subteam2.team1", labels=S1, node="node2"),
            ],
            [node("node1", RG_CHINA), node("node2", RG_INDIA)],
            [100, 0],
            id="Affinity with pods matching both NamespaceSelector and Namespaces fields",
        ),
        pytest.param(
            pod(ns="subteam1.team1", labels=S1, **ANTI_AFFINITY_NS_SELECTOR),
            [
                pod("e1", ns="subteam1.team1", labels=S1, node="node1"),
                pod("e2", ns="subteam1.team1", labels=S1, node="node1"),
                pod("e3", ns="subteam1.team2", labels=S1, node="node1"),
                pod("e4", ns="subteam2.team1", labels=S1, node="node2"),
            ],
            [node("node1", RG_CHINA), node("node2", RG_INDIA)],
            [0, 100],
            id="AntiAffinity with pods matching NamespaceSelector",
        ),
        pytest.param(
            pod(ns="subteam1.team1", labels=S1, **AFFINITY_NEGATIVE_NS_SELECTOR),
            [
                pod("e1", ns="subteam1.team1", labels=S1, node="node1"),
                pod("e2", ns="subteam1.team1", labels=S1, node="node1"),
                pod("e3", ns="subteam1.team2", labels=S1, node="node2"),
            ],
            [node("node1", RG_CHINA), node("node2", RG_INDIA)],
            [0, 100],
            id="Affinity with pods correctly enforcing negative NamespaceSelector",
        ),
        pytest.param(
            pod(ns="subteam1.team1", labels=S1, **ANTI_AFFINITY_NEGATIVE_NS_SELECTOR),
            [
                pod("e1", ns="subteam1.team1", labels=S1, node="node1"),
                pod("e2", ns="subteam1.team1", labels=S1, node="node1"),
                pod("e3", ns="subteam1.team2", labels=S1, node="node2"),
            ],
            [node("node1", RG_CHINA), node("node2", RG_INDIA)],
            [100, 0],
            id="AntiAffinity with pods correctly enforcing negative NamespaceSelector",
        ),
        pytest.param(
            pod(labels=S2),
            [
                pod("e1", labels=S1, node="node1", **STAY_S1_REGION_AWAY_S2_AZ),
                pod("e2", labels=S2, node="node2", **STAY_WITH_S2_IN_REGION),
            ],
            [node("node1", RG_CHINA), node("node2", RG_INDIA)],
            [0, 100],
            id="Do not ignore preferred terms of existing pods",
        ),
        pytest.param(pod(labels=S2), [], [], None, id="No nodes to score"),
    ],
)
def test_preferred_affinity(
    incoming: PodInfo, pods: list[PodInfo], nodes: list[NodeRecord], want: list[int] | None
) -> None:
    state_status, scores = run_score(
        InterPodAffinity(namespace_labels=ns_labels), incoming, nodes, pods
    )
    if want is None:
        assert state_status.is_skip()
    else:
        assert state_status.is_success()
        assert scores == want


def test_ignore_preferred_terms_of_existing_pods() -> None:
    plugin = InterPodAffinity(ignore_preferred_terms_of_existing_pods=True)
    state = CycleState()
    snap = snapshot(
        [node("node1", RG_CHINA), node("node2", RG_INDIA)],
        [
            pod("e1", labels=S1, node="node1", **STAY_S1_REGION_AWAY_S2_AZ),
            pod("e2", labels=S2, node="node2", **STAY_WITH_S2_IN_REGION),
        ],
    )
    st = plugin.pre_score(state, pod(labels=S2), snap.node_info_list, snap)
    assert st.is_skip()
    assert names.INTER_POD_AFFINITY in state.skip_score_plugins


HARD_POD_AFFINITY = dict(
    affinity=[
        {
            "labelSelector": {
                "matchExpressions": [{"key": "service", "operator": "In", "values": ["S1"]}]
            },
            "namespaces": ["default", "subteam2.team2"],
            "namespaceSelector": TEAM1_SELECTOR,
            "topologyKey": "region",
        }
    ]
)


@pytest.mark.parametrize(
    ("ns", "weight", "want"),
    [
        pytest.param("default", 1, [100, 100, 0], id="with default weight"),
        pytest.param("default", 0, None, id="with zero weight"),
        pytest.param("subteam1.team2", 1, None, id="with no matching namespace"),
        pytest.param("subteam1.team1", 1, [100, 100, 0], id="with matching NamespaceSelector"),
        pytest.param("subteam2.team2", 1, [100, 100, 0], id="with matching Namespaces"),
    ],
)
def test_preferred_affinity_with_hard_pod_affinity_symmetric_weight(
    ns: str, weight: int, want: list[int] | None
) -> None:
    plugin = InterPodAffinity(hard_pod_affinity_weight=weight, namespace_labels=ns_labels)
    st, scores = run_score(
        plugin,
        pod(ns=ns, labels={"service": "S1"}),
        CHINA_INDIA_AZ1,
        [
            pod("e1", node="node1", **HARD_POD_AFFINITY),
            pod("e2", node="node2", **HARD_POD_AFFINITY),
        ],
    )
    if want is None:
        assert st.is_skip()
    else:
        assert scores == want


def test_hard_pod_affinity_weight_is_validated() -> None:
    with pytest.raises(ValueError, match="hardPodAffinityWeight"):
        InterPodAffinity(hard_pod_affinity_weight=101)


# --------------------------------------------------------------------------- queueing hints


def _hints(plugin: InterPodAffinity) -> dict[tuple[str, str], Any]:
    return {(r.event.resource, r.event.action): r.hint for r in plugin.events_to_register()}


def test_assigned_pod_hints() -> None:
    hints = _hints(InterPodAffinity())
    wants_db = pod(affinity=[term("app", "In", ["db"], topology="zone")])
    hates_db = pod(anti=[term("app", "In", ["db"], topology="zone")])
    db = pod("db", labels={"app": "db"}, node="n1")
    web = pod("web", labels={"app": "web"}, node="n1")
    add, update, delete = (hints[("AssignedPod", a)] for a in ("Add", "Update", "Delete"))
    assert add(wants_db, None, db) is QueueingHint.QUEUE
    assert add(wants_db, None, web) is QueueingHint.SKIP
    assert add(hates_db, None, db) is QueueingHint.SKIP
    assert delete(hates_db, db, None) is QueueingHint.QUEUE
    assert delete(hates_db, web, None) is QueueingHint.SKIP
    assert update(wants_db, web, db) is QueueingHint.QUEUE
    assert update(hates_db, db, web) is QueueingHint.QUEUE
    assert update(hates_db, web, web) is QueueingHint.SKIP
    # The deleted pod's own anti-affinity rejected the incoming pod.
    jealous = pod("j", node="n1", anti=[term("app", "In", ["web"], topology="zone")])
    assert delete(pod(labels={"app": "web"}), jealous, None) is QueueingHint.QUEUE


def test_node_hints() -> None:
    hints = _hints(InterPodAffinity())
    add, update = hints[("Node", "Add")], hints[("Node", "Update")]
    wants_zone = pod(affinity=[term("app", "In", ["db"], topology="zone")])
    hates_zone = pod(anti=[term("app", "In", ["db"], topology="zone")])
    zoned = node("n", {"zone": "z1"})
    rezoned = node("n", {"zone": "z2"})
    zoneless = node("n", {"other": "x"})
    assert add(wants_zone, None, zoned) is QueueingHint.QUEUE
    assert add(wants_zone, None, zoneless) is QueueingHint.SKIP
    assert add(hates_zone, None, zoneless) is QueueingHint.QUEUE
    assert update(wants_zone, zoneless, zoned) is QueueingHint.QUEUE
    assert update(wants_zone, zoned, rezoned) is QueueingHint.QUEUE
    assert update(wants_zone, zoned, zoned) is QueueingHint.SKIP
    assert update(hates_zone, zoned, zoneless) is QueueingHint.QUEUE
    assert update(hates_zone, zoneless, zoned) is QueueingHint.SKIP
