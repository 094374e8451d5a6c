"""DefaultPreemption's PostFilter, after upstream's TestPostFilter: the result, the code and
the exact "preemption: " message for given filter statuses. Nodes absent from the statuses
count as UNSCHEDULABLE_AND_UNRESOLVABLE (upstream's absent-nodes status)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from scheduler.backend.cache.snapshot import Snapshot
from scheduler.backend.queue.nominator import Nominator
from scheduler.config import DefaultPreemptionArgs
from scheduler.framework.interface import (
    Code,
    CycleState,
    PostFilterResult,
    QueueingHint,
    Status,
)
from scheduler.framework.plugins.defaultpreemption import DefaultPreemption
from scheduler.framework.plugins.noderesources.fit import NodeResourcesFit
from scheduler.framework.preemption import Candidate, Evaluator
from scheduler.framework.runtime import Framework
from scheduler.types import NodeInfo, PDBInfo, PodInfo
from tests.builders import make_node, make_pdb, make_pod

LOW, MID, HIGH, VERY_HIGH = 0, 100, 1000, 10000
NodeRes = dict[str, str | int]
ONE_POD: NodeRes = {"pods": 1, "cpu": "4", "memory": "4Gi"}
NODE_RES: NodeRes = {"cpu": "200m", "memory": "400", "pods": 10}
LARGE_RES: NodeRes = {"cpu": "300m", "memory": "300", "pods": 10}
LARGE = {"cpu": "300m", "memory": "300"}
MEDIUM = {"cpu": "200m", "memory": "200"}
VIOLATING = {"test.kubernetes.io/is-violating-pdb": "violating"}
NON_VIOLATING = {"test.kubernetes.io/is-violating-pdb": "non-violating"}

U = Status.unschedulable()
UU = Status.unresolvable()


def pod(
    name: str,
    prio: int = LOW,
    *,
    node: str = "",
    req: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
) -> PodInfo:
    b = make_pod(name).priority(prio)
    if node:
        b.node(node)
    if req:
        b.req(**req)
    for k, v in (labels or {}).items():
        b.label(k, v)
    return b.info()


class _ErrorOnLabelledNodes:
    """Upstream's TestPlugin: AddPod/RemovePod fail on nodes labelled error=true."""

    name = "test-plugin"

    def pre_filter(self, state: CycleState, p: PodInfo, snapshot: Snapshot) -> tuple[None, Status]:
        return None, Status()

    def pre_filter_extensions(self) -> _ErrorOnLabelledNodes:
        return self

    def _check(self, verb: str, p: PodInfo, ni: NodeInfo) -> Status:
        assert ni.node is not None
        if ni.node.labels.get("error") == "true":
            return Status.error(f"failed to {verb} pod: {p.name}")
        return Status()

    def add_pod(self, state: CycleState, p: PodInfo, to_add: PodInfo, ni: NodeInfo) -> Status:
        return self._check("add", p, ni)

    def remove_pod(self, state: CycleState, p: PodInfo, to_remove: PodInfo, ni: NodeInfo) -> Status:
        return self._check("remove", p, ni)

    def filter(self, state: CycleState, p: PodInfo, ni: NodeInfo) -> Status:
        return Status()


@dataclass
class Case:
    preemptor: PodInfo
    pods: list[PodInfo]
    nodes: list[tuple[str, dict[str, str | int], dict[str, str]]]
    statuses: dict[str, Status]
    want_result: PostFilterResult | None
    want_code: Code
    want_message: str
    pdbs: list[PDBInfo] = field(default_factory=list)
    only_nodes: tuple[str, ...] = ()  # an "extender" that keeps only these candidates


def _n(
    name: str, res: dict[str, str | int], **labels: str
) -> tuple[str, dict[str, str | int], dict[str, str]]:
    return (name, res, labels)


def _success(node: str) -> tuple[PostFilterResult, Code, str]:
    return (
        PostFilterResult(node),
        Code.SUCCESS,
        f"preemption: found a potential placement for pod on node {node}, preempting 1 victims",
    )


