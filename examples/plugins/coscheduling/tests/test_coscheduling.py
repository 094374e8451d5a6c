"""Coscheduling through the configuration, in the scheduler core (the binder's side of the
wait played by hand) and in simulate."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]

from scheduler.clock import FakeClock  # noqa: E402
from scheduler.config import ConfigError, parse_config  # noqa: E402
from scheduler.schedule_one import BindingCycle, BindOutcome, SchedulerCore  # noqa: E402
from scheduler.types import node_from_dict, pod_from_dict  # noqa: E402

CONFIG = {
    "pluginModules": {"Coscheduling": "coscheduling:Coscheduling"},
    "profiles": [
        {
            "plugins": {
                "multiPoint": {
                    "enabled": [{"name": "Coscheduling"}],
                    "disabled": [{"name": "PrioritySort"}],  # Coscheduling sorts the queue
                }
            },
            "pluginConfig": [{"name": "Coscheduling", "args": {"timeoutSeconds": 30}}],
        }
    ],
}
GROUP = "pod-group.example.com/name"
MIN = "pod-group.example.com/min-member"


def api_pod(
    name: str, group: str = "", size: int = 0, cpu: str = "1", created: str = ""
) -> dict[str, Any]:
    labels = {GROUP: group, MIN: str(size)} if group else {}
    container = {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": name, "labels": labels}
    if created:
        meta["creationTimestamp"] = created
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"schedulerName": "py-scheduler", "containers": [container]},
    }


def api_node(name: str, cpu: str = "4") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
    }


class Ports:
    """Binder (keeps each pod's BindingCycle), Recorder (keeps failures) and the plugins'
    event recorder (keeps their events)."""

    def __init__(self) -> None:
        self.cycles: dict[str, BindingCycle | None] = {}
        self.failures: list[tuple[str, str]] = []
        self.events: list[tuple[str, str, str, str]] = []

    def eventf(
        self, regarding: Any, related: Any, event_type: str, reason: str, action: str, note: str
    ) -> None:
        self.events.append((regarding.name, event_type, reason, note))

    def bind(self, pod: Any, node_name: str, cycle: BindingCycle | None = None) -> None:
        self.cycles[pod.key] = cycle

    def scheduled(self, pod: Any, node_name: str) -> None: ...

    def failed(self, pod: Any, **kw: Any) -> None:
        self.failures.append((pod.key, kw["message"]))


def _core() -> tuple[SchedulerCore, Ports, FakeClock]:
    cfg = parse_config(CONFIG, "sched.yaml")
    assert cfg.permit == ("Coscheduling",)
    assert cfg.reserve == ("VolumeBinding", "DynamicResources", "Coscheduling")
    assert cfg.queue_sort == "Coscheduling"
    ports, clock = Ports(), FakeClock()
    core = SchedulerCore(cfg, clock, ports, ports, rng=random.Random(0), event_recorder=ports)
    core.on_node_add(node_from_dict(api_node("n1")))
    return core, ports, clock


def _finish(core: SchedulerCore, ports: Ports, key: str) -> str:
    """The binder's side for one pod whose wait has ended: report the outcome."""
    cycle = ports.cycles.pop(key)
    assert cycle is not None and cycle.waiting is not None and cycle.waiting.outcome is not None
    failed = cycle.permitted(cycle.waiting.outcome)
    if failed is None:
        core.on_bind_result(key, BindOutcome.OK)
        return "bound"
    core.on_bind_result(key, BindOutcome.PERMIT, failed.message(), failed.plugin)
    return failed.message()


def test_a_group_binds_once_its_last_member_reaches_permit() -> None:
    core, ports, _ = _core()
    for name in ("a", "b", "c"):
        core.on_pod_add(pod_from_dict(api_pod(name, "g", 3)))
    core.on_pod_add(pod_from_dict(api_pod("loner")))
    results = [core.schedule_one() for _ in range(4)]
    assert [r.outcome for r in results if r] == ["assumed"] * 4
    waiting = {k: c.waiting for k, c in ports.cycles.items() if c is not None}
    # "loner" has no group: no wait, no cycle; "c" completed the group and allowed a, b.
    assert ports.cycles["default/loner"] is None and ports.cycles["default/c"] is None
    for key in ("default/a", "default/b"):
        wp = waiting[key]
        assert wp is not None and wp.outcome is not None and wp.outcome.is_success()
        assert _finish(core, ports, key) == "bound"
    assert len(core.framework.waiting_pods) == 0
    assert ports.failures == []
    # Each member that waited said so in an event (through FrameworkHandle.event_recorder).
    assert ports.events == [
        ("a", "Normal", "WaitingForPodGroup", "waiting for 2 more member(s) of pod group g"),
        ("b", "Normal", "WaitingForPodGroup", "waiting for 1 more member(s) of pod group g"),
    ]


def test_an_incomplete_group_times_out_together_and_retries_with_a_new_member() -> None:
    core, ports, clock = _core()
    for name in ("a", "b"):
        core.on_pod_add(pod_from_dict(api_pod(name, "g", 3)))
    for _ in range(2):
        result = core.schedule_one()
        assert result is not None and result.outcome == "assumed"
        clock.step(5)
    assert core.cache.get_pod("default/a") is not None  # waiting pods keep their room
    wp = core.framework.waiting_pods.get("a")
    assert wp is not None and wp.get_pending_plugins() == ["Coscheduling"]
    clock.step(20)
    core.flush()  # "a" (first to wait) times out; its Unreserve lets "b" go too
    assert _finish(core, ports, "default/a") == (
        "rejected due to timeout after waiting 30s at plugin Coscheduling"
    )
    assert _finish(core, ports, "default/b") == "pod group g: member a gave up"
    assert core.cache.get_pod("default/a") is None and core.cache.get_pod("default/b") is None
    assert [m for _, m in ports.failures] == [
        "0/1 nodes are available: 1 rejected due to timeout after waiting 30s at plugin "
        "Coscheduling.",
        "0/1 nodes are available: 1 pod group g: member a gave up.",
    ]
    assert sorted(p.name for p in core.queue.pending_pods()["unschedulable"]) == ["a", "b"]
    # A third member arrives: its wait sends a and b back to the active queue with it.
    core.on_pod_add(pod_from_dict(api_pod("c", "g", 3)))
    third = core.schedule_one()
    assert third is not None and third.pod.name == "c" and third.outcome == "assumed"
    assert sorted(p.name for p in core.queue.pending_pods()["active"]) == ["a", "b"]
    for _ in range(2):
        result = core.schedule_one()
        assert result is not None and result.outcome == "assumed"
    for key in ("default/c", "default/a"):
        assert _finish(core, ports, key) == "bound"
    assert ports.cycles["default/b"] is None  # b completed the group: no wait


def test_the_members_of_a_group_leave_the_queue_together() -> None:
    """QueueSort: a group's members go one after the other (at the time of the first
    member met), not interleaved with the pods created between them; priority first."""
    core, _, _ = _core()
    for name, group, minute in (
        ("g-1", "g", 10),
        ("loner-1", "", 20),
        ("g-2", "g", 30),
        ("loner-2", "", 40),
        ("h-1", "h", 5),
    ):
        created = f"2026-01-01T00:{minute:02d}:00Z"
        core.on_pod_add(pod_from_dict(api_pod(name, group, 9, cpu="100m", created=created)))
    urgent = api_pod("urgent", cpu="100m", created="2026-01-01T00:50:00Z")
    urgent["spec"]["priority"] = 100
    core.on_pod_add(pod_from_dict(urgent))
    order = [p.name for p in core.queue.pending_pods()["active"]]
    assert order == ["urgent", "h-1", "g-1", "g-2", "loner-1", "loner-2"]


def test_it_needs_prioritysort_disabled_as_upstream() -> None:
    both = yaml.safe_load(yaml.safe_dump(CONFIG))
    del both["profiles"][0]["plugins"]["multiPoint"]["disabled"]
    with pytest.raises(ConfigError, match=r"got 2 \(PrioritySort, Coscheduling\)"):
        parse_config(both, "sched.yaml")


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ({"timeoutSeconds": 0}, "timeoutSeconds: expected seconds in (0, 900]"),
        ({"timeoutSeconds": 901}, "timeoutSeconds: expected seconds in (0, 900]"),
        ({"labelPrefix": ""}, "labelPrefix: expected a label prefix"),
        ({"minMember": 3}, "minMember: unknown field"),
    ],
)
def test_bad_args_name_the_file_and_field(args: dict[str, Any], problem: str) -> None:
    bad = yaml.safe_load(yaml.safe_dump(CONFIG))
    bad["profiles"][0]["pluginConfig"][0]["args"] = args
    with pytest.raises(ConfigError) as e:
        parse_config(bad, "sched.yaml")
    assert "sched.yaml" in str(e.value) and "pluginConfig[0].args" in str(e.value)
    assert problem in str(e.value)


