"""The preemption Evaluator (scheduler/framework/preemption.py), table by table, after
upstream's default_preemption_test.go and util_test.go; then preemption end to end through
SchedulerCore with recording ports. Case ids reuse upstream's names where a case mirrors one.

Upstream's resources and priorities: small/medium/large/very large = 100/200/300/500 (mCPU
and bytes), priorities -100/0/100/1000/10000; nodes are "very large" unless said otherwise.
Upstream start times are nanoseconds after the epoch; ours are seconds after the builders'
epoch (the order is what matters).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from scheduler.backend.cache.snapshot import Snapshot
from scheduler.backend.queue import BACKOFF_Q, UNSCHEDULABLE_Q
from scheduler.backend.queue.nominator import Nominator
from scheduler.clock import FakeClock
from scheduler.config import DefaultPreemptionArgs, SchedulerConfig
from scheduler.framework.interface import Code, CycleState, Status
from scheduler.framework.plugins.interpodaffinity import InterPodAffinity
from scheduler.framework.plugins.noderesources.fit import NodeResourcesFit
from scheduler.framework.plugins.podtopologyspread import PodTopologySpread
from scheduler.framework.preemption import (
    MSG_NEVER,
    MSG_NO_VICTIMS,
    MSG_NOT_HELPFUL,
    MSG_TERMINATING,
    Candidate,
    Evaluator,
    filter_victims_with_pdb_violation,
    fit_error_message,
    more_important,
    pick_one_node_for_preemption,
)
from scheduler.framework.runtime import Framework
from scheduler.schedule_one import SchedulerCore
from scheduler.types import (
    LabelSelector,
    LabelSelectorRequirement,
    NodeInfo,
    PDBInfo,
    PodInfo,
)
from tests.builders import make_node, make_pdb, make_pod
from tests.unit.fakes import (
    FakeFilter,
    FalseFilter,
    MatchFilter,
    RecordingActions,
    RecordingBinder,
    RecordingRecorder,
    ScriptedRandom,
)

NEG, LOW, MID, HIGH, VERY_HIGH = -100, 0, 100, 1000, 10000
SMALL = {"cpu": "100m", "memory": "100"}
MEDIUM = {"cpu": "200m", "memory": "200"}
LARGE = {"cpu": "300m", "memory": "300"}
VERY_LARGE = {"cpu": "500m", "memory": "500"}
INT32_MIN = -(2**31)
DEFAULT_ARGS = DefaultPreemptionArgs()

Res = dict[str, str]


# ----------------------------------------------------------------------------- helpers


def pod(
    name: str,
    prio: int = LOW,
    res: Res | None = None,
    *,
    node: str = "",
    start: float | None = None,
    labels: dict[str, str] | None = None,
    ns: str = "default",
    scheduler: str = "",
    nominated: str = "",
    policy: str = "",
    terminating: bool = False,
    by_preemption: bool = False,
    affinity: dict[str, Any] | None = None,
    spread: Sequence[dict[str, object]] = (),
) -> PodInfo:
    b = make_pod(name, ns).priority(prio)
    if res:
        b.req(**res)
    if node:
        b.node(node)
    if start is not None:
        b.started(start)
    for k, v in (labels or {}).items():
        b.label(k, v)
    if scheduler:
        b.scheduler(scheduler)
    if nominated:
        b.nominated(nominated)
    if policy:
        b.preemption_policy(policy)
    if terminating or by_preemption:
        b.terminating(by_preemption=by_preemption)
    if affinity:
        b.affinity(affinity)
    for c in spread:
        b.spread(c)
    return b.info()


def nodes_with(
    names: Sequence[str], pods: Sequence[PodInfo], res: Res | None = None, pods_cap: int = 100
) -> list[NodeInfo]:
    """Nodes named "name" or "name/zone" (upstream's convention: the zone becomes a label),
    holding the pods bound to them."""
    out = []
    for spec in names:
        name, _, zone = spec.partition("/")
        b = make_node(name).alloc(**(res or VERY_LARGE), pods=pods_cap)
        if zone:
            b.label("zone", zone)
        out.append(b.info(*[p for p in pods if p.node_name == name]))
    return out


def make_evaluator(
    nodes: Sequence[NodeInfo],
    plugins: Sequence[object],
    *,
    args: DefaultPreemptionArgs | None = None,
    pdbs: Sequence[PDBInfo] = (),
    nominator: Nominator | None = None,
    actions: RecordingActions | None = None,
    rng: random.Random | None = None,
) -> Evaluator:
    fw = Framework.build(
        "py-scheduler",
        list(plugins),
        score_weights={},
        nominator=nominator if nominator is not None else Nominator(),
    )
    return Evaluator(
        fw,
        Snapshot.from_node_infos(list(nodes)),
        args or DefaultPreemptionArgs(),
        lambda: list(pdbs),
        actions,
        rng or random.Random(0),
    )


def pre_filtered(ev: Evaluator, preemptor: PodInfo) -> CycleState:
    state = CycleState()
    _, st = ev.framework.run_pre_filter(state, preemptor, ev.snapshot)
    assert st.is_success(), st
    return state


def all_unschedulable(ev: Evaluator) -> dict[str, Status]:
    return {ni.name: Status.unschedulable("Insufficient cpu") for ni in ev.snapshot.node_info_list}


CandidateView = tuple[str, tuple[str, ...], int]


def view(candidates: Sequence[Candidate]) -> list[CandidateView]:
    """Upstream's comparison: candidates sorted by node, victims sorted by name."""
    return sorted(
        (c.node_name, tuple(sorted(v.name for v in c.victims)), c.num_pdb_violations)
        for c in candidates
    )


# ----------------------------------------------------------------------------- eligibility


@dataclass
class EligibleCase:
    preemptor: PodInfo
    pods: list[PodInfo] = field(default_factory=list)
    nodes: list[str] = field(default_factory=lambda: ["node1"])
    nominated_status: Status | None = None
    nominate_in_nominator: str = ""
    args: DefaultPreemptionArgs = DEFAULT_ARGS
    expected: tuple[bool, str] = (True, "")


_UNRESOLVABLE = Status.unresolvable("node(s) had untolerated taint(s)")


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            EligibleCase(
                pod("p_with_nominated_node", HIGH, nominated="node1"),
                [pod("p1", LOW, node="node1", terminating=True)],
                nominated_status=_UNRESOLVABLE,
            ),
            id="Pod with nominated node",
        ),
        pytest.param(
            EligibleCase(pod("p_without_nominated_node", HIGH), nodes=[]),
            id="Pod without nominated node",
        ),
        pytest.param(
            EligibleCase(
                pod("p_with_preempt_never_policy", HIGH, policy="Never"),
                nodes=[],
                expected=(False, MSG_NEVER),
            ),
            id="Pod with 'PreemptNever' preemption policy",
        ),
        pytest.param(
            EligibleCase(
                pod("p_with_nominated_node", HIGH, nominated="node1"),
                [pod("p1", LOW, node="node1", by_preemption=True)],
                expected=(False, MSG_TERMINATING),
            ),
            id="preemption victim pod terminating, as indicated by the dedicated "
            "DisruptionTarget condition",
        ),
        pytest.param(
            EligibleCase(
                pod("p_with_nominated_node", HIGH, nominated="node1"),
                [pod("p1", LOW, node="node1", terminating=True)],
            ),
            id="non-victim Pods terminating",
        ),
        pytest.param(
            EligibleCase(
                pod("p", HIGH, nominated="node1"),
                [pod("p1", LOW, node="node1", by_preemption=True)],
                nominated_status=_UNRESOLVABLE,
            ),
            id="victim terminating, but the nominated node is now unresolvable: eligible again",
        ),
        pytest.param(
            EligibleCase(
                pod("p", HIGH, nominated="node1"),
                [pod("p1", LOW, node="node1", by_preemption=True)],
                nominated_status=Status.unschedulable("Insufficient cpu"),
                expected=(False, MSG_TERMINATING),
            ),
            id="victim terminating and the nominated node merely unschedulable: wait",
        ),
        pytest.param(
            EligibleCase(
                pod("p", HIGH, nominated="node1"),
                [pod("p1", HIGH, node="node1", by_preemption=True)],
            ),
            id="terminating pod of equal priority does not block",
        ),
        pytest.param(
            EligibleCase(
                pod("p", HIGH, nominated="node1"),
                [pod("p1", VERY_HIGH, node="node1", by_preemption=True)],
            ),
            id="terminating pod of higher priority does not block",
        ),
        pytest.param(
            EligibleCase(
                pod("p", HIGH, nominated="node1"),
                [pod("p1", LOW, node="node2", by_preemption=True)],
                nodes=["node1", "node2"],
            ),
            id="terminating victim on another node does not block",
        ),
        pytest.param(
            EligibleCase(
                pod("p", HIGH),
                [pod("p1", LOW, node="node1", by_preemption=True)],
                nominate_in_nominator="node1",
                expected=(False, MSG_TERMINATING),
            ),
            id="nomination known to the nominator only (status patch not seen yet)",
        ),
        pytest.param(
            EligibleCase(pod("p", HIGH, nominated="gone"), [], nodes=["node1"]),
            id="nominated node no longer in the snapshot",
        ),
        pytest.param(
            EligibleCase(
                pod("p", HIGH, nominated="node1"),
                [pod("p1", LOW, node="node1", by_preemption=True, scheduler="other")],
                args=DefaultPreemptionArgs(victim_scheduler_names=("py-scheduler",)),
            ),
            id="terminating pod that may not be a victim (victimSchedulerNames) does not block",
        ),
    ],
)
def test_pod_eligible_to_preempt_others(case: EligibleCase) -> None:
    nominator = Nominator()
    if case.nominate_in_nominator:
        nominator.add_nominated_pod(case.preemptor, case.nominate_in_nominator)
    ev = make_evaluator(nodes_with(case.nodes, case.pods), [], args=case.args, nominator=nominator)
    assert ev.pod_eligible_to_preempt_others(case.preemptor, case.nominated_status) == case.expected