CASES = [
    pytest.param(
        Case(
            pod("p", HIGH),
            [pod("p1", node="node1")],
            [_n("node1", ONE_POD)],
            {"node1": U},
            *_success("node1"),
        ),
        id="pod with higher priority can be made schedulable",
    ),
    pytest.param(
        Case(
            pod("p"),
            [pod("p1", node="node1")],
            [_n("node1", ONE_POD)],
            {"node1": U},
            PostFilterResult(""),
            Code.UNSCHEDULABLE,
            "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
        ),
        id="pod with tied priority is still unschedulable",
    ),
    pytest.param(
        Case(
            pod("p", HIGH),
            [pod("p1", node="node1")],
            [_n("node1", ONE_POD)],
            {"node1": UU},
            PostFilterResult(""),
            Code.UNSCHEDULABLE,
            "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
        ),
        id="preemption should respect filteredNodesStatuses",
    ),
    pytest.param(
        Case(
            pod("p", HIGH),
            [pod("p1", node="node1")],
            [_n("node1", ONE_POD)],
            {},
            PostFilterResult(""),
            Code.UNSCHEDULABLE,
            "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
        ),
        id="preemption should respect absent NodeToStatusReader entry meaning "
        "UnschedulableAndUnresolvable",
    ),
    pytest.param(
        Case(
            pod("p", MID),
            [pod("p1", HIGH, node="node1"), pod("p2", LOW, node="node2")],
            [_n("node1", ONE_POD), _n("node2", ONE_POD)],
            {"node1": U, "node2": U},
            *_success("node2"),
        ),
        id="pod can be made schedulable on one node",
    ),
    pytest.param(
        Case(
            pod("p", VERY_HIGH),
            [
                pod("p1", HIGH, node="node1", labels=NON_VIOLATING),
                pod("p2", LOW, node="node1", labels=VIOLATING),
                pod("p3", MID, node="node2", labels=VIOLATING),
            ],
            [_n("node1", ONE_POD), _n("node2", ONE_POD)],
            {"node1": U, "node2": U},
            *_success("node2"),
            pdbs=[
                # minAvailable 100%: no status yet, so no disruption allowed.
                make_pdb("violating-pdb", match_labels=VIOLATING, min_available="100%"),
                make_pdb(
                    "non-violating-pdb",
                    match_labels=NON_VIOLATING,
                    min_available=0,
                    allowed=2**31 - 1,
                ),
            ],
        ),
        id="pod can be made schedulable on minHighestPriority node",
    ),
    pytest.param(
        Case(
            pod("p", HIGH),
            [pod("p1", node="node1"), pod("p2", node="node2")],
            [_n("node1", ONE_POD), _n("node2", ONE_POD)],
            {"node1": U, "node2": U},
            *_success("node1"),
            only_nodes=("node1",),
        ),
        id="preemption result filtered out by extenders",
    ),
    pytest.param(
        Case(
            pod("p", HIGH, req=LARGE),
            [pod("p1", node="node1"), pod("p2", node="node2")],
            [_n("node1", NODE_RES), _n("node2", NODE_RES)],
            {"node1": U, "node2": U},
            PostFilterResult(""),
            Code.UNSCHEDULABLE,
            "preemption: 0/2 nodes are available: 2 Insufficient cpu.",
        ),
        id="no candidate nodes found, no enough resource after removing low priority pods",
    ),
    pytest.param(
        Case(
            pod("p", HIGH, req=LARGE),
            [
                pod("p1", HIGH, node="node1"),
                pod("p2", node="node2"),
                pod("p3", HIGH, node="node3"),
            ],
            [_n("node1", ONE_POD), _n("node2", NODE_RES), _n("node3", ONE_POD)],
            {"node1": U, "node2": U, "node3": U},
            PostFilterResult(""),
            Code.UNSCHEDULABLE,
            "preemption: 0/3 nodes are available: 1 Insufficient cpu, "
            "2 No preemption victims found for incoming pod.",
        ),
        id="no candidate nodes found with mixed reasons, no lower priority pod and no enough "
        "CPU resource",
    ),
    pytest.param(
        Case(
            pod("p", HIGH, req=LARGE),
            [pod("p1", node="node1"), pod("p2", node="node2")],
            [
                _n("node1", NODE_RES),
                _n("node2", NODE_RES),
                _n("node3", NODE_RES),
                _n("node4", NODE_RES),
            ],
            {"node1": U, "node2": U, "node4": UU},
            PostFilterResult(""),
            Code.UNSCHEDULABLE,
            "preemption: 0/4 nodes are available: 2 Insufficient cpu, "
            "2 Preemption is not helpful for scheduling.",
        ),
        id="no candidate nodes found with mixed reason, 2 UnschedulableAndUnresolvable nodes "
        "and 2 nodes don't have enough CPU resource",
    ),
    pytest.param(
        Case(
            pod("p", HIGH, req=LARGE),
            [pod("p1", node="node1")],
            [_n("node1", LARGE_RES, error="true")],
            {"node1": U},
            None,
            Code.ERROR,
            'preemption: running RemovePod on PreFilter plugin "test-plugin": '
            "failed to remove pod: p",
        ),
        id="only one node but failed with TestPlugin",
    ),
    pytest.param(
        Case(
            pod("p", HIGH, req=LARGE),
            [pod("p1", node="node1"), pod("p2", node="node2", req=MEDIUM)],
            [_n("node1", LARGE_RES, error="true"), _n("node2", LARGE_RES)],
            {"node1": U, "node2": U},
            *_success("node2"),
        ),
        id="one failed with TestPlugin and the other pass",
    ),
]