def test_a_bad_min_member_label_is_a_rejection_naming_the_label() -> None:
    core, ports, _ = _core()
    pod = api_pod("odd", "g", 1)
    pod["metadata"]["labels"][MIN] = "three"
    core.on_pod_add(pod_from_dict(pod))
    result = core.schedule_one()
    assert result is not None and result.outcome == "unschedulable"
    assert result.message == (
        "0/1 nodes are available: 1 label pod-group.example.com/min-member: expected a "
        "positive integer, got 'three'."
    )
    assert core.cache.get_pod("default/odd") is None
    assert ports.failures == [("default/odd", result.message)]


def test_simulate_places_a_complete_group_and_reports_an_incomplete_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from scheduler.cli import main

    (tmp_path / "sched.yaml").write_text(yaml.safe_dump(CONFIG))
    objs = [
        api_node("n1", cpu="3"),
        api_pod("x-0", "x", 2),
        api_pod("y-0", "y", 3),
        api_pod("x-1", "x", 2),
        api_pod("y-1", "y", 3),
        api_pod("y-2", "y", 3),  # no room left for it: group y never completes
    ]
    (tmp_path / "dump.yaml").write_text(yaml.safe_dump_all(objs))
    argv = ["simulate", "-f", str(tmp_path / "dump.yaml"), "--config", str(tmp_path / "sched.yaml")]
    code = main([*argv, "-o", "json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    result = json.loads(out.out)
    assert result["placements"] == {
        "default/x-0": "n1",
        "default/y-0": None,
        "default/x-1": "n1",
        "default/y-1": None,
        "default/y-2": None,
    }
    timeout = "rejected due to timeout after waiting 30s at plugin Coscheduling"
    no_room = (
        "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: "
        "1 No preemption victims found for incoming pod."
    )
    # The queue keeps each group together (Coscheduling's less): x completes first; y-0
    # waits on the last cpu until it times out, which lets y-1 take the room and wait in
    # turn (y-0 is sent back with it, finds no room) until it times out: no pod bound in
    # between, so the run stops there and says so.
    assert [(d["pod"], d["outcome"], d.get("message", "")) for d in result["decisions"]] == [
        ("default/x-0", "scheduled", ""),
        ("default/x-1", "scheduled", ""),
        ("default/y-0", "unschedulable", timeout),
        ("default/y-1", "unschedulable", no_room),
        ("default/y-2", "unschedulable", no_room),
        ("default/y-1", "unschedulable", timeout),
        ("default/y-0", "unschedulable", no_room),
        ("default/y-2", "unschedulable", no_room),
    ]
    assert "pods kept timing out at Permit with no pod bound in between" in out.err