def test_terminating_by_preemption_needs_reason_and_deletion() -> None:
    """Upstream's PodTerminatingByPreemption: deletionTimestamp plus DisruptionTarget=True
    with reason PreemptionByScheduler."""
    other_reason = (
        make_pod("a")
        .node("n")
        .terminating()
        .condition("DisruptionTarget", reason="TerminationByKubelet")
    )
    not_deleted = (
        make_pod("b").node("n").condition("DisruptionTarget", reason="PreemptionByScheduler")
    )
    false_condition = (
        make_pod("c")
        .node("n")
        .terminating()
        .condition("DisruptionTarget", status="False", reason="PreemptionByScheduler")
    )
    assert not other_reason.info().terminating_by_preemption
    assert not not_deleted.info().terminating_by_preemption
    assert not false_condition.info().terminating_by_preemption
    assert pod("d", node="n", by_preemption=True).terminating_by_preemption


# ----------------------------------------------------------------------------- select victims


@dataclass
class VictimsCase:
    init_pods: list[PodInfo]
    preemptor: PodInfo
    pdbs: list[PDBInfo] = field(default_factory=list)
    expected: tuple[str, ...] = ()  # in order, most important first
    num_violating: int = 0
    code: Code = Code.SUCCESS
    message: str = ""
    args: DefaultPreemptionArgs = DEFAULT_ARGS


_FOO_PDB_0 = make_pdb("pdb", match_labels={"app": "foo"}, allowed=0)
_FOO = {"app": "foo"}


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            VictimsCase(
                [pod("victim", LOW, LARGE, node="node1")],
                pod("p", HIGH, LARGE),
                expected=("victim",),
            ),
            id="Basic: Preempt single lower priority pod",
        ),
        pytest.param(
            VictimsCase(
                [
                    pod("high-prio", HIGH, SMALL, node="node1"),
                    pod("mid-prio", MID, SMALL, node="node1"),
                    pod("low-prio", LOW, SMALL, node="node1"),
                ],
                pod("p", HIGH, LARGE),
                expected=("low-prio",),
            ),
            id="Priority: Prefer lower priority victim",
        ),
        pytest.param(
            VictimsCase(
                [
                    pod("victim-pdb", LOW, MEDIUM, node="node1", labels=_FOO),
                    pod("victim-no-pdb", MID, MEDIUM, node="node1"),
                ],
                pod("p", HIGH, LARGE),
                pdbs=[_FOO_PDB_0],
                expected=("victim-no-pdb",),
            ),
            id="PDB: Prefer non-violating victim with higher priority over violating victim "
            "with lower priority",
        ),
        pytest.param(
            VictimsCase(
                [
                    pod("v1", LOW, MEDIUM, node="node1", labels=_FOO),
                    pod("v2", MID, MEDIUM, node="node1", labels=_FOO),
                ],
                pod("p", HIGH, LARGE),
                pdbs=[_FOO_PDB_0],
                expected=("v1",),
                num_violating=1,
            ),
            id="PDB: Prefer lower prioirity pod for preemption, when preemption without pdb "
            "violation is not possible",
        ),
        pytest.param(
            VictimsCase(
                [pod("victim", HIGH, node="node1")],
                pod("p", MID),
                code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                message=MSG_NO_VICTIMS,
            ),
            id="Failure: Cannot preempt the victim with higher priority",
        ),
        pytest.param(
            VictimsCase(
                [pod("victim", HIGH, node="node1")],
                pod("p", HIGH),
                code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                message=MSG_NO_VICTIMS,
            ),
            id="equal priority is never a victim",
        ),
        pytest.param(
            VictimsCase(
                [],
                pod("p", MID),
                code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                message=MSG_NO_VICTIMS,
            ),
            id="Failure: Cannot preempt if node is empty",
        ),
        pytest.param(
            VictimsCase(
                [pod("low", LOW, SMALL, node="node1"), pod("high", HIGH, LARGE, node="node1")],
                pod("p", HIGH, LARGE),
                code=Code.UNSCHEDULABLE,
                message="Insufficient cpu, Insufficient memory",
            ),
            id="removing every lower-priority pod is not enough: the filter's status",
        ),
        pytest.param(
            VictimsCase(
                [
                    pod("old", LOW, MEDIUM, node="node1", start=1),
                    pod("young", LOW, MEDIUM, node="node1", start=5),
                ],
                pod("p", HIGH, LARGE),
                expected=("young",),
            ),
            id="equal priority: the one that started earlier is reprieved first",
        ),
        pytest.param(
            VictimsCase(
                [
                    pod("a", MID, SMALL, node="node1"),
                    pod("b", LOW, SMALL, node="node1"),
                    pod("c", MID, MEDIUM, node="node1"),
                    pod("d", HIGH, SMALL, node="node1"),
                ],
                pod("p", HIGH, LARGE),
                expected=("c", "b"),
            ),
            id="minimal victims, returned most important first",
        ),
        pytest.param(
            VictimsCase(
                [
                    pod("pdb-low", LOW, MEDIUM, node="node1", labels=_FOO),
                    pod("free-mid", MID, MEDIUM, node="node1"),
                    pod("free-low", LOW, SMALL, node="node1", start=3),
                ],
                pod("p", HIGH, VERY_LARGE),
                pdbs=[_FOO_PDB_0],
                expected=("free-mid", "pdb-low", "free-low"),
                num_violating=1,
            ),
            id="PDB-violating and other victims mixed: re-sorted by importance",
        ),
        pytest.param(
            VictimsCase(
                [
                    pod("theirs", LOW, SMALL, node="node1", scheduler="default-scheduler"),
                    pod("ours", LOW, LARGE, node="node1"),
                ],
                pod("p", HIGH, LARGE),
                args=DefaultPreemptionArgs(victim_scheduler_names=("py-scheduler",)),
                expected=("ours",),
            ),
            id="victimSchedulerNames: only pods of the named schedulers may be victims",
        ),
        pytest.param(
            VictimsCase(
                [pod("theirs", LOW, LARGE, node="node1", scheduler="default-scheduler")],
                pod("p", HIGH, LARGE),
                args=DefaultPreemptionArgs(victim_scheduler_names=("py-scheduler",)),
                code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                message=MSG_NO_VICTIMS,
            ),
            id="victimSchedulerNames: no allowed victim on the node",
        ),
    ],
)
def test_select_victims_on_node(case: VictimsCase) -> None:
    nodes = nodes_with(["node1"], case.init_pods)
    ev = make_evaluator(nodes, [NodeResourcesFit()], args=case.args, pdbs=case.pdbs)
    original = nodes[0]
    ni = original.clone()
    victims, num_violating, st = ev.select_victims_on_node(
        pre_filtered(ev, case.preemptor), case.preemptor, ni, case.pdbs
    )
    assert (tuple(v.name for v in victims), num_violating) == (case.expected, case.num_violating)
    assert st.code == case.code
    assert st.message() == case.message
    # On success the victims are gone from the clone and every other pod is back (the
    # clone is thrown away otherwise); the snapshot's NodeInfo is never touched.
    if st.is_success():
        assert set(ni.pods) == {p.key for p in case.init_pods} - {v.key for v in victims}
        ni.check_invariants()
    assert set(original.pods) == {p.key for p in case.init_pods}


