"""Raw API objects -> typed records: the one decoder shared by run, simulate and explain.

(Placeholder of the live-layer branch; the simulate work replaces it with the full module.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.types import (
    NodeRecord,
    PDBInfo,
    PodInfo,
    PriorityClassInfo,
    global_default_class,
    node_from_dict,
    pdb_from_dict,
    pod_from_dict,
    priority_class_from_dict,
)

__all__ = ["ObjectDecoder"]


class ObjectDecoder:
    def __init__(self) -> None:
        self.classes: dict[str, PriorityClassInfo] = {}

    def priority_class(self, raw: Mapping[str, Any]) -> PriorityClassInfo:
        pc = priority_class_from_dict(raw)
        self.classes[pc.name] = pc
        return pc

    def forget_priority_class(self, name: str) -> None:
        self.classes.pop(name, None)

    def pod(self, raw: Mapping[str, Any]) -> PodInfo:
        return pod_from_dict(
            raw, classes=self.classes, global_default=global_default_class(self.classes.values())
        )

    def node(self, raw: Mapping[str, Any]) -> NodeRecord:
        return node_from_dict(raw)

    def pdb(self, raw: Mapping[str, Any]) -> PDBInfo:
        return pdb_from_dict(raw)

    def namespace(self, raw: Mapping[str, Any]) -> tuple[str, dict[str, str]]:
        meta = raw.get("metadata") or {}
        labels = meta.get("labels") or {}
        out = {str(k): str(v) for k, v in labels.items()} if isinstance(labels, Mapping) else {}
        return str(meta.get("name") or ""), out
