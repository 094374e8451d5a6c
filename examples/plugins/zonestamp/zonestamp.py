"""ZoneStamp: an example Bind plugin for py-scheduler.

Binds the pods of the namespaces it is given (every namespace when none are) with the zone
of their node written on them as an annotation, in the Binding itself: the API server
copies a Binding's annotations onto the pod, so the pod is bound and stamped in one call,
and no one ever sees it bound without the stamp. Other pods it leaves to the next Bind
plugin (SKIP). Configuration::

    plugins:
      bind:
        disabled: [{name: DefaultBinder}]
        enabled: [{name: ZoneStamp}, {name: DefaultBinder}]
    pluginConfig:
      - name: ZoneStamp
        args: {namespaces: [prod], annotation: example.com/zone}

DefaultBinder is disabled and enabled again after ZoneStamp so that ZoneStamp comes first:
as upstream, the Bind plugins run in order until one does not skip, and DefaultBinder
binds every pod that reaches it. A node without the zone label gets ``"unknown"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.plugins import (
    SKIP,
    SUCCESS,
    ApiCallError,
    CycleState,
    FrameworkHandle,
    PodInfo,
    Status,
)

ZONE_LABEL = "topology.kubernetes.io/zone"


class ZoneStamp:
    name = "ZoneStamp"

    def __init__(self, args: Mapping[str, Any], handle: FrameworkHandle) -> None:
        unknown = sorted(set(args) - {"namespaces", "annotation"})
        if unknown:
            raise ValueError(f"{unknown[0]}: unknown field (known: namespaces, annotation)")
        namespaces = args.get("namespaces", [])
        if not isinstance(namespaces, list) or not all(
            isinstance(n, str) and n for n in namespaces
        ):
            raise ValueError(f"namespaces: expected a list of names, got {namespaces!r}")
        annotation = args.get("annotation", "example.com/zone")
        if not isinstance(annotation, str) or not annotation:
            raise ValueError(f"annotation: expected an annotation key, got {annotation!r}")
        self.namespaces = frozenset(namespaces)
        self.annotation = annotation
        self.handle = handle

    def zone_of(self, node_name: str) -> str:
        for ni in self.handle.node_infos():
            if ni.node is not None and ni.node.name == node_name:
                return ni.node.labels.get(ZONE_LABEL, "unknown")
        return "unknown"

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        """Send the Binding with the stamp (awaited in the pod's binding task: other pods
        are scheduled meanwhile), or leave the pod to the next Bind plugin."""
        client = self.handle.client
        if client is None or (self.namespaces and pod.namespace not in self.namespaces):
            return SKIP
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {
                "name": pod.name,
                "namespace": pod.namespace,
                "uid": pod.uid,  # never binds a re-created namesake
                "annotations": {self.annotation: self.zone_of(node_name)},
            },
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
        }
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/binding"
        try:
            await client.request("POST", path, body=body)
        except ApiCallError as e:
            # An error: the pod is unreserved and retried after backoff (a pod deleted or
            # bound meanwhile leaves the queue when the watch says so).
            return Status.error(f"Binding with {self.annotation}: {e}")
        return SUCCESS
