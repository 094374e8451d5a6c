"""Pods and nodes as the API serves them: a plugin's own tests need no py-scheduler test kit."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


def pod(
    name: str,
    *,
    cpu: str = "1",
    node: str = "",
    priority: int = 0,
    started: float = 0,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    stamp = datetime.fromtimestamp(started, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    spec: dict[str, Any] = {
        "schedulerName": "py-scheduler",
        "priority": priority,
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}],
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "creationTimestamp": stamp,
            "labels": labels or {},
        },
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending", "startTime": stamp},
    }


def node(name: str, *, cpu: str = "1", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
    }
