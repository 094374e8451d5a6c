"""``explain`` (scheduler/explain.py) against an in-memory cluster: names and missing pods,
per-node verdicts, scores, the preemption report (and that it agrees with what a real
scheduling cycle does on the same cluster), bound pods, and the JSON and text outputs."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest

from scheduler.clock import FakeClock
from scheduler.config import SchedulerConfig
from scheduler.explain import LIST_KINDS, ExplainError, Explanation, explain
from scheduler.framework.interface import CycleState
from scheduler.schedule_one import SchedulerCore
from scheduler.types import PodInfo, node_from_dict, pdb_from_dict, pod_from_dict
from tests.builders import make_node, make_pdb_obj, make_pod
from tests.unit.fakes import RecordingActions, RecordingBinder, RecordingRecorder

CONFIG = SchedulerConfig()


class Cluster:
    """A lister over objects by kind; remembers what was listed."""

    def __init__(self, *objs: dict[str, Any]) -> None:
        self.objs: dict[str, list[dict[str, Any]]] = {k: [] for k in LIST_KINDS}
        self.listed: list[str] = []
        plural = {
            "Node": "nodes",
            "Pod": "pods",
            "PodDisruptionBudget": "poddisruptionbudgets",
            "PriorityClass": "priorityclasses",
            "Namespace": "namespaces",
            "ReplicaSet": "replicasets",
            "Service": "services",
        }
        for o in objs:
            self.objs[plural[o["kind"]]].append(o)

    def __call__(self, kind: str) -> list[dict[str, Any]]:
        self.listed.append(kind)
        return self.objs[kind]

    def explain(self, ref: str, config: SchedulerConfig = CONFIG) -> Explanation:
        return explain(ref, self, config)


def node(name: str, cpu: str = "2") -> Any:
    return make_node(name).alloc(cpu=cpu, memory="8Gi", pods="110")


def running(name: str, on: str, cpu: str = "1", priority: int = 0, started: float = 0) -> Any:
    return make_pod(name).req(cpu=cpu).priority(priority).node(on).started(started)


def verdicts(e: Explanation) -> dict[str, tuple[bool, str, tuple[str, ...]]]:
    return {v.node: (v.fits, v.plugin, v.reasons) for v in e.nodes}


# ------------------------------------------------------------------------- names


@pytest.mark.parametrize("ref", ["default/", "/p", "a/b/c", ""])
def test_bad_names(ref: str) -> None:
    with pytest.raises(ExplainError, match=r"expected \[NAMESPACE/\]POD"):
        Cluster().explain(ref)


def test_a_name_without_namespace_is_looked_up_in_the_default_namespace() -> None:
    with pytest.raises(ExplainError, match=r"^pod default/p not found$"):
        Cluster().explain("p")


def test_missing_pod() -> None:
    c = Cluster(node("n1").obj(), make_pod("other").obj())
    with pytest.raises(ExplainError, match=r"^pod default/p not found$"):
        c.explain("default/p")


def test_lists_each_kind_once_and_only_lists() -> None:
    c = Cluster(node("n1").obj(), make_pod("p").obj())
    c.explain("default/p")
    assert sorted(c.listed) == sorted(LIST_KINDS)


# ------------------------------------------------------------------------- pending, fits


def test_pending_pod_that_fits_verdicts_and_scores() -> None:
    c = Cluster(
        node("small", cpu="1").obj(),
        node("big", cpu="8").obj(),
        node("busy", cpu="4").obj(),
        node("tainted").taint("dedicated", "x").obj(),
        running("filler", "busy", cpu="3").obj(),
        make_pod("p").req(cpu="1").obj(),
    )
    e = c.explain("default/p")
    assert e.state == "pending" and e.pod == "default/p"
    assert verdicts(e) == {
        "big": (True, "", ()),
        "busy": (True, "", ()),
        "small": (True, "", ()),
        "tainted": (False, "TaintToleration", ("node(s) had untolerated taint(s)",)),
    }
    assert [s.node for s in e.scores] == ["big", "busy", "small"]  # best first
    for s in e.scores:
        assert s.total == sum(p.score * p.weight for p in s.plugins)
        weights = {p.plugin: p.weight for p in s.plugins}
        assert weights["NodeResourcesFit"] == 1 and weights["TaintToleration"] == 3
    fit = {s.node: {p.plugin: p.score for p in s.plugins}["NodeResourcesFit"] for s in e.scores}
    assert fit["big"] > max(fit["busy"], fit["small"])  # LeastAllocated: the emptiest
    assert e.would_pick == ["big"]
    assert e.preemption is None and e.message == ""


def test_the_scores_are_the_ones_a_cycle_uses() -> None:
    objs = [
        node("a", cpu="4").obj(),
        node("b", cpu="8").obj(),
        running("x", "a", cpu="1").obj(),
        make_pod("p").req(cpu="1").obj(),
    ]
    e = Cluster(*objs).explain("default/p")
    core, _, _ = _cycle_core(objs[:-1])
    pod = pod_from_dict(objs[-1])
    state = _state(core, pod)
    nodes = [ni for ni in core.snapshot.node_info_list if ni.name in {s.node for s in e.scores}]
    assert core.framework.run_pre_score(state, pod, nodes, core.snapshot).is_success()
    want = {ns.name: ns.score for ns in core.framework.run_score(state, pod, nodes)}
    assert {s.node: s.total for s in e.scores} == want


def test_score_tie_is_reported() -> None:
    c = Cluster(node("n1").obj(), node("n2").obj(), make_pod("p").req(cpu="1").obj())
    e = c.explain("default/p")
    assert e.would_pick == ["n1", "n2"]
    assert any("tie" in n for n in e.notes)


def test_nominated_node_that_fits_is_taken_without_scoring() -> None:
    c = Cluster(
        node("n1", cpu="8").obj(),
        node("n2", cpu="2").obj(),
        make_pod("p").req(cpu="1").nominated("n2").obj(),
    )
    e = c.explain("default/p")
    assert e.nominated_node == "n2" and e.would_pick == ["n2"]


def test_other_pods_nominations_hold_their_room() -> None:
    """A higher-priority pod nominated to n1 counts there (pass 1 of the filter)."""
    c = Cluster(
        node("n1", cpu="2").obj(),
        node("n2", cpu="1").obj(),
        make_pod("nominee").req(cpu="2").priority(100).nominated("n1").obj(),
        make_pod("p").req(cpu="1").priority(10).obj(),
    )
    e = c.explain("default/p")
    assert verdicts(e)["n1"] == (False, "NodeResourcesFit", ("Insufficient cpu",))
    assert e.would_pick == ["n2"]


# ------------------------------------------------------------------------- preemption


def _nginx_like() -> list[dict[str, Any]]:
    """n1: one 2-cpu victim would do; n2: two victims and a PDB violation; n3: tainted."""
    return [
        node("n1", cpu="4").obj(),
        node("n2", cpu="4").obj(),
        node("n3", cpu="8").taint("dedicated", "x").obj(),
        running("a", "n1", cpu="2", started=30).label("app", "web").obj(),
        running("keep", "n1", cpu="1", priority=2000).obj(),
        running("b", "n2", cpu="2", started=10).label("app", "web").obj(),
        running("c", "n2", cpu="2", started=20).label("app", "web").obj(),
        make_pdb_obj("web", match_labels={"app": "web"}, allowed=1),
        make_pod("high").req(cpu="3").priority(1000).obj(),
    ]


def test_preemption_report() -> None:
    e = Cluster(*_nginx_like()).explain("default/high")
    assert verdicts(e) == {
        "n1": (False, "NodeResourcesFit", ("Insufficient cpu",)),
        "n2": (False, "NodeResourcesFit", ("Insufficient cpu",)),
        "n3": (False, "TaintToleration", ("node(s) had untolerated taint(s)",)),
    }
    p = e.preemption
    assert p is not None and p.outcome == "would preempt"
    assert (
        p.message
        == "preemption: found a potential placement for pod on node n1, preempting 1 victims"
    )
    assert p.chosen is not None and p.chosen.node == "n1" and p.chosen.lost_at == ""
    assert [(v.pod, v.priority, v.pdbs) for v in p.chosen.victims] == [
        ("default/a", 0, (("default/web", 1),))
    ]
    (other,) = p.others
    assert other.node == "n2"
    assert [v.pod for v in other.victims] == ["default/b", "default/c"]
    assert other.num_pdb_violations == 1
    assert other.lost_at == "fewest PDB violations"
    assert p.not_candidates == (("n3", "preemption cannot help: node(s) had untolerated taint(s)"),)
    assert e.message == (
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu. "
        "preemption: found a potential placement for pod on node n1, preempting 1 victims"
    )


@pytest.mark.parametrize("seed", range(4))
def test_preemption_report_agrees_with_a_scheduling_cycle(seed: int) -> None:
    """Run one real cycle on the same objects: same node, same victims, same message."""
    objs = _nginx_like()
    e = Cluster(*objs).explain("default/high")
    core, recorder, actions = _cycle_core(objs, seed)
    result = core.schedule_one()
    assert result is not None and result.outcome == "preempting"
    assert e.preemption is not None and e.preemption.chosen is not None
    assert result.node == e.preemption.chosen.node
    assert [v.key for v in result.victims] == [v.pod for v in e.preemption.chosen.victims]
    assert recorder.failed_calls[0].message == e.message
    assert actions.calls[0].node == e.preemption.chosen.node


def test_candidate_lost_at_each_criterion() -> None:
    c = Cluster(
        node("cheap").obj(),
        node("dear").obj(),
        node("many").obj(),
        running("v1", "cheap", cpu="2", priority=1).obj(),
        running("v2", "dear", cpu="2", priority=5).obj(),
        running("m1", "many", cpu="1", priority=1).obj(),
        running("m2", "many", cpu="1", priority=0).obj(),
        make_pod("p").req(cpu="2").priority(100).obj(),
    )
    p = c.explain("default/p").preemption
    assert p is not None and p.chosen is not None and p.chosen.node == "cheap"
    assert {o.node: o.lost_at for o in p.others} == {
        "dear": "lowest highest-priority victim",
        "many": "smallest sum of victim priorities",
    }
    by_node = {o.node: o for o in p.others}
    assert by_node["dear"].highest_victim_priority == 5
    assert (by_node["many"].highest_victim_priority, by_node["many"].victim_priority_sum) == (1, 1)
    assert len(by_node["many"].victims) == 2


def test_nodes_without_lower_priority_pods_are_no_candidates() -> None:
    c = Cluster(
        node("n1").obj(),
        running("important", "n1", cpu="2", priority=500).obj(),
        make_pod("p").req(cpu="1").priority(100).obj(),
    )
    e = c.explain("default/p")
    assert e.preemption is not None and e.preemption.outcome == "not helpful"
    assert e.preemption.not_candidates == (("n1", "No preemption victims found for incoming pod"),)
    assert e.message.endswith(
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    )


def test_preemption_policy_never() -> None:
    c = Cluster(
        node("n1", cpu="1").obj(),
        running("low", "n1").obj(),
        make_pod("p").req(cpu="1").priority(100).preemption_policy("Never").obj(),
    )
    e = c.explain("default/p")
    assert e.preemption is not None and e.preemption.outcome == "not eligible"
    assert e.preemption.message == "preemption: not eligible due to preemptionPolicy=Never."
    assert e.preemption.chosen is None


def test_preemption_disabled() -> None:
    config = replace(CONFIG, post_filters=())
    c = Cluster(
        node("n1", cpu="1").obj(),
        running("low", "n1").obj(),
        make_pod("p").priority(9).req(cpu="1").obj(),
    )
    e = c.explain("default/p", config)
    assert e.preemption is not None and e.preemption.outcome == "disabled"
    assert e.message == "0/1 nodes are available: 1 Insufficient cpu."


def test_no_nodes() -> None:
    e = Cluster(make_pod("p").obj()).explain("default/p")
    assert e.nodes == [] and e.message == "no nodes available to schedule pods"


def test_a_filter_error_stops_like_a_cycle(monkeypatch: pytest.MonkeyPatch) -> None:
    from scheduler.framework.interface import Status
    from scheduler.framework.plugins.nodeports import NodePorts

    monkeypatch.setattr(NodePorts, "filter", lambda *_: Status.error("boom"))
    # A host port: NodePorts' PreFilter skips its Filter for a pod without one.
    c = Cluster(node("n1").obj(), make_pod("p").priority(5).host_port(8080).obj())
    e = c.explain("default/p")
    assert verdicts(e) == {"n1": (False, "NodePorts", ("boom",))}
    assert e.nodes[0].code == "Error"
    assert e.preemption is None and e.scores == [] and e.message == ""
    assert (
        "Filter on node n1: plugin NodePorts failed: boom; a cycle would stop with this error"
        in e.notes
    )


# ------------------------------------------------------------------------- bound pods


def test_bound_pod_is_compared_off_its_node() -> None:
    c = Cluster(
        node("home", cpu="2").obj(),
        node("spare", cpu="8").obj(),
        node("full", cpu="1").obj(),
        running("p", "home", cpu="2").obj(),
        running("x", "full", cpu="1").obj(),
    )
    e = c.explain("default/p")
    assert e.state == "bound" and e.node == "home"
    # Off its node, it fits there again (its own 2 cpu do not count against it).
    assert verdicts(e)["home"] == (True, "", ())
    assert verdicts(e)["full"] == (False, "NodeResourcesFit", ("Insufficient cpu",))
    assert {s.node for s in e.scores} == {"home", "spare"}
    assert any("taken off home" in n for n in e.notes)
    assert e.preemption is None and e.would_pick == []
    assert "ON home: fits there now" in e.to_text()


def test_bound_pod_that_would_not_fit_there_now() -> None:
    c = Cluster(
        node("home", cpu="1").obj(),
        running("p", "home", cpu="2").obj(),
    )
    e = c.explain("default/p")
    assert verdicts(e)["home"] == (False, "NodeResourcesFit", ("Insufficient cpu",))
    assert "ON home: would not fit there now: Unschedulable" in e.to_text()


def test_pod_with_unknown_class_is_rejected() -> None:
    c = Cluster(node("n1").obj(), make_pod("p").priority_class("missing").obj())
    e = c.explain("default/p")
    assert e.state == "rejected"
    assert e.notes == [
        "the scheduler cannot use this pod: pod default/p: no PriorityClass with name "
        "missing was found"
    ]
    assert e.to_json()["state"] == "rejected"


def test_another_schedulers_pod_is_explained_with_a_note() -> None:
    c = Cluster(node("n1").obj(), make_pod("p").scheduler("default-scheduler").obj())
    e = c.explain("default/p")
    assert e.would_pick == ["n1"]
    assert any("not 'py-scheduler'" in n for n in e.notes)


def test_a_pod_being_deleted_is_explained_with_the_skip_it_gets() -> None:
    c = Cluster(node("n1").obj(), make_pod("p").terminating().obj())
    e = c.explain("default/p")
    assert e.would_pick == ["n1"]  # what a cycle would decide, were one to run
    assert any("'skip schedule deleting pod'" in n for n in e.notes)


def test_unparseable_objects_are_left_out_with_a_note() -> None:
    bad = node("bad").obj()
    bad["status"]["allocatable"]["cpu"] = "lots"
    c = Cluster(node("n1").obj(), bad, make_pod("p").obj())
    e = c.explain("default/p")
    assert [v.node for v in e.nodes] == ["n1"]
    assert any("1 Node object(s) could not be parsed" in n for n in e.notes)


# ------------------------------------------------------------------------- output


def test_json_output() -> None:
    out = Cluster(*_nginx_like()).explain("default/high").to_json()
    assert set(out) == {
        "pod", "state", "priority", "schedulerName", "node", "nominatedNode", "notes",
        "preFilter", "nodes", "scores", "wouldPick", "preemption", "message",
    }  # fmt: skip
    assert out["preFilter"] == {"code": "Success", "plugin": "", "message": ""}
    assert out["nodes"][0] == {
        "node": "n1",
        "fits": False,
        "code": "Unschedulable",
        "plugin": "NodeResourcesFit",
        "reasons": ["Insufficient cpu"],
    }
    pre = out["preemption"]
    assert pre["outcome"] == "would preempt" and pre["node"] == "n1"
    assert pre["victims"] == [
        {
            "pod": "default/a",
            "priority": 0,
            "schedulerName": "py-scheduler",
            "pdbs": [{"name": "default/web", "disruptionsAllowed": 1}],
            "violates": [],
        }
    ]
    assert pre["decidedBy"] == "fewest PDB violations" and pre["warnings"] == []
    assert pre["candidates"][0]["node"] == "n2"
    assert pre["candidates"][0]["lostAt"] == "fewest PDB violations"
    assert pre["candidates"][0]["earliestStartOfHighestPriorityVictims"] == "2026-01-01T00:00:10Z"
    assert pre["notCandidates"] == [
        {"node": "n3", "reason": "preemption cannot help: node(s) had untolerated taint(s)"}
    ]


def test_json_scores() -> None:
    out = Cluster(node("n1").obj(), make_pod("p").req(cpu="1").obj()).explain("default/p").to_json()
    (s,) = out["scores"]
    assert s["node"] == "n1"
    assert s["total"] == sum(p["weighted"] for p in s["plugins"])
    assert all(p["weighted"] == p["score"] * p["weight"] for p in s["plugins"])
    assert out["wouldPick"] == ["n1"]


def test_text_output() -> None:
    text = Cluster(*_nginx_like()).explain("default/high").to_text()
    lines = text.splitlines()
    assert lines[0] == "Pod default/high (priority 1000, schedulerName py-scheduler): pending"
    assert "FILTERS (3 nodes)" in lines
    assert any(line.split()[:3] == ["n1", "Unschedulable", "NodeResourcesFit"] for line in lines)
    assert "PREEMPTION: would preempt" in lines
    assert "  node n1; victims: default/a (priority 0, PDB default/web allows 1)" in lines
    assert "  decided by: fewest PDB violations" in lines
    # The candidates ranked by pickOneNodeForPreemption's criteria, where each lost.
    assert any(line.split()[:2] == ["n1", "0"] and line.endswith("(chosen)") for line in lines)
    assert any(
        line.split()[:2] == ["n2", "1"] and line.endswith("fewest PDB violations") for line in lines
    )
    assert any("would violate PDB" in line and "default/b" in line for line in lines)
    assert lines[-2] == "FailedScheduling message a cycle would record now:"


def test_text_output_with_scores() -> None:
    text = (
        Cluster(node("n1").obj(), make_pod("p").req(cpu="1").obj()).explain("default/p").to_text()
    )
    assert "SCORES (normalised score x weight = weighted)" in text
    assert "WOULD PICK: n1" in text


# ------------------------------------------------------------------------- helpers


def _cycle_core(
    objs: list[dict[str, Any]], seed: int = 0
) -> tuple[SchedulerCore, RecordingRecorder, RecordingActions]:
    """A SchedulerCore with recording ports, loaded with ``objs`` as the watches would."""
    recorder, actions = RecordingRecorder(), RecordingActions()
    core = SchedulerCore(
        CONFIG, FakeClock(), RecordingBinder(), recorder, actions, rng=random.Random(seed)
    )
    for o in objs:
        if o["kind"] == "Node":
            core.on_node_add(node_from_dict(o))
        elif o["kind"] == "Pod":
            core.on_pod_add(pod_from_dict(o))
        elif o["kind"] == "PodDisruptionBudget":
            core.on_pdb_set(pdb_from_dict(o))
    core.cache.update_snapshot(core.snapshot)
    return core, recorder, actions


def _state(core: SchedulerCore, pod: PodInfo) -> CycleState:
    state = CycleState()
    _, st = core.framework.run_pre_filter(state, pod, core.snapshot)
    assert st.is_success()
    return state


def test_default_spreading_scores_come_from_the_listed_replicasets_and_services() -> None:
    """The PodTopologySpread score of an owned pod depends on whether its ReplicaSet is
    listed (upstream's DefaultSelector): 3 peers on n1 make n1 score lower than n2."""
    owner = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-rs", "uid": "u1"}]
    owner[0]["controller"] = True  # type: ignore[assignment]

    def owned(b: Any) -> dict[str, Any]:
        o: dict[str, Any] = b.label("app", "web").obj()
        o["metadata"]["ownerReferences"] = owner
        return o

    rs = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "web-rs", "namespace": "default", "uid": "u1"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}},
    }
    objs = [node("n1", cpu="8").obj(), node("n2", cpu="8").obj()]
    objs += [owned(running(f"w{i}", "n1", cpu="100m")) for i in range(3)]
    objs.append(owned(make_pod("p").req(cpu="100m")))

    def spread(*extra: dict[str, Any]) -> dict[str, int | None]:
        e = Cluster(*objs, *extra).explain("default/p")
        return {
            s.node: {p.plugin: p.score for p in s.plugins}.get("PodTopologySpread")
            for s in e.scores
        }

    with_rs = spread(rs)
    assert with_rs["n2"] > with_rs["n1"]  # type: ignore[operator]
    assert spread() == {"n1": None, "n2": None}  # nothing selects the peers: PTS skips