def test_select_victims_honours_nominated_pods() -> None:
    """The dry run keeps room for pods of equal or higher priority nominated to the node
    (upstream's RunFilterPluginsWithNominatedPods); lower-priority nominations are ignored."""
    init = [pod("low", LOW, LARGE, node="node1")]
    preemptor = pod("p", HIGH, LARGE)
    for nominated_prio, expected in [
        (VERY_HIGH, Code.UNSCHEDULABLE),
        (HIGH, Code.UNSCHEDULABLE),
        (MID, Code.SUCCESS),
    ]:
        nominator = Nominator()
        nominator.add_nominated_pod(pod("nominated", nominated_prio, LARGE), "node1")
        ev = make_evaluator(nodes_with(["node1"], init), [NodeResourcesFit()], nominator=nominator)
        victims, _, st = ev.select_victims_on_node(
            CycleState(), preemptor, ev.snapshot.node_info_list[0].clone(), []
        )
        assert st.code == expected, nominated_prio
        assert [v.name for v in victims] == (["low"] if expected == Code.SUCCESS else [])


def test_preemptor_nominated_to_the_node_does_not_count_itself() -> None:
    nominator = Nominator()
    preemptor = pod("p", HIGH, LARGE)
    nominator.add_nominated_pod(preemptor, "node1")
    ev = make_evaluator(
        nodes_with(["node1"], [pod("low", LOW, LARGE, node="node1")]),
        [NodeResourcesFit()],
        nominator=nominator,
    )
    victims, _, st = ev.select_victims_on_node(
        CycleState(), preemptor, ev.snapshot.node_info_list[0].clone(), []
    )
    assert st.is_success()
    assert [v.name for v in victims] == ["low"]


class _ExtensionPlugin:
    """Upstream's TestPlugin: AddPod/RemovePod fail on nodes labelled error=true."""

    name = "test-plugin"

    def __init__(self, code: Code = Code.ERROR) -> None:
        self.code = code
        self.added: list[str] = []
        self.removed: list[str] = []

    def pre_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot
    ) -> tuple[None, Status]:
        return None, Status()

    def pre_filter_extensions(self) -> _ExtensionPlugin:
        return self

    def _verdict(self, verb: str, pod: PodInfo, node_info: NodeInfo) -> Status:
        assert node_info.node is not None
        if node_info.node.labels.get("error") == "true":
            return Status(self.code, (f"failed to {verb} pod: {pod.name}",))
        return Status()

    def add_pod(
        self, state: CycleState, pod: PodInfo, to_add: PodInfo, node_info: NodeInfo
    ) -> Status:
        self.added.append(to_add.name)
        return self._verdict("add", pod, node_info)

    def remove_pod(
        self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node_info: NodeInfo
    ) -> Status:
        self.removed.append(to_remove.name)
        return self._verdict("remove", pod, node_info)

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status:
        return Status()


def test_select_victims_keeps_prefilter_state_in_step() -> None:
    """Every removal and every reprieve goes through the PreFilter extensions."""
    ext = _ExtensionPlugin()
    init = [pod("a", MID, MEDIUM, node="node1"), pod("b", LOW, MEDIUM, node="node1")]
    ev = make_evaluator(nodes_with(["node1"], init), [NodeResourcesFit(), ext])
    preemptor = pod("p", HIGH, LARGE)
    victims, _, st = ev.select_victims_on_node(
        pre_filtered(ev, preemptor), preemptor, ev.snapshot.node_info_list[0].clone(), []
    )
    assert st.is_success()
    assert [v.name for v in victims] == ["b"]
    assert ext.removed == ["a", "b", "b"]  # both removed; b removed again when not reprieved
    assert ext.added == ["a", "b"]  # reprieves, most important first


@pytest.mark.parametrize("code", [Code.ERROR, Code.UNSCHEDULABLE])
def test_select_victims_prefilter_extension_failure_is_an_error(code: Code) -> None:
    """Upstream: any non-success from AddPod/RemovePod is an error for the node."""
    nodes = [
        make_node("node1")
        .alloc(**LARGE, pods=10)
        .label("error", "true")
        .info(pod("p1", LOW, node="node1"))
    ]
    ev = make_evaluator(nodes, [NodeResourcesFit(), _ExtensionPlugin(code)])
    preemptor = pod("p", HIGH, LARGE)
    victims, n, st = ev.select_victims_on_node(
        pre_filtered(ev, preemptor), preemptor, nodes[0].clone(), []
    )
    assert (victims, n, st.code) == ([], 0, Code.ERROR)
    assert (
        st.message()
        == 'running RemovePod on PreFilter plugin "test-plugin": failed to remove pod: p'
    )


# ----------------------------------------------------------------------------- dry run


@dataclass
class DryRunCase:
    plugins: Callable[[], list[object]]
    node_names: list[str]
    preemptors: list[PodInfo]
    init_pods: list[PodInfo]
    expected: list[list[CandidateView]]
    filter_calls: list[int]
    pdbs: list[PDBInfo] = field(default_factory=list)
    fake_code: Code = Code.SUCCESS
    args: DefaultPreemptionArgs = DEFAULT_ARGS
    offsets: list[int] = field(default_factory=lambda: [0, 0, 0])


def _fit() -> list[object]:
    return [NodeResourcesFit()]


_ARGS_40_1 = DefaultPreemptionArgs(
    min_candidate_nodes_percentage=40, min_candidate_nodes_absolute=1
)
_FIVE = ["node1", "node2", "node3", "node4", "node5"]
_ANTI_FOO = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {
                "labelSelector": {"matchExpressions": [{"key": "foo", "operator": "Exists"}]},
                "topologyKey": "kubernetes.io/hostname",
            }
        ]
    }
}


def _spread(key: str) -> dict[str, object]:
    return {
        "maxSkew": 1,
        "topologyKey": key,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchExpressions": [{"key": "foo", "operator": "Exists"}]},
    }


def _foo_pdb(allowed: int, disrupted: tuple[str, ...] = ()) -> PDBInfo:
    return make_pdb("pdb", match_labels={"app": "foo"}, allowed=allowed, disrupted=disrupted)


