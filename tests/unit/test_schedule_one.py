"""SchedulerCore (scheduler/schedule_one.py): event handlers, one scheduling cycle, the
failure path and binding results, driven through its ports with recorders, a FakeClock and
seeded random sources. Case ids reuse upstream's (schedule_one_test.go) where they mirror one.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

import pytest

from scheduler.backend.queue import ACTIVE_Q, BACKOFF_Q, UNSCHEDULABLE_Q
from scheduler.clock import FakeClock
from scheduler.config import SchedulerConfig
from scheduler.framework.interface import Code
from scheduler.schedule_one import (
    BindOutcome,
    SchedulerCore,
    _FeasibleNodes,
    num_feasible_nodes_to_find,
)
from scheduler.types import NodeInfo, NodeRecord, PodInfo
from tests.builders import make_node, make_pod
from tests.unit.fakes import Failed, FakeFilter, RecordingBinder, RecordingRecorder

FILTERS = (
    "NodeUnschedulable",
    "NodeName",
    "TaintToleration",
    "NodeAffinity",
    "NodePorts",
    "NodeResourcesFit",
)
CONFIG = SchedulerConfig(filters=FILTERS, scores=("NodeResourcesFit",))
NO_PREEMPTION = replace(CONFIG, post_filters=())


@dataclass
class H:
    core: SchedulerCore
    clock: FakeClock
    binder: RecordingBinder
    recorder: RecordingRecorder

    def bound(self) -> list[tuple[str, str]]:
        return [(p.name, n) for p, n in self.binder.calls]

    def where(self, name: str) -> str | None:
        return self.core.queue.where(f"default/{name}")


def node(name: str, cpu: str = "4", memory: str = "8Gi", pods: int = 110) -> NodeRecord:
    return make_node(name).alloc(cpu=cpu, memory=memory, pods=pods).record()


def harness(
    nodes: Sequence[NodeRecord] = (),
    pods: Sequence[PodInfo] = (),
    *,
    config: SchedulerConfig = CONFIG,
    seed: int = 0,
    batching: bool = True,
) -> H:
    clock = FakeClock()
    binder, recorder = RecordingBinder(), RecordingRecorder()
    config = replace(config, opportunistic_batching=batching)
    core = SchedulerCore(config, clock, binder, recorder, rng=random.Random(seed))
    for n in nodes:
        core.on_node_add(n)
    for p in pods:
        core.on_pod_add(p)
    return H(core, clock, binder, recorder)


def pending(name: str, cpu: str = "", priority: int = 0) -> PodInfo:
    b = make_pod(name).priority(priority)
    if cpu:
        b.req(cpu=cpu)
    return b.info()


def bound(name: str, node_name: str, cpu: str = "", priority: int = 0) -> PodInfo:
    b = make_pod(name).priority(priority).node(node_name)
    if cpu:
        b.req(cpu=cpu)
    return b.info()


# ----------------------------------------------------------------------------- numbers


@pytest.mark.parametrize(
    ("percentage", "num_nodes", "expected"),
    [
        pytest.param(
            0,
            10,
            10,
            id="not set percentageOfNodesToScore and nodes number not more than 50",
        ),
        pytest.param(
            40,
            10,
            10,
            id="set profile percentageOfNodesToScore and nodes number not more than 50",
        ),
        pytest.param(
            0,
            1000,
            420,
            id="not set percentageOfNodesToScore and nodes number more than 50",
        ),
        pytest.param(
            40,
            1000,
            400,
            id="set profile percentageOfNodesToScore and nodes number more than 50",
        ),
        pytest.param(
            0,
            6000,
            300,
            id="not set profile percentageOfNodesToScore and nodes number more than 50*125",
        ),
        pytest.param(
            40,
            6000,
            2400,
            id="set profile percentageOfNodesToScore and nodes number more than 50*125",
        ),
        pytest.param(0, 50, 50, id="adaptive: 50 nodes, all of them"),
        pytest.param(0, 99, 99, id="adaptive: below the 100-node minimum, all of them"),
        pytest.param(0, 100, 100, id="adaptive: 100 nodes, 50% is below the minimum 100"),
        pytest.param(0, 5000, 500, id="adaptive: 5000 nodes, 50 - 5000/125 = 10%"),
        pytest.param(0, 7000, 350, id="adaptive: the percentage never drops below 5%"),
        pytest.param(5, 1000, 100, id="explicit 5% of 1000 is lifted to 100"),
        pytest.param(100, 5000, 5000, id="explicit 100%"),
    ],
)
def test_num_feasible_nodes_to_find(percentage: int, num_nodes: int, expected: int) -> None:
    assert num_feasible_nodes_to_find(percentage, num_nodes) == expected


# ----------------------------------------------------------------------------- happy path


def test_pod_that_fits_is_assumed_and_bound() -> None:
    h = harness([node("n1")], [pending("p", cpu="1")])
    r = h.core.schedule_one()
    assert r is not None
    assert (r.outcome, r.node, r.evaluated_nodes, r.feasible_nodes) == ("assumed", "n1", 1, 1)
    assert h.bound() == [("p", "n1")]
    assert h.binder.calls[0][0].node_name == "n1"  # the binder gets the assumed pod
    assert h.core.cache.is_assumed("default/p")
    ni = h.core.cache.get_node("n1")
    assert ni is not None and ni.requested.milli_cpu == 1000 and "default/p" in ni.pods
    assert not h.core.queue.contains("default/p")
    assert h.core.in_binding() == 1
    assert h.core.schedule_one() is None  # nothing else to do
    h.core.cache.check_invariants()
    h.core.queue.check_invariants()


def test_assumed_pod_counts_for_the_next_cycle() -> None:
    h = harness([node("n1", cpu="1")], [pending("a", cpu="1"), pending("b", cpu="1")])
    first = h.core.schedule_one()
    second = h.core.schedule_one()
    assert first is not None and first.outcome == "assumed"
    assert second is not None and second.outcome == "unschedulable"
    assert second.message.startswith("0/1 nodes are available: 1 Insufficient cpu.")


def test_highest_score_wins() -> None:
    # LeastAllocated: the bigger, emptier node scores higher, whatever the rng says.
    picks = set()
    for seed in range(20):
        h = harness(
            [node("small", cpu="4", memory="8Gi"), node("big", cpu="8", memory="16Gi")],
            [make_pod("p").req(cpu="1", memory="1Gi").info()],
            seed=seed,
        )
        r = h.core.schedule_one()
        assert r is not None
        picks.add(r.node)
        assert r.feasible_nodes == 2
    assert picks == {"big"}


def test_ties_are_broken_by_the_rng_uniformly() -> None:
    names = ["n1", "n2", "n3"]
    counts: Counter[str] = Counter()
    for seed in range(300):
        h = harness([node(n) for n in names], [pending("p", cpu="1")], seed=seed)
        r = h.core.schedule_one()
        assert r is not None
        counts[r.node] += 1
    assert set(counts) == set(names)
    assert all(70 <= c <= 130 for c in counts.values()), counts  # 100 expected each
    # Deterministic: the same seed, the same choice.
    again = [harness([node(n) for n in names], [pending("p")], seed=7) for _ in range(3)]
    assert len({a.core.schedule_one().node for a in again}) == 1  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("nominated", "codes", "expected_calls", "expected_node"),
    [
        pytest.param(
            "node1",
            {},
            1,
            "node1",
            id="pod has the nominated node set, filter is called only once",
        ),
        pytest.param(
            "",
            {},
            3,
            None,
            id="pod without the nominated pod, filter is called for each node",
        ),
        pytest.param(
            "node1",
            {"node1": Code.UNSCHEDULABLE},
            4,
            None,
            id="nominated pod cannot pass the filter, filter is called for each node",
        ),
    ],
)
def test_prefer_nominated_node_filter_call_counts(
    nominated: str, codes: dict[str, Code], expected_calls: int, expected_node: str | None
) -> None:
    b = make_pod("p").priority(1000)
    if nominated:
        b.nominated(nominated)
    h = harness([node("node1"), node("node2"), node("node3")], [b.info()])
    fake = FakeFilter(codes)
    h.core.framework.filter_plugins.insert(0, fake)
    r = h.core.schedule_one()
    assert r is not None and r.outcome == "assumed"
    assert fake.calls == expected_calls
    if expected_node is not None:
        assert (r.node, r.evaluated_nodes, r.feasible_nodes) == (expected_node, 1, 1)
    # The nomination is spent once the pod is assumed.
    assert h.core.queue.nominator.nominated_node("default/p") is None


def test_nominated_node_wins_over_a_better_scoring_node() -> None:
    h = harness(
        [node("small", cpu="2"), node("big", cpu="64")],
        [make_pod("p").req(cpu="1").nominated("small").info()],
    )
    r = h.core.schedule_one()
    assert r is not None and r.node == "small"


def test_nomination_known_only_to_the_nominator_is_tried_first() -> None:
    h = harness([node("a"), node("b"), node("c")], [pending("p")])
    h.core.queue.nominator.add_nominated_pod(pending("p"), "c")
    fake = FakeFilter()
    h.core.framework.filter_plugins.insert(0, fake)
    r = h.core.schedule_one()
    assert r is not None and (r.node, fake.calls) == ("c", 1)


def test_fair_evaluation_for_nodes() -> None:
    """Upstream's TestFairEvaluationForNodes: with 500 nodes and percentageOfNodesToScore 30,
    each cycle checks 150 nodes and the next one starts where it stopped. (Without
    OpportunisticBatching: upstream's test plugins do not sign pods, ours do, and a pod
    like the one before would take its hint without a search.)"""
    num_nodes = 500
    h = harness(
        [node(str(i)) for i in range(num_nodes)],
        config=replace(CONFIG, percentage_of_nodes_to_score=30),
        batching=False,
    )
    to_find = num_feasible_nodes_to_find(30, num_nodes)
    assert to_find == 150
    for i in range(2 * (num_nodes // to_find + 1)):
        h.core.on_pod_add(pending(f"p{i}"))
        r = h.core.schedule_one()
        assert r is not None and r.outcome == "assumed"
        assert (r.feasible_nodes, r.evaluated_nodes) == (to_find, to_find)
        assert h.core.next_start_node_index == (i + 1) * to_find % num_nodes


def test_rotation_counts_rejected_nodes_too() -> None:
    h = harness(
        [node("a", cpu="1"), node("b", cpu="1"), node("c"), node("d")],
        [pending("p", cpu="2"), pending("q", cpu="2")],
        config=replace(CONFIG, scores=()),
    )
    h.core.cache.update_snapshot(h.core.snapshot)
    order = [ni.name for ni in h.core.snapshot.node_info_list]
    fits = [n for n in order if n in ("c", "d")]
    # No score plugin: the first feasible node from the start index is taken (upstream), and
    # the next search starts right after it, rejected nodes counted.
    r = h.core.schedule_one()
    assert r is not None and r.node == fits[0]
    processed = order.index(fits[0]) + 1
    assert (r.evaluated_nodes, r.feasible_nodes) == (processed, 1)
    assert h.core.next_start_node_index == processed % 4
    r = h.core.schedule_one()
    rotated = order[processed:] + order[:processed]
    assert r is not None and r.node == next(n for n in rotated if n in ("c", "d"))


def test_without_score_plugins_no_extra_nodes_are_evaluated() -> None:
    h = harness(
        [node("node1"), node("node2"), node("node3")],
        [pending("pod1")],
        config=replace(CONFIG, scores=()),
    )
    fake = FakeFilter()
    h.core.framework.filter_plugins.insert(0, fake)
    r = h.core.schedule_one()
    assert r is not None and (r.evaluated_nodes, fake.calls) == (1, 1)


def test_skips_a_terminating_pod_with_upstreams_event() -> None:
    # upstream's skipPodSchedule: a pending pod whose deletion has begun (a finalizer holds
    # it) stays queued until popped; then a FailedScheduling warning, no cycle, no status.
    h = harness([node("n1")])
    p = pending("p")
    h.core.on_pod_add(p)
    h.core.on_pod_update(p, replace(p, deletion_timestamp=1.0, resource_version="2"))
    assert h.core.queue.where("default/p") == ACTIVE_Q
    r = h.core.schedule_one()
    assert r is not None and r.outcome == "skipped"
    assert h.binder.calls == [] and not h.core.queue.contains("default/p")
    assert h.recorder.skipped_deleting_calls == ["default/p"]
    assert h.recorder.failed_calls == []
    # Its next update queues it again (upstream's Update of a pod in no queue), and the
    # next pop tells it again.
    h.core.on_pod_update(
        replace(p, deletion_timestamp=1.0, resource_version="2"),
        replace(p, deletion_timestamp=1.0, resource_version="3", labels={"a": "b"}),
    )
    r = h.core.schedule_one()
    assert r is not None and r.outcome == "skipped"
    assert h.recorder.skipped_deleting_calls == ["default/p", "default/p"]


def test_a_terminating_pod_keeps_its_nomination() -> None:
    # The nominator holds a preemptor whose deletion has begun until the pod is gone: a
    # lower pod does not take the room it was promised (upstream keeps it too).
    h = harness([node("n1", cpu="2")])
    high = replace(pending("high", cpu="2", priority=10), nominated_node_name="n1")
    h.core.on_pod_add(high)
    h.core.on_pod_update(high, replace(high, deletion_timestamp=1.0, resource_version="2"))
    r = h.core.schedule_one()
    assert r is not None and r.outcome == "skipped"
    low = pending("low", cpu="1")
    h.core.on_pod_add(low)
    r = h.core.schedule_one()
    assert r is not None and r.outcome == "unschedulable"
    h.core.on_pod_delete(replace(high, deletion_timestamp=1.0, resource_version="3"))
    assert h.core.queue.nominator.nominated_pods_for_node("n1") == []


@pytest.mark.parametrize("vectorized", [True, False], ids=["bulk", "node by node"])
def test_plugin_evaluations_are_counted_as_upstreams_instrumented_plugins(
    vectorized: bool,
) -> None:
    """scheduler_plugin_evaluation_total's counts: a PreFilter or PreScore call unless it
    skipped, a Filter plugin per node it decided (up to the plugin that rejected the
    node), a Score plugin per node scored; alike in the bulk walk and node by node."""
    clock = FakeClock()
    binder, recorder = RecordingBinder(), RecordingRecorder()
    core = SchedulerCore(
        CONFIG, clock, binder, recorder, rng=random.Random(0), vectorized=vectorized
    )
    for n in (node("n1"), node("n2"), node("n3", cpu="1")):
        core.on_node_add(n)
    tainted = make_node("n4").alloc(cpu="4", memory="8Gi", pods=110)
    core.on_node_add(tainted.taint("k", "v", "NoSchedule").record())
    core.on_pod_add(pending("p", cpu="2"))
    r = core.schedule_one()
    assert r is not None and r.outcome == "assumed" and r.feasible_nodes == 2
    counts = core.framework.evaluations
    at = {
        point: {p: n for (p, pt), n in counts.items() if pt == point}
        for point in ("PreFilter", "Filter", "PreScore", "Score")
    }
    # The PreFilter plugins that let every pod through run; the others skipped this pod.
    assert at["PreFilter"] == {
        "NodeUnschedulable": 1,
        "NodeName": 1,
        "TaintToleration": 1,
        "NodeResourcesFit": 1,
    }
    # Four nodes reached TaintToleration, which turned n4 down; Fit turned n3 down;
    # NodeAffinity and NodePorts were skipped by their PreFilter.
    assert at["Filter"] == {
        "NodeUnschedulable": 4,
        "NodeName": 4,
        "TaintToleration": 4,
        "NodeResourcesFit": 3,
    }
    # This profile scores with NodeResourcesFit alone: its PreScore once, its Score on
    # the two feasible nodes.
    assert at["PreScore"] == {"NodeResourcesFit": 1}
    assert at["Score"] == {"NodeResourcesFit": 2}


def _filter_evaluations(core: SchedulerCore) -> dict[str, int]:
    return {p: n for (p, pt), n in core.framework.evaluations.items() if pt == "Filter"}


@pytest.mark.parametrize("vectorized", [True, False], ids=["bulk", "node by node"])
def test_preemptions_dry_run_counts_a_filter_run_per_try(vectorized: bool) -> None:
    """Upstream's instrumented Filter plugins count every call, preemption's dry run's
    too: the run with every victim off the node, then one per pod put back, each up to
    the plugin that turned the node down. The fast dry run (on sums) counts as the
    general one."""
    clock = FakeClock()
    binder, recorder = RecordingBinder(), RecordingRecorder()
    core = SchedulerCore(
        CONFIG, clock, binder, recorder, rng=random.Random(0), vectorized=vectorized
    )
    core.on_node_add(node("n1"))
    core.on_pod_add(bound("a", "n1", cpu="2"))
    core.on_pod_add(bound("b", "n1", cpu="2"))
    core.on_pod_add(pending("high", cpu="2", priority=100))
    r = core.schedule_one()
    assert r is not None and r.outcome == "preempting"
    assert core.queue.nominator.nominated_node("default/high") == "n1"
    # The cycle's walk: n1 turned down by Fit (1 each). The dry run: every victim off
    # (passed), one put back (passed), the other put back (Fit said no): 3 each.
    four = dict.fromkeys(("NodeUnschedulable", "NodeName", "TaintToleration"), 4)
    assert _filter_evaluations(core) == {**four, "NodeResourcesFit": 4}


@pytest.mark.parametrize("vectorized", [True, False], ids=["bulk", "node by node"])
def test_a_node_with_nominated_pods_counts_both_filter_passes(vectorized: bool) -> None:
    clock = FakeClock()
    binder, recorder = RecordingBinder(), RecordingRecorder()
    core = SchedulerCore(
        CONFIG, clock, binder, recorder, rng=random.Random(0), vectorized=vectorized
    )
    core.on_node_add(node("n1"))
    core.on_node_add(node("n2", cpu="1"))
    core.queue.nominator.add_nominated_pod(pending("high", cpu="2", priority=100), "n1")
    core.on_pod_add(pending("low", cpu="1"))
    r = core.schedule_one()
    assert r is not None and r.outcome == "assumed"
    # n1: the pass with "high" on it, then the pass without; n2: one pass.
    assert _filter_evaluations(core) == {
        "NodeUnschedulable": 3,
        "NodeName": 3,
        "TaintToleration": 3,
        "NodeResourcesFit": 3,
    }


# ----------------------------------------------------------------------------- failures


def _mixed_cluster() -> list[NodeRecord]:
    return [
        make_node("n1").unschedulable().record(),
        make_node("n2").taint("dedicated", "infra").record(),
        node("n3", cpu="1"),
    ]


def test_failure_message_reasons_sorted_and_pod_unschedulable() -> None:
    h = harness(
        _mixed_cluster(),
        [bound("big", "n3", cpu="1", priority=100), pending("p", cpu="1")],
        config=NO_PREEMPTION,
    )
    r = h.core.schedule_one()
    msg = (
        "0/3 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s), "
        "1 node(s) were unschedulable."
    )
    assert r is not None and (r.outcome, r.message) == ("unschedulable", msg)
    assert h.recorder.failed_calls == [Failed("default/p", "Unschedulable", msg, "")]
    assert h.where("p") == UNSCHEDULABLE_Q
    qpi = h.core.queue.get("default/p")
    assert qpi is not None
    assert qpi.unschedulable_plugins == {"NodeUnschedulable", "TaintToleration", "NodeResourcesFit"}
    assert not qpi.errored
    h.core.queue.check_invariants()
    # An event one of those plugins cares about brings it back (still backing off).
    h.core.on_node_add(node("n4"))
    assert h.where("p") == BACKOFF_Q
    h.clock.step(1)
    h.core.flush()
    assert h.where("p") == ACTIVE_Q
    r2 = h.core.schedule_one()
    assert r2 is not None and (r2.outcome, r2.node) == ("assumed", "n4")


def test_failure_counts_each_reason_of_each_node() -> None:
    h = harness(
        [node("n1", cpu="1", memory="1Gi"), node("n2", cpu="1", memory="1Gi")],
        [make_pod("p").req(cpu="2", memory="2Gi").info()],
    )
    r = h.core.schedule_one()
    assert r is not None
    assert r.message == (
        "0/2 nodes are available: 2 Insufficient cpu, 2 Insufficient memory. preemption: "
        "0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )


def test_no_nodes() -> None:
    """Upstream's ErrNoNodesAvailable: reason Unschedulable, nomination cleared, retried
    after backoff (no plugin to wait for)."""
    h = harness([], [make_pod("p").nominated("gone").info()])
    r = h.core.schedule_one()
    assert r is not None and r.message == "no nodes available to schedule pods"
    assert h.recorder.failed_calls == [
        Failed("default/p", "Unschedulable", "no nodes available to schedule pods", "")
    ]
    assert h.where("p") == BACKOFF_Q
    assert h.core.queue.nominator.nominated_node("default/p") is None


def test_filter_error_is_a_scheduler_error() -> None:
    h = harness([node("n1")], [make_pod("p").nominated("n1").info()])
    h.core.framework.filter_plugins.insert(0, FakeFilter({"n1": Code.ERROR}))
    r = h.core.schedule_one()
    assert r is not None and r.outcome == "error"
    [failed] = h.recorder.failed_calls
    assert failed.reason == "SchedulerError"
    assert "injecting failure for pod p" in failed.message
    assert failed.nominated_node == ""  # upstream clears the nomination on errors
    assert h.core.queue.nominator.nominated_node("default/p") is None
    assert h.where("p") == BACKOFF_Q
    qpi = h.core.queue.get("default/p")
    assert qpi is not None and qpi.errored


def test_pod_deleted_during_its_cycle_is_not_requeued() -> None:
    h = harness([node("n1")])
    p = pending("p")
    h.core.on_pod_add(p)
    deleted: list[str] = []

    def delete_once(pod: PodInfo, _: object) -> None:
        if not deleted:
            deleted.append(pod.key)
            h.core.on_pod_delete(pod)

    h.core.framework.filter_plugins.insert(
        0, FakeFilter({"n1": Code.UNSCHEDULABLE}, on_filter=delete_once)
    )
    r = h.core.schedule_one()
    assert r is not None and r.outcome == "unschedulable"
    assert deleted == ["default/p"]
    assert not h.core.queue.contains("default/p")
    h.core.queue.check_invariants()


# ----------------------------------------------------------------------------- binding results


def _assumed(config: SchedulerConfig = CONFIG) -> H:
    """p assumed on n1; w (too big for n1 with p on it) waits as unschedulable."""
    h = harness([node("n1", cpu="2")], [pending("p", cpu="1", priority=10)], config=config)
    r = h.core.schedule_one()
    assert r is not None and r.outcome == "assumed"
    h.core.on_pod_add(pending("w", cpu="2"))
    r = h.core.schedule_one()
    assert r is not None and r.outcome == "unschedulable"
    assert h.where("w") == UNSCHEDULABLE_Q
    return h


def test_bind_ok() -> None:
    h = _assumed()
    h.core.on_bind_result("default/p", BindOutcome.OK)
    assert h.recorder.scheduled_calls == [("default/p", "n1")]
    assert h.core.cache.is_assumed("default/p")  # until the watch confirms it
    assert h.core.in_binding() == 0
    # The watch delivers the binding: confirmed, no longer assumed, never requeued.
    h.core.on_pod_update(pending("p", cpu="1", priority=10), bound("p", "n1", "1", 10))
    assert not h.core.cache.is_assumed("default/p")
    assert h.core.cache.get_pod("default/p") is not None
    assert not h.core.queue.contains("default/p")
    h.core.cache.check_invariants()


@pytest.mark.parametrize("outcome", [BindOutcome.GONE, BindOutcome.CONFLICT])
def test_bind_gone_or_conflict_forgets_without_requeue(outcome: str) -> None:
    h = _assumed()
    h.core.on_bind_result("default/p", outcome, "whatever")
    assert h.core.cache.get_pod("default/p") is None
    assert not h.core.queue.contains("default/p")
    assert h.recorder.failed_calls[-1].pod == "default/w"  # nothing recorded for p
    # The room p held is free again: w is worth another try.
    assert h.where("w") == BACKOFF_Q
    h.core.cache.check_invariants()


def test_bind_error_forgets_and_requeues_to_backoff() -> None:
    h = _assumed()
    h.core.on_bind_result("default/p", BindOutcome.ERROR, "etcdserver: request timed out")
    assert h.core.cache.get_pod("default/p") is None
    assert h.where("p") == BACKOFF_Q
    assert h.recorder.failed_calls[-1] == Failed(
        "default/p", "SchedulerError", "binding rejected: etcdserver: request timed out", ""
    )
    qpi = h.core.queue.get("default/p")
    assert qpi is not None and qpi.errored
    assert h.recorder.scheduled_calls == []
    # One attempt so far: the initial backoff, 1s from the failure.
    h.clock.step(0.9)
    h.core.flush()
    assert h.where("p") == BACKOFF_Q
    h.clock.step(0.1)
    h.core.flush()
    assert h.where("p") == ACTIVE_Q
    h.core.queue.check_invariants()


def test_unknown_bind_result_is_ignored() -> None:
    h = _assumed()
    h.core.on_bind_result("default/nobody", BindOutcome.ERROR)
    h.core.on_bind_result("default/p", BindOutcome.OK)
    h.core.on_bind_result("default/p", BindOutcome.ERROR)  # a late duplicate
    assert h.recorder.scheduled_calls == [("default/p", "n1")]
    assert not h.core.queue.contains("default/p")


@pytest.mark.parametrize("outcome", [BindOutcome.ERROR, BindOutcome.GONE, BindOutcome.OK])
def test_pod_deleted_while_binding_is_not_requeued(outcome: str) -> None:
    h = _assumed()
    h.core.on_pod_delete(pending("p", cpu="1", priority=10))
    # Its assumed room is released at once.
    assert h.core.cache.get_pod("default/p") is None
    assert h.where("w") == BACKOFF_Q
    h.core.on_bind_result("default/p", outcome, 'pods "p" not found')
    assert not h.core.queue.contains("default/p")
    assert [f.pod for f in h.recorder.failed_calls] == ["default/w"]
    assert h.recorder.scheduled_calls == []
    h.core.cache.check_invariants()
    h.core.queue.check_invariants()


def test_update_of_a_pod_being_bound_does_not_requeue_it() -> None:
    h = _assumed()
    old = pending("p", cpu="1", priority=10)
    h.core.on_pod_update(old, make_pod("p").req(cpu="1").priority(10).label("x", "y").info())
    assert not h.core.queue.contains("default/p")


# ----------------------------------------------------------------------------- event handlers


@pytest.mark.parametrize(
    ("pod", "queued", "cached"),
    [
        pytest.param(pending("p"), True, False, id="pending pod of ours: queued"),
        pytest.param(
            make_pod("p").scheduler("default-scheduler").info(),
            False,
            False,
            id="pending pod of another scheduler: ignored",
        ),
        pytest.param(bound("p", "n1"), False, True, id="bound pod of ours: cached"),
        pytest.param(
            make_pod("p").scheduler("default-scheduler").node("n1").info(),
            False,
            True,
            id="bound pod of another scheduler: cached (it takes room)",
        ),
        pytest.param(
            make_pod("p").node("n1").phase("Succeeded").info(),
            False,
            False,
            id="terminal bound pod: not cached",
        ),
        pytest.param(
            make_pod("p").phase("Failed").info(), False, False, id="terminal pending pod: ignored"
        ),
        pytest.param(
            make_pod("p").terminating().info(),
            True,
            False,
            id="terminating pending pod: queued, to be skipped when popped (upstream's)",
        ),
    ],
)
def test_on_pod_add(pod: PodInfo, queued: bool, cached: bool) -> None:
    h = harness([node("n1")])
    h.core.on_pod_add(pod)
    assert h.core.queue.contains(pod.key) is queued
    assert (h.core.cache.get_pod(pod.key) is not None) is cached
    if queued:
        assert h.core.queue.where(pod.key) == ACTIVE_Q


def test_terminal_pod_leaves_the_cache() -> None:
    h = harness([node("n1")], [bound("p", "n1", cpu="1")])
    h.core.on_pod_update(
        bound("p", "n1", cpu="1"), make_pod("p").node("n1").phase("Succeeded").info()
    )
    assert h.core.cache.get_pod("default/p") is None
    ni = h.core.cache.get_node("n1")
    assert ni is not None and ni.requested.milli_cpu == 0


def test_nominated_node_name_restored_on_add() -> None:
    h = harness([node("n1")], [make_pod("p").nominated("n1").priority(5).info()])
    assert h.core.queue.nominator.nominated_node("default/p") == "n1"
    assert [p.name for p in h.core.queue.nominator.nominated_pods_for_node("n1")] == ["p"]


def test_binding_by_someone_else_removes_the_pod_from_the_queue() -> None:
    h = harness([node("n1")], [make_pod("p").req(cpu="1").nominated("n1").info()])
    assert h.where("p") == ACTIVE_Q
    h.core.on_pod_update(pending("p", cpu="1"), bound("p", "n1", cpu="1"))
    assert not h.core.queue.contains("default/p")
    assert h.core.queue.nominator.nominated_node("default/p") is None
    cached = h.core.cache.get_pod("default/p")
    assert cached is not None and cached.node_name == "n1"
    assert h.core.schedule_one() is None
    h.core.queue.check_invariants()


def test_nomination_follows_the_api() -> None:
    h = harness([node("n1"), node("n2")], [make_pod("p").nominated("n1").info()])
    old = make_pod("p").nominated("n1").info()
    moved = make_pod("p").nominated("n2").info()
    h.core.on_pod_update(old, moved)
    assert h.core.queue.nominator.nominated_node("default/p") == "n2"
    cleared = make_pod("p").info()
    h.core.on_pod_update(moved, cleared)
    assert h.core.queue.nominator.nominated_node("default/p") is None


def test_pending_pod_deleted() -> None:
    h = harness([node("n1")], [make_pod("p").nominated("n1").info()])
    h.core.on_pod_delete(make_pod("p").nominated("n1").info())
    assert not h.core.queue.contains("default/p")
    assert h.core.queue.nominator.nominated_node("default/p") is None


def test_bound_pod_deletion_wakes_pods_it_blocked() -> None:
    h = harness(
        [node("n1", cpu="1")],
        [bound("big", "n1", cpu="1", priority=100), pending("p", cpu="1")],
    )
    r = h.core.schedule_one()
    assert r is not None and r.outcome == "unschedulable"
    assert h.where("p") == UNSCHEDULABLE_Q
    h.core.on_pod_delete(bound("big", "n1", cpu="1", priority=100))
    assert h.where("p") == BACKOFF_Q
    h.clock.step(1)
    h.core.flush()
    r = h.core.schedule_one()
    assert r is not None and (r.outcome, r.node) == ("assumed", "n1")


def test_pod_update_of_a_queued_pod_keeps_one_copy() -> None:
    h = harness([node("n1")], [pending("p")])
    h.core.on_pod_update(pending("p"), make_pod("p").label("a", "b").info())
    assert h.core.queue.counts()[ACTIVE_Q] == 1
    qpi = h.core.queue.get("default/p")
    assert qpi is not None and qpi.pod.labels == {"a": "b"}
    h.core.queue.check_invariants()


# --------------------------------------------------------------------------- queue events


def test_a_node_deletion_reaches_pod_topology_spreads_hint() -> None:
    """Zone b's only node is full, so zone a's node is one pod too many (skew 2 > 1); when
    zone b's node goes away, so does the domain, and the pod fits (Node/Delete)."""
    spread = {
        "maxSkew": 1,
        "topologyKey": "zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "x"}},
    }
    h = harness(
        nodes=[
            make_node("n1").label("zone", "a").record(),
            make_node("n2").label("zone", "b").alloc(cpu="100m", memory="1Gi", pods=10).record(),
        ],
        pods=[make_pod("old").label("app", "x").req(cpu="1").node("n1").info()],
        config=SchedulerConfig(post_filters=()),  # every default filter, no preemption
    )
    h.core.on_pod_add(make_pod("p").label("app", "x").req(cpu="1").spread(spread).info())
    r = h.core.schedule_one()
    assert r is not None and r.outcome == "unschedulable"
    assert h.core.queue.where("default/p") == "unschedulable"
    h.core.on_node_delete("n2")
    assert h.core.queue.where("default/p") in ("active", "backoff")
    h.clock.step(20)
    h.core.flush()
    r = h.core.schedule_one()
    assert r is not None and r.outcome == "assumed" and r.node == "n1"