def _plugin(case: Case, nodes: Sequence[NodeInfo]) -> DefaultPreemption:
    fw = Framework.build(
        "py-scheduler",
        [NodeResourcesFit(), _ErrorOnLabelledNodes()],
        score_weights={},
        nominator=Nominator(),
    )
    ev = Evaluator(
        fw,
        Snapshot.from_node_infos(list(nodes)),
        DefaultPreemptionArgs(),
        lambda: list(case.pdbs),
        None,
        random.Random(4),
    )
    if case.only_nodes:
        keep = set(case.only_nodes)
        ev.candidate_filters.append(lambda p, cands: [c for c in cands if c.node_name in keep])
    return DefaultPreemption(ev)


@pytest.mark.parametrize("case", CASES)
def test_post_filter(case: Case) -> None:
    nodes = []
    for name, res, labels in case.nodes:
        b = make_node(name).alloc(**res)
        for k, v in labels.items():
            b.label(k, v)
        nodes.append(b.info(*[p for p in case.pods if p.node_name == name]))
    plugin = _plugin(case, nodes)
    state = CycleState()
    _, st = plugin.evaluator.framework.run_pre_filter(
        state, case.preemptor, plugin.evaluator.snapshot
    )
    assert st.is_success()
    result, status = plugin.post_filter(state, case.preemptor, dict(case.statuses))
    assert result == case.want_result
    assert (status.code, status.message(), status.plugin) == (
        case.want_code,
        case.want_message,
        "DefaultPreemption",
    )
    assert plugin.attempts == 1


def test_post_filter_not_eligible_keeps_nomination() -> None:
    p = make_pod("p").priority(HIGH).preemption_policy("Never").info()
    plugin = _plugin(
        Case(p, [], [], {}, None, Code.UNSCHEDULABLE, ""),
        [make_node("node1").alloc(**ONE_POD).info(pod("p1", node="node1"))],
    )
    result, status = plugin.post_filter(CycleState(), p, {"node1": U})
    assert result is None
    assert (status.code, status.message()) == (
        Code.UNSCHEDULABLE,
        "preemption: not eligible due to preemptionPolicy=Never.",
    )