_P = pod("p", HIGH, LARGE)
_P_VL = pod("p", HIGH, VERY_LARGE)
_MID_LARGE_ON_TWO = [pod("p1", MID, LARGE, node="node1"), pod("p2", MID, LARGE, node="node2")]
_THREE_FOO = [
    pod("p1.1", MID, MEDIUM, node="node1", labels=_FOO),
    pod("p1.2", MID, MEDIUM, node="node1", labels=_FOO),
]


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            DryRunCase(
                lambda: [FalseFilter()],
                ["node1", "node2"],
                [pod("p", HIGH)],
                [pod("p1", MID, node="node1"), pod("p2", MID, node="node2")],
                [[]],
                [2],
            ),
            id="a pod that does not fit on any node",
        ),
        pytest.param(
            DryRunCase(
                lambda: [],
                ["node1", "node2"],
                [pod("p", HIGH)],
                [pod("p1", MID, node="node1"), pod("p2", MID, node="node2")],
                [[]],
                [2],
                fake_code=Code.UNSCHEDULABLE,
            ),
            id="a pod that fits with no preemption",
        ),
        pytest.param(
            DryRunCase(
                lambda: [MatchFilter()],
                ["node1", "node2"],
                [pod("node1", HIGH)],
                [pod("p1", MID, node="node1"), pod("p2", MID, node="node2")],
                [[]],
                [2],
                fake_code=Code.UNSCHEDULABLE,
            ),
            id="a pod that fits on one node with no preemption",
        ),
        pytest.param(
            DryRunCase(
                _fit,
                ["node1", "node2"],
                [_P],
                _MID_LARGE_ON_TWO,
                [[("node1", ("p1",), 0), ("node2", ("p2",), 0)]],
                [4],
            ),
            id="a pod that fits on both nodes when lower priority pods are preempted",
        ),
        pytest.param(
            DryRunCase(
                _fit, ["node1", "node2"], [pod("p", LOW, LARGE)], _MID_LARGE_ON_TWO, [[]], [0]
            ),
            id="a pod that would fit on the nodes, but other pods running are higher priority, "
            "no preemption would happen",
        ),
        pytest.param(
            DryRunCase(
                _fit,
                ["node1", "node2"],
                [_P],
                [
                    pod("p1.1", LOW, SMALL, node="node1"),
                    pod("p1.2", MID, LARGE, node="node1"),
                    pod("p2", MID, LARGE, node="node2"),
                ],
                [[("node1", ("p1.2",), 0), ("node2", ("p2",), 0)]],
                [5],
            ),
            id="medium priority pod is preempted, but lower priority one stays as it is small",
        ),
        pytest.param(
            DryRunCase(
                _fit,
                ["node1", "node2"],
                [_P],
                [
                    pod("p1.1", MID, SMALL, node="node1"),
                    pod("p1.2", LOW, SMALL, node="node1"),
                    pod("p1.3", MID, MEDIUM, node="node1"),
                    pod("p1.4", HIGH, SMALL, node="node1"),
                    pod("p2", HIGH, LARGE, node="node2"),
                ],
                [[("node1", ("p1.2", "p1.3"), 0)]],
                [4],
            ),
            id="mixed priority pods are preempted",
        ),
        pytest.param(
            DryRunCase(
                _fit,
                ["node1", "node2"],
                [_P],
                [
                    pod("p1.1", LOW, SMALL, node="node1", start=5),
                    pod("p1.2", LOW, SMALL, node="node1", start=4),
                    pod("p1.3", MID, MEDIUM, node="node1", start=3),
                    pod("p1.4", HIGH, SMALL, node="node1", start=2),
                    pod("p2", HIGH, LARGE, node="node2", start=1),
                ],
                [[("node1", ("p1.1", "p1.3"), 0)]],
                [4],
            ),
            id="mixed priority pods are preempted, pick later StartTime one when priorities are "
            "equal",
        ),
        pytest.param(
            DryRunCase(
                lambda: [NodeResourcesFit(), InterPodAffinity()],
                ["node1", "node2"],
                [pod("p", HIGH, SMALL, labels={"foo": ""})],
                [
                    pod("p1.1", LOW, SMALL, node="node1", labels={"foo": ""}, affinity=_ANTI_FOO),
                    pod("p1.2", MID, SMALL, node="node1"),
                    pod("p1.3", HIGH, SMALL, node="node1"),
                    pod("p2", HIGH, SMALL, node="node2"),
                ],
                [[("node1", ("p1.1",), 0)]],
                [3],
            ),
            id="pod with anti-affinity is preempted",
        ),
        pytest.param(
            DryRunCase(
                lambda: [PodTopologySpread()],
                ["node-a/zone1", "node-b/zone1", "node-x/zone2"],
                [
                    pod(
                        "p",
                        HIGH,
                        labels={"foo": ""},
                        spread=[_spread("zone"), _spread("kubernetes.io/hostname")],
                    )
                ],
                [
                    pod("pod-a1", MID, node="node-a", labels={"foo": ""}),
                    pod("pod-a2", LOW, node="node-a", labels={"foo": ""}),
                    pod("pod-b1", LOW, node="node-b", labels={"foo": ""}),
                    pod("pod-x1", HIGH, node="node-x", labels={"foo": ""}),
                    pod("pod-x2", HIGH, node="node-x", labels={"foo": ""}),
                ],
                [[("node-a", ("pod-a2",), 0), ("node-b", ("pod-b1",), 0)]],
                [5],
            ),
            id="preemption to resolve pod topology spread filter failure",
        ),
        pytest.param(
            DryRunCase(
                _fit,
                ["node1", "node2"],
                [_P],
                _MID_LARGE_ON_TWO,
                [[]],
                [2],
                fake_code=Code.UNSCHEDULABLE,
            ),
            id="get Unschedulable in the preemption phase when the filter plugins filtering the "
            "nodes",
        ),
        pytest.param(
            DryRunCase(
                _fit,
                ["node1"],
                [_P_VL],
                _THREE_FOO,
                [[("node1", ("p1.1", "p1.2"), 1)]],
                [3],
                pdbs=[_foo_pdb(1)],
            ),
            id="preemption with violation of same pdb",
        ),
        pytest.param(
            DryRunCase(
                _fit,
                ["node1"],
                [_P_VL],
                _THREE_FOO,
                [[("node1", ("p1.1", "p1.2"), 1)]],
                [3],
                pdbs=[_foo_pdb(1, ("p2",))],
            ),
            id="preemption with violation of the pdb with pod whose eviction was processed, the "
            "victim doesn't belong to DisruptedPods",
        ),
        pytest.param(
            DryRunCase(
                _fit,
                ["node1"],
                [_P_VL],
                _THREE_FOO,
                [[("node1", ("p1.1", "p1.2"), 0)]],
                [3],
                pdbs=[_foo_pdb(1, ("p1.2",))],
            ),
            id="preemption with violation of the pdb with pod whose eviction was processed, the "
            "victim belongs to DisruptedPods",
        ),
        pytest.param(
            DryRunCase(
                _fit,
                ["node1"],
                [_P_VL],
                [*_THREE_FOO, pod("p1.3", MID, MEDIUM, node="node1", labels=_FOO)],
                [[("node1", ("p1.1", "p1.2", "p1.3"), 1)]],
                [4],
                pdbs=[_foo_pdb(1, ("p1.3",))],
            ),
            id="preemption with violation of the pdb with pod whose eviction was processed, the "
            "victim which belongs to DisruptedPods is treated as 'nonViolating'",
        ),
        pytest.param(
            DryRunCase(
                _fit,
                _FIVE,
                [_P],
                [pod(f"p{i}", MID, LARGE, node=f"node{i}") for i in range(1, 6)],
                [[("node1", ("p1",), 0), ("node5", ("p5",), 0)]],
                [4],
                args=_ARGS_40_1,
                offsets=[4],
            ),
            id="all nodes are possible candidates, but DefaultPreemptionArgs limits to 2",
        ),
        pytest.param(
            DryRunCase(
                _fit,
                _FIVE,
                [_P],
                [
                    pod("p1", MID, LARGE, node="node1"),
                    pod("p2", VERY_HIGH, LARGE, node="node2"),
                    pod("p3", MID, LARGE, node="node3"),
                    pod("p4", MID, LARGE, node="node4"),
                    pod("p5", VERY_HIGH, LARGE, node="node5"),
                ],
                [[("node1", ("p1",), 0), ("node3", ("p3",), 0)]],
                [4],
                args=_ARGS_40_1,
                offsets=[4],
            ),
            id="some nodes are not possible candidates, DefaultPreemptionArgs limits to 2",
        ),
        pytest.param(
            DryRunCase(
                _fit,
                _FIVE,
                [pod("tp1", HIGH, LARGE), pod("tp2", HIGH, LARGE), pod("tp3", HIGH, LARGE)],
                [pod(f"p{i}", MID, LARGE, node=f"node{i}") for i in range(1, 6)],
                [
                    [("node1", ("p1",), 0), ("node5", ("p5",), 0)],
                    [("node2", ("p2",), 0), ("node3", ("p3",), 0)],
                    [("node4", ("p4",), 0), ("node5", ("p5",), 0)],
                ],
                [4, 4, 4],
                args=_ARGS_40_1,
                offsets=[4, 1, 3],
            ),
            id="preemption offset across multiple scheduling cycles and wrap around",
        ),
        pytest.param(
            DryRunCase(
                _fit,
                _FIVE,
                [_P],
                [
                    pod("p1", MID, LARGE, node="node1", labels=_FOO),
                    pod("p2", MID, LARGE, node="node2", labels=_FOO),
                    pod("p3", MID, LARGE, node="node3"),
                    pod("p4", MID, LARGE, node="node4"),
                    pod("p5", MID, LARGE, node="node5", labels=_FOO),
                ],
                # node5, node1: violating; node2: violating too but that list is full (2);
                # node3: the first non-violating one ends the search.
                [[("node1", ("p1",), 1), ("node3", ("p3",), 0), ("node5", ("p5",), 1)]],
                [8],
                pdbs=[_foo_pdb(0)],
                args=DefaultPreemptionArgs(
                    min_candidate_nodes_percentage=40, min_candidate_nodes_absolute=2
                ),
                offsets=[4],
            ),
            id="preemption looks past numCandidates until a non-PDB violating node is found",
        ),
    ],
)
def test_dry_run_preemption(case: DryRunCase) -> None:
    fake = FakeFilter()
    init_nodes = nodes_with(case.node_names, case.init_pods)
    fake.codes = {ni.name: case.fake_code for ni in init_nodes}
    ev = make_evaluator(
        init_nodes,
        [fake, *case.plugins()],
        args=case.args,
        pdbs=case.pdbs,
        rng=ScriptedRandom(case.offsets),
    )
    for cycle, preemptor in enumerate(case.preemptors):
        before = fake.calls
        candidates, _ = ev.find_candidates(
            pre_filtered(ev, preemptor), preemptor, all_unschedulable(ev)
        )
        assert view(candidates) == case.expected[cycle], f"cycle {cycle}"
        assert fake.calls - before == case.filter_calls[cycle], f"cycle {cycle}"
        # Non-violating candidates come first.
        flags = [c.num_pdb_violations > 0 for c in candidates]
        assert flags == sorted(flags)


