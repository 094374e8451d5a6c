"""Preemption on a real API server (e2e scenarios 2-6): victims get DisruptionTarget, a
graceful DELETE and a Preempted event; the preemptor is nominated, then bound."""

from __future__ import annotations

import time

from tests.e2e.conftest import wait_for
from tests.e2e.kit import Kit, settle
from tests.e2e.procs import SchedulerProcess


def _fill(k: Kit, node: str, count: int, *, cpu: str, prefix: str = "low", **kw: object) -> None:
    """Bound pods started in order (1 s apart would be slow; kwok sets startTime)."""
    for i in range(count):
        k.create(f"{prefix}-{i}", cpu=cpu, node_name=node, **kw)  # type: ignore[arg-type]
    for i in range(count):
        k.wait_running(f"{prefix}-{i}")


def test_basic_preemption_takes_minimal_victims_then_binds_to_the_nominated_node(
    kit: Kit,
    py_scheduler: SchedulerProcess,
) -> None:
    """Scenario 2 (the seeds' nginx example): a node full of priority-0 pods; a pod of
    priority 1000000 arrives; exactly the minimal victims go."""
    (node,) = kit.nodes(1, cpu="2")
    for i in range(4):
        kit.create(f"low-{i}", cpu="500m", node_name=node, grace=3)
        kit.wait_running(f"low-{i}")
        time.sleep(1.05)  # distinct start times: the latest started is the cheapest victim
    high = kit.priority_class(1000000)
    pre = kit.create("high", cpu="1", priority_class=high)
    uid = pre["metadata"]["uid"]

    nominated = wait_for(
        lambda: (
            ((kit.pod("high") or {}).get("status") or {}).get("nominatedNodeName")
            or kit.node_of("high")
        ),
        30,
        "preemptor nominated (or bound)",
    )
    assert nominated == node
    # Exactly two 500m victims, the two started last; DisruptionTarget then deletion.
    victims = ["low-2", "low-3"]
    for v in victims:
        ev = kit.wait_event(v, "Preempted")
        assert ev["message"] == f"Preempted by pod {uid} on node {node}"
        # The preemptor is the event's related object (upstream's Eventf(victim, preemptor)).
        related = ev.get("related") or {}
        assert (related.get("name"), related.get("uid"), ev.get("action")) == (
            "high",
            uid,
            "Preempting",
        ), ev
    for v in victims:
        pod = kit.pod(v)
        if pod is not None:  # still terminating: both marks must be there
            cond = kit.condition(v, "DisruptionTarget")
            assert cond and cond["status"] == "True" and cond["reason"] == "PreemptionByScheduler"
            assert pod["metadata"].get("deletionTimestamp")
            # The generation the scheduler saw: the graceful DELETE that followed the
            # condition bumped metadata.generation by one (the API server's BeforeDelete).
            assert cond.get("observedGeneration") == pod["metadata"]["generation"] - 1, cond
    assert kit.wait_bound("high", timeout=60) == node
    for v in victims:
        kit.wait_gone(v)
    for survivor in ("low-0", "low-1"):
        p = kit.pod(survivor)
        assert p is not None and not p["metadata"].get("deletionTimestamp"), survivor
        assert kit.events(survivor, "Preempted") == []
    assert kit.node_usage_ok([node])


def test_preemption_policy_never_leaves_pod_pending_and_victims_untouched(
    kit: Kit,
    py_scheduler: SchedulerProcess,
) -> None:
    """Scenario 4."""
    (node,) = kit.nodes(1, cpu="1")
    _fill(kit, node, 2, cpu="500m")
    never = kit.priority_class(1000000, policy="Never")
    kit.create("polite", cpu="500m", priority_class=never)
    cond = kit.wait_condition("polite", "PodScheduled", lambda c: c.get("status") == "False")
    assert cond["message"].endswith("preemption: not eligible due to preemptionPolicy=Never."), (
        cond["message"]
    )
    settle(3)
    assert not kit.node_of("polite")
    for i in range(2):
        p = kit.pod(f"low-{i}")
        assert p is not None and not p["metadata"].get("deletionTimestamp")
        assert kit.condition(f"low-{i}", "DisruptionTarget") is None


