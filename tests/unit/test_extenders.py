"""Scheduler extenders in the core (SchedulerCore.schedule_one_async with
scheduler/framework/extender.py's protocol): filter, prioritize and bind as upstream's
schedule_one.go combines them, with in-process fake extenders. Case names follow upstream's
extender_test.go where they mirror one. The HTTP client is tests/unit/kube/test_extender.py."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from scheduler.backend.queue import BACKOFF_Q, UNSCHEDULABLE_Q
from scheduler.clock import FakeClock
from scheduler.config import SchedulerConfig
from scheduler.framework.extender import EXTENDER_NAME, ExtenderError, ExtenderFilterResult
from scheduler.framework.interface import Code
from scheduler.framework.preemption import Candidate
from scheduler.schedule_one import CycleResult, SchedulerCore
from scheduler.types import NodeInfo, NodeRecord, PodInfo
from tests.builders import make_node, make_pod
from tests.unit.fakes import RecordingBinder, RecordingRecorder

FILTERS = ("NodeUnschedulable", "NodeName", "TaintToleration", "NodeResourcesFit")
CONFIG = SchedulerConfig(filters=FILTERS, scores=("NodeResourcesFit",), post_filters=())
PREEMPTING = SchedulerConfig(filters=FILTERS, scores=("NodeResourcesFit",))


@dataclass
class FakeExtender:
    """An extender answering from Python: ``accept`` decides each node (True, or the
    message of a rejection), ``scores`` the prioritize answer; ``fail`` raises."""

    name: str = "fake"
    ignorable: bool = False
    weight: int = 1
    filters: bool = True
    prioritizes: bool = False
    binds: bool = False
    accept: Callable[[str], bool | str] = lambda _: True
    unresolvable: frozenset[str] = frozenset()
    scores: Mapping[str, int] = field(default_factory=dict)
    fail: str = ""
    extra_nodes: tuple[str, ...] = ()  # names answered that were not asked about
    interested: Callable[[PodInfo], bool] = lambda _: True
    # Preemption: None = not supported; else the answer from the candidates given,
    # node -> (victim UIDs, PDB violations).
    preempt: Callable[[Mapping[str, Candidate]], Mapping[str, tuple[Sequence[str], int]]] | None = (
        None
    )
    calls: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)  # names sorted

    def is_filter(self) -> bool:
        return self.filters

    def is_prioritizer(self) -> bool:
        return self.prioritizes

    def is_binder(self) -> bool:
        return self.binds

    def is_interested(self, pod: PodInfo) -> bool:
        return self.interested(pod)

    async def filter(self, pod: PodInfo, nodes: Sequence[NodeInfo]) -> ExtenderFilterResult:
        self.calls.append(("filter", tuple(sorted(ni.name for ni in nodes))))
        await asyncio.sleep(0)
        if self.fail:
            raise ExtenderError(self.fail)
        ok = [ni.name for ni in nodes if self.accept(ni.name) is True]
        failed = {
            ni.name: str(self.accept(ni.name))
            for ni in nodes
            if self.accept(ni.name) is not True and ni.name not in self.unresolvable
        }
        unresolvable = {
            ni.name: str(self.accept(ni.name)) for ni in nodes if ni.name in self.unresolvable
        }
        return ExtenderFilterResult([*ok, *self.extra_nodes], failed, unresolvable)

    async def prioritize(
        self, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> Sequence[tuple[str, int]]:
        self.calls.append(("prioritize", tuple(sorted(ni.name for ni in nodes))))
        await asyncio.sleep(0)
        if self.fail:
            raise ExtenderError(self.fail)
        return [(ni.name, self.scores.get(ni.name, 0)) for ni in nodes]

    def supports_preemption(self) -> bool:
        return self.preempt is not None

    async def process_preemption(
        self, pod: PodInfo, candidates: Sequence[Candidate]
    ) -> Mapping[str, tuple[Sequence[str], int]]:
        self.calls.append(("preempt", tuple(sorted(c.node_name for c in candidates))))
        await asyncio.sleep(0)
        if self.fail:
            raise ExtenderError(self.fail)
        assert self.preempt is not None
        return self.preempt({c.node_name: c for c in candidates})

    async def bind(self, pod: PodInfo, node: str) -> None:
        self.calls.append(("bind", (node,)))
        await asyncio.sleep(0)
        if self.fail:
            raise ExtenderError(self.fail)


def node(name: str, cpu: str = "4") -> NodeRecord:
    return make_node(name).alloc(cpu=cpu, memory="8Gi", pods=110).record()


def core_with(
    extenders: Sequence[FakeExtender],
    nodes: Sequence[NodeRecord],
    pods: Sequence[PodInfo],
    *,
    config: SchedulerConfig = CONFIG,
    vectorized: bool = True,
    seed: int = 0,
) -> tuple[SchedulerCore, RecordingBinder, RecordingRecorder, FakeClock]:
    clock = FakeClock()
    binder, recorder = RecordingBinder(), RecordingRecorder()
    core = SchedulerCore(
        config,
        clock,
        binder,
        recorder,
        rng=random.Random(seed),
        vectorized=vectorized,
        extenders=extenders,
    )
    for n in nodes:
        core.on_node_add(n)
    for p in pods:
        core.on_pod_add(p)
    return core, binder, recorder, clock


def cycle(core: SchedulerCore) -> CycleResult:
    r = asyncio.run(core.schedule_one_async())
    assert r is not None
    return r


def pending(name: str, cpu: str = "1") -> PodInfo:
    return make_pod(name).req(cpu=cpu).info()


def test_the_sync_cycle_refuses_extenders() -> None:
    core, *_ = core_with([FakeExtender()], [node("n1")], [pending("p")])
    with pytest.raises(TypeError, match="schedule_one_async"):
        core.schedule_one()


@pytest.mark.parametrize("vectorized", [True, False])
def test_filter_narrows_the_feasible_nodes(vectorized: bool) -> None:
    ext = FakeExtender(accept=lambda n: n == "n2" or "not n2")
    core, binder, _, _ = core_with(
        [ext], [node("n1"), node("n2"), node("n3")], [pending("p")], vectorized=vectorized
    )
    r = cycle(core)
    assert (r.outcome, r.node, r.evaluated_nodes, r.feasible_nodes) == ("assumed", "n2", 3, 1)
    assert [(p.name, n) for p, n in binder.calls] == [("p", "n2")]
    assert ext.calls == [("filter", ("n1", "n2", "n3"))]


def test_every_node_filtered_out_is_unschedulable_for_the_extender() -> None:
    ext = FakeExtender(accept=lambda n: "no GPU here")
    core, _, recorder, _ = core_with([ext], [node("n1"), node("n2")], [pending("p")])
    r = cycle(core)
    assert (r.outcome, r.message) == ("unschedulable", "0/2 nodes are available: 2 no GPU here.")
    assert {n: st.code for n, st in r.node_statuses.items()} == {
        "n1": Code.UNSCHEDULABLE,
        "n2": Code.UNSCHEDULABLE,
    }
    qpi = core.queue.get("default/p")
    assert qpi is not None and qpi.unschedulable_plugins == {EXTENDER_NAME}
    assert core.queue.where("default/p") == UNSCHEDULABLE_Q
    # Extenders have no hints: any cluster event brings the pod back.
    core.on_node_add(node("n3"))
    assert core.queue.where("default/p") == BACKOFF_Q
    assert [f.reason for f in recorder.failed_calls] == ["Unschedulable"]


def test_plugins_rejections_and_extenders_rejections_add_up() -> None:
    ext = FakeExtender(accept=lambda n: n != "n2" or "extender says no")
    core, *_ = core_with([ext], [node("n1", cpu="0"), node("n2"), node("n3")], [pending("p")])
    r = cycle(core)
    assert (r.outcome, r.node, r.evaluated_nodes, r.feasible_nodes) == ("assumed", "n3", 3, 1)
    assert ext.calls == [("filter", ("n2", "n3"))]  # only what the plugins let through


def test_unresolvable_wins_over_unschedulable() -> None:
    ext = FakeExtender(accept=lambda n: f"{n} refused", unresolvable=frozenset({"n1"}))
    core, *_ = core_with([ext], [node("n1"), node("n2")], [pending("p")])
    r = cycle(core)
    assert {n: st.code for n, st in r.node_statuses.items()} == {
        "n1": Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        "n2": Code.UNSCHEDULABLE,
    }


def test_extenders_filter_in_turn() -> None:
    first = FakeExtender(name="a", accept=lambda n: n != "n1" or "a")
    second = FakeExtender(name="b", accept=lambda n: n != "n2" or "b")
    core, *_ = core_with([first, second], [node("n1"), node("n2"), node("n3")], [pending("p")])
    r = cycle(core)
    assert r.node == "n3"
    assert second.calls == [("filter", ("n2", "n3"))]


def test_an_error_fails_the_cycle_unless_ignorable() -> None:
    broken = FakeExtender(fail="failed filter with extender at URL http://x/filter, code 500")
    core, _, recorder, _ = core_with([broken], [node("n1"), node("n2")], [pending("p")])
    r = cycle(core)
    assert (r.outcome, r.message) == ("error", broken.fail)
    assert [f.reason for f in recorder.failed_calls] == ["SchedulerError"]

    ignored = replace(broken, ignorable=True, calls=[])
    core, binder, _, _ = core_with([ignored], [node("n1"), node("n2")], [pending("p")])
    assert cycle(core).outcome == "assumed"
    assert ignored.calls and binder.calls


def test_a_node_not_asked_about_is_an_error() -> None:
    ext = FakeExtender(extra_nodes=("elsewhere",))
    core, *_ = core_with([ext], [node("n1"), node("n2")], [pending("p")])
    r = cycle(core)
    assert r.outcome == "error"
    assert "claims a filtered node 'elsewhere' which is not found in the input" in r.message


def test_an_extender_not_interested_is_not_asked() -> None:
    ext = FakeExtender(accept=lambda n: "never", interested=lambda pod: pod.name != "p")
    core, *_ = core_with([ext], [node("n1"), node("n2")], [pending("p")])
    assert cycle(core).outcome == "assumed"
    assert ext.calls == []


@pytest.mark.parametrize("vectorized", [True, False])
def test_prioritize_scores_are_scaled_and_weighted(vectorized: bool) -> None:
    # NodeResourcesFit prefers the emptier node n2 (8 CPUs); the extender's 10 x weight 2 x
    # 10 = 200 for n1 outweighs any plugin difference (0..100 per plugin).
    ext = FakeExtender(filters=False, prioritizes=True, weight=2, scores={"n1": 10})
    for seed in range(5):
        core, *_ = core_with(
            [ext],
            [node("n1"), node("n2", cpu="8")],
            [pending("p")],
            vectorized=vectorized,
            seed=seed,
        )
        assert cycle(core).node == "n1"
    # Without it the plugins pick n2.
    quiet = FakeExtender(filters=False, prioritizes=True, scores={})
    core, *_ = core_with([quiet], [node("n1"), node("n2", cpu="8")], [pending("p")])
    assert cycle(core).node == "n2"


def test_a_failing_prioritizer_gives_no_score() -> None:
    bad = FakeExtender(filters=False, prioritizes=True, weight=5, scores={"n1": 10}, fail="x")
    core, *_ = core_with([bad], [node("n1"), node("n2", cpu="8")], [pending("p")])
    r = cycle(core)
    assert (r.outcome, r.node) == ("assumed", "n2")
    assert bad.calls == [("prioritize", ("n1", "n2"))]


def test_extenders_look_past_the_first_feasible_node_without_score_plugins() -> None:
    ext = FakeExtender()
    core, *_ = core_with(
        [ext],
        [node("n1"), node("n2"), node("n3")],
        [pending("p")],
        config=replace(CONFIG, scores=()),
    )
    r = cycle(core)
    assert (r.evaluated_nodes, r.feasible_nodes) == (3, 3)
    assert ext.calls == [("filter", ("n1", "n2", "n3"))]


def test_nominated_node_rejected_by_the_extender_falls_back_to_all_nodes() -> None:
    ext = FakeExtender(accept=lambda n: n != "n1" or "not the nominated one")
    core, *_ = core_with(
        [ext], [node("n1"), node("n2")], [make_pod("p").req(cpu="1").nominated("n1").info()]
    )
    r = cycle(core)
    assert r.node == "n2"
    assert ext.calls == [("filter", ("n1",)), ("filter", ("n1", "n2"))]


def test_nominated_node_the_extender_accepts_is_taken_at_once() -> None:
    ext = FakeExtender()
    core, *_ = core_with(
        [ext],
        [node("n1"), node("n2", cpu="64")],
        [make_pod("p").req(cpu="1").nominated("n1").info()],
    )
    r = cycle(core)
    assert (r.node, ext.calls) == ("n1", [("filter", ("n1",))])


def test_a_pod_bound_while_the_extenders_answer_is_skipped() -> None:
    pod = pending("p")
    core: SchedulerCore

    class Binding(FakeExtender):
        async def filter(self, p: PodInfo, nodes: Sequence[NodeInfo]) -> ExtenderFilterResult:
            # Another scheduler binds it meanwhile (the watch tells the cache).
            core.on_pod_update(pod, replace(pod, node_name="n1"))
            return await super().filter(p, nodes)

    core, binder, _, _ = core_with([Binding()], [node("n1"), node("n2")], [pod])
    r = cycle(core)
    assert r.outcome == "skipped" and binder.calls == []
    core.cache.check_invariants()
    core.queue.check_invariants()


def test_a_pod_deleted_while_the_extenders_answer_is_not_bound() -> None:
    pod = pending("p")
    core: SchedulerCore

    class Deleting(FakeExtender):
        async def filter(self, p: PodInfo, nodes: Sequence[NodeInfo]) -> ExtenderFilterResult:
            core.on_pod_delete(pod)
            return await super().filter(p, nodes)

    core, binder, recorder, _ = core_with([Deleting()], [node("n1"), node("n2")], [pod])
    r = cycle(core)
    assert r.outcome == "skipped" and binder.calls == [] and recorder.failed_calls == []
    assert not core.queue.contains("default/p") and core.cache.get_pod("default/p") is None
    core.queue.check_invariants()


def _bind_step(core: SchedulerCore, binder: RecordingBinder) -> Code:
    cycle_ = binder.cycles["default/p"]
    assert cycle_.bind is not None
    return asyncio.run(cycle_.bind()).code


def test_a_binder_extender_binds() -> None:
    ext = FakeExtender(filters=False, binds=True)
    core, binder, _, _ = core_with([ext], [node("n1")], [pending("p")])
    assert cycle(core).node == "n1"
    assert _bind_step(core, binder) == Code.SUCCESS
    assert ext.calls == [("bind", ("n1",))]


def test_an_ignorable_binder_that_fails_leaves_it_to_default_binder() -> None:
    ext = FakeExtender(filters=False, binds=True, ignorable=True, fail="down")
    core, binder, _, _ = core_with([ext], [node("n1")], [pending("p")])
    cycle(core)
    assert _bind_step(core, binder) == Code.SKIP  # the Binding API call goes out


def test_a_binder_that_fails_fails_the_binding() -> None:
    ext = FakeExtender(filters=False, binds=True, fail="down")
    core, binder, _, _ = core_with([ext], [node("n1")], [pending("p")])
    cycle(core)
    assert _bind_step(core, binder) == Code.ERROR


def test_a_binder_not_interested_leaves_the_plain_binding() -> None:
    ext = FakeExtender(filters=False, binds=True, interested=lambda _: False)
    core, binder, _, _ = core_with([ext], [node("n1")], [pending("p")])
    cycle(core)
    assert binder.calls and "default/p" not in binder.cycles


# ----------------------------------------------------------------------------- preemption


def bound(name: str, node_name: str, cpu: str = "2", priority: int = 0) -> PodInfo:
    return make_pod(name).priority(priority).node(node_name).req(cpu=cpu).info()


def full_cluster() -> tuple[list[NodeRecord], list[PodInfo]]:
    """Two 4-CPU nodes, each full with two low-priority pods of 2 CPUs."""
    nodes = [node("n1"), node("n2")]
    pods = [bound("a1", "n1"), bound("a2", "n1"), bound("b1", "n2"), bound("b2", "n2")]
    return nodes, pods


def high(name: str = "p") -> PodInfo:
    return make_pod(name).priority(100).req(cpu="2").info()


def test_preemption_asks_the_extender_about_the_candidates() -> None:
    nodes, pods = full_cluster()
    uid = {p.name: p.uid for p in pods}
    # Of the two candidates (one victim each), the extender keeps n2, with b2 as victim.
    ext = FakeExtender(filters=False, preempt=lambda c: {"n2": ([uid["b2"]], 0)})
    core, *_ = core_with([ext], nodes, [*pods, high()], config=PREEMPTING)
    r = cycle(core)
    assert (r.outcome, r.nominated_node) == ("preempting", "n2")
    assert [v.name for v in r.victims] == ["b2"]
    assert ext.calls == [("preempt", ("n1", "n2"))]


def test_preemption_with_no_candidate_left_by_the_extender() -> None:
    nodes, pods = full_cluster()
    ext = FakeExtender(filters=False, preempt=lambda c: {})
    core, *_ = core_with([ext], nodes, [*pods, high()], config=PREEMPTING)
    r = cycle(core)
    assert r.outcome == "unschedulable"
    assert r.message.endswith("preemption: no candidate node for preemption"), r.message


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        pytest.param(
            lambda c, uid: {"n1": ([], 0)},
            'expected at least one victim pod on node "n1"',
            id="no victims",
        ),
        pytest.param(
            lambda c, uid: {"n1": ([uid["b1"]], 0)},
            "claims to preempt pod (UID: b1-uid) on node: n1, but the pod is not found",
            id="victim elsewhere",
        ),
        pytest.param(
            lambda c, uid: {"n9": ([uid["a1"]], 0)},
            "node 'n9' is not in the cluster",
            id="unknown node",
        ),
    ],
)
def test_preemption_answers_that_end_it_unless_ignorable(
    answer: Callable[[Mapping[str, Candidate], dict[str, str]], Any], problem: str
) -> None:
    """An ignorable extender's answer that fails to convert is passed over (the candidates
    stay as they were); a node it left without victims is dropped from its answer, which
    stands (here nothing is left)."""
    nodes, pods = full_cluster()
    pods = [replace(p, uid=f"{p.name}-uid") for p in pods]
    uid = {p.name: p.uid for p in pods}
    ext = FakeExtender(filters=False, preempt=lambda c: answer(c, uid))
    core, *_ = core_with([ext], nodes, [*pods, high()], config=PREEMPTING)
    r = cycle(core)
    assert r.outcome == "unschedulable" and problem in r.message, r.message
    lenient = replace(ext, ignorable=True, calls=[])
    core, *_ = core_with([lenient], nodes, [*pods, high()], config=PREEMPTING)
    r = cycle(core)
    if "victim pod on node" in problem:
        assert r.message.endswith("preemption: no candidate node for preemption"), r.message
    else:
        assert r.outcome == "preempting", r.message


def test_a_failing_preempting_extender() -> None:
    nodes, pods = full_cluster()
    ext = FakeExtender(filters=False, preempt=lambda c: {}, fail="preempt: code 500")
    core, *_ = core_with([ext], nodes, [*pods, high()], config=PREEMPTING)
    r = cycle(core)
    assert r.outcome == "unschedulable" and "preempt: code 500" in r.message
    core, *_ = core_with([replace(ext, ignorable=True)], nodes, [*pods, high()], config=PREEMPTING)
    assert cycle(core).outcome == "preempting"


def test_extenders_narrow_preemption_in_turn_and_a_pod_they_ignore_is_not_asked() -> None:
    nodes, pods = full_cluster()
    uid = {p.name: p.uid for p in pods}
    first = FakeExtender(
        name="a", filters=False, preempt=lambda c: {"n1": ([uid["a1"]], 0), "n2": ([uid["b1"]], 0)}
    )
    second = FakeExtender(name="b", filters=False, preempt=lambda c: {"n1": ([uid["a2"]], 1)})
    core, *_ = core_with([first, second], nodes, [*pods, high()], config=PREEMPTING)
    r = cycle(core)
    assert (r.nominated_node, [v.name for v in r.victims]) == ("n1", ["a2"])
    assert second.calls == [("preempt", ("n1", "n2"))]
    bored = FakeExtender(filters=False, preempt=lambda c: {}, interested=lambda p: False)
    core, *_ = core_with([bored], nodes, [*pods, high()], config=PREEMPTING)
    assert cycle(core).outcome == "preempting" and bored.calls == []
