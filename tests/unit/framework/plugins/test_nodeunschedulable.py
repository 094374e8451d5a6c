"""NodeUnschedulable: spec.unschedulable rejects unless the pod tolerates the
node.kubernetes.io/unschedulable:NoSchedule taint. Case names mirror upstream's
nodeunschedulable/node_unschedulable_test.go."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.framework.interface import Code, CycleState, QueueingHint
from scheduler.framework.plugins.nodeunschedulable import (
    ERR_REASON_UNSCHEDULABLE,
    NodeUnschedulable,
)
from scheduler.types import NodeInfo, NodeRecord, PodInfo
from tests.builders import make_node, make_pod

KEY = "node.kubernetes.io/unschedulable"


def node(*, unschedulable: bool, taint: bool = False) -> NodeRecord:
    b = make_node("n1")
    if unschedulable:
        b.unschedulable()
    if taint:
        b.taint("node.kubernetes.io/not-ready", effect="NoExecute")
    return b.record()


@pytest.mark.parametrize(
    ("pod", "unschedulable", "fits"),
    [
        pytest.param(
            make_pod("p").info(),
            True,
            False,
            id="Does not schedule pod to unschedulable node (node.Spec.Unschedulable==true)",
        ),
        pytest.param(make_pod("p").info(), False, True, id="Schedule pod to normal node"),
        pytest.param(
            make_pod("p").toleration(KEY, effect="NoSchedule").info(),
            True,
            True,
            id="Schedule pod with toleration to unschedulable node (node.Spec.Unschedulable==true)",
        ),
        pytest.param(
            make_pod("p").toleration(KEY, operator="Exists").info(),
            True,
            True,
            id="an Exists toleration without effect also tolerates",
        ),
        pytest.param(
            make_pod("p").toleration(KEY, effect="NoExecute", operator="Exists").info(),
            True,
            False,
            id="a toleration of another effect does not",
        ),
    ],
)
def test_filter(pod: PodInfo, unschedulable: bool, fits: bool) -> None:
    ni = NodeInfo(node(unschedulable=unschedulable))
    st = NodeUnschedulable().filter(CycleState(), pod, ni)
    if fits:
        assert st.is_success()
    else:
        assert (st.code, st.reasons, st.plugin) == (
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            (ERR_REASON_UNSCHEDULABLE,),
            "NodeUnschedulable",
        )


def _hint(action: str) -> Any:
    for reg in NodeUnschedulable().events_to_register():
        if (reg.event.resource, reg.event.action) == ("Node", action):
            return reg.hint
    raise AssertionError(action)


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param(
            None,
            node(unschedulable=True),
            QueueingHint.SKIP,
            id="skip-queue-on-unschedulable-node-added",
        ),
        pytest.param(
            None,
            node(unschedulable=False),
            QueueingHint.QUEUE,
            id="queue-on-schedulable-node-added",
        ),
        pytest.param(
            node(unschedulable=True, taint=True),
            node(unschedulable=True),
            QueueingHint.SKIP,
            id="skip-unrelated-change-unschedulable-true",
        ),
        pytest.param(
            node(unschedulable=False, taint=True),
            node(unschedulable=False),
            QueueingHint.SKIP,
            id="skip-unrelated-change-unschedulable-false",
        ),
        pytest.param(
            node(unschedulable=True),
            node(unschedulable=False),
            QueueingHint.QUEUE,
            id="queue-on-unschedulable-field-change",
        ),
    ],
)
def test_node_change_hint(old: NodeRecord | None, new: NodeRecord, want: QueueingHint) -> None:
    assert _hint("Add" if old is None else "Update")(make_pod("p").info(), old, new) is want