def test_dry_run_statuses_of_nodes_that_are_not_candidates() -> None:
    init = [
        pod("high", HIGH, LARGE, node="node1"),
        pod("low", LOW, SMALL, node="node2"),
        pod("low2", LOW, SMALL, node="node3"),
    ]
    nodes = nodes_with(["node1", "node2", "node3"], init, res=LARGE)
    ev = make_evaluator(nodes, [NodeResourcesFit()])
    preemptor = pod("p", HIGH, {"cpu": "400m"})
    small_fit = pod("q", HIGH, LARGE)
    candidates, statuses = ev.dry_run_preemption(
        CycleState(), preemptor, ev.snapshot.node_info_list, [], 0, 3
    )
    assert candidates == []
    assert {n: (s.code, s.message()) for n, s in statuses.items()} == {
        "node1": (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, MSG_NO_VICTIMS),
        "node2": (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "Insufficient cpu"),
        "node3": (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "Insufficient cpu"),
    }
    candidates, statuses = ev.dry_run_preemption(
        CycleState(), small_fit, ev.snapshot.node_info_list, [], 0, 3
    )
    assert view(candidates) == [("node2", ("low",), 0), ("node3", ("low2",), 0)]
    assert set(statuses) == {"node1"}


def test_find_candidates_only_on_unschedulable_nodes() -> None:
    """A node whose filter status was UNSCHEDULABLE_AND_UNRESOLVABLE (or that passed, or is
    absent) is not a potential node: preemption cannot help there."""
    init = [pod(f"v{i}", LOW, LARGE, node=f"node{i}") for i in range(1, 4)]
    ev = make_evaluator(nodes_with(["node1", "node2", "node3"], init), [NodeResourcesFit()])
    statuses = {
        "node1": Status.unresolvable("node(s) didn't match Pod's node affinity/selector"),
        "node2": Status.unschedulable("Insufficient cpu"),
    }
    candidates, _ = ev.find_candidates(CycleState(), _P, statuses)
    assert view(candidates) == [("node2", ("v2",), 0)]
    assert ev.find_candidates(CycleState(), _P, {"node1": statuses["node1"]}) == ([], {})


@pytest.mark.parametrize(
    ("args", "num_nodes", "expected"),
    [
        pytest.param(DefaultPreemptionArgs(), 5, 5, id="default: fewer than 100 nodes, all"),
        pytest.param(DefaultPreemptionArgs(), 100, 100, id="default: 100 nodes"),
        pytest.param(DefaultPreemptionArgs(), 1000, 100, id="default: 10% of 1000 < 100"),
        pytest.param(DefaultPreemptionArgs(), 2000, 200, id="default: 10% of 2000"),
        pytest.param(DefaultPreemptionArgs(), 5000, 500, id="default: 10% of 5000"),
        pytest.param(_ARGS_40_1, 5, 2, id="40% of 5, absolute 1"),
        pytest.param(
            DefaultPreemptionArgs(min_candidate_nodes_percentage=0, min_candidate_nodes_absolute=3),
            10,
            3,
            id="percentage 0, absolute 3",
        ),
        pytest.param(
            DefaultPreemptionArgs(
                min_candidate_nodes_percentage=100, min_candidate_nodes_absolute=0
            ),
            7,
            7,
            id="100%, capped at the number of nodes",
        ),
    ],
)
def test_num_candidates(args: DefaultPreemptionArgs, num_nodes: int, expected: int) -> None:
    assert make_evaluator([], [], args=args).num_candidates(num_nodes) == expected


# ----------------------------------------------------------------------------- pick one node


@dataclass
class BestCase:
    node_names: list[str]
    preemptor: PodInfo
    pods: list[PodInfo]
    expected: set[str]


