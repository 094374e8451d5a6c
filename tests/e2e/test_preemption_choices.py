"""Which node and which victims (e2e scenario 3), nomination races (7), the nominated node
not being guaranteed (8), and a restart in the middle of a preemption (9)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.e2e.conftest import wait_for
from tests.e2e.kit import Kit, settle
from tests.e2e.procs import SchedulerProcess


def _nominated(k: Kit, name: str) -> str:
    p = k.pod(name) or {}
    return str((p.get("status") or {}).get("nominatedNodeName") or "")


def _place(k: Kit, node: str, specs: list[tuple[str, str, str | None]]) -> None:
    """Bound pods (name, cpu, priority class) on a node, Running, created in order with
    distinct start times (kwok stamps startTime when it runs a pod)."""
    for name, cpu, pc in specs:
        k.create(
            name,
            cpu=cpu,
            node_name=node,
            priority_class=pc,
            grace=2,
            labels={"app": name.split("-")[0]},
        )
        k.wait_running(name)
        time.sleep(1.05)


def _preempted(k: Kit) -> set[str]:
    return {e["involvedObject"]["name"] for e in k.events(reason="Preempted")}


CRITERIA = ["pdb_violations", "highest_victim_priority", "sum_of_priorities", "start_time"]


@pytest.mark.parametrize("criterion", CRITERIA)
def test_pick_one_node_follows_upstream_criteria(
    kit: Kit,
    py_scheduler: SchedulerProcess,
    criterion: str,
) -> None:
    """Scenario 3: two candidate nodes that tie on every criterion before ``criterion``
    and differ on it; the preemptor must be nominated to the node upstream picks and only
    that node's minimal victims may go. (The 'fewest victims' criterion can never decide
    on a real cluster: the sum criterion shifts each victim by 2^31, so with user
    priorities (<= 10^9) more victims always means a larger sum; unit tests cover it.)"""
    a, b = kit.nodes(2, cpu="2")
    p1, p5, p4 = kit.priority_class(1), kit.priority_class(5), kit.priority_class(4)
    high = kit.priority_class(1000)
    need = "1"
    expected_node, expected_victims = b, set()
    if criterion == "pdb_violations":
        _place(kit, a, [("guarded-0", "1", p1), ("guarded-1", "1", p1)])
        _place(kit, b, [("free-0", "1", p1), ("free-1", "1", p1)])
        kit.pdb("guard", {"app": "guarded"}, min_available=2)
        kit.wait_pdb_allowed("guard", 0)
        expected_victims = {"free-1"}  # later start: reprieve keeps the older one
    elif criterion == "highest_victim_priority":
        _place(kit, a, [("a-0", "1", p5), ("a-1", "1", p5)])
        _place(kit, b, [("b-0", "1", p4), ("b-1", "1", p4)])
        expected_victims = {"b-1"}
    elif criterion == "sum_of_priorities":
        need = "2"  # both pods of a node must go; max priority 5 on both nodes
        _place(kit, a, [("a-0", "1", p5), ("a-1", "1", p4)])
        _place(kit, b, [("b-0", "1", p5), ("b-1", "1", p1)])
        expected_victims = {"b-0", "b-1"}
    else:  # start_time: same priorities; b's victim started later
        _place(kit, a, [("a-0", "1", p1), ("a-1", "1", p1)])
        _place(kit, b, [("b-0", "1", p1), ("b-1", "1", p1)])
        expected_victims = {"b-1"}
    kit.create("pre", cpu=need, priority_class=high)
    got = wait_for(lambda: _nominated(kit, "pre") or kit.node_of("pre"), 30, "nomination")
    assert got == expected_node, f"{criterion}: picked {got}, expected {expected_node}"
    wait_for(lambda: _preempted(kit) >= expected_victims, 30, "Preempted events")
    assert kit.wait_bound("pre", timeout=60) == expected_node
    assert _preempted(kit) == expected_victims
    assert kit.node_usage_ok([a, b])


def test_higher_priority_pod_takes_the_nominated_node_and_clears_lower_nomination(
    kit: Kit,
    py_scheduler: SchedulerProcess,
) -> None:
    """Scenario 7: a lower-priority preemptor is nominated to a node; a higher-priority
    pod that needs the same node arrives while the victims terminate."""
    (node,) = kit.nodes(1, cpu="2")
    p0, mid, top = kit.priority_class(1), kit.priority_class(100), kit.priority_class(1000)
    for i in range(2):
        kit.create(f"low-{i}", cpu="1", node_name=node, priority_class=p0, grace=8)
        kit.wait_running(f"low-{i}")
    kit.create("mid", cpu="2", priority_class=mid)
    wait_for(lambda: _nominated(kit, "mid") == node, 30, "mid nominated")
    wait_for(
        lambda: (
            (kit.pod("low-0") or {}).get("metadata", {}).get("deletionTimestamp")
            and (kit.pod("low-1") or {}).get("metadata", {}).get("deletionTimestamp")
        ),
        20,
        "victims terminating",
    )
    kit.create("top", cpu="2", priority_class=top)
    wait_for(
        lambda: _nominated(kit, "top") == node or kit.node_of("top") == node,
        30,
        "top nominated to the same node",
    )
    wait_for(lambda: _nominated(kit, "mid") != node, 30, "mid's nomination cleared")
    assert kit.wait_bound("top", timeout=60) == node
    settle(2)
    assert kit.node_of("mid") == "", "mid must not be bound to a node that cannot hold it"
    assert kit.node_usage_ok([node])
    # The lower preemptor later finds a place once there is one.
    (other,) = kit.nodes(1, cpu="2")
    assert kit.wait_bound("mid", timeout=60) == other


def test_nominated_node_is_not_guaranteed_preemptor_binds_elsewhere_when_free(
    kit: Kit,
    py_scheduler: SchedulerProcess,
) -> None:
    """Scenario 8: while victims terminate on the nominated node, another node frees up;
    the preemptor may bind there and its stale nomination is cleared."""
    a, b = kit.nodes(2, cpu="1")
    p0, blocker_pc, top = kit.priority_class(1), kit.priority_class(5000), kit.priority_class(1000)
    kit.create("victim", cpu="1", node_name=a, priority_class=p0, grace=10)
    kit.create("blocker", cpu="1", node_name=b, priority_class=blocker_pc, grace=0)
    kit.wait_running("victim")
    kit.wait_running("blocker")
    kit.create("pre", cpu="1", priority_class=top)
    wait_for(lambda: _nominated(kit, "pre") == a, 30, "pre nominated to a")
    kit.delete("blocker", grace=0)
    assert kit.wait_bound("pre", timeout=30) == b
    wait_for(lambda: _nominated(kit, "pre") == "", 15, "stale nomination cleared")
    assert kit.node_usage_ok([a, b])


def test_restart_in_the_middle_of_a_preemption_takes_no_extra_victims(
    kit: Kit,
    spawn_scheduler: Any,
) -> None:
    """Scenario 9: kill -9 after the victims are deleted, before the preemptor binds; after
    restart the preemptor binds and nobody else is preempted."""
    name = f"restart-{kit.ns}"
    (node,) = kit.nodes(1, cpu="3")
    p0, top = kit.priority_class(1), kit.priority_class(1000)
    for i in range(3):
        kit.create(f"low-{i}", cpu="1", node_name=node, priority_class=p0, grace=8, scheduler=name)
        kit.wait_running(f"low-{i}")
        time.sleep(1.05)
    sched = spawn_scheduler(name=name)
    kit.create("pre", cpu="2", priority_class=top, scheduler=name)
    wait_for(lambda: _preempted(kit) == {"low-1", "low-2"}, 30, "two victims preempted")
    wait_for(
        lambda: all(
            (kit.pod(v) or {"metadata": {"deletionTimestamp": "gone"}})["metadata"].get(
                "deletionTimestamp"
            )
            for v in ("low-1", "low-2")
        ),
        20,
        "victims deleted",
    )
    assert kit.node_of("pre") == ""
    sched.kill()
    assert _nominated(kit, "pre") == node
    restarted = spawn_scheduler(name=name)
    assert kit.wait_bound("pre", timeout=60) == node
    settle(2)
    assert _preempted(kit) == {"low-1", "low-2"}
    survivor = kit.pod("low-0")
    assert survivor is not None and not survivor["metadata"].get("deletionTimestamp")
    assert restarted.alive
