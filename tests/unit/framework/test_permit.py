"""Permit: the waiting-pods map, the framework's run_permit, and the core's handling of a
pod held at Permit (upstream's prepareForBindingCycle, WaitOnPermit and the binding
cycle's error path)."""

from __future__ import annotations

import asyncio
import random
import sys
import types
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from scheduler.clock import FakeClock
from scheduler.config import ConfigError, parse_config
from scheduler.framework.waiting_pods import MAX_PERMIT_TIMEOUT_SECONDS, WaitingPods
from scheduler.plugins import (
    SUCCESS,
    ClusterEvent,
    Code,
    CycleState,
    EventRegistration,
    FrameworkHandle,
    PodInfo,
    Status,
)
from scheduler.schedule_one import BindOutcome, SchedulerCore
from tests.builders import make_node, make_pod
from tests.unit.fakes import RecordingBinder, RecordingRecorder

# ------------------------------------------------------------------ the waiting pods


def _pod(name: str) -> PodInfo:
    return make_pod(name).info()


def test_a_pod_binds_once_every_waiting_plugin_allows_it() -> None:
    waiting = WaitingPods()
    wp = waiting.add(_pod("a"), {"A": 10, "B": 20}, now=100.0)
    seen: list[Status] = []
    wp.on_done(seen.append)
    assert waiting.get(wp.pod.uid) is wp and sorted(wp.get_pending_plugins()) == ["A", "B"]
    wp.allow("A")
    assert seen == [] and wp.get_pending_plugins() == ["B"]
    wp.allow("B")
    assert seen == [SUCCESS] and wp.outcome == SUCCESS
    assert waiting.get(wp.pod.uid) is None and len(waiting) == 0  # gone once decided
    assert not wp.reject("A", "too late")  # a decided pod stays decided
    late: list[Status] = []
    wp.on_done(late.append)  # told at once
    assert late == [SUCCESS]


@pytest.mark.parametrize(
    ("timeouts", "now", "plugin", "message"),
    [
        pytest.param({"A": 10, "B": 5}, 105.0, "B", "5s", id="the earliest plugin"),
        pytest.param({"A": 1.5}, 101.5, "A", "1.5s", id="fractional"),
        pytest.param({"A": 3600}, 100.0 + 900, "A", "15m0s", id="cut to 15 minutes"),
        pytest.param({"A": 90}, 190.0, "A", "1m30s", id="minutes"),
    ],
)
def test_a_timeout_rejects_the_pod_for_the_plugin_whose_time_ran_out(
    timeouts: dict[str, float], now: float, plugin: str, message: str
) -> None:
    waiting = WaitingPods()
    wp = waiting.add(_pod("a"), timeouts, now=100.0)
    assert waiting.expire(now - 0.001) == 0 and wp.outcome is None
    assert waiting.next_deadline() == now
    assert waiting.expire(now) == 1
    assert wp.outcome == Status(
        Code.UNSCHEDULABLE,
        (f"rejected due to timeout after waiting {message} at plugin {plugin}",),
        plugin,
    )
    assert MAX_PERMIT_TIMEOUT_SECONDS == 900


def test_reject_preempt_and_the_handle() -> None:
    waiting = WaitingPods()
    a = waiting.add(_pod("a"), {"A": 10}, now=0.0)
    b = waiting.add(_pod("b"), {"A": 10}, now=0.0)
    c = waiting.add(_pod("c"), {"A": 10}, now=0.0)
    handle = FrameworkHandle(waiting, lambda: [])
    assert [wp.pod.name for wp in handle.iterate_over_waiting_pods()] == ["a", "b", "c"]
    assert handle.get_waiting_pod(b.pod.uid) is b and handle.node_infos() == []
    assert handle.reject_waiting_pod(a.pod.uid)
    assert a.outcome == Status(Code.UNSCHEDULABLE, ("removed",), "")
    assert not handle.reject_waiting_pod(a.pod.uid)  # no longer waiting
    assert b.preempt("DefaultPreemption", "preempted")
    assert b.outcome == Status(Code.ERROR, ("preempted",), "DefaultPreemption")
    assert c.reject("A", "no")
    assert len(waiting) == 0 and waiting.next_deadline() is None