def test_preemption_disabled_by_config_preempts_nothing(
    kit: Kit,
    spawn_scheduler,
) -> None:
    """Scenario 5: ``disablePreemption: true`` (and the standard plugin disable)."""
    name = f"nopreempt-{kit.ns}"
    spawn_scheduler(name=name, config={"disablePreemption": True})
    (node,) = kit.nodes(1, cpu="1")
    _fill(kit, node, 2, cpu="500m")
    high = kit.priority_class(1000000)
    kit.create("high", cpu="500m", priority_class=high, scheduler=name)
    cond = kit.wait_condition(
        "high",
        "PodScheduled",
        lambda c: c.get("status") == "False" and "Insufficient cpu" in c.get("message", ""),
    )
    assert "preemption" not in cond["message"], cond["message"]
    assert "Insufficient cpu" in cond["message"]
    settle(3)
    assert not kit.node_of("high")
    assert not ((kit.pod("high") or {}).get("status") or {}).get("nominatedNodeName")
    for i in range(2):
        p = kit.pod(f"low-{i}")
        assert p is not None and not p["metadata"].get("deletionTimestamp")


def test_equal_and_higher_priority_pods_are_never_victims(
    kit: Kit,
    py_scheduler: SchedulerProcess,
) -> None:
    """Scenario 6a: the node is full of pods of equal and higher priority."""
    (node,) = kit.nodes(1, cpu="1")
    same = kit.priority_class(500)
    higher = kit.priority_class(900)
    kit.create("eq", cpu="500m", node_name=node, priority_class=same)
    kit.create("hi", cpu="500m", node_name=node, priority_class=higher)
    kit.wait_running("eq")
    kit.wait_running("hi")
    kit.create("pre", cpu="500m", priority_class=same)
    cond = kit.wait_condition("pre", "PodScheduled", lambda c: c.get("status") == "False")
    assert "No preemption victims found for incoming pod" in cond["message"], cond["message"]
    settle(2)
    for n in ("eq", "hi"):
        p = kit.pod(n)
        assert p is not None and not p["metadata"].get("deletionTimestamp"), n


def test_system_node_critical_pods_are_never_preempted_by_ordinary_pods(
    kit: Kit,
    py_scheduler: SchedulerProcess,
) -> None:
    """Scenario 6b: a system-node-critical pod (2000001000) outranks any user class
    (user classes are capped at 1000000000 by the API)."""
    (node,) = kit.nodes(1, cpu="1")
    kit.create("critical", cpu="1", node_name=node, priority_class="system-node-critical")
    kit.wait_running("critical")
    top = kit.priority_class(1000000000)
    kit.create("vip", cpu="1", priority_class=top)
    cond = kit.wait_condition("vip", "PodScheduled", lambda c: c.get("status") == "False")
    assert "No preemption victims found for incoming pod" in cond["message"], cond["message"]
    settle(2)
    p = kit.pod("critical")
    assert p is not None and not p["metadata"].get("deletionTimestamp")
    assert kit.condition("critical", "DisruptionTarget") is None


def test_strict_pdb_policy_leaves_a_protected_pod_alone_and_says_why(
    kit: Kit,
    spawn_scheduler,
) -> None:
    """DefaultPreemption ``pdbPolicy: Strict``: the only victim would violate its PDB, so
    nothing is preempted and the FailedScheduling message says PDBs blocked it."""
    name = f"strictpdb-{kit.ns}"
    args = {"pdbPolicy": "Strict"}
    spawn_scheduler(
        name=name,
        config={"profiles": [{"pluginConfig": [{"name": "DefaultPreemption", "args": args}]}]},
    )
    kit.nodes(1, cpu="1")
    low = kit.priority_class(10)
    kit.create("guarded", cpu="1", priority_class=low, scheduler=name, labels={"app": "guarded"})
    kit.wait_bound("guarded")
    kit.pdb("guard", {"app": "guarded"}, min_available=1)
    kit.wait_pdb_allowed("guard", 0)
    high = kit.priority_class(1000000)
    kit.create("high", cpu="1", priority_class=high, scheduler=name)
    cond = kit.wait_condition(
        "high",
        "PodScheduled",
        lambda c: c.get("status") == "False" and "pdbPolicy: Strict" in c.get("message", ""),
    )
    assert "preemption would violate a PodDisruptionBudget" in cond["message"], cond["message"]
    settle(3)
    guarded = kit.pod("guarded")
    assert guarded is not None and not guarded["metadata"].get("deletionTimestamp")
    assert not kit.node_of("high")
