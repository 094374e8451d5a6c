"""Several profiles in one live scheduler, against the real API server: each pod is
scheduled by the profile its ``spec.schedulerName`` names (here one packs nodes, the other
spreads over them), its Events name that profile as their reporting controller, its
attempts are counted under it, and a pod of one profile preempts a pod of the other."""

from __future__ import annotations

from typing import Any

from tests.e2e.conftest import wait_for
from tests.e2e.kit import Kit, settle


def test_each_profile_schedules_its_own_pods_with_its_own_plugins(
    kit: Kit, spawn_scheduler: Any
) -> None:
    spread = f"spread-{kit.ns}"[:60]
    packed = f"packed-{kit.ns}"[:60]
    sched = spawn_scheduler(
        name=spread,
        config={
            "profiles": [
                {},
                {
                    "schedulerName": packed,
                    "pluginConfig": [
                        {
                            "name": "NodeResourcesFit",
                            "args": {"scoringStrategy": {"type": "MostAllocated"}},
                        }
                    ],
                },
            ]
        },
    )
    nodes = kit.nodes(2, cpu="4", memory="8Gi")
    # One pod at a time, each bound before the next: the packed profile's pods share a
    # node, the spread profile's take the emptier one.
    order = [("p0", packed), ("p1", packed), ("s0", spread), ("p2", packed), ("s1", spread)]
    for name, scheduler in order:
        kit.create(name, cpu="1", memory="2Gi", scheduler=scheduler)
        kit.wait_bound(name)
    where = {name: kit.node_of(name) for name, _ in order}
    assert where["p0"] == where["p1"] == where["p2"], where
    assert where["s0"] == where["s1"] != where["p0"], where
    assert set(where.values()) == set(nodes)
    # A pod of neither profile is not ours.
    kit.create("theirs", cpu="1", memory="2Gi", scheduler=f"nobody-{kit.ns}")

    def told(name: str, reason: str) -> str:
        ev = kit.wait_event(name, reason)
        return str(ev.get("reportingComponent") or ev.get("reportingController") or "")

    assert {name: told(name, "Scheduled") for name, _ in order} == {
        name: scheduler for name, scheduler in order
    }
    for profile, count in ((packed, 3), (spread, 2)):
        labels = {"result": "scheduled", "profile": profile}
        assert sched.metric("scheduler_schedule_attempts_total", labels) == count

    # The spread node is full (2 of 4 CPUs taken by s0, s1; the packed one by p0-p2): a
    # high-priority pod of the packed profile preempts a pod of the spread profile.
    high = kit.priority_class(1000)
    kit.create("big", cpu="3", memory="2Gi", scheduler=packed, priority_class=high)
    wait_for(
        lambda: kit.events(reason="Preempted"),
        30,
        "a Preempted event",
    )
    (victim_event,) = kit.events(reason="Preempted")
    victim = victim_event["involvedObject"]["name"]
    assert victim_event.get("reportingComponent") == packed
    assert kit.wait_bound("big", timeout=60) == where[victim]
    settle(1.0)
    assert kit.node_of("theirs") == ""
    assert not kit.events("theirs")
    assert kit.overcommitted(nodes) == {}