# ------------------------------------------------------------------ the framework and core


class Gate:
    """Permit by the pod's label ``gate``: wait (10 s), deny, boom (raises), badwait (a
    timeout that is no number); anything else passes. Reserve/Unreserve are logged."""

    name = "Gate"
    calls: ClassVar[list[tuple[str, str]]] = []

    def __init__(self, args: dict[str, Any], handle: FrameworkHandle) -> None:
        self.handle = handle

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        Gate.calls.append(("reserve", pod.name))
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        Gate.calls.append(("unreserve", pod.name))

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, Any]:
        how = pod.labels.get("gate", "")
        Gate.calls.append(("permit", pod.name))
        if how == "wait":
            return Status(Code.WAIT, ("hold on",)), 10
        if how == "deny":
            return Status.unschedulable("not today"), 0
        if how == "boom":
            raise RuntimeError("gatekeeper unreachable")
        if how == "badwait":
            return Status(Code.WAIT), "soon"
        return SUCCESS, 0

    def events_to_register(self) -> list[EventRegistration]:
        return [EventRegistration(ClusterEvent("Node", "Add"))]


@pytest.fixture
def gate() -> Iterator[tuple[SchedulerCore, RecordingBinder, RecordingRecorder, FakeClock]]:
    mod = types.ModuleType("gate_plugin")
    mod.Gate = Gate  # type: ignore[attr-defined]
    sys.modules["gate_plugin"] = mod
    Gate.calls = []
    cfg = parse_config(
        {
            "pluginModules": {"Gate": "gate_plugin:Gate"},
            "profiles": [{"plugins": {"multiPoint": {"enabled": [{"name": "Gate"}]}}}],
        },
        "sched.yaml",
    )
    assert cfg.permit == ("Gate",)
    binder, recorder, clock = RecordingBinder(), RecordingRecorder(), FakeClock()
    core = SchedulerCore(cfg, clock, binder, recorder, rng=random.Random(0))
    core.on_node_add(make_node("n1").record())
    yield core, binder, recorder, clock
    del sys.modules["gate_plugin"]


def _one(core: SchedulerCore, name: str, how: str = "", priority: int = 0) -> Any:
    pod = make_pod(name).req(cpu="1").priority(priority)
    core.on_pod_add((pod.label("gate", how) if how else pod).info())
    result = core.schedule_one()
    assert result is not None and result.pod.name == name
    return result


@pytest.mark.parametrize(
    ("how", "outcome", "message", "where"),
    [
        pytest.param(
            "deny", "unschedulable", "0/1 nodes are available: 1 not today.", "unschedulable"
        ),
        pytest.param(
            "boom",
            "error",
            "running Permit plugin Gate: Permit plugin Gate raised RuntimeError: "
            "gatekeeper unreachable",
            "backoff",
        ),
        pytest.param(
            "badwait",
            "error",
            "Permit plugin Gate asked to wait 'soon': expected seconds",
            "backoff",
        ),
    ],
)
def test_a_permit_rejection_or_error_unreserves_and_fails_the_attempt(
    gate: Any, how: str, outcome: str, message: str, where: str
) -> None:
    core, binder, recorder, _ = gate
    result = _one(core, "p", how)
    assert (result.outcome, result.message) == (outcome, message)
    assert Gate.calls == [("reserve", "p"), ("permit", "p"), ("unreserve", "p")]
    assert binder.calls == [] and core.cache.get_pod("default/p") is None
    assert recorder.failed_calls[0].nominated_node == ""
    assert [p.name for p in core.queue.pending_pods()[where]] == ["p"]