def test_events_to_register_mirror_upstream() -> None:
    """Only AssignedPod/Delete, and its hint always says SKIP: the Filter plugins that
    rejected the pod decide when it is worth another try."""
    plugin = _plugin(Case(pod("p"), [], [], {}, None, Code.SUCCESS, ""), [])
    regs = list(plugin.events_to_register())
    assert [(r.event.resource, r.event.action) for r in regs] == [("AssignedPod", "Delete")]
    hint = regs[0].hint
    assert hint is not None
    assert hint(pod("p"), pod("gone", node="n1"), None) is QueueingHint.SKIP


def test_candidate_type_is_shared() -> None:
    """The plugin hands the Evaluator's Candidate through untouched (the actions port and
    ``simulate`` rely on ``last_candidate``)."""
    nodes = [make_node("node1").alloc(**ONE_POD).info(pod("p1", node="node1"))]
    plugin = _plugin(Case(pod("p", HIGH), [], [], {}, None, Code.SUCCESS, ""), nodes)
    plugin.post_filter(CycleState(), pod("p", HIGH), {"node1": U})
    last = plugin.evaluator.last_candidate
    assert isinstance(last, Candidate)
    assert (last.node_name, [v.name for v in last.victims]) == ("node1", ["p1"])


# --------------------------------------------------------------------------- pdbPolicy: Strict


def _strict_core(policy: str) -> Any:
    import random

    from scheduler.clock import FakeClock
    from scheduler.config import DefaultPreemptionArgs, SchedulerConfig
    from scheduler.schedule_one import SchedulerCore
    from scheduler.types import pdb_from_dict
    from tests.builders import make_node, make_pod
    from tests.unit.fakes import RecordingActions, RecordingBinder, RecordingRecorder

    cfg = SchedulerConfig(preemption=DefaultPreemptionArgs(pdb_policy=policy))
    core = SchedulerCore(
        cfg,
        FakeClock(),
        RecordingBinder(),
        RecordingRecorder(),
        RecordingActions(),
        rng=random.Random(0),
    )
    for n in ("n1", "n2"):
        core.on_node_add(make_node(n).alloc(cpu="1", memory="4Gi", pods=10).record())
        core.on_pod_add(make_pod(f"low-{n}").label("app", "db").req(cpu="1").node(n).info())
    core.on_pdb_set(
        pdb_from_dict(
            {
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "db", "namespace": "default"},
                "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "db"}}},
                "status": {"disruptionsAllowed": 0},
            }
        )
    )
    core.on_pod_add(make_pod("high").req(cpu="1").priority(1000).info())
    return core


def test_strict_pdb_policy_never_picks_a_candidate_that_violates_a_pdb() -> None:
    # BestEffort (upstream): PDBs only rank candidates, so a protected pod is preempted.
    best_effort = _strict_core("BestEffort").schedule_one()
    assert best_effort.outcome == "preempting"
    # Strict: every candidate would violate the PDB: no preemption, and the message says so.
    strict = _strict_core("Strict").schedule_one()
    assert strict.outcome == "unschedulable" and not strict.victims
    assert strict.message.endswith(
        "preemption: 0/2 nodes are available: 2 preemption would violate a "
        "PodDisruptionBudget (pdbPolicy: Strict)."
    ), strict.message


def test_pdb_policy_is_validated() -> None:
    from scheduler.config import ConfigError, parse_config

    raw = {
        "profiles": [
            {"pluginConfig": [{"name": "DefaultPreemption", "args": {"pdbPolicy": "Sometimes"}}]}
        ]
    }
    with pytest.raises(ConfigError, match=r"pluginConfig\[0\]\.args\.pdbPolicy"):
        parse_config(raw, "s.yaml")
    raw["profiles"][0]["pluginConfig"][0]["args"]["pdbPolicy"] = "Strict"
    assert parse_config(raw, "s.yaml").preemption.pdb_policy == "Strict"