def test_a_namespace_label_change_reaches_inter_pod_affinitys_hint() -> None:
    labels: dict[str, dict[str, str]] = {"other": {}}
    core = SchedulerCore(
        SchedulerConfig(post_filters=()),
        FakeClock(),
        RecordingBinder(),
        RecordingRecorder(),
        rng=random.Random(0),
        namespace_labels=lambda ns: labels.get(ns, {}),
    )
    core.on_node_add(make_node("n1").label("zone", "a").record())
    core.on_pod_add(make_pod("db", namespace="other").label("app", "db").node("n1").info())
    term = {
        "labelSelector": {"matchLabels": {"app": "db"}},
        "namespaceSelector": {"matchLabels": {"team": "x"}},
        "topologyKey": "zone",
    }
    aff = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    core.on_pod_add(make_pod("p").affinity(aff).info())
    r = core.schedule_one()
    assert r is not None and r.outcome == "unschedulable"
    # An unrelated label change moves nothing; the selected one does.
    labels["other"] = {"unrelated": "1"}
    core.on_namespace_update({}, labels["other"])
    assert core.queue.where("default/p") == "unschedulable"
    old, labels["other"] = labels["other"], {"team": "x"}
    core.on_namespace_update(old, labels["other"])
    assert core.queue.where("default/p") in ("active", "backoff")