def test_a_waiting_pod_keeps_its_room_and_binds_once_allowed(gate: Any) -> None:
    core, binder, recorder, clock = gate
    result = _one(core, "p", "wait")
    assert result.outcome == "assumed"
    cycle = binder.cycles["default/p"]
    wp = cycle.waiting
    assert wp is not None and core.framework.waiting_pods.get(wp.pod.uid) is wp
    assert core.cache.get_pod("default/p") is not None
    assert core.queue.counts()["in_flight"] == 1  # still in flight while it waits
    # The binder's view: pre-flight (no PreBind plugin: SKIP), but the wait still gets the
    # nomination written first (upstream's WillWaitOnPermit).
    assert cycle.begin() == (None, True)
    clock.step(3)
    assert cycle.permit_timeout() == 7.0
    wp.allow("Gate")
    assert cycle.permitted(wp.outcome) is None and asyncio.run(cycle.finish_async()) is None
    assert core.queue.counts()["in_flight"] == 0  # Done once allowed, as upstream
    core.on_bind_result("default/p", BindOutcome.OK)
    assert [k for k, _ in recorder.scheduled_calls] == ["default/p"]
    assert recorder.failed_calls == []


@pytest.mark.parametrize("event_while_waiting", [False, True])
def test_a_rejected_waiting_pod_is_unschedulable_for_the_plugin_unless_an_event_helped(
    gate: Any, event_while_waiting: bool
) -> None:
    core, binder, recorder, clock = gate
    _one(core, "p", "wait")
    cycle = binder.cycles["default/p"]
    if event_while_waiting:  # Gate's hint: a new node may help
        core.on_node_add(make_node("n2").record())
    clock.step(10)
    assert core.expire_waiting() == 1
    failed = cycle.permitted(cycle.waiting.outcome)
    assert failed is not None and failed.plugin == "Gate"
    core.on_bind_result("default/p", BindOutcome.PERMIT, failed.message(), failed.plugin)
    assert Gate.calls[-1] == ("unreserve", "p")
    assert core.cache.get_pod("default/p") is None
    (f,) = recorder.failed_calls
    assert (f.reason, f.message) == (
        "Unschedulable",
        "0/1 nodes are available: 1 rejected due to timeout after waiting 10s at plugin Gate.",
    )
    where = "backoff" if event_while_waiting else "unschedulable"
    assert [p.name for p in core.queue.pending_pods()[where]] == ["p"]
    assert core.queue.unschedulable_by_plugin() == ({} if event_while_waiting else {"Gate": 1})


def test_a_pod_deleted_while_waiting_is_let_go_and_unreserved(gate: Any) -> None:
    core, binder, recorder, _ = gate
    result = _one(core, "p", "wait")
    wp = binder.cycles["default/p"].waiting
    core.on_pod_delete(result.pod)
    assert wp.outcome == Status(Code.UNSCHEDULABLE, ("removed",), "")
    assert Gate.calls[-1] == ("unreserve", "p")
    assert core.cache.get_pod("default/p") is None
    core.on_bind_result("default/p", BindOutcome.PERMIT, "removed")  # the binder's late word
    assert recorder.failed_calls == []
    assert not any(core.queue.pending_pods().values())


def test_a_waiting_victim_is_preempted_in_memory_and_retried_after_backoff(gate: Any) -> None:
    from scheduler.framework.preemption import Candidate

    core, binder, _, _ = gate
    taken: list[Candidate] = []

    class Actions:
        def prepare_candidate(self, preemptor: Any, candidate: Candidate, lower: Any) -> Status:
            taken.append(candidate)
            return SUCCESS

    core.evaluator.actions = Actions()
    for i in range(4):  # n1 has 4 cpu; low-0, the least important, waits at Permit
        _one(core, f"low-{i}", "wait" if i == 0 else "", priority=1 if i else 0)
    for i in range(1, 4):
        core.on_bind_result(f"default/low-{i}", BindOutcome.OK)
    wp = binder.cycles["default/low-0"].waiting
    result = _one(core, "high", priority=100)
    assert result.outcome == "preempting" and [v.name for v in result.victims] == ["low-0"]
    # No API call for the waiting victim: its wait ends with an error instead.
    assert [list(c.victims) for c in taken] == [[]]
    assert wp.outcome == Status(Code.ERROR, ("preempted",), "DefaultPreemption")
    failed = binder.cycles["default/low-0"].permitted(wp.outcome)
    assert failed is not None and failed.code is Code.ERROR
    assert failed.message() == "waiting on permit for pod: preempted"
    core.on_bind_result("default/low-0", BindOutcome.PRE_BIND, failed.message())
    assert core.cache.get_pod("default/low-0") is None
    # low-0 backs off (an error, not unschedulable); the room it freed sends the
    # preemptor, waiting for it, to try again.
    assert sorted(p.name for p in core.queue.pending_pods()["backoff"]) == ["high", "low-0"]


