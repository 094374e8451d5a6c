"""TaintToleration: the filter (NoSchedule/NoExecute), the PreferNoSchedule score with its
reversed normalisation, and the node-change hint. Case names mirror upstream's
tainttoleration/taint_toleration_test.go."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.backend.cache.snapshot import Snapshot
from scheduler.framework.interface import Code, CycleState, QueueingHint
from scheduler.framework.plugins.tainttoleration import TaintToleration
from scheduler.types import NodeInfo, NodeRecord, PodInfo, Taint, Toleration
from tests.builders import make_node, make_pod

NS, PNS, NE = "NoSchedule", "PreferNoSchedule", "NoExecute"


def tolerating(*tols: tuple[str, str, str, str]) -> PodInfo:
    """Tolerations as (key, operator, value, effect)."""
    b = make_pod("pod1")
    for key, op, value, effect in tols:
        b.toleration(key, value, effect, operator=op)
    return b.info()


def tainted(name: str, *taints: tuple[str, str, str]) -> NodeInfo:
    """Taints as (key, value, effect)."""
    b = make_node(name)
    for key, value, effect in taints:
        b.taint(key, value, effect)
    return b.info()


# --------------------------------------------------------------------------- filter


@pytest.mark.parametrize(
    ("pod", "node", "fits"),
    [
        pytest.param(
            tolerating(),
            tainted("nodeA", ("dedicated", "user1", NS)),
            False,
            id="A pod having no tolerations can't be scheduled onto a node with nonempty taints",
        ),
        pytest.param(
            tolerating(("dedicated", "", "user1", NS)),
            tainted("nodeA", ("dedicated", "user1", NS)),
            True,
            id="A pod which can be scheduled on a dedicated node assigned to user1 with "
            "effect NoSchedule",
        ),
        pytest.param(
            tolerating(("dedicated", "Equal", "user2", NS)),
            tainted("nodeA", ("dedicated", "user1", NS)),
            False,
            id="A pod which can't be scheduled on a dedicated node assigned to user2 with effect "
            "NoSchedule",
        ),
        pytest.param(
            tolerating(("foo", "Exists", "", NS)),
            tainted("nodeA", ("foo", "bar", NS)),
            True,
            id="A pod can be scheduled onto the node, with a toleration uses operator Exists that "
            "tolerates the taints on the node",
        ),
        pytest.param(
            tolerating(("dedicated", "Equal", "user2", NS), ("foo", "Exists", "", NS)),
            tainted("nodeA", ("dedicated", "user2", NS), ("foo", "bar", NS)),
            True,
            id="A pod has multiple tolerations, node has multiple taints, all the taints are "
            "tolerated, pod can be scheduled onto the node",
        ),
        pytest.param(
            tolerating(("foo", "Equal", "bar", PNS)),
            tainted("nodeA", ("foo", "bar", NS)),
            False,
            id="A pod has a toleration that keys and values match the taint on the node, but "
            "(non-empty) effect doesn't match, can't be scheduled onto the node",
        ),
        pytest.param(
            tolerating(("foo", "Equal", "bar", "")),
            tainted("nodeA", ("foo", "bar", NS)),
            True,
            id="The pod has a toleration that keys and values match the taint on the node, the "
            "effect of toleration is empty, and the effect of taint is NoSchedule. Pod can be "
            "scheduled onto the node",
        ),
        pytest.param(
            tolerating(("dedicated", "Equal", "user2", NS)),
            tainted("nodeA", ("dedicated", "user1", PNS)),
            True,
            id="The pod has a toleration that key and value don't match the taint on the node, but "
            "the effect of taint on node is PreferNoSchedule. Pod can be scheduled onto the node",
        ),
        pytest.param(
            tolerating(),
            tainted("nodeA", ("dedicated", "user1", PNS)),
            True,
            id="The pod has no toleration, but the effect of taint on node is "
            "PreferNoSchedule. Pod "
            "can be scheduled onto the node",
        ),
        # --- ours.
        pytest.param(
            tolerating(),
            tainted("nodeA", ("node.kubernetes.io/not-ready", "", NE)),
            False,
            id="NoExecute taints reject too",
        ),
        pytest.param(
            tolerating(("", "Exists", "", "")),
            tainted("nodeA", ("a", "b", NS), ("c", "", NE)),
            True,
            id="an empty key with Exists tolerates everything",
        ),
        pytest.param(
            tolerating(("a", "Exists", "", NE)),
            tainted("nodeA", ("a", "b", NS)),
            False,
            id="the toleration's effect must match",
        ),
        pytest.param(tolerating(), make_node("nodeA").info(), True, id="no taints"),
    ],
)
def test_filter(pod: PodInfo, node: NodeInfo, fits: bool) -> None:
    st = TaintToleration().filter(CycleState(), pod, node)
    if fits:
        assert st.is_success()
    else:
        assert (st.code, st.reasons, st.plugin) == (
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            ("node(s) had untolerated taint(s)",),
            "TaintToleration",
        )


@pytest.mark.parametrize(
    ("toleration", "taint", "want"),
    [
        pytest.param(Toleration("k", "Equal", "v", ""), Taint("k", "v", NS), True, id="equal"),
        pytest.param(
            Toleration("k", "Equal", "w", ""), Taint("k", "v", NS), False, id="other value"
        ),
        pytest.param(Toleration("k", "Exists", "", ""), Taint("k", "v", NE), True, id="exists"),
        pytest.param(Toleration("j", "Exists", "", ""), Taint("k", "v", NE), False, id="other key"),
        pytest.param(
            Toleration("", "Exists", "", NS), Taint("k", "v", NE), False, id="other effect"
        ),
        pytest.param(Toleration("k", "Equal", "", ""), Taint("k", "", NS), True, id="empty values"),
    ],
)
def test_tolerates(toleration: Toleration, taint: Taint, want: bool) -> None:
    assert toleration.tolerates(taint) is want


# --------------------------------------------------------------------------- score


def scores(pod: PodInfo, nodes: list[NodeInfo]) -> list[int]:
    plugin = TaintToleration()
    state = CycleState()
    assert plugin.pre_score(state, pod, nodes, Snapshot.from_node_infos(nodes)).is_success()
    out = [plugin.score(state, pod, ni) for ni in nodes]
    plugin.normalize_scores(state, pod, out)
    return out


ARM = ("cpu-type", "arm64", PNS)
SSD = ("disk-type", "ssd", PNS)


@pytest.mark.parametrize(
    ("pod", "nodes", "want"),
    [
        pytest.param(
            tolerating(("foo", "Equal", "bar", PNS)),
            [tainted("nodeA", ("foo", "bar", PNS)), tainted("nodeB", ("foo", "blah", PNS))],
            [100, 0],
            id="node with taints tolerated by the pod, gets a higher score than those node with "
            "intolerable taints",
        ),
        pytest.param(
            tolerating(("cpu-type", "Equal", "arm64", PNS), ("disk-type", "Equal", "ssd", PNS)),
            [tainted("nodeA"), tainted("nodeB", ARM), tainted("nodeC", ARM, SSD)],
            [100, 100, 100],
            id="the nodes that all of their taints are tolerated by the pod, get the "
            "same score, no "
            "matter how many tolerable taints a node has",
        ),
        pytest.param(
            tolerating(("foo", "Equal", "bar", PNS)),
            [tainted("nodeA"), tainted("nodeB", ARM), tainted("nodeC", ARM, SSD)],
            [100, 50, 0],
            id="the more intolerable taints a node has, the lower score it gets.",
        ),
        pytest.param(
            tolerating(("cpu-type", "Equal", "arm64", NS), ("disk-type", "Equal", "ssd", NS)),
            [
                tainted("nodeA"),
                tainted("nodeB", ("cpu-type", "arm64", NS)),
                tainted("nodeC", ARM, SSD),
            ],
            [100, 100, 0],
            id="only taints and tolerations that have effect PreferNoSchedule are checked by "
            "taints-tolerations priority function",
        ),
        pytest.param(
            tolerating(),
            [tainted("nodeA"), tainted("nodeB", ARM)],
            [100, 0],
            id="Default behaviour No taints and tolerations, lands on node with no taints",
        ),
        pytest.param(
            tolerating(("cpu-type", "Exists", "", "")),
            [tainted("nodeA", ARM), tainted("nodeB", SSD)],
            [100, 0],
            id="a toleration without effect counts for PreferNoSchedule",
        ),
        pytest.param(
            tolerating(),
            [tainted("nodeA"), tainted("nodeB")],
            [100, 100],
            id="no PreferNoSchedule taints anywhere: all nodes get the maximum",
        ),
    ],
)
def test_score(pod: PodInfo, nodes: list[NodeInfo], want: list[int]) -> None:
    assert scores(pod, nodes) == want


# --------------------------------------------------------------------------- hints


def _hint(action: str) -> Any:
    for reg in TaintToleration().events_to_register():
        if (reg.event.resource, reg.event.action) == ("Node", action):
            return reg.hint
    raise AssertionError(action)


def _node(*taints: tuple[str, str, str]) -> NodeRecord:
    record = tainted("nodeA", *taints).node
    assert record is not None
    return record


POD = tolerating(("dedicated", "Equal", "user2", NS))


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param(
            None,
            _node(("dedicated", "user1", NS)),
            QueueingHint.SKIP,
            id="skip-queue-on-untoleratedtaint-node-added",
        ),
        pytest.param(
            None,
            _node(("dedicated", "user2", NS)),
            QueueingHint.QUEUE,
            id="queue-on-toleratedtaint-node-added",
        ),
        pytest.param(
            _node(("dedicated", "user1", NS)),
            _node(("dedicated", "user1", NS), ("dedicated", "user3", NS)),
            QueueingHint.SKIP,
            id="skip-unrelated-change",
        ),
        pytest.param(
            _node(("dedicated", "user1", NS)),
            _node(("dedicated", "user2", NS)),
            QueueingHint.QUEUE,
            id="queue-on-taint-change",
        ),
        pytest.param(
            _node(),
            _node(("x", "", PNS)),
            QueueingHint.SKIP,
            id="a node that was tolerated before is not this plugin's change",
        ),
    ],
)
def test_node_change_hint(old: NodeRecord | None, new: NodeRecord, want: QueueingHint) -> None:
    assert _hint("Add" if old is None else "Update")(POD, old, new) is want