def test_a_gated_pod_is_explained_as_kept_out_of_the_queue() -> None:
    c = Cluster(node("n1").obj(), make_pod("g").req(cpu="1").gates("example.com/quota").obj())
    e = c.explain("default/g")
    note = next(n for n in e.notes if n.startswith("PreEnqueue plugin SchedulingGates"))
    assert "waiting for scheduling gates: [example.com/quota]" in note
    assert verdicts(e)["n1"][0]  # and what it would meet once let in


class _Seats:
    """A Reserve plugin (out of tree): explain must name it, never run it."""

    name = "Seats"
    calls = 0

    def __init__(self, args: dict[str, Any]) -> None:
        pass

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Any:
        _Seats.calls += 1
        raise AssertionError("explain ran Reserve")

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        _Seats.calls += 1

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> Any:
        _Seats.calls += 1
        raise AssertionError("explain ran Permit")

    def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Any:
        _Seats.calls += 1
        raise AssertionError("explain ran PreBind")

    def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Any:
        _Seats.calls += 1
        raise AssertionError("explain ran Bind")


def test_reserve_and_permit_plugins_are_named_not_run(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import types

    from scheduler.config import parse_config

    mod = types.ModuleType("seats_plugin")
    mod.Seats = _Seats  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "seats_plugin", mod)
    config = parse_config(
        {
            "pluginModules": {"Seats": "seats_plugin:Seats"},
            "profiles": [
                {
                    "plugins": {
                        "multiPoint": {"enabled": [{"name": "Seats"}]},
                        "bind": {
                            "disabled": [{"name": "DefaultBinder"}],
                            "enabled": [{"name": "Seats"}, {"name": "DefaultBinder"}],
                        },
                    }
                }
            ],
        },
        "sched.yaml",
    )
    assert config.bind == ("Seats", "DefaultBinder")
    c = Cluster(node("n1").obj(), make_pod("p").req(cpu="1").obj())
    e = c.explain("default/p", config)
    assert e.would_pick == ["n1"]
    assert any(n.startswith("Reserve plugin(s) Seats decide once the node") for n in e.notes)
    assert any(n.startswith("Permit plugin(s) Seats decide after Reserve") for n in e.notes)
    assert any(n.startswith("PreBind/Bind plugin(s) Seats run in the binding") for n in e.notes)
    assert _Seats.calls == 0
