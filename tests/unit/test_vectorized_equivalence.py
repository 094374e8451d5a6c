"""The bulk paths (numpy Filter masks and Score columns, preemption's dry run on amounts)
give exactly the node-by-node answers.

Hypothesis draws clusters (nodes with random allocatable, taints, unschedulable flags,
images and labels; bound pods; nominated pods; PDBs), profiles (scoring strategy, scored
resources, score plugins, percentageOfNodesToScore) and pending pods. Two SchedulerCores
are fed the same events, one with ``vectorized=False``; each check compares what a cycle
can observe: the feasible nodes in order, ``node_to_status`` (in order), the rejecting
plugins, ``next_start_node_index``, the totals per node and per plugin, the host drawn
from a seeded rng (and the rng state after it), whole cycles with preemption, and the
preemption decision with and without the dry run on amounts.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import scheduler.schedule_one as schedule_one
from scheduler.clock import FakeClock
from scheduler.config import (
    SCORE_PLUGINS,
    NodeAffinityArgs,
    NodeResourcesFitArgs,
    SchedulerConfig,
)
from scheduler.framework.interface import BatchScorePlugin, Code, CycleState, Status
from scheduler.schedule_one import BindOutcome, SchedulerCore
from scheduler.types import (
    LabelSelector,
    NodeInfo,
    NodeRecord,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PDBInfo,
    PodInfo,
    SelectorObject,
    ServiceInfo,
)
from tests.builders import make_node, make_pdb, make_pod
from tests.unit.fakes import RecordingActions, RecordingBinder, RecordingRecorder

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

TAINTS = [
    ("dedicated", "a", "NoSchedule"),
    ("dedicated", "b", "NoExecute"),
    ("soft", "x", "PreferNoSchedule"),
    ("soft", "y", "PreferNoSchedule"),
]
TOLERATIONS = [
    ("dedicated", "a", "NoSchedule", "Equal"),
    ("dedicated", "", "", "Exists"),
    ("soft", "x", "PreferNoSchedule", "Equal"),
    ("node.kubernetes.io/unschedulable", "", "NoSchedule", "Exists"),
    ("", "", "", "Exists"),
]
IMAGES = ["img-a:1", "img-b:1", "img-c"]
# "2000Pi" of memory is beyond the arrays' exact range: such nodes and pods go one by one.
NODE_MEMORY = ["0", "1Gi", "4Gi", "2000Pi"]
POD_MEMORY = ["", "0", "100Mi", "1Gi", "3000Pi"]


def _sampled(values: list[Any]) -> st.SearchStrategy[Any]:
    return st.sampled_from(values)


@st.composite
def node_records(draw: st.DrawFn, name: str) -> NodeRecord:
    b = make_node(name)
    alloc: dict[str, str | int] = {
        "cpu": draw(_sampled(["0", "1", "2", "4", "3500m"])),
        "memory": draw(_sampled(NODE_MEMORY)),
        "pods": draw(_sampled([0, 1, 2, 4, 110])),
    }
    if draw(st.booleans()):
        alloc["ephemeral_storage"] = draw(_sampled(["0", "10Gi"]))
    if draw(st.booleans()):
        alloc["gpu"] = draw(_sampled([0, 1, 2]))
    b.alloc(**alloc)
    for key, value, effect in draw(st.lists(_sampled(TAINTS), max_size=2, unique=True)):
        b.taint(key, value, effect)
    if draw(st.integers(0, 4)) == 0:
        b.unschedulable()
    for img in draw(st.lists(_sampled(IMAGES), max_size=2, unique=True)):
        b.image(img, draw(_sampled([10 * 2**20, 300 * 2**20, 2000 * 2**20])))
    if draw(st.booleans()):
        b.label("disk", "ssd")
    return b.record()


@st.composite
def pods(draw: st.DrawFn, name: str, *, node: str = "", nominated: str = "") -> PodInfo:
    b = make_pod(name).priority(draw(st.integers(0, 3)))
    images = draw(st.lists(_sampled(IMAGES), max_size=2, unique=True))
    if images:
        b.images(*images)  # replaces the containers: before the requests
    req: dict[str, str | int] = {}
    cpu = draw(_sampled(["", "0", "100m", "300m", "1", "2", "5"]))
    if cpu:
        req["cpu"] = cpu
    memory = draw(_sampled(POD_MEMORY))
    if memory:
        req["memory"] = memory
    if draw(st.integers(0, 3)) == 0:
        req["ephemeral_storage"] = draw(_sampled(["0", "1Gi", "20Gi"]))
    if draw(st.integers(0, 3)) == 0:
        req["gpu"] = draw(_sampled([0, 1]))
    if req:
        b.req(**req)
    for key, value, effect, op in draw(st.lists(_sampled(TOLERATIONS), max_size=2, unique=True)):
        b.toleration(key, value, effect, op)
    if draw(st.integers(0, 4)) == 0:
        b.node_selector(disk="ssd")
    if draw(st.integers(0, 4)) == 0:
        b.host_port(8080)
    b.label("app", draw(_sampled(["a", "b"])))
    b.started(draw(st.integers(0, 50)))
    if node:
        b.node(node)
    if nominated:
        b.nominated(nominated)
    return b.info()


@st.composite
def configs(draw: st.DrawFn) -> SchedulerConfig:
    fit = NodeResourcesFitArgs(
        strategy=draw(_sampled(["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"])),
        resources=draw(
            _sampled(
                [
                    (("cpu", 1), ("memory", 1)),
                    (("cpu", 2), ("memory", 1), ("ephemeral-storage", 3)),
                    (("cpu", 1), ("nvidia.com/gpu", 2)),
                    (("memory", 1),),
                ]
            )
        ),
        shape=draw(_sampled([((0, 10), (100, 0)), ((0, 0), (50, 7), (100, 10))])),
    )
    scores = draw(_sampled([SCORE_PLUGINS, (), ("NodeResourcesFit", "TaintToleration")]))
    ssd = NodeSelectorTerm((NodeSelectorRequirement("disk", "In", ("ssd",)),), ())
    not_ssd = NodeSelectorTerm((NodeSelectorRequirement("disk", "DoesNotExist", ()),), ())
    # A profile's addedAffinity (NodeAffinityArgs): the bulk filter's per-snapshot mask
    # against the node filter.
    node_affinity = NodeAffinityArgs(
        required=draw(_sampled([None, None, (ssd,), (not_ssd,), (ssd, not_ssd)])),
        preferred=draw(_sampled([(), ((20, ssd),), ((5, not_ssd), (50, ssd))])),
    )
    return SchedulerConfig(
        percentage_of_nodes_to_score=draw(_sampled([0, 10, 50, 100])),
        scores=scores,
        fit=fit,
        node_affinity=node_affinity,
    )


@st.composite
def clusters(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(1, 12))
    nodes = [draw(node_records(f"n{i}")) for i in range(n)]
    names = [r.name for r in nodes]
    bound = [
        draw(pods(f"b{i}", node=draw(_sampled([*names, "gone"]))))
        for i in range(draw(st.integers(0, 3 * n)))
    ]
    nominated = [
        draw(pods(f"nom{i}", nominated=draw(_sampled(names))))
        for i in range(draw(st.integers(0, 3)))
    ]
    pdbs = [
        make_pdb(f"pdb-{app}", match_labels={"app": app}, allowed=draw(st.integers(0, 2)))
        for app in draw(st.lists(_sampled(["a", "b"]), max_size=2, unique=True))
    ]
    pending = [draw(pods(f"p{i}")) for i in range(draw(st.integers(1, 4)))]
    return {
        "config": draw(configs()),
        "nodes": nodes,
        "bound": bound,
        "nominated": nominated,
        "pdbs": pdbs,
        "pending": pending,
        # Smaller than upstream's 100 so that small clusters stop the walk early too.
        "min_feasible": draw(_sampled([1, 3, 100])),
        "start": draw(st.integers(0, 30)),
    }


def build(
    c: dict[str, Any], *, vectorized: bool, upstream_default_selector: bool = False
) -> SchedulerCore:
    core = SchedulerCore(
        c["config"],
        FakeClock(),
        RecordingBinder(),
        RecordingRecorder(),
        actions=RecordingActions(),
        rng=random.Random(7),
        vectorized=vectorized,
        upstream_default_selector=upstream_default_selector,
    )
    for kind, rec in c.get("selector_objects", ()):
        core.on_selector_object_set(kind, rec)
    for node in c["nodes"]:
        core.on_node_add(node)
    for pod in c["bound"]:
        core.on_pod_add(pod)
    for pod in c["nominated"]:
        core.queue.nominator.add_nominated_pod(pod, pod.nominated_node_name)
    pdb: PDBInfo
    for pdb in c["pdbs"]:
        core.on_pdb_set(pdb)
    core.next_start_node_index = c["start"]
    return core


def _names(nodes: list[NodeInfo]) -> list[str]:
    return [ni.name for ni in nodes]


# --------------------------------------------------------------------------- filter, score


@SETTINGS
@given(c=clusters())
def test_filter_score_and_host_match_the_node_by_node_path(c: dict[str, Any]) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(schedule_one, "MIN_FEASIBLE_NODES_TO_FIND", c["min_feasible"])
        slow, fast = build(c, vectorized=False), build(c, vectorized=True)
        for pod in c["pending"]:
            for core in (slow, fast):
                core.cache.update_snapshot(core.snapshot)
                core.snapshot.check_invariants()
            s_state, f_state = CycleState(), CycleState()
            s_feasible, s_rows, s_diag = slow._find_feasible(s_state, pod)
            f_feasible, f_rows, f_diag = fast._find_feasible(f_state, pod)
            assert s_rows is None
            assert _names(f_feasible) == _names(s_feasible)
            assert list(f_diag.node_to_status.items()) == list(s_diag.node_to_status.items())
            assert f_diag.unschedulable_plugins == s_diag.unschedulable_plugins
            assert f_diag.pre_filter_msg == s_diag.pre_filter_msg
            assert fast.next_start_node_index == slow.next_start_node_index
            snap = fast.snapshot
            if f_rows is not None:
                assert [snap.node_info_list[r].name for r in f_rows] == _names(f_feasible)
            if len(s_feasible) > 1:
                _check_scores(slow, fast, pod, s_state, f_state, s_feasible, f_feasible, f_rows)
            if s_feasible:  # place the pod, so that the next one sees it
                for core in (slow, fast):
                    core.cache.assume_pod(pod, s_feasible[0].name)
            assert slow.rng.getstate() == fast.rng.getstate()


def _check_scores(
    slow: SchedulerCore,
    fast: SchedulerCore,
    pod: PodInfo,
    s_state: CycleState,
    f_state: CycleState,
    s_feasible: list[NodeInfo],
    f_feasible: list[NodeInfo],
    rows: Any,
) -> None:
    s_st = slow.framework.run_pre_score(s_state, pod, s_feasible, slow.snapshot)
    f_state.feasible_rows = rows  # as the core sets it: PreScore may read columns at them
    f_st = fast.framework.run_pre_score(f_state, pod, f_feasible, fast.snapshot)
    assert f_st == s_st
    if not s_st.is_success():
        return
    scores = slow.framework.run_score(s_state, pod, s_feasible)
    if rows is None:
        return
    fw = fast.framework
    totals = fw.run_score_batch(f_state, pod, fast.snapshot, rows)
    assert totals is not None
    assert totals.tolist() == [ns.score for ns in scores]
    # Plugin by plugin: raw and normalised columns equal the per-node scores.
    for w in fw.score_plugins:
        p = w.plugin
        if p.name in f_state.skip_score_plugins or not isinstance(p, BatchScorePlugin):
            continue
        col = p.score_batch(f_state, pod, fast.snapshot, rows)
        if col is None:
            continue
        raw = [p.score(f_state, pod, ni) for ni in f_feasible]
        assert col.tolist() == raw, p.name
        p.normalize_scores(f_state, pod, raw)
        assert p.normalize_scores_batch(f_state, pod, col).tolist() == raw, p.name
    # The same host from the same rng, and the rng left in the same state.
    host = slow._select_host(scores)
    assert fast._select_host_batch(f_feasible, totals) == host
    assert slow.rng.getstate() == fast.rng.getstate()


# --------------------------------------------------------------------------- whole cycles


def _bind_all(core: SchedulerCore, seen: int) -> int:
    binder = core.binder
    assert isinstance(binder, RecordingBinder)
    for pod, node in binder.calls[seen:]:
        core.on_bind_result(pod.key, BindOutcome.OK)
        core.on_pod_update(None, replace(pod, node_name=node, phase="Running"))
    return len(binder.calls)


@SETTINGS
@given(c=clusters())
def test_whole_cycles_with_preemption_match(c: dict[str, Any]) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(schedule_one, "MIN_FEASIBLE_NODES_TO_FIND", c["min_feasible"])
        cores = (build(c, vectorized=False), build(c, vectorized=True))
        for core in cores:
            for i, pod in enumerate(c["pending"]):
                # Preemptors too: a higher priority than any bound pod.
                core.queue.add(replace(pod, priority=pod.priority + 10 * (i % 2)))
        seen = [0, 0]
        for _ in range(2):  # a second round retries what preemption made room for
            for _ in range(3 * len(c["pending"])):
                results = [core.schedule_one() for core in cores]
                assert results[1] == results[0]
                if results[0] is None:
                    break
                for i, core in enumerate(cores):
                    seen[i] = _bind_all(core, seen[i])
                    for victim in results[i].victims if results[i] is not None else ():
                        core.on_pod_delete(victim)
                assert cores[1].next_start_node_index == cores[0].next_start_node_index
            for core in cores:
                assert isinstance(core.clock, FakeClock)
                core.clock.step(400)
                core.flush()
        slow, fast = cores
        assert fast.rng.getstate() == slow.rng.getstate()
        assert fast.recorder == slow.recorder
        assert fast.actions == slow.actions


# --------------------------------------------------------------------------- default spreading


def _owned(pod: PodInfo) -> PodInfo:
    """The pod as a pod of ReplicaSet rs-<app> (whose selector is app=<app>)."""
    return replace(pod, owner_kind_uid=("ReplicaSet", f"uid-{pod.labels['app']}"))


@st.composite
def owned_clusters(draw: st.DrawFn) -> dict[str, Any]:
    """Clusters whose pods all belong to ReplicaSets rs-a / rs-b (selector app=a / app=b),
    so that system default spreading applies; sometimes a Service selects app=a."""
    c = draw(clusters())
    for k in ("bound", "nominated", "pending"):
        c[k] = [_owned(p) for p in c[k]]
    objects: list[tuple[str, ServiceInfo | SelectorObject]] = [
        (
            "ReplicaSet",
            SelectorObject(
                "ReplicaSet",
                "default",
                f"rs-{app}",
                LabelSelector((("app", app),)),
                uid=f"uid-{app}",
            ),
        )
        for app in ("a", "b")
    ]
    if draw(st.booleans()):
        objects.append(("Service", ServiceInfo("default", "svc-a", (("app", "a"),))))
    c["selector_objects"] = objects
    return c


def _run_cycles(cores: tuple[SchedulerCore, SchedulerCore], pending: list[PodInfo]) -> None:
    for core in cores:
        for pod in pending:
            core.queue.add(pod)
    seen = [0, 0]
    for _ in range(3 * len(pending)):
        results = [core.schedule_one() for core in cores]
        assert results[1] == results[0]
        if results[0] is None:
            break
        for i, core in enumerate(cores):
            seen[i] = _bind_all(core, seen[i])
    assert cores[1].rng.getstate() == cores[0].rng.getstate()
    assert cores[1].recorder == cores[0].recorder


@SETTINGS
@given(c=owned_clusters())
def test_upstream_default_selector_bulk_matches_node_by_node(c: dict[str, Any]) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(schedule_one, "MIN_FEASIBLE_NODES_TO_FIND", c["min_feasible"])
        cores = (
            build(c, vectorized=False, upstream_default_selector=True),
            build(c, vectorized=True, upstream_default_selector=True),
        )
        _run_cycles(cores, c["pending"])


@SETTINGS
@given(c=owned_clusters())
def test_upstream_default_selector_decides_as_the_owner_when_they_agree(
    c: dict[str, Any],
) -> None:
    """Every app=X pod is owned by rs-X and no Service adds labels beyond app: the
    ReplicaSet's selector selects exactly the owner's pods, so decisions are the same."""
    c["selector_objects"] = [o for o in c["selector_objects"] if o[0] != "Service"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(schedule_one, "MIN_FEASIBLE_NODES_TO_FIND", c["min_feasible"])
        cores = (
            build(c, vectorized=True, upstream_default_selector=False),
            build(c, vectorized=True, upstream_default_selector=True),
        )
        _run_cycles(cores, c["pending"])


# --------------------------------------------------------------------------- preemption


@SETTINGS
@given(c=clusters(), offset=st.integers(0, 20))
def test_preemption_dry_run_on_amounts_matches(c: dict[str, Any], offset: int) -> None:
    core = build(c, vectorized=True)
    core.cache.update_snapshot(core.snapshot)
    fw, ev = core.framework, core.evaluator
    for pod in c["pending"]:
        preemptor = replace(pod, priority=pod.priority + 5)
        state = CycleState()
        _, st_pre = fw.run_pre_filter(state, preemptor, core.snapshot)
        if st_pre.code == Code.ERROR:
            continue
        statuses: dict[str, Status] = {
            ni.name: fw.run_filter_with_nominated_pods(state, preemptor, ni)
            for ni in core.snapshot.node_info_list
        }
        statuses = {k: v for k, v in statuses.items() if not v.is_success()}
        potential = ev.potential_nodes(statuses)
        pdbs = list(ev.pdbs())
        decisions = []
        dry_runs = []
        evaluations = []
        for fast in (False, True):
            ev.fast_dry_run = fast
            decisions.append(ev.decide(state.clone(), preemptor, statuses, offset=offset))
            # Every potential node, not only until enough candidates are found.
            before = dict(fw.evaluations)
            dry_runs.append(
                ev.dry_run_preemption(
                    state.clone(), preemptor, potential, pdbs, 0, len(potential) or 1
                )
            )
            # The Filter runs the dry run counted (scheduler_plugin_evaluation_total).
            evaluations.append(
                {k: n - before.get(k, 0) for k, n in fw.evaluations.items() if n != before.get(k)}
            )
        assert decisions[1] == decisions[0]
        assert dry_runs[1] == dry_runs[0]
        assert evaluations[1] == evaluations[0]


# --------------------------------------------------------------------------- the fast paths run


def _counting(monkeypatch: pytest.MonkeyPatch, cls: type, method: str) -> list[str]:
    calls: list[str] = []
    original = getattr(cls, method)

    def counted(self: Any, *args: Any) -> Any:
        calls.append(method)
        return original(self, *args)

    monkeypatch.setattr(cls, method, counted)
    return calls


def test_the_bulk_path_calls_no_filter_on_nodes_that_surely_fit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from scheduler.framework.plugins.noderesources.fit import NodeResourcesFit

    c = {
        "config": SchedulerConfig(),
        "nodes": [make_node(f"n{i}").record() for i in range(5)]
        + [make_node("small").alloc(cpu="100m", memory="1Gi", pods=110).record()],
        "bound": [],
        "nominated": [],
        "pdbs": [],
        "start": 0,
    }
    core = build(c, vectorized=True)
    calls = _counting(monkeypatch, NodeResourcesFit, "filter")
    scores = _counting(monkeypatch, NodeResourcesFit, "score")
    core.queue.add(make_pod("p").req(cpu="1", memory="1Gi").info())
    result = core.schedule_one()
    assert result is not None and result.outcome == "assumed"
    assert result.evaluated_nodes == 6 and result.feasible_nodes == 5
    assert calls == ["filter"]  # only the node that may not fit
    assert scores == []
    assert isinstance(core.snapshot.arrays().alloc_cpu, np.ndarray)


def test_the_dry_run_goes_on_amounts_for_resource_only_profiles(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from scheduler.framework.preemption import Evaluator

    c = {
        "config": SchedulerConfig(),
        "nodes": [
            make_node(f"n{i}").alloc(cpu="1", memory="4Gi", pods=110).record() for i in range(3)
        ],
        "bound": [make_pod(f"b{i}").req(cpu="600m").node(f"n{i}").info() for i in range(3)],
        "nominated": [],
        "pdbs": [],
        "start": 0,
    }
    core = build(c, vectorized=True)
    slow_calls = _counting(monkeypatch, Evaluator, "select_victims_on_node")
    core.queue.add(make_pod("p").req(cpu="600m").priority(10).info())
    result = core.schedule_one()
    assert result is not None and result.outcome == "preempting"
    assert [v.name for v in result.victims] == ["b" + result.node.removeprefix("n")]
    assert slow_calls == []


@pytest.mark.parametrize("seed", range(8))
def test_select_host_batch_draws_as_the_node_by_node_path(seed: int) -> None:
    """``_select_host_batch`` over a column of totals: the same host and the same rng
    state as ``_select_host``, with long runs of ties and new maxima among them."""
    from scheduler.schedule_one import NodeScore

    gen = random.Random(seed)
    count = gen.choice([1, 2, 3, 300, 1000])
    totals = [gen.choice([5, 7, 7, 7, 9]) if gen.random() < 0.9 else 12 for _ in range(count)]
    nodes = [make_node(f"n{i}").info() for i in range(count)]
    cores = []
    for _ in range(2):
        core = SchedulerCore(
            SchedulerConfig(),
            FakeClock(),
            RecordingBinder(),
            RecordingRecorder(),
            rng=random.Random(seed),
        )
        cores.append(core)
    slow, fast = cores
    host = slow._select_host([NodeScore(ni.name, t) for ni, t in zip(nodes, totals, strict=True)])
    assert fast._select_host_batch(nodes, np.array(totals, dtype=np.int64)) == host
    assert totals[int(host.removeprefix("n"))] == max(totals)
    assert slow.rng.getstate() == fast.rng.getstate()


def test_select_host_draws_uniformly_among_the_best_and_only_at_a_tie() -> None:
    """One draw among the nodes of the best total, each as likely (2000 draws over four
    tied nodes: each within 400-600); a single best node is taken without a draw."""
    core = SchedulerCore(
        SchedulerConfig(), FakeClock(), RecordingBinder(), RecordingRecorder(), rng=random.Random(3)
    )
    nodes = [make_node(f"n{i}").info() for i in range(6)]
    totals = np.array([9, 4, 9, 9, 1, 9], dtype=np.int64)
    picks = Counter(core._select_host_batch(nodes, totals) for _ in range(2000))
    assert set(picks) == {"n0", "n2", "n3", "n5"}
    assert all(400 <= n <= 600 for n in picks.values()), picks
    state = core.rng.getstate()
    assert core._select_host_batch(nodes, np.array([1, 8, 3, 8, 9, 0], dtype=np.int64)) == "n4"
    assert core.rng.getstate() == state
    assert core._select_host_batch([], np.array([], dtype=np.int64)) == ""
