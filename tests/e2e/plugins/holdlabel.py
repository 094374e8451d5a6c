"""A PreEnqueue plugin for the e2e suite: pods labelled ``hold=true`` wait out of the queue
(gated) until the label is gone, as a quota or approval plugin would hold them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.plugins import SUCCESS, PodInfo, Status


class HoldLabel:
    name = "HoldLabel"

    def __init__(self, args: Mapping[str, Any]) -> None:
        self.key = str(args.get("label", "hold"))

    def pre_enqueue(self, pod: PodInfo) -> Status:
        if pod.labels.get(self.key) == "true":
            return Status.unresolvable(f"held by label {self.key}=true")
        return SUCCESS