def test_records_leave_no_cyclic_garbage() -> None:
    """What the live scheduler freezes after its first listing (kube/live.py settle_heap)
    must be freed by reference counting alone: pods scheduled, spread and bound, then
    deleted with their nodes, leave nothing for the cycle collector."""
    import gc

    nodes = [
        make_node(f"n{i}").alloc(cpu="4", pods=110).label("zone", f"z{i % 2}").record()
        for i in range(4)
    ]
    h = harness(nodes, [bound(f"b{i}", f"n{i % 4}", "100m") for i in range(8)])
    for i in range(6):
        h.core.queue.add(
            make_pod(f"p{i}")
            .req(cpu="100m")
            .label("app", "web")
            .spread(
                {
                    "maxSkew": 1,
                    "topologyKey": "zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "web"}},
                }
            )
            .info()
        )
    while h.core.schedule_one() is not None:
        pass
    for pod, node_name in h.binder.calls:
        h.core.on_bind_result(pod.key, BindOutcome.OK)
        h.core.on_pod_update(pod, replace(pod, node_name=node_name, phase="Running"))
    from scheduler.backend.cache.snapshot import Snapshot

    snap = Snapshot()
    h.core.cache.update_snapshot(snap)
    pods = [p for ni in snap.node_info_list for p in ni.pods.values()]
    assert len(pods) == 14
    del snap
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for p in pods:
            h.core.on_pod_delete(p)
        for n in nodes:
            h.core.on_node_delete(n.name)
        del pods
        gc.collect()
        kinds = {type(o).__name__ for o in gc.garbage}
        assert not kinds & {"PodInfo", "NodeInfo", "NodeRecord", "Resource"}, kinds
        assert gc.garbage == [], kinds
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