def _p(name: str, prio: int, res: Res, start: float = 0) -> PodInfo:
    return pod(name, prio, res, node="node" + name[1], start=start)


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            BestCase(
                ["node1", "node2"],
                _P,
                [_p("p1", MID, LARGE), _p("p2", MID, LARGE)],
                {"node1", "node2"},
            ),
            id="a pod that fits on both nodes when lower priority pods are preempted",
        ),
        pytest.param(
            BestCase(
                ["node1", "node2", "node3"],
                _P_VL,
                [
                    _p("p1.1", MID, MEDIUM),
                    _p("p1.2", MID, LARGE),
                    _p("p2.1", MID, MEDIUM),
                    _p("p2.2", LOW, MEDIUM),
                    _p("p3.1", LOW, MEDIUM),
                    _p("p3.2", LOW, MEDIUM),
                ],
                {"node3"},
            ),
            id="node with min highest priority pod is picked",
        ),
        pytest.param(
            BestCase(
                ["node1", "node2", "node3"],
                _P_VL,
                [
                    _p("p1.1", MID, MEDIUM),
                    _p("p1.2", MID, LARGE),
                    _p("p2.1", MID, LARGE),
                    _p("p2.2", LOW, MEDIUM),
                    _p("p3.1", MID, MEDIUM),
                    _p("p3.2", MID, MEDIUM),
                ],
                {"node2"},
            ),
            id="when highest priorities are the same, minimum sum of priorities is picked",
        ),
        pytest.param(
            BestCase(
                ["node1", "node2", "node3"],
                _P_VL,
                [
                    _p("p1.1", MID, SMALL),
                    _p("p1.2", NEG, SMALL),
                    _p("p1.3", MID, SMALL),
                    _p("p1.4", NEG, SMALL),
                    _p("p2.1", MID, LARGE),
                    _p("p2.2", NEG, MEDIUM),
                    _p("p3.1", MID, MEDIUM),
                    _p("p3.2", NEG, SMALL),
                    _p("p3.3", LOW, SMALL),
                ],
                {"node2"},
            ),
            id="when highest priority and sum are the same, minimum number of pods is picked",
        ),
        pytest.param(
            BestCase(
                ["node1", "node2", "node3"],
                _P_VL,
                [
                    _p("p1.1", MID, SMALL),
                    _p("p1.2", NEG, SMALL),
                    _p("p1.3", NEG, SMALL),
                    _p("p2.1", MID, LARGE),
                    _p("p2.2", NEG, MEDIUM),
                    _p("p3.1", MID, MEDIUM),
                    _p("p3.2", NEG, SMALL),
                    _p("p3.3", LOW, SMALL),
                ],
                {"node2"},
            ),
            id="sum of adjusted priorities is considered",
        ),
        pytest.param(
            BestCase(
                ["node1", "node2", "node3", "node4"],
                pod("p", VERY_HIGH, VERY_LARGE),
                [
                    _p("p1.1", MID, SMALL),
                    _p("p1.2", LOW, SMALL),
                    _p("p1.3", LOW, SMALL),
                    _p("p2.1", HIGH, LARGE),
                    _p("p3.1", MID, MEDIUM),
                    _p("p3.2", LOW, SMALL),
                    _p("p3.3", LOW, SMALL),
                    _p("p3.4", LOW, MEDIUM),
                    _p("p4.1", MID, MEDIUM),
                    _p("p4.2", MID, SMALL),
                    _p("p4.3", MID, SMALL),
                    _p("p4.4", NEG, SMALL),
                ],
                {"node1"},
            ),
            id="non-overlapping lowest high priority, sum priorities, and number of pods",
        ),
        pytest.param(
            BestCase(
                ["node1", "node2", "node3"],
                _P_VL,
                [
                    _p("p1.1", MID, MEDIUM, 2),
                    _p("p1.2", MID, MEDIUM, 2),
                    _p("p2.1", MID, MEDIUM, 3),
                    _p("p2.2", MID, MEDIUM, 3),
                    _p("p3.1", MID, MEDIUM, 1),
                    _p("p3.2", MID, MEDIUM, 1),
                ],
                {"node2"},
            ),
            id="same priority, same number of victims, different start time for each node's pod",
        ),
        pytest.param(
            BestCase(
                ["node1", "node2", "node3"],
                _P_VL,
                [
                    _p("p1.1", MID, MEDIUM, 4),
                    _p("p1.2", MID, MEDIUM, 2),
                    _p("p2.1", MID, MEDIUM, 5),
                    _p("p2.2", MID, MEDIUM, 1),
                    _p("p3.1", MID, MEDIUM, 3),
                    _p("p3.2", MID, MEDIUM, 6),
                ],
                {"node3"},
            ),
            id="same priority, same number of victims, different start time for all pods",
        ),
        pytest.param(
            BestCase(
                ["node1", "node2", "node3"],
                _P_VL,
                [
                    _p("p1.1", LOW, MEDIUM, 4),
                    _p("p1.2", MID, MEDIUM, 2),
                    _p("p2.1", MID, MEDIUM, 6),
                    _p("p2.2", LOW, MEDIUM, 1),
                    _p("p3.1", LOW, MEDIUM, 3),
                    _p("p3.2", MID, MEDIUM, 5),
                ],
                {"node2"},
            ),
            id="different priority, same number of victims, different start time for all pods",
        ),
    ],
)
def test_select_best_candidate(case: BestCase) -> None:
    ev = make_evaluator(nodes_with(case.node_names, case.pods), [NodeResourcesFit()])
    potential = ev.snapshot.node_info_list
    candidates, _ = ev.dry_run_preemption(
        CycleState(), case.preemptor, potential, [], 0, ev.num_candidates(len(potential))
    )
    best = pick_one_node_for_preemption(candidates)
    assert best is not None
    assert best.node_name in case.expected


def _cand(node: str, victims: Sequence[tuple[int, float]], pdb: int = 0) -> Candidate:
    """victims: (priority, start) pairs, most important first as the dry run orders them."""
    pods = [pod(f"{node}-v{i}", p, node=node, start=s) for i, (p, s) in enumerate(victims)]
    pods.sort(key=lambda v: (-v.priority, v.start_time))
    return Candidate(node, tuple(pods), pdb)


@pytest.mark.parametrize(
    ("candidates", "expected"),
    [
        pytest.param([], None, id="no candidates"),
        pytest.param([_cand("n1", [(MID, 0)])], "n1", id="a single candidate"),
        pytest.param(
            [_cand("n1", [(LOW, 0)], pdb=1), _cand("n2", [(HIGH, 0), (HIGH, 0)], pdb=0)],
            "n2",
            id="fewest PDB violations first, whatever the priorities",
        ),
        pytest.param(
            [_cand("n1", [(MID, 0)]), _cand("n2", [(LOW, 0), (LOW, 0), (LOW, 0)])],
            "n2",
            id="lowest highest-victim priority",
        ),
        pytest.param(
            [_cand("n1", [(MID, 0), (MID, 0)]), _cand("n2", [(MID, 0), (LOW, 0)])],
            "n2",
            id="smallest sum of priorities",
        ),
        pytest.param(
            [
                _cand("n1", [(MID, 0), (NEG, 0), (NEG, 0)]),
                _cand("n2", [(MID, 0), (NEG, 0)]),
            ],
            "n2",
            id="negative priorities: the 2^31 shift makes another victim cost more",
        ),
        pytest.param(
            [_cand("n1", [(NEG, 0), (NEG, 0)]), _cand("n2", [(NEG, 0), (NEG, 0), (NEG, 0)])],
            "n1",
            id="all negative: fewer victims is a smaller shifted sum",
        ),
        pytest.param(
            [_cand("n1", [(LOW, 0), (INT32_MIN, 0)]), _cand("n2", [(LOW, 0)])],
            "n2",
            id="fewest victims (equal shifted sums need a victim at the int32 minimum)",
        ),
        pytest.param(
            [_cand("n1", [(MID, 2), (LOW, 10)]), _cand("n2", [(MID, 5), (LOW, 0)])],
            "n2",
            id="latest start of the highest-priority victims; lower ones do not count",
        ),
        pytest.param(
            [_cand("n1", [(MID, 1), (MID, 9)]), _cand("n2", [(MID, 5), (MID, 6)])],
            "n2",
            id="the earliest start among several highest-priority victims counts",
        ),
        pytest.param(
            [_cand("n1", [(MID, 3)]), _cand("n2", [(MID, 3)]), _cand("n3", [(MID, 3)])],
            "n1",
            id="all tied: the first",
        ),
    ],
)
def test_pick_one_node_for_preemption(candidates: list[Candidate], expected: str | None) -> None:
    best = pick_one_node_for_preemption(candidates)
    assert (best.node_name if best is not None else None) == expected


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        pytest.param((MID, 5), (LOW, 0), True, id="higher priority"),
        pytest.param((LOW, 0), (MID, 5), False, id="lower priority"),
        pytest.param((MID, 1), (MID, 2), True, id="equal priority, started earlier"),
        pytest.param((MID, 2), (MID, 1), False, id="equal priority, started later"),
        pytest.param((MID, 2), (MID, 2), False, id="equal"),
    ],
)
def test_more_important(a: tuple[int, float], b: tuple[int, float], expected: bool) -> None:
    pa = pod("a", a[0], start=a[1])
    pb = pod("b", b[0], start=b[1])
    assert more_important(pa, pb) is expected


# ----------------------------------------------------------------------------- PDB filter


def _pdb_sel(
    selector: LabelSelector | None,
    allowed: int,
    ns: str = "default",
    disrupted: tuple[str, ...] = (),
) -> PDBInfo:
    return PDBInfo(ns, "pdb", selector, allowed, frozenset(disrupted))


_SEL_FOO = LabelSelector(match_labels=(("app", "foo"),))
_SEL_NO_APP = LabelSelector(
    match_expressions=(LabelSelectorRequirement("app", "DoesNotExist", frozenset()),)
)


