"""NodePorts: host-port conflicts (0.0.0.0 against every IP of the same protocol and port)
and the assigned-pod-delete hint. Case names mirror upstream's nodeports/node_ports_test.go
(TestNodePorts, TestFits)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.framework.interface import Code, CycleState, QueueingHint
from scheduler.framework.plugins.nodeports import ERR_REASON, NodePorts
from scheduler.types import NodeInfo, PodInfo
from tests.builders import make_node, make_pod


def new_pod(name: str, *ports: str, node: str = "") -> PodInfo:
    """Upstream's newPod: ports as "PROTOCOL/IP/PORT"."""
    b = make_pod(name)
    for spec in ports:
        proto, ip, port = spec.split("/")
        b.host_port(int(port), protocol=proto, ip=ip)
    if node:
        b.node(node)
    return b.info()


def new_node_info(*ports: str) -> NodeInfo:
    return make_node("n1").info(new_pod("p1", *ports, node="n1"))


@pytest.mark.parametrize(
    ("pod", "node", "fits"),
    [
        pytest.param(make_pod("p").info(), new_node_info(), True, id="skip filter"),
        pytest.param(
            new_pod("m1", "UDP/127.0.0.1/8080"),
            new_node_info("UDP/127.0.0.1/9090"),
            True,
            id="other port",
        ),
        pytest.param(
            new_pod("m1", "UDP/127.0.0.1/8080"),
            new_node_info("UDP/127.0.0.1/8080"),
            False,
            id="same udp port",
        ),
        pytest.param(
            new_pod("m1", "TCP/127.0.0.1/8080"),
            new_node_info("TCP/127.0.0.1/8080"),
            False,
            id="same tcp port",
        ),
        pytest.param(
            new_pod("m1", "TCP/127.0.0.1/8080"),
            new_node_info("TCP/127.0.0.2/8080"),
            True,
            id="different host ip",
        ),
        pytest.param(
            new_pod("m1", "UDP/127.0.0.1/8080"),
            new_node_info("TCP/127.0.0.1/8080"),
            True,
            id="different protocol",
        ),
        pytest.param(
            new_pod("m1", "UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"),
            new_node_info("UDP/127.0.0.1/8080"),
            False,
            id="second udp port conflict",
        ),
        pytest.param(
            new_pod("m1", "TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"),
            new_node_info("TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081"),
            False,
            id="first tcp port conflict",
        ),
        pytest.param(
            new_pod("m1", "TCP/0.0.0.0/8001"),
            new_node_info("TCP/127.0.0.1/8001"),
            False,
            id="first tcp port conflict due to 0.0.0.0 hostIP",
        ),
        pytest.param(
            new_pod("m1", "TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"),
            new_node_info("TCP/127.0.0.1/8001"),
            False,
            id="TCP hostPort conflict due to 0.0.0.0 hostIP",
        ),
        pytest.param(
            new_pod("m1", "TCP/127.0.0.1/8001"),
            new_node_info("TCP/0.0.0.0/8001"),
            False,
            id="second tcp port conflict to 0.0.0.0 hostIP",
        ),
        pytest.param(
            new_pod("m1", "UDP/127.0.0.1/8001"),
            new_node_info("TCP/0.0.0.0/8001"),
            True,
            id="second different protocol",
        ),
        pytest.param(
            new_pod("m1", "UDP/127.0.0.1/8001"),
            new_node_info("TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001"),
            False,
            id="UDP hostPort conflict due to 0.0.0.0 hostIP",
        ),
        pytest.param(
            make_pod("p").init_host_port(8001, sidecar=False).info(),
            new_node_info("TCP/0.0.0.0/8001"),
            True,
            id="non-sidecar initContainer using hostPort",
        ),
        pytest.param(
            make_pod("p").init_host_port(8001, sidecar=True).info(),
            new_node_info("TCP/0.0.0.0/8001"),
            False,
            id="TCP hostPort conflict from sidecar initContainer",
        ),
        # --- TestFits.
        pytest.param(
            new_pod("p", "TCP/127.0.0.1/80"),
            new_node_info("TCP/127.0.0.1/9090"),
            True,
            id="non-conflicting ports",
        ),
        pytest.param(
            new_pod(
                "p", "TCP/127.0.0.1/80", "TCP/127.0.1.1/80", "TCP/127.0.1.1/90", "TCP/127.0.1.1/100"
            ),
            new_node_info("TCP/127.0.0.1/9090", "TCP/127.0.0.1/9191", "TCP/127.0.1.1/8080"),
            True,
            id="multiple non-conflicting ports",
        ),
        pytest.param(
            new_pod("m1", "TCP/127.0.0.1/80"),
            new_node_info("UDP/127.0.0.1/80"),
            True,
            id="same ports on different protocols",
        ),
        pytest.param(
            new_pod(
                "p", "TCP/127.0.0.1/80", "TCP/127.0.1.1/80", "TCP/127.0.1.1/90", "TCP/127.0.1.1/100"
            ),
            new_node_info("TCP/127.0.0.1/9090", "TCP/127.0.1.1/90", "TCP/127.0.1.1/8080"),
            False,
            id="multiple ports, some conflicting",
        ),
    ],
)
def test_filter(pod: PodInfo, node: NodeInfo, fits: bool) -> None:
    st = NodePorts().filter(CycleState(), pod, node)
    if fits:
        assert st.is_success()
    else:
        assert (st.code, st.reasons, st.plugin) == (Code.UNSCHEDULABLE, (ERR_REASON,), "NodePorts")


def test_ports_free_again_after_the_pod_leaves() -> None:
    ni = new_node_info("TCP/0.0.0.0/80")
    pod = new_pod("m1", "TCP/127.0.0.1/80")
    assert not NodePorts().filter(CycleState(), pod, ni).is_success()
    ni.remove_pod("default/p1")
    assert NodePorts().filter(CycleState(), pod, ni).is_success()


def _hint(resource: str, action: str) -> Any:
    for reg in NodePorts().events_to_register():
        if (reg.event.resource, reg.event.action) == (resource, action):
            return reg.hint
    raise AssertionError(action)


@pytest.mark.parametrize(
    ("deleted", "want"),
    [
        pytest.param(new_pod("d", node="n1"), QueueingHint.SKIP, id="deleted pod without ports"),
        pytest.param(
            new_pod("d", "TCP/0.0.0.0/9090", node="n1"), QueueingHint.SKIP, id="no common port"
        ),
        pytest.param(
            new_pod("d", "TCP/0.0.0.0/8080", node="n1"), QueueingHint.QUEUE, id="common port"
        ),
        pytest.param(
            new_pod("d", "UDP/0.0.0.0/8080", node="n1"), QueueingHint.SKIP, id="other protocol"
        ),
        pytest.param(None, QueueingHint.SKIP, id="not a pod"),
    ],
)
def test_assigned_pod_delete_hint(deleted: PodInfo | None, want: QueueingHint) -> None:
    pod = new_pod("p", "TCP/127.0.0.1/8080")
    assert _hint("AssignedPod", "Delete")(pod, deleted, None) is want


def test_node_add_always_queues() -> None:
    assert _hint("Node", "Add") is None
