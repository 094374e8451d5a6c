"""Approval: an example PreEnqueue plugin for py-scheduler.

Pods of the namespaces named in ``namespaces`` wait out of the scheduling queue (gated: no
Filter, no Score, no preemption, no FailedScheduling event) until they carry the label
``<label>=true``, e.g. set by a person or an admission workflow once a change is approved.
Adding the label is an update of the pod, which lets it in at once. Configuration::

    - name: Approval
      args: {namespaces: [prod], label: example.com/approved}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.plugins import SUCCESS, EventRegistration, PodInfo, Status


class Approval:
    name = "Approval"

    def __init__(self, args: Mapping[str, Any]) -> None:
        unknown = sorted(set(args) - {"namespaces", "label"})
        if unknown:
            raise ValueError(f"{unknown[0]}: unknown field (known: namespaces, label)")
        namespaces = args.get("namespaces")
        if (
            not isinstance(namespaces, list)
            or not namespaces
            or not all(isinstance(n, str) and n for n in namespaces)
        ):
            raise ValueError(f"namespaces: expected a non-empty list of names, got {namespaces!r}")
        label = args.get("label", "approved")
        if not isinstance(label, str) or not label:
            raise ValueError(f"label: expected a label key, got {label!r}")
        self.namespaces = frozenset(namespaces)
        self.label = label

    def pre_enqueue(self, pod: PodInfo) -> Status:
        """Let ``pod`` into the queue unless its namespace needs approval it lacks."""
        if pod.namespace not in self.namespaces or pod.labels.get(self.label) == "true":
            return SUCCESS
        return Status.unresolvable(f"waiting for approval: label {self.label}=true")

    def events_to_register(self) -> list[EventRegistration]:
        """None: only an update of the pod itself (its label) can approve it, and updates
        always run the checks again. Without this method the plugin would be told of every
        cluster event and re-check each waiting pod on each one."""
        return []
