"""LabelPolicy: an example out-of-tree plugin for py-scheduler (Filter + Score).

- Filter: nodes carrying the ``avoid`` label (``key=value``) do not fit, unless the pod
  tolerates it with the same label on itself (a simple opt-in).
- Score: nodes carrying the ``prefer`` label score 100, others 0.
- Queueing hints: a pod this plugin turned down is tried again when a node is added, or
  when a node's update removes the ``avoid`` label (other events cannot change its mind;
  the pod's own updates always bring it back).
- Sign (OpportunisticBatching): what it reads of a pod, the value of the ``avoid`` label's
  key, so that a profile with this plugin still batches pods alike.

Configuration (``pluginConfig``)::

    - name: LabelPolicy
      args: {avoid: "maintenance=true", prefer: "disk=ssd"}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.plugins import (
    MAX_NODE_SCORE,
    SUCCESS,
    ClusterEvent,
    CycleState,
    EventRegistration,
    NodeInfo,
    NodeRecord,
    PodInfo,
    QueueingHint,
    SignFragment,
    Status,
)


def _label(args: Mapping[str, Any], field: str) -> tuple[str, str] | None:
    raw = args.get(field)
    if raw is None:
        return None
    if not isinstance(raw, str) or raw.count("=") != 1 or raw.startswith("="):
        raise ValueError(f"{field}: expected 'key=value', got {raw!r}")
    key, value = raw.split("=")
    return key, value


class LabelPolicy:
    name = "LabelPolicy"

    def __init__(self, args: Mapping[str, Any]) -> None:
        unknown = sorted(set(args) - {"avoid", "prefer"})
        if unknown:
            raise ValueError(f"{unknown[0]}: unknown field (known: avoid, prefer)")
        self.avoid = _label(args, "avoid")
        self.prefer = _label(args, "prefer")

    def sign_pod(self, pod: PodInfo) -> tuple[list[SignFragment], Status]:
        """Filter reads one label of the pod; Score reads nothing of it."""
        if self.avoid is None:
            return [], SUCCESS
        key, _ = self.avoid
        return [SignFragment(f"{self.name}/avoid-opt-in", pod.labels.get(key))], SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status:
        node = node_info.node
        if self.avoid is None or node is None:
            return SUCCESS
        key, value = self.avoid
        if node.labels.get(key) == value and pod.labels.get(key) != value:
            return Status.unschedulable(f"node(s) had the label {key}={value}", plugin=self.name)
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int:
        node = node_info.node
        if self.prefer is None or node is None:
            return 0
        key, value = self.prefer
        return MAX_NODE_SCORE if node.labels.get(key) == value else 0

    def _avoided(self, node: Any) -> bool:
        if self.avoid is None or not isinstance(node, NodeRecord):
            return False
        key, value = self.avoid
        return node.labels.get(key) == value

    def events_to_register(self) -> list[EventRegistration]:
        def lifted(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
            """A node that had the avoid label lost it."""
            if self._avoided(old) and not self._avoided(new):
                return QueueingHint.QUEUE
            return QueueingHint.SKIP

        return [
            EventRegistration(ClusterEvent("Node", "Add")),
            EventRegistration(ClusterEvent("Node", "Update"), lifted),
        ]
