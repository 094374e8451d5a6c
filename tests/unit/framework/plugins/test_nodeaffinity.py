"""NodeAffinity: nodeSelector and required node affinity as a filter, preferred node affinity
as a score, and the node-change queueing hint. Case names mirror upstream's
nodeaffinity/node_affinity_test.go (TestNodeAffinity, TestNodeAffinityPriority,
Test_isSchedulableAfterNodeChange)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.backend.cache.snapshot import Snapshot
from scheduler.framework.interface import Code, CycleState, QueueingHint
from scheduler.framework.plugins.nodeaffinity import (
    ERR_REASON_ENFORCED,
    ERR_REASON_POD,
    NodeAffinity,
    node_names_from_match_fields,
)
from scheduler.types import (
    NodeInfo,
    NodeRecord,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodInfo,
)
from tests.builders import make_node, make_pod


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    e: dict[str, Any] = {"key": key, "operator": op}
    if values:
        e["values"] = list(values)
    return e


def field(op: str, *values: str) -> dict[str, Any]:
    return {"key": "metadata.name", "operator": op, "values": list(values)}


def required(*terms: dict[str, Any], node_selector: dict[str, str] | None = None) -> PodInfo:
    b = make_pod("p").affinity(
        {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
            }
        }
    )
    if node_selector:
        b.node_selector(**node_selector)
    return b.info()


def selector(**labels: str) -> PodInfo:
    return make_pod("p").node_selector(**labels).info()


def node(name: str = "node1", **labels: str) -> NodeRecord:
    b = make_node(name)
    for k, v in labels.items():
        b.label(k, v)
    return b.record()


UNRESOLVABLE = Code.UNSCHEDULABLE_AND_UNRESOLVABLE


@pytest.mark.parametrize(
    ("pod", "labels", "node_name", "fits"),
    [
        pytest.param(selector(foo="bar"), {}, "node1", False, id="missing labels"),
        pytest.param(selector(foo="bar"), {"foo": "bar"}, "node1", True, id="same labels"),
        pytest.param(
            selector(foo="bar"),
            {"foo": "bar", "baz": "blah"},
            "node1",
            True,
            id="node labels are superset",
        ),
        pytest.param(
            selector(foo="bar", baz="blah"),
            {"foo": "bar"},
            "node1",
            False,
            id="node labels are subset",
        ),
        pytest.param(
            required({"matchExpressions": [expr("foo", "In", "bar", "value2")]}),
            {"foo": "bar"},
            "node1",
            True,
            id="Pod with matchExpressions using In operator that matches the existing node",
        ),
        pytest.param(
            required({"matchExpressions": [expr("kernel-version", "Gt", "0204")]}),
            {"kernel-version": "0206"},
            "node1",
            True,
            id="Pod with matchExpressions using Gt operator that matches the existing node",
        ),
        pytest.param(
            required({"matchExpressions": [expr("mem-type", "NotIn", "DDR", "DDR2")]}),
            {"mem-type": "DDR3"},
            "node1",
            True,
            id="Pod with matchExpressions using NotIn operator that matches the existing node",
        ),
        pytest.param(
            required({"matchExpressions": [expr("GPU", "Exists")]}),
            {"GPU": "NVIDIA-GRID-K1"},
            "node1",
            True,
            id="Pod with matchExpressions using Exists operator that matches the existing node",
        ),
        pytest.param(
            required({"matchExpressions": [expr("foo", "In", "value1", "value2")]}),
            {"foo": "bar"},
            "node1",
            False,
            id="Pod with affinity that don't match node's labels won't schedule onto the node",
        ),
        pytest.param(
            required({"matchExpressions": []}),
            {"foo": "bar"},
            "node1",
            False,
            id="Pod with empty MatchExpressions is not a valid value will match no "
            "objects and won't "
            "schedule onto the node",
        ),
        pytest.param(
            make_pod("p").info(),
            {"foo": "bar"},
            "node1",
            True,
            id="Pod with no Affinity will schedule onto a node",
        ),
        pytest.param(
            make_pod("p").affinity({"nodeAffinity": {}}).info(),
            {"foo": "bar"},
            "node1",
            True,
            id="Pod with Affinity but nil NodeSelector will schedule onto a node",
        ),
        pytest.param(
            required(
                {"matchExpressions": [expr("GPU", "Exists"), expr("GPU", "NotIn", "AMD", "INTER")]}
            ),
            {"GPU": "NVIDIA-GRID-K1"},
            "node1",
            True,
            id="Pod with multiple matchExpressions ANDed that matches the existing node",
        ),
        pytest.param(
            required(
                {"matchExpressions": [expr("GPU", "Exists"), expr("GPU", "In", "AMD", "INTER")]}
            ),
            {"GPU": "NVIDIA-GRID-K1"},
            "node1",
            False,
            id="Pod with multiple matchExpressions ANDed that doesn't match the existing node",
        ),
        pytest.param(
            required(
                {"matchExpressions": [expr("foo", "In", "bar", "value2")]},
                {"matchExpressions": [expr("diffkey", "In", "wrong", "value2")]},
            ),
            {"foo": "bar"},
            "node1",
            True,
            id="Pod with multiple NodeSelectorTerms ORed in affinity, matches the node's "
            "labels and "
            "will schedule onto the node",
        ),
        pytest.param(
            required({"matchExpressions": [expr("foo", "Exists")]}, node_selector={"foo": "bar"}),
            {"foo": "bar"},
            "node1",
            True,
            id="Pod with an Affinity and a PodSpec.NodeSelector(the old thing that we "
            "are deprecating) "
            "both are satisfied, will schedule onto the node",
        ),
        pytest.param(
            required({"matchExpressions": [expr("foo", "Exists")]}, node_selector={"foo": "bar"}),
            {"foo": "barrrrrr"},
            "node1",
            False,
            id="Pod with an Affinity matches node's labels but the "
            "PodSpec.NodeSelector(the old thing "
            "that we are deprecating) is not satisfied, won't schedule onto the node",
        ),
        pytest.param(
            required({"matchExpressions": [expr("foo", "NotIn", "invalid value: ___@#$%^")]}),
            {"foo": "bar"},
            "node1",
            False,
            id="Pod with an invalid value in Affinity term won't be scheduled onto the node",
        ),
        pytest.param(
            required({"matchFields": [field("In", "node1")]}),
            {},
            "node1",
            True,
            id="Pod with matchFields using In operator that matches the existing node",
        ),
        pytest.param(
            required({"matchFields": [field("In", "node1")]}),
            {},
            "node2",
            False,
            id="Pod with matchFields using In operator that does not match the existing node",
        ),
        pytest.param(
            required(
                {"matchFields": [field("In", "node1"), field("In", "node2")]},
                {"matchExpressions": [expr("foo", "In", "bar")]},
            ),
            {"foo": "bar"},
            "node2",
            True,
            id="Pod with two terms: matchFields does not match, but matchExpressions matches",
        ),
        pytest.param(
            required(
                {
                    "matchFields": [field("In", "node1")],
                    "matchExpressions": [expr("foo", "In", "bar")],
                }
            ),
            {"foo": "bar"},
            "node2",
            False,
            id="Pod with one term: matchFields does not match, but matchExpressions matches",
        ),
        pytest.param(
            required(
                {
                    "matchFields": [field("In", "node1")],
                    "matchExpressions": [expr("foo", "In", "bar")],
                }
            ),
            {"foo": "bar"},
            "node1",
            True,
            id="Pod with one term: both matchFields and matchExpressions match",
        ),
        pytest.param(
            required(
                {"matchFields": [field("In", "node1")]},
                {"matchExpressions": [expr("foo", "In", "not-match-to-bar")]},
            ),
            {"foo": "bar"},
            "node2",
            False,
            id="Pod with two terms: both matchFields and matchExpressions do not match",
        ),
        pytest.param(
            required(
                {"matchFields": [field("In", "node1")]}, {"matchFields": [field("In", "node2")]}
            ),
            {},
            "node2",
            True,
            id="Pod with two terms of node.Name affinity",
        ),
        pytest.param(
            required({"matchFields": [field("In", "node1"), field("In", "node2")]}),
            {"foo": "bar"},
            "node2",
            False,
            id="Pod with two conflicting mach field requirements",
        ),
        # --- ours: requirement rules upstream's labels.NewRequirement enforces.
        pytest.param(
            required({"matchExpressions": [expr("foo", "In")]}),
            {"foo": "bar"},
            "node1",
            False,
            id="In without values matches nothing",
        ),
        pytest.param(
            required({"matchExpressions": [expr("foo", "NotIn")]}),
            {"foo": "bar"},
            "node1",
            False,
            id="NotIn without values matches nothing",
        ),
        pytest.param(
            required({"matchExpressions": [expr("foo", "Exists", "bar")]}),
            {"foo": "bar"},
            "node1",
            False,
            id="Exists with values matches nothing",
        ),
        pytest.param(
            required({"matchExpressions": [expr("invalid key", "DoesNotExist")]}),
            {},
            "node1",
            False,
            id="an invalid key matches nothing",
        ),
        pytest.param(
            required({"matchExpressions": [expr("v", "Lt", "10")]}),
            {"v": "1_0"},
            "node1",
            False,
            id="Lt compares Go integers only (no underscores)",
        ),
        pytest.param(
            required({"matchExpressions": [expr("v", "Lt", "10")]}),
            {"v": "-3"},
            "node1",
            True,
            id="Lt with a negative label",
        ),
        pytest.param(
            required({"matchExpressions": [expr("v", "Gt", "x")]}),
            {"v": "3"},
            "node1",
            False,
            id="Gt with a non-integer value matches nothing",
        ),
        pytest.param(
            required({"matchExpressions": [expr("zone", "DoesNotExist")]}),
            {"foo": "bar"},
            "node1",
            True,
            id="DoesNotExist",
        ),
        pytest.param(
            required({"matchFields": [field("NotIn", "node1")]}),
            {},
            "node2",
            True,
            id="matchFields NotIn",
        ),
        pytest.param(
            required({"matchFields": [field("In", "node1", "node2")]}),
            {},
            "node2",
            False,
            id="matchFields needs exactly one value",
        ),
        pytest.param(
            required({"matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["x"]}]}),
            {},
            "node1",
            False,
            id="matchFields only knows metadata.name",
        ),
        pytest.param(required(), {}, "node1", False, id="no terms at all match nothing"),
    ],
)
def test_filter(pod: PodInfo, labels: dict[str, str], node_name: str, fits: bool) -> None:
    ni = make_node(node_name).info()
    ni.set_node(node(node_name, **labels), 1)
    st = NodeAffinity().filter(CycleState(), pod, ni)
    if fits:
        assert st.is_success()
    else:
        assert (st.code, st.reasons, st.plugin) == (UNRESOLVABLE, (ERR_REASON_POD,), "NodeAffinity")


# --------------------------------------------------------------------------- score


def preferred(*terms: tuple[int, list[dict[str, Any]]]) -> PodInfo:
    return (
        make_pod("p")
        .affinity(
            {
                "nodeAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": w, "preference": {"matchExpressions": exprs}}
                        for w, exprs in terms
                    ]
                }
            }
        )
        .info()
    )


LABEL1 = {"foo": "bar"}
LABEL2 = {"key": "value"}
LABEL3 = {"az": "az1"}
LABEL4 = {"abc": "az11", "def": "az22"}
LABEL5 = {"foo": "bar", "key": "value", "az": "az1"}
AFFINITY1 = preferred((2, [expr("foo", "In", "bar")]))
AFFINITY2 = preferred(
    (2, [expr("foo", "In", "bar")]),
    (4, [expr("key", "In", "value")]),
    (5, [expr("foo", "In", "bar"), expr("key", "In", "value"), expr("az", "In", "az1")]),
)


def scores(pod: PodInfo, nodes: list[tuple[str, dict[str, str]]]) -> tuple[list[int], bool]:
    plugin = NodeAffinity()
    infos = [make_node(n).info() for n, _ in nodes]
    for ni, (n, labels) in zip(infos, nodes, strict=True):
        ni.set_node(node(n, **labels), 1)
    state = CycleState()
    assert plugin.pre_score(state, pod, infos, Snapshot.from_node_infos(infos)).is_success()
    out = [plugin.score(state, pod, ni) for ni in infos]
    plugin.normalize_scores(state, pod, out)
    return out, plugin.name in state.skip_score_plugins


@pytest.mark.parametrize(
    ("pod", "nodes", "want", "skipped"),
    [
        pytest.param(
            make_pod("p").info(),
            [("node1", LABEL1), ("node2", LABEL2), ("node3", LABEL3)],
            [0, 0, 0],
            True,
            id="all nodes are same priority as NodeAffinity is nil",
        ),
        pytest.param(
            AFFINITY1,
            [("node1", LABEL4), ("node2", LABEL2), ("node3", LABEL3)],
            [0, 0, 0],
            False,
            id="no node matches preferred scheduling requirements in NodeAffinity of pod so all "
            "nodes' priority is zero",
        ),
        pytest.param(
            AFFINITY1,
            [("node1", LABEL1), ("node2", LABEL2), ("node3", LABEL3)],
            [100, 0, 0],
            False,
            id="only node1 matches the preferred scheduling requirements of pod",
        ),
        pytest.param(
            AFFINITY2,
            [("node1", LABEL1), ("node5", LABEL5), ("node2", LABEL2)],
            [18, 100, 36],
            False,
            id="all nodes matches the preferred scheduling requirements of pod but with different "
            "priorities ",
        ),
        pytest.param(
            preferred((0, [expr("foo", "In", "bar")]), (3, [expr("key", "In", "value")])),
            [("node1", LABEL1), ("node2", LABEL2)],
            [0, 100],
            False,
            id="terms of weight 0 count for nothing",
        ),
    ],
)
def test_score(
    pod: PodInfo, nodes: list[tuple[str, dict[str, str]]], want: list[int], skipped: bool
) -> None:
    got, was_skipped = scores(pod, nodes)
    assert was_skipped is skipped
    if not skipped:
        assert got == want


# --------------------------------------------------------------------------- hints


POD_WITH_AFFINITY = required({"matchExpressions": [expr("foo", "In", "bar")]})


def _hint(action: str) -> Any:
    for reg in NodeAffinity().events_to_register():
        if (reg.event.resource, reg.event.action) == ("Node", action):
            return reg.hint
    raise AssertionError(action)


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param(None, node("n"), QueueingHint.SKIP, id="skip-queue-on-add"),
        pytest.param(None, node("n", foo="bar"), QueueingHint.QUEUE, id="queue-on-add"),
        pytest.param(node("n"), node("n"), QueueingHint.SKIP, id="skip-unrelated-changes"),
        pytest.param(
            node("n"), node("n", k="v"), QueueingHint.SKIP, id="skip-unrelated-changes-on-labels"
        ),
        pytest.param(
            node("n", foo="bar"),
            node("n", k="v"),
            QueueingHint.SKIP,
            id="skip-labels-changes-on-node-from-suitable-to-unsuitable",
        ),
        pytest.param(
            node("n"),
            node("n", foo="bar"),
            QueueingHint.QUEUE,
            id="queue-on-labels-change-makes-pod-schedulable",
        ),
        pytest.param(
            node("n", foo="bar"),
            node("n", foo="bar", x="y"),
            QueueingHint.SKIP,
            id="skip-unrelated-change-that-keeps-pod-schedulable",
        ),
    ],
)
def test_node_change_hint(old: NodeRecord | None, new: NodeRecord, want: QueueingHint) -> None:
    assert _hint("Add" if old is None else "Update")(POD_WITH_AFFINITY, old, new) is want


def test_filter_on_a_node_info_without_node() -> None:
    st = NodeAffinity().filter(CycleState(), selector(foo="bar"), NodeInfo())
    assert st.code == UNRESOLVABLE


# --------------------------------------------------------------------------- PreFilter node set
# Upstream: pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go (NodeAffinity.PreFilter
# returns PreFilterResult.NodeNames for metadata.name matchFields), and
# pkg/scheduler/schedule_one.go (findNodesThatFitPod reports nodes outside it as
# "node(s) didn't satisfy plugin(s) [NodeAffinity]").


def _name_terms(*terms: list[str] | None) -> dict[str, Any]:
    out = []
    for names_ in terms:
        if names_ is None:
            out.append({"matchExpressions": [{"key": "zone", "operator": "Exists"}]})
        else:
            out.append(
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": names_}]}
            )
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": out}
        }
    }


@pytest.mark.parametrize(
    ("affinity", "expected"),
    [
        pytest.param(_name_terms(["n1"]), frozenset({"n1"}), id="one term naming a node"),
        pytest.param(
            _name_terms(["n1"], ["n2", "n3"]),
            frozenset({"n1", "n2", "n3"}),
            id="terms are ORed: names unite",
        ),
        pytest.param(_name_terms(["n1"], None), None, id="a term without names allows every node"),
        pytest.param(_name_terms([]), frozenset(), id="no name can match: conflict"),
    ],
)
def test_pre_filter_node_names_from_match_fields(
    affinity: dict[str, Any], expected: frozenset[str] | None
) -> None:
    pod = make_pod("p").affinity(affinity).info()
    assert node_names_from_match_fields(pod.required_node_affinity or ()) == expected


def test_nodes_outside_the_pre_filter_set_are_reported_as_upstream() -> None:
    import random

    from scheduler.clock import FakeClock
    from scheduler.config import SchedulerConfig
    from scheduler.schedule_one import SchedulerCore
    from tests.unit.fakes import RecordingBinder, RecordingRecorder

    core = SchedulerCore(
        SchedulerConfig(post_filters=()),
        FakeClock(),
        RecordingBinder(),
        RecordingRecorder(),
        rng=random.Random(0),
    )
    for n in ("n1", "n2", "n3"):
        core.on_node_add(make_node(n).alloc(cpu="1", memory="1Gi", pods=10).record())
    core.on_pod_add(make_pod("p").req(cpu="2").affinity(_name_terms(["n1"])).info())
    r = core.schedule_one()
    assert r is not None and r.outcome == "unschedulable"
    assert r.message == (
        "0/3 nodes are available: 1 Insufficient cpu, "
        "2 node(s) didn't satisfy plugin(s) [NodeAffinity]."
    )
    qpi = core.queue.get("default/p")
    assert qpi is not None and "NodeAffinity" in qpi.unschedulable_plugins


# --------------------------------------------------------------------------- addedAffinity
# Upstream: node_affinity_test.go's cases with NodeAffinityArgs.AddedAffinity.

ADDED = (NodeSelectorTerm((NodeSelectorRequirement("zone", "In", ("foo",)),), ()),)


@pytest.mark.parametrize(
    ("pod", "labels", "code", "reason"),
    [
        pytest.param(make_pod("p").info(), {"zone": "foo"}, Code.SUCCESS, "", id="matches added"),
        pytest.param(
            make_pod("p").info(),
            {"zone": "bar"},
            UNRESOLVABLE,
            ERR_REASON_ENFORCED,
            id="misses added",
        ),
        pytest.param(
            selector(foo="bar"),
            {"zone": "foo", "foo": "bar"},
            Code.SUCCESS,
            "",
            id="matches both",
        ),
        pytest.param(
            selector(foo="bar"), {"zone": "foo"}, UNRESOLVABLE, ERR_REASON_POD, id="misses pod's"
        ),
        pytest.param(
            selector(foo="bar"),
            {"foo": "bar"},
            UNRESOLVABLE,
            ERR_REASON_ENFORCED,
            id="misses added first",
        ),
    ],
)
def test_added_affinity_filter(
    pod: PodInfo, labels: dict[str, str], code: Code, reason: str
) -> None:
    plugin = NodeAffinity(added_required=ADDED)
    state = CycleState()
    _, st = plugin.pre_filter(state, pod, Snapshot())
    assert st.code == Code.SUCCESS  # not skipped: the added terms apply to every pod
    ni = NodeInfo(node("n", **labels))
    got = plugin.filter(state, pod, ni)
    assert (got.code, got.reasons) == (code, (reason,) if reason else ())
    snapshot = Snapshot()
    snapshot.node_info_map = {"n": ni}
    snapshot.rebuild_lists()
    mask = plugin.filter_batch(state, pod, snapshot)
    assert mask is None or mask.tolist() == [code == Code.SUCCESS]


def test_added_preferred_terms_add_to_the_pod_s_own() -> None:
    preferred = [(30, ADDED[0]), (0, ADDED[0])]  # weight 0 counts for nothing
    plugin = NodeAffinity(added_preferred=preferred)
    own = make_pod("p").affinity(
        {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 5, "preference": {"matchExpressions": [expr("foo", "Exists")]}}
                ]
            }
        }
    )
    state = CycleState()
    for pod, labels, want in (
        (make_pod("p").info(), {"zone": "foo"}, 30),
        (make_pod("p").info(), {"zone": "bar"}, 0),
        (own.info(), {"zone": "foo", "foo": "x"}, 35),
        (own.info(), {"foo": "x"}, 5),
    ):
        plugin.pre_score(state, pod, [], Snapshot())
        assert plugin.name not in state.skip_score_plugins
        assert plugin.score(state, pod, NodeInfo(node("n", **labels))) == want


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param(None, node("n", foo="bar"), QueueingHint.SKIP, id="added node misses added"),
        pytest.param(
            None, node("n", foo="bar", zone="foo"), QueueingHint.QUEUE, id="added node matches"
        ),
        pytest.param(
            node("n", foo="bar"),
            node("n", foo="bar", zone="foo"),
            QueueingHint.QUEUE,
            id="node now matches added (upstream skips)",
        ),
        pytest.param(
            node("n", foo="bar", zone="foo"),
            node("n", foo="bar", zone="foo", x="y"),
            QueueingHint.SKIP,
            id="matched both before",
        ),
        pytest.param(
            node("n", zone="foo"),
            node("n", foo="bar", zone="bar"),
            QueueingHint.SKIP,
            id="pod's now, added no longer",
        ),
    ],
)
def test_added_affinity_node_change_hint(
    old: NodeRecord | None, new: NodeRecord, want: QueueingHint
) -> None:
    plugin = NodeAffinity(added_required=ADDED)
    hint = next(
        reg.hint
        for reg in plugin.events_to_register()
        if reg.event.action == ("Add" if old is None else "Update")
    )
    assert hint(POD_WITH_AFFINITY, old, new) is want