@pytest.mark.parametrize(
    ("pods", "pdbs", "violating"),
    [
        pytest.param(
            [pod("a", labels=_FOO), pod("b", labels=_FOO)],
            [_pdb_sel(_SEL_FOO, 0, ns="other")],
            [],
            id="a PDB of another namespace does not count",
        ),
        pytest.param(
            [pod("a", labels=_FOO), pod("b", labels={"app": "bar"})],
            [_pdb_sel(_SEL_FOO, 0)],
            ["a"],
            id="only pods the selector matches",
        ),
        pytest.param(
            [pod("a", labels=_FOO)],
            [_pdb_sel(LabelSelector(), 0)],
            [],
            id="an empty selector matches nothing",
        ),
        pytest.param(
            [pod("a", labels=_FOO)],
            [_pdb_sel(None, 0)],
            [],
            id="no selector matches nothing",
        ),
        pytest.param(
            [pod("a"), pod("b", labels={"x": "y"})],
            [_pdb_sel(_SEL_NO_APP, 0)],
            ["b"],
            id="a pod without labels never violates",
        ),
        pytest.param(
            [pod("a", labels=_FOO), pod("b", labels=_FOO)],
            [_pdb_sel(_SEL_FOO, 0, disrupted=("a",))],
            ["b"],
            id="a pod in disruptedPods neither violates nor spends the budget",
        ),
        pytest.param(
            [pod("a", labels=_FOO), pod("b", labels=_FOO), pod("c", labels=_FOO)],
            [_pdb_sel(_SEL_FOO, 1, disrupted=("b",))],
            ["c"],
            id="disruptionsAllowed is spent as it goes (in the given order)",
        ),
        pytest.param(
            [pod("a", labels=_FOO), pod("b", labels=_FOO), pod("c", labels=_FOO)],
            [_pdb_sel(_SEL_FOO, 2)],
            ["c"],
            id="two allowed, three pods",
        ),
        pytest.param(
            [pod("a", labels={"app": "foo", "tier": "x"}), pod("b", labels={"tier": "x"})],
            [
                _pdb_sel(_SEL_FOO, 0),
                _pdb_sel(LabelSelector(match_labels=(("tier", "x"),)), 1),
            ],
            ["a"],
            id="the first PDB a pod breaks settles it; later PDBs are not spent on it",
        ),
        pytest.param(
            [pod("a", labels={"app": "foo", "tier": "x"}), pod("b", labels={"tier": "x"})],
            [
                _pdb_sel(LabelSelector(match_labels=(("tier", "x"),)), 1),
                _pdb_sel(_SEL_FOO, 0),
            ],
            ["a", "b"],
            id="a PDB the pod does not break is still spent before one it breaks",
        ),
    ],
)
def test_filter_victims_with_pdb_violation(
    pods: list[PodInfo], pdbs: list[PDBInfo], violating: list[str]
) -> None:
    bad, ok = filter_victims_with_pdb_violation(pods, pdbs)
    assert [p.name for p in bad] == violating
    assert [p.name for p in ok] == [p.name for p in pods if p.name not in violating]


# ----------------------------------------------------------------------------- preempt()


def test_preempt_hands_victims_and_lower_nominated_pods_to_the_actions() -> None:
    nominator = Nominator()
    low_nominated = pod("low-nominated", LOW, SMALL)
    high_nominated = pod("high-nominated", VERY_HIGH, SMALL)
    elsewhere = pod("elsewhere", LOW, SMALL)
    nominator.add_nominated_pod(low_nominated, "node1")
    nominator.add_nominated_pod(elsewhere, "node2")
    init = [pod("v1", LOW, LARGE, node="node1"), pod("v2", MID, LARGE, node="node2")]
    actions = RecordingActions()
    ev = make_evaluator(
        nodes_with(["node1", "node2"], init),
        [NodeResourcesFit()],
        nominator=nominator,
        actions=actions,
    )
    preemptor = pod("p", HIGH, LARGE)
    result, st = ev.preempt(CycleState(), preemptor, all_unschedulable(ev))
    assert result is not None and result.nominated_node_name == "node1"
    assert (st.code, st.message()) == (
        Code.SUCCESS,
        "found a potential placement for pod on node node1, preempting 1 victims",
    )
    assert [(c.node, c.victims, c.lower_nominated) for c in actions.calls] == [
        ("node1", ("v1",), ("low-nominated",))
    ]
    assert ev.last_candidate is not None and ev.last_candidate.node_name == "node1"
    # A higher-priority nomination is not the preemptor's to clear.
    nominator.add_nominated_pod(high_nominated, "node1")
    assert [p.name for p in ev.lower_priority_nominated_pods(preemptor, "node1")] == [
        "low-nominated"
    ]


def test_preempt_actions_failure_keeps_nomination() -> None:
    actions = RecordingActions(result=Status.error('pods "v1" is forbidden'))
    ev = make_evaluator(
        nodes_with(["node1"], [pod("v1", LOW, LARGE, node="node1")]),
        [NodeResourcesFit()],
        actions=actions,
    )
    result, st = ev.preempt(CycleState(), pod("p", HIGH, LARGE), all_unschedulable(ev))
    assert result is None
    assert (st.code, st.message()) == (Code.ERROR, 'pods "v1" is forbidden')
    assert len(actions.calls) == 1


def test_preempt_candidate_filters_can_veto() -> None:
    """The extender seam: filters see the candidates and may narrow them (upstream's
    callExtenders) or leave none."""
    init = [pod("v1", LOW, LARGE, node="node1"), pod("v2", NEG, LARGE, node="node2")]
    ev = make_evaluator(nodes_with(["node1", "node2"], init), [NodeResourcesFit()])
    seen: list[list[str]] = []

    def only_node1(p: PodInfo, cands: list[Candidate]) -> list[Candidate]:
        seen.append(sorted(c.node_name for c in cands))
        return [c for c in cands if c.node_name == "node1"]

    ev.candidate_filters.append(only_node1)
    result, st = ev.preempt(CycleState(), _P, all_unschedulable(ev))
    assert seen == [["node1", "node2"]]
    assert result is not None and result.nominated_node_name == "node1"
    ev.candidate_filters.append(lambda p, cands: [])
    result, st = ev.preempt(CycleState(), _P, all_unschedulable(ev))
    assert (result, st.code, st.message()) == (
        None,
        Code.UNSCHEDULABLE,
        "no candidate node for preemption",
    )


def test_preempt_errors_without_candidates_are_returned() -> None:
    nodes = [
        make_node("node1")
        .alloc(**LARGE, pods=10)
        .label("error", "true")
        .info(pod("p1", LOW, node="node1"))
    ]
    ev = make_evaluator(nodes, [NodeResourcesFit(), _ExtensionPlugin()])
    preemptor = pod("p", HIGH, LARGE)
    result, st = ev.preempt(pre_filtered(ev, preemptor), preemptor, all_unschedulable(ev))
    assert result is None
    assert st.code == Code.ERROR


def test_preempt_with_no_nodes_is_an_error() -> None:
    ev = make_evaluator([], [NodeResourcesFit()])
    result, st = ev.preempt(CycleState(), _P, {})
    assert (result, st.code) == (None, Code.ERROR)


@pytest.mark.parametrize(
    ("num_nodes", "statuses", "absent", "expected"),
    [
        pytest.param(
            1,
            {"n1": ("Insufficient cpu",)},
            "",
            "0/1 nodes are available: 1 Insufficient cpu.",
            id="one reason",
        ),
        pytest.param(
            3,
            {"n1": ("Insufficient cpu", "Insufficient memory"), "n2": ("Insufficient cpu",)},
            MSG_NOT_HELPFUL,
            "0/3 nodes are available: 1 Insufficient memory, 1 Preemption is not helpful for "
            "scheduling, 2 Insufficient cpu.",
            id="reasons counted per node, sorted as strings, absent nodes get the absent reason",
        ),
        pytest.param(
            12,
            {f"n{i}": ("node(s) were unschedulable",) for i in range(10)}
            | {"n10": ("Insufficient cpu",), "n11": ("Insufficient cpu",)},
            "",
            "0/12 nodes are available: 10 node(s) were unschedulable, 2 Insufficient cpu.",
            id="string order, not numeric (sort.Strings)",
        ),
        pytest.param(2, {}, "", "0/2 nodes are available:", id="no reasons at all"),
    ],
)
def test_fit_error_message(
    num_nodes: int, statuses: dict[str, tuple[str, ...]], absent: str, expected: str
) -> None:
    st = {n: Status(Code.UNSCHEDULABLE, r) for n, r in statuses.items()}
    assert fit_error_message(num_nodes, st, absent_reason=absent) == expected


