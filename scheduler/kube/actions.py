"""KubeApi: the ClusterApi port of ``scheduler.scheduler`` over the raw-JSON client."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.kube.client import KubeClient

__all__ = ["LIST_PATHS", "KubeApi"]

STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
LIST_PATHS = {
    "namespaces": "/api/v1/namespaces",
    "pods": "/api/v1/pods",
    "nodes": "/api/v1/nodes",
    "poddisruptionbudgets": "/apis/policy/v1/poddisruptionbudgets",
    "priorityclasses": "/apis/scheduling.k8s.io/v1/priorityclasses",
}


def _pod_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{namespace}/pods/{name}"


class KubeApi:
    def __init__(self, client: KubeClient) -> None:
        self.client = client

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        # Raw JSON on purpose: the generated client cannot deserialise the (Status) reply.
        await self.client.call("POST", _pod_path(namespace, name) + "/binding", body=body)

    async def patch_pod_status(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        await self.client.call(
            "PATCH", _pod_path(namespace, name) + "/status", body=patch, content_type=STRATEGIC
        )

    def patch_pod_status_sync(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        self.client.request(
            "PATCH", _pod_path(namespace, name) + "/status", body=patch, content_type=STRATEGIC
        )

    @staticmethod
    def _delete_options(uid: str) -> dict[str, Any]:
        # Default grace period (graceful termination), guarded by the victim's uid so that a
        # re-created pod of the same name is never deleted by mistake.
        opts: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if uid:
            opts["preconditions"] = {"uid": uid}
        return opts

    async def delete_pod(self, namespace: str, name: str, uid: str) -> None:
        await self.client.call("DELETE", _pod_path(namespace, name), body=self._delete_options(uid))

    def delete_pod_sync(self, namespace: str, name: str, uid: str) -> None:
        self.client.request("DELETE", _pod_path(namespace, name), body=self._delete_options(uid))

    async def create_event(self, namespace: str, body: Mapping[str, Any]) -> str:
        out = await self.client.call(
            "POST", f"/api/v1/namespaces/{namespace}/events", body=body, events=True
        )
        return str((out.get("metadata") or {}).get("name") or "")

    async def patch_event(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        await self.client.call(
            "PATCH",
            f"/api/v1/namespaces/{namespace}/events/{name}",
            body=patch,
            content_type=MERGE,
            events=True,
        )

    async def list_objects(self, kind: str) -> list[dict[str, Any]]:
        return await self.client.list_all(LIST_PATHS[kind])