def test_the_left_over_flush_runs_only_when_asked() -> None:
    """The live loop flushes backoffQ every second but the unschedulable pods' left-over
    only every 30 seconds (upstream's two flushers): flush(left_over=False) leaves a pod
    that has waited past the 5 minutes where it is."""
    h = harness([node("n1", cpu="1")], [pending("p", cpu="2")])
    r = h.core.schedule_one()
    assert r is not None and h.where("p") == UNSCHEDULABLE_Q
    h.clock.step(301)
    h.core.flush(left_over=False)
    assert h.where("p") == UNSCHEDULABLE_Q
    h.core.flush()
    assert h.where("p") in (ACTIVE_Q, BACKOFF_Q)


def test_the_bulk_filters_feasible_nodes_read_as_a_list_of_them() -> None:
    infos = [NodeInfo(make_node(f"n{i}")) for i in range(6)]
    at = [4, 1, 5]
    lazy = _FeasibleNodes(infos, at)
    plain = [infos[j] for j in at]
    assert len(lazy) == 3
    assert list(lazy) == plain
    assert [lazy[i] for i in range(-3, 3)] == plain[-3:] + plain
    assert lazy[1:] == plain[1:] and lazy[::-1] == plain[::-1]
    assert infos[5] in lazy and infos[0] not in lazy
    assert lazy.index(infos[1]) == 1
    with pytest.raises(IndexError):
        lazy[3]