def test_permit_is_configured_for_out_of_tree_plugins_only(gate: Any) -> None:
    with pytest.raises(ConfigError, match=r"permit.*'NodeAffinity'"):
        parse_config(
            {"profiles": [{"plugins": {"permit": {"enabled": [{"name": "NodeAffinity"}]}}}]},
            "sched.yaml",
        )
    cfg = parse_config(
        {
            "pluginModules": {"Gate": "gate_plugin:Gate"},
            "profiles": [
                {
                    "plugins": {
                        "multiPoint": {"enabled": [{"name": "Gate"}]},
                        "permit": {"disabled": [{"name": "Gate"}]},
                    }
                }
            ],
        },
        "sched.yaml",
    )
    assert cfg.permit == () and cfg.reserve == ("VolumeBinding", "DynamicResources", "Gate")


def test_updates_of_a_waiting_pod_change_nothing_until_its_deletion_starts(gate: Any) -> None:
    """As upstream: our own nominatedNodeName write, coming back through the watch, neither
    nominates the waiting pod nor counts as an update in flight (which would send it to
    backoff once rejected); the start of its deletion lets it go at once."""
    core, binder, recorder, clock = gate
    result = _one(core, "p", "wait")
    echo = make_pod("p").req(cpu="1").label("gate", "wait").nominated("n1").info()
    core.on_pod_update(result.pod, echo)
    assert core.queue.nominator.nominated_node("default/p") is None
    clock.step(10)
    core.expire_waiting()
    cycle = binder.cycles["default/p"]
    failed = cycle.permitted(cycle.waiting.outcome)
    core.on_bind_result("default/p", BindOutcome.PERMIT, failed.message(), failed.plugin)
    assert [p.name for p in core.queue.pending_pods()["unschedulable"]] == ["p"]

    again = _one(core, "q", "wait")
    wp = binder.cycles["default/q"].waiting
    deleting = make_pod("q").req(cpu="1").label("gate", "wait").terminating().info()
    core.on_pod_update(again.pod, deleting)
    assert wp.outcome == Status(Code.UNSCHEDULABLE, ("removed",), "")
    assert Gate.calls[-1] == ("unreserve", "q")
    assert core.cache.get_pod("default/q") is None  # its room is free at once
    core.on_bind_result("default/q", BindOutcome.PERMIT, "removed")  # ignored
    assert [f.pod for f in recorder.failed_calls] == ["default/p"]
    assert "q" not in [p.name for q in core.queue.pending_pods().values() for p in q]


def test_a_pod_in_pre_bind_is_either_cancelled_or_prebound_never_both() -> None:
    from scheduler.framework.waiting_pods import PodInPreBind

    told: list[str] = []
    first = PodInPreBind(told.append)
    assert first.cancel("preempted by DefaultPreemption") and told == [
        "preempted by DefaultPreemption"
    ]
    assert not first.mark_prebound() and not first.cancel("again")
    assert (first.state, first.message) == ("cancelled", "preempted by DefaultPreemption")
    second = PodInPreBind(told.append)
    assert second.mark_prebound() and not second.cancel("too late")
    assert second.state == "prebound" and told == ["preempted by DefaultPreemption"]