def test_fit_error_message_prefilter_and_postfilter() -> None:
    st = {"n1": Status.unresolvable("x"), "n2": Status.unresolvable("x")}
    assert (
        fit_error_message(2, st, pre_filter_msg="x", post_filter_msg="preemption: y")
        == "0/2 nodes are available: x. preemption: y"
    )


# ----------------------------------------------------------------------------- end to end


FILTERS = ("NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodeResourcesFit")
CONFIG = SchedulerConfig(filters=FILTERS, scores=("NodeResourcesFit",))


@dataclass
class Harness:
    core: SchedulerCore
    clock: FakeClock
    binder: RecordingBinder
    recorder: RecordingRecorder
    actions: RecordingActions


def harness(
    nodes: Sequence[tuple[str, Res]],
    pods: Sequence[PodInfo] = (),
    *,
    config: SchedulerConfig = CONFIG,
) -> Harness:
    clock = FakeClock()
    binder, recorder, actions = RecordingBinder(), RecordingRecorder(), RecordingActions()
    core = SchedulerCore(config, clock, binder, recorder, actions, rng=random.Random(0))
    for name, res in nodes:
        core.on_node_add(make_node(name).alloc(**res, pods=10).record())
    for p in pods:
        core.on_pod_add(p)
    return Harness(core, clock, binder, recorder, actions)


CPU1: Res = {"cpu": "1", "memory": "1Gi"}


def test_e2e_no_victims_message_and_nomination_cleared() -> None:
    h = harness(
        [("n1", CPU1)],
        [pod("busy", LOW, {"cpu": "1"}, node="n1"), pod("p", LOW, {"cpu": "1"}, nominated="n1")],
    )
    r = h.core.schedule_one()
    assert r is not None and r.outcome == "unschedulable"
    msg = (
        "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: "
        "1 No preemption victims found for incoming pod."
    )
    assert r.message == msg
    [failed] = h.recorder.failed_calls
    assert (failed.reason, failed.message, failed.nominated_node) == ("Unschedulable", msg, "")
    assert h.core.queue.nominator.nominated_node("default/p") is None
    assert h.core.queue.where("default/p") == UNSCHEDULABLE_Q
    qpi = h.core.queue.get("default/p")
    assert qpi is not None and qpi.unschedulable_plugins == {"NodeResourcesFit"}
    assert h.actions.calls == []


def test_e2e_preemption_not_helpful_for_unresolvable_nodes() -> None:
    h = harness(
        [("n1", CPU1), ("n2", CPU1)],
        [pod("low", LOW, node="n1"), make_pod("p").priority(HIGH).node_selector(disk="ssd").info()],
    )
    r = h.core.schedule_one()
    assert r is not None
    assert r.message == (
        "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )
    assert r.nominated_node == ""
    qpi = h.core.queue.get("default/p")
    assert qpi is not None and qpi.unschedulable_plugins == {"NodeAffinity"}


def test_e2e_successful_preemption_then_binding_to_the_nominated_node() -> None:
    h = harness(
        [("n1", CPU1), ("n2", CPU1)],
        [
            pod("victim", LOW, {"cpu": "1"}, node="n1"),
            pod("keeper", HIGH, {"cpu": "1"}, node="n2"),
            pod("lower-nominated", LOW, {"cpu": "100m"}, nominated="n1"),
            pod("p", MID, {"cpu": "1"}),
        ],
    )
    r = h.core.schedule_one()
    assert r is not None and r.pod.name == "p"
    assert (r.outcome, r.node, r.nominated_node) == ("preempting", "n1", "n1")
    assert [v.name for v in r.victims] == ["victim"]
    msg = (
        "0/2 nodes are available: 2 Insufficient cpu. preemption: found a potential placement "
        "for pod on node n1, preempting 1 victims"
    )
    assert r.message == msg
    assert h.recorder.failed_calls[-1].nominated_node == "n1"
    assert [(c.preemptor, c.node, c.victims, c.lower_nominated) for c in h.actions.calls] == [
        ("default/p", "n1", ("victim",), ("lower-nominated",))
    ]
    assert h.core.queue.nominator.nominated_node("default/p") == "n1"
    assert h.core.queue.where("default/p") == UNSCHEDULABLE_Q

    # The victim goes: NodeResourcesFit's hint moves the preemptor (still backing off).
    h.core.on_pod_delete(pod("victim", LOW, {"cpu": "1"}, node="n1"))
    assert h.core.queue.where("default/p") == BACKOFF_Q
    # A lower-priority pod may not take the room kept for the nominated preemptor.
    h.core.on_pod_add(pod("sneaky", LOW, {"cpu": "1"}))
    r2 = h.core.schedule_one()
    assert r2 is not None and r2.pod.name == "lower-nominated"
    r3 = h.core.schedule_one()
    assert r3 is not None and r3.pod.name == "sneaky" and r3.outcome == "unschedulable"
    h.clock.step(1)
    h.core.flush()
    r4 = h.core.schedule_one()
    assert r4 is not None and (r4.pod.name, r4.outcome, r4.node) == ("p", "assumed", "n1")
    assert h.core.queue.nominator.nominated_node("default/p") is None
    assert [(p.name, n) for p, n in h.binder.calls][-1] == ("p", "n1")


def test_e2e_preemption_disabled_runs_no_postfilter() -> None:
    h = harness(
        [("n1", CPU1)],
        [pod("victim", LOW, {"cpu": "1"}, node="n1"), pod("p", HIGH, {"cpu": "1"}, nominated="n1")],
        config=replace(CONFIG, post_filters=()),
    )
    r = h.core.schedule_one()
    assert r is not None
    assert r.message == "0/1 nodes are available: 1 Insufficient cpu."
    assert h.actions.calls == []
    # No PostFilter plugins: the nomination is cleared, as upstream.
    assert h.recorder.failed_calls[-1].nominated_node == ""
    assert h.core.queue.nominator.nominated_node("default/p") is None


def test_e2e_preemption_policy_never() -> None:
    h = harness(
        [("n1", CPU1)],
        [pod("victim", LOW, {"cpu": "1"}, node="n1"), pod("p", HIGH, {"cpu": "1"}, policy="Never")],
    )
    r = h.core.schedule_one()
    assert r is not None
    assert r.message == (
        "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to "
        "preemptionPolicy=Never."
    )
    assert r.nominated_node is None
    assert h.actions.calls == []


def test_e2e_waiting_for_terminating_victims_keeps_the_nomination() -> None:
    h = harness(
        [("n1", CPU1), ("n2", CPU1)],
        [
            pod("victim", LOW, {"cpu": "1"}, node="n1", by_preemption=True),
            pod("other", LOW, {"cpu": "1"}, node="n2"),
            pod("p", HIGH, {"cpu": "1"}, nominated="n1"),
        ],
    )
    r = h.core.schedule_one()
    assert r is not None
    assert r.message == (
        "0/2 nodes are available: 2 Insufficient cpu. preemption: not eligible due to a "
        "terminating pod on the nominated node."
    )
    assert r.nominated_node is None
    assert h.recorder.failed_calls[-1].nominated_node is None
    assert h.core.queue.nominator.nominated_node("default/p") == "n1"
    assert h.actions.calls == []


def test_e2e_actions_failure_is_reported_and_nomination_kept() -> None:
    h = harness(
        [("n1", CPU1)],
        [pod("victim", LOW, {"cpu": "1"}, node="n1"), pod("p", HIGH, {"cpu": "1"})],
    )
    h.actions.result = Status.error("connection refused")
    r = h.core.schedule_one()
    assert r is not None
    assert r.message == (
        "0/1 nodes are available: 1 Insufficient cpu. preemption: connection refused"
    )
    assert (r.outcome, r.nominated_node) == ("unschedulable", None)


def test_e2e_default_plugins_smoke() -> None:
    """The whole default profile (spread and inter-pod affinity included) preempts too."""
    h = harness(
        [("n1", CPU1)],
        [pod("victim", LOW, {"cpu": "1"}, node="n1"), pod("p", HIGH, {"cpu": "1"})],
        config=SchedulerConfig(),
    )
    r = h.core.schedule_one()
    assert r is not None and (r.outcome, r.nominated_node) == ("preempting", "n1")
