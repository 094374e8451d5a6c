"""NodePorts: a pod's host ports must be free on the node (0.0.0.0 conflicts with every IP
of the same protocol and port). PreFilter skips the filter of a pod without host ports
(upstream)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from scheduler.backend.cache.snapshot import Snapshot
from scheduler.framework import signers
from scheduler.framework.interface import (
    SKIP,
    SUCCESS,
    ClusterEvent,
    CycleState,
    EventRegistration,
    PreFilterResult,
    QueueingHint,
    SignFragment,
    Status,
)
from scheduler.framework.plugins import names
from scheduler.types import HostPort, NodeInfo, PodInfo

ERR_REASON = "node(s) didn't have free ports for the requested pod ports"
_ANY = "0.0.0.0"


def _conflicts(hp: HostPort, used: Iterable[tuple[str, str, int]]) -> bool:
    for ip, proto, port in used:
        if port == hp.port and proto == hp.protocol and (ip == hp.ip or _ANY in (ip, hp.ip)):
            return True
    return False


class NodePorts:
    name = names.NODE_PORTS

    def sign_pod(self, pod: PodInfo) -> tuple[list[SignFragment], Status]:
        """Filtering reads the pod's host ports."""
        return [SignFragment(signers.HOST_PORTS, signers.host_ports(pod))], SUCCESS

    def pre_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        if not pod.host_ports:
            return None, SKIP
        return None, SUCCESS

    def pre_filter_extensions(self) -> None:
        return None

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status:
        if not pod.host_ports or not node_info.used_ports:
            return SUCCESS
        for hp in pod.host_ports:
            if _conflicts(hp, node_info.used_ports):
                return Status.unschedulable(ERR_REASON, plugin=self.name)
        return SUCCESS

    def events_to_register(self) -> Iterable[EventRegistration]:
        def pod_deleted(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
            if not isinstance(old, PodInfo):
                return QueueingHint.SKIP
            used = [(h.ip, h.protocol, h.port) for h in old.host_ports]
            if any(_conflicts(hp, used) for hp in pod.host_ports):
                return QueueingHint.QUEUE
            return QueueingHint.SKIP

        return [
            EventRegistration(ClusterEvent("AssignedPod", "Delete"), pod_deleted),
            EventRegistration(ClusterEvent("Node", "Add")),
        ]
