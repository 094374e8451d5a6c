"""NodeName: a pod with spec.nodeName fits only that node. Case names mirror upstream's
nodename/node_name_test.go."""

from __future__ import annotations

import pytest

from scheduler.framework.interface import Code, CycleState, QueueingHint
from scheduler.framework.plugins.nodename import ERR_REASON, NodeName
from scheduler.types import PodInfo
from tests.builders import make_node, make_pod


@pytest.mark.parametrize(
    ("pod", "fits"),
    [
        pytest.param(make_pod("p").info(), True, id="no host specified"),
        pytest.param(make_pod("p").node("foo").info(), True, id="host matches"),
        pytest.param(make_pod("p").node("bar").info(), False, id="host doesn't match"),
    ],
)
def test_filter(pod: PodInfo, fits: bool) -> None:
    st = NodeName().filter(CycleState(), pod, make_node("foo").info())
    if fits:
        assert st.is_success()
    else:
        assert (st.code, st.reasons, st.plugin) == (
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            (ERR_REASON,),
            "NodeName",
        )


def test_node_add_hint_queues_for_the_named_node_only() -> None:
    (reg,) = NodeName().events_to_register()
    assert (reg.event.resource, reg.event.action) == ("Node", "Add")
    assert reg.hint is not None
    pod = make_pod("p").node("foo").info()
    assert reg.hint(pod, None, make_node("foo").record()) is QueueingHint.QUEUE
    assert reg.hint(pod, None, make_node("bar").record()) is QueueingHint.SKIP
