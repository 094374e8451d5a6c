"""A Reserve/Unreserve/PreBind/PostBind plugin for the e2e suite (tests/e2e/test_plugins.py):
Reserve rejects pods labelled ``ledger=deny``, PreBind those labelled ``ledger=unprepared``;
every call is appended to the file named by the
``journal`` argument as ``POINT NAMESPACE/NAME NODE`` (the scheduler runs as another
process: the file is how the test sees the calls)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from scheduler.plugins import SUCCESS, CycleState, PodInfo, Status


class Ledger:
    name = "Ledger"

    def __init__(self, args: Mapping[str, Any]) -> None:
        journal = args.get("journal")
        if not isinstance(journal, str) or not journal:
            raise ValueError(f"journal: expected a file path, got {journal!r}")
        self.journal = Path(journal)

    def _note(self, point: str, pod: PodInfo, node_name: str) -> None:
        with self.journal.open("a") as f:
            f.write(f"{point} {pod.key} {node_name}\n")

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        self._note("reserve", pod, node_name)
        if pod.labels.get("ledger") == "deny":
            return Status.unschedulable("the ledger denies this pod")
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        self._note("unreserve", pod, node_name)

    def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        self._note("pre_bind", pod, node_name)
        if pod.labels.get("ledger") == "unprepared":
            return Status.unschedulable("the ledger cannot prepare this pod")
        return SUCCESS

    def post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        self._note("post_bind", pod, node_name)
