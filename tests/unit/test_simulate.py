"""``py-scheduler simulate`` (scheduler/simulate.py) through its command line: input kinds
and layouts, priorities, queue order, the run loop, PDB derivation, the three outputs, the
error exits and determinism. Every test writes YAML to tmp_path and calls
``scheduler.cli.main``; the golden test replays the seeds' nginx example."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.cli import main
from scheduler.simulate import derive_pdb_status
from scheduler.types import PDBInfo, PodInfo
from tests.builders import make_node, make_pdb, make_pdb_obj, make_pod

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


@dataclass
class Run:
    code: int
    out: str
    err: str

    @property
    def json(self) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(self.out)
        return out

    @property
    def decisions(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = self.json["decisions"]
        return out


@pytest.fixture
def sim(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Any:
    """sim(*objects, args=[...]) writes one multi-document file and runs simulate on it;
    sim.files(...) runs it on files written with ``write``."""

    class Sim:
        def __call__(self, *objs: dict[str, Any], args: tuple[str, ...] = ()) -> Run:
            return self.files(write(tmp_path, "cluster.yaml", *objs), args=args)

        def files(self, *paths: str, args: tuple[str, ...] = ()) -> Run:
            argv = ["simulate"]
            for p in paths:
                argv += ["-f", p]
            code = main([*argv, *args])
            captured = capsys.readouterr()
            return Run(code, captured.out, captured.err)

    return Sim()


def write(tmp_path: Path, name: str, *objs: dict[str, Any]) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(objs, sort_keys=False))
    return str(path)


def node(name: str, cpu: str = "2", **kw: str) -> dict[str, Any]:
    return make_node(name).alloc(cpu=cpu, memory="8Gi", pods="110", **kw).obj()


def bound(name: str, on: str, cpu: str = "1", priority: int = 0, **kw: Any) -> dict[str, Any]:
    b = make_pod(name).req(cpu=cpu).priority(priority).node(on).scheduler("default-scheduler")
    if "started" in kw:
        b.started(kw["started"])
    for k, v in kw.get("labels", {}).items():
        b.label(k, v)
    return b.obj()


def pending(name: str, cpu: str = "1", priority: int | None = 0, created: float = 0) -> Any:
    b = make_pod(name).req(cpu=cpu).created(created)
    if priority is not None:
        b.priority(priority)
    return b


def pclass(name: str, value: int, *, default: bool = False, policy: str = "") -> dict[str, Any]:
    o: dict[str, Any] = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "globalDefault": default,
    }
    if policy:
        o["preemptionPolicy"] = policy
    return o


# ------------------------------------------------------------------------- outcomes


def test_scheduled_decision_and_placement(sim: Any) -> None:
    r = sim(node("n1"), pending("p").obj())
    assert r.code == 0 and r.err == ""
    assert r.json == {
        "decisions": [{"pod": "default/p", "outcome": "scheduled", "node": "n1"}],
        "placements": {"default/p": "n1"},
        "evicted": [],
    }


def test_preemption_nominates_deletes_victims_at_once_then_binds(sim: Any) -> None:
    """The seeds' shape: a full node of priority-0 pods; the latest started is the cheapest
    victim; the preemptor goes back to the queue and binds to its nominated node."""
    r = sim(
        node("n1", cpu="2"),
        *(bound(f"low-{i}", "n1", cpu="500m", started=i) for i in range(4)),
        pending("high", cpu="1", priority=1000000).obj(),
    )
    assert r.code == 0
    assert r.decisions == [
        {
            "pod": "default/high",
            "outcome": "preempting",
            "node": "n1",
            "victims": ["default/low-2", "default/low-3"],  # most important first
        },
        {"pod": "default/high", "outcome": "scheduled", "node": "n1"},
    ]
    assert r.json["placements"] == {"default/high": "n1"}
    assert r.json["evicted"] == ["default/low-2", "default/low-3"]


def test_a_pod_with_scheduling_gates_is_reported_gated_after_the_cycles(sim: Any) -> None:
    r = sim(node("n1"), pending("g").gates("example.com/x").obj(), pending("p").obj())
    assert r.code == 0 and r.err == ""
    assert r.json["decisions"] == [
        {"pod": "default/p", "outcome": "scheduled", "node": "n1"},
        {
            "pod": "default/g",
            "outcome": "gated",
            "plugin": "SchedulingGates",
            "message": "waiting for scheduling gates: [example.com/x]",
        },
    ]
    assert r.json["placements"] == {"default/g": None, "default/p": "n1"}


def test_unschedulable_message_is_the_failed_scheduling_text(sim: Any) -> None:
    r = sim(node("n1", cpu="1"), bound("big", "n1", cpu="1", priority=5), pending("p").obj())
    assert r.decisions == [
        {
            "pod": "default/p",
            "outcome": "unschedulable",
            "message": "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are "
            "available: 1 No preemption victims found for incoming pod.",
        }
    ]
    assert r.json["placements"] == {"default/p": None}
    assert r.json["evicted"] == []


def test_preemption_policy_never_is_unschedulable_and_evicts_nothing(sim: Any) -> None:
    r = sim(
        pclass("polite", 1000, policy="Never"),
        node("n1", cpu="1"),
        bound("low", "n1"),
        pending("p", priority=None).priority_class("polite").obj(),
    )
    (d,) = r.decisions
    assert d["outcome"] == "unschedulable"
    assert d["message"].endswith("preemption: not eligible due to preemptionPolicy=Never.")
    assert r.json["evicted"] == []


def test_unknown_class_is_an_error_outcome_and_the_rest_goes_on(sim: Any) -> None:
    """Rejected as it is loaded (as the live scheduler's watch rejects it), so its decision
    comes before the cycles' decisions; its placement is null."""
    r = sim(
        node("n1"),
        pending("first").obj(),
        pending("ghost", priority=None).priority_class("no-such-class").obj(),
    )
    assert r.code == 0
    assert r.decisions == [
        {
            "pod": "default/ghost",
            "outcome": "error",
            "message": "no PriorityClass with name no-such-class was found",
        },
        {"pod": "default/first", "outcome": "scheduled", "node": "n1"},
    ]
    assert r.json["placements"] == {"default/first": "n1", "default/ghost": None}


def test_bound_pod_with_unknown_class_is_ignored_with_a_note(sim: Any) -> None:
    ghost = make_pod("ghost").req(cpu="2").node("n1").priority_class("gone").obj()
    r = sim(node("n1", cpu="2"), ghost, pending("p", cpu="2").obj())
    assert r.decisions == [{"pod": "default/p", "outcome": "scheduled", "node": "n1"}]
    assert "no PriorityClass with name gone was found; pod ignored" in r.err


# ------------------------------------------------------------------------- priority


@pytest.mark.parametrize(
    ("winner_spec", "extra"),
    [
        pytest.param({"priority": 7}, [], id="spec.priority"),
        pytest.param({"class": "gold"}, [pclass("gold", 7)], id="priorityClassName"),
        pytest.param(
            {},
            [pclass("everyone", 7, default=True)],
            id="globalDefault for a pod without priority or class",
        ),
    ],
)
def test_priority_sources_decide_who_gets_the_last_slot(
    sim: Any, winner_spec: dict[str, Any], extra: list[dict[str, Any]]
) -> None:
    """One free cpu, two pods: the one with priority 7 goes first even though created
    later; the other (priority 3 from spec) finds no room and may not preempt a 7."""
    b = make_pod("winner").req(cpu="1").created(100)
    if "priority" in winner_spec:
        b.priority(winner_spec["priority"])
    if "class" in winner_spec:
        b.priority_class(winner_spec["class"])
    loser = pending("loser", priority=3, created=0).obj()
    r = sim(*extra, node("n1", cpu="1"), loser, b.obj())
    assert [(d["pod"], d["outcome"]) for d in r.decisions] == [
        ("default/winner", "scheduled"),
        ("default/loser", "unschedulable"),
    ]


def test_priority_defaults_to_zero(sim: Any) -> None:
    r = sim(
        node("n1", cpu="1"),
        pending("zero", priority=None, created=0).obj(),
        pending("one", priority=1, created=100).obj(),
    )
    assert r.decisions[0] == {"pod": "default/one", "outcome": "scheduled", "node": "n1"}


def test_queue_order_equal_priority_creation_time_then_document_order(sim: Any) -> None:
    r = sim(
        node("n1", cpu="8"),
        pending("late", created=50).obj(),
        pending("doc-b", created=10).obj(),
        pending("doc-a", created=10).obj(),
        pending("early", created=0).obj(),
    )
    assert [d["pod"] for d in r.decisions] == [
        "default/early",
        "default/doc-b",
        "default/doc-a",
        "default/late",
    ]


# ------------------------------------------------------------------------- nodes and pods


def test_node_capacity_is_used_when_allocatable_is_missing(sim: Any) -> None:
    n = make_node("n1").obj()
    n["status"] = {"capacity": {"cpu": "1", "memory": "1Gi", "pods": "10"}}
    r = sim(n, pending("fits", cpu="1").obj(), pending("too-much", cpu="1", created=1).obj())
    assert [d["outcome"] for d in r.decisions] == ["scheduled", "unschedulable"]


def test_node_labels_taints_and_unschedulable_are_honoured(sim: Any) -> None:
    r = sim(
        make_node("tainted").taint("dedicated", "x").obj(),
        make_node("cordoned").unschedulable().obj(),
        make_node("wrong-label").label("disk", "hdd").obj(),
        make_node("right").label("disk", "ssd").obj(),
        make_pod("p").node_selector(disk="ssd").obj(),
    )
    assert r.decisions == [{"pod": "default/p", "outcome": "scheduled", "node": "right"}]


def test_start_time_falls_back_to_creation_time_for_victim_choice(sim: Any) -> None:
    """Equal priorities: the victim is the pod that started last; a pod without
    status.startTime started at its creationTimestamp."""
    no_start = make_pod("no-start").req(cpu="1").priority(0).node("n1").created(500).obj()
    r = sim(
        node("n1", cpu="2"),
        bound("started-early", "n1", started=100),
        no_start,
        pending("high", priority=10).obj(),
    )
    assert r.decisions[0]["victims"] == ["default/no-start"]


def test_other_schedulers_pending_pods_are_ignored_but_their_bound_pods_count(sim: Any) -> None:
    r = sim(
        node("n1", cpu="2"),
        bound("theirs-running", "n1", cpu="1"),
        make_pod("theirs-pending").scheduler("default-scheduler").obj(),
        pending("mine", cpu="2").obj(),
    )
    assert r.json["placements"] == {"default/mine": None}
    assert [d["pod"] for d in r.decisions] == ["default/mine"]


def test_terminal_and_terminating_pods(sim: Any) -> None:
    done = make_pod("done").req(cpu="2").node("n1").phase("Succeeded").obj()
    leaving = make_pod("leaving").terminating().obj()
    r = sim(node("n1", cpu="2"), done, leaving, pending("p", cpu="2").obj())
    assert r.json["placements"] == {"default/p": "n1"}


def test_scheduler_name_comes_from_the_config(sim: Any, tmp_path: Path) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\n"
        "kind: KubeSchedulerConfiguration\n"
        "profiles:\n- schedulerName: other\n"
    )
    r = sim(
        node("n1"),
        make_pod("for-other").scheduler("other").obj(),
        pending("for-py").obj(),
        args=("--config", str(cfg)),
    )
    assert r.json["placements"] == {"default/for-other": "n1"}


def test_extenders_of_the_config_are_named_as_not_called(sim: Any, tmp_path: Path) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\n"
        "kind: KubeSchedulerConfiguration\n"
        "extenders:\n- urlPrefix: http://127.0.0.1:1/ext\n  filterVerb: filter\n"
    )
    r = sim(node("n1"), pending("p").obj(), args=("--config", str(cfg)))
    assert r.json["placements"] == {"default/p": "n1"}
    assert "note: the configuration's extenders (http://127.0.0.1:1/ext) are not called" in r.err


def test_nominated_node_name_is_honoured(sim: Any) -> None:
    """Its nominated node is tried first and taken if it fits, though the scores would
    prefer the emptier node."""
    for seed in range(5):
        r = sim(
            node("busy", cpu="4"),
            bound("x", "busy", cpu="3"),
            node("empty", cpu="4"),
            make_pod("p").req(cpu="1").nominated("busy").obj(),
            args=("--seed", str(seed)),
        )
        assert r.decisions == [{"pod": "default/p", "outcome": "scheduled", "node": "busy"}]


def test_nomination_holds_room_against_lower_priority_pods(sim: Any) -> None:
    """'nominee' waits for its victim to terminate (not eligible to preempt again) and keeps
    its nomination; 'small' would fit in the free cpu of n1, but the two-pass filter counts
    the higher-priority nominee there first."""
    leaving = make_pod("leaving").req(cpu="2").priority(50).node("n1")
    r = sim(
        node("n1", cpu="3"),
        leaving.terminating(by_preemption=True).obj(),
        make_pod("nominee").req(cpu="2").priority(100).nominated("n1").obj(),
        pending("small", cpu="1", priority=10, created=1).obj(),
    )
    assert r.decisions == [
        {
            "pod": "default/nominee",
            "outcome": "unschedulable",
            "message": "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible "
            "due to a terminating pod on the nominated node.",
        },
        {
            "pod": "default/small",
            "outcome": "unschedulable",
            "message": "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are "
            "available: 1 No preemption victims found for incoming pod.",
        },
    ]


# ------------------------------------------------------------------------- the loop


def test_unschedulable_pods_get_another_try_after_any_deletion(sim: Any) -> None:
    """'picky' fails on NodeAffinity, whose hints never fire for a pod deletion; the
    contract still gives it another try after the victim's deletion."""
    r = sim(
        node("n1", cpu="2"),
        bound("victim", "n1", cpu="2"),
        make_pod("picky").req(cpu="1").priority(200).node_selector(disk="ssd").obj(),
        pending("preemptor", cpu="2", priority=100).obj(),
    )
    assert [(d["pod"], d["outcome"]) for d in r.decisions] == [
        ("default/picky", "unschedulable"),
        ("default/preemptor", "preempting"),
        ("default/picky", "unschedulable"),
        ("default/preemptor", "scheduled"),
    ]


def test_a_pod_placed_in_this_run_can_be_evicted_later(sim: Any) -> None:
    """x needs a pod labelled app=a in its zone: it fails until a binds (a hint moves it
    back), then preempts b, placed earlier in the run; b's placement becomes null."""
    zone = {"labels": {"zone": "z1"}}
    nodes = []
    for n in ("n1", "n2"):
        o = node(n, cpu="1")
        o["metadata"]["labels"].update(zone["labels"])
        nodes.append(o)
    affinity = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "zone"}
            ]
        }
    }
    r = sim(
        *nodes,
        make_pod("x").req(cpu="1").priority(100).affinity(affinity).obj(),
        make_pod("a").req(cpu="1").priority(10).label("app", "a").obj(),
        make_pod("b").req(cpu="1").priority(5).obj(),
    )
    outcomes = [(d["pod"], d["outcome"]) for d in r.decisions]
    assert outcomes == [
        ("default/x", "unschedulable"),
        ("default/a", "scheduled"),
        ("default/b", "scheduled"),
        ("default/x", "preempting"),
        ("default/x", "scheduled"),
    ]
    b_node = r.decisions[2]["node"]
    assert r.decisions[3] == {
        "pod": "default/x",
        "outcome": "preempting",
        "node": b_node,
        "victims": ["default/b"],
    }
    assert r.json["placements"] == {
        "default/x": b_node,
        "default/a": r.decisions[1]["node"],
        "default/b": None,
    }
    assert r.json["evicted"] == ["default/b"]


def test_no_nodes(sim: Any) -> None:
    r = sim(pending("p").obj())
    assert r.decisions == [
        {
            "pod": "default/p",
            "outcome": "unschedulable",
            "message": "no nodes available to schedule pods",
        }
    ]


def test_empty_input(sim: Any) -> None:
    r = sim()
    assert r.code == 0
    assert r.json == {"decisions": [], "placements": {}, "evicted": []}


# ------------------------------------------------------------------------- PDBs


def _pods(n: int, **labels: str) -> list[PodInfo]:
    out = []
    for i in range(n):
        b = make_pod(f"p{i}").node("n1")
        for k, v in labels.items():
            b.label(k, v)
        out.append(b.info())
    return out


def _pdb(namespace: str = "default", labels: dict[str, str] | None = None, **kw: Any) -> PDBInfo:
    return make_pdb(
        "m", namespace=namespace, match_labels={"a": "b"} if labels is None else labels, **kw
    )


@pytest.mark.parametrize(
    ("pdb", "pods", "allowed"),
    [
        pytest.param(_pdb(min_available=2), 3, 1, id="minAvailable int"),
        pytest.param(_pdb(min_available=5), 3, 0, id="minAvailable above healthy"),
        pytest.param(_pdb(min_available="50%"), 3, 1, id="minAvailable 50% of 3 rounds up to 2"),
        pytest.param(_pdb(min_available="100%"), 4, 0, id="minAvailable 100%"),
        pytest.param(_pdb(max_unavailable=1), 3, 1, id="maxUnavailable int"),
        pytest.param(_pdb(max_unavailable="50%"), 3, 2, id="maxUnavailable 50% of 3 is 2"),
        pytest.param(_pdb(max_unavailable=0), 3, 0, id="maxUnavailable 0"),
        pytest.param(_pdb(min_available=0), 0, 0, id="no matching pod allows nothing"),
        pytest.param(_pdb(), 3, 0, id="neither field allows nothing"),
        pytest.param(_pdb(labels={"x": "y"}, min_available=0), 3, 0, id="selects no pod"),
        pytest.param(_pdb(labels={}, min_available=1), 3, 2, id="empty selector: whole namespace"),
        pytest.param(_pdb("other", min_available=0), 3, 0, id="other namespace"),
    ],
)
def test_derive_pdb_status(pdb: PDBInfo, pods: int, allowed: int) -> None:
    got = derive_pdb_status(pdb, _pods(pods, a="b"))
    assert got.has_status and got.disruptions_allowed == allowed


def test_derive_pdb_status_skips_terminating_and_disrupted_pods() -> None:
    pods = _pods(3, a="b")
    pods.append(make_pod("going").node("n1").label("a", "b").terminating().info())
    pdb = make_pdb("m", match_labels={"a": "b"}, min_available=1)
    assert derive_pdb_status(pdb, pods).disruptions_allowed == 2
    disrupted = replace(pdb, disrupted_pods=frozenset({"p0"}))
    assert derive_pdb_status(disrupted, pods).disruptions_allowed == 1


def _pdb_scenario(pdb: dict[str, Any]) -> list[dict[str, Any]]:
    """Two nodes, each with one priority-0 pod; the one on 'protected' is covered by the
    PDB. Both would be equal victims but for the PDB."""
    return [
        node("protected", cpu="1"),
        node("plain", cpu="1"),
        bound("guarded", "protected", labels={"app": "db"}, started=200),
        bound("free", "plain", started=100),
        pdb,
        pending("high", priority=100).obj(),
    ]


@pytest.mark.parametrize(
    "pdb",
    [
        pytest.param(make_pdb_obj("db", match_labels={"app": "db"}, min_available=1), id="derived"),
        pytest.param(make_pdb_obj("db", match_labels={"app": "db"}, allowed=0), id="status given"),
    ],
)
def test_pdb_steers_the_victim_choice(sim: Any, pdb: dict[str, Any]) -> None:
    for seed in range(4):
        r = sim(*_pdb_scenario(pdb), args=("--seed", str(seed)))
        assert r.decisions[0]["node"] == "plain", seed
        assert r.decisions[0]["victims"] == ["default/free"]


def test_pdb_status_given_in_the_input_wins_over_the_spec(sim: Any) -> None:
    """The spec alone would allow nothing (minAvailable 1 of 1); the status says 1."""
    pdb = make_pdb_obj("db", match_labels={"app": "db"}, min_available=1, allowed=1)
    r = sim(*_pdb_scenario(pdb))
    # No PDB violation either way: the pick goes to the later start (guarded started 200).
    assert r.decisions[0]["victims"] == ["default/guarded"]


def test_pdb_stays_current_after_a_deletion(sim: Any) -> None:
    """Two preemptions in a row: the first spends the PDB's one disruption, so the second
    prefers the node whose victim the PDB does not cover."""
    objs = [
        node("a", cpu="1"),
        node("b", cpu="1"),
        node("c", cpu="1"),
        bound("db-0", "a", labels={"app": "db"}, started=300),
        bound("db-1", "b", labels={"app": "db"}, started=300),
        bound("plain", "c", started=100),
        make_pdb_obj("db", match_labels={"app": "db"}, allowed=1),
        pending("first", priority=100, created=0).obj(),
        pending("second", priority=100, created=1).obj(),
    ]
    r = sim(*objs)
    first, second = (d for d in r.decisions if d["outcome"] == "preempting")
    assert first["victims"][0].startswith("default/db-")
    assert second["victims"] == ["default/plain"]


# ------------------------------------------------------------------------- input layout


def test_kind_list_multi_document_and_several_files(sim: Any, tmp_path: Path) -> None:
    listing = {"apiVersion": "v1", "kind": "List", "items": [node("n1"), bound("b", "n1")]}
    f1 = write(tmp_path, "dump.yaml", listing, pclass("gold", 10))
    f2 = write(tmp_path, "more.yaml", node("n2"), pending("p", cpu="1").obj())
    r = sim.files(f1, f2)
    assert r.code == 0 and r.json["placements"]["default/p"] in ("n1", "n2")


def test_typed_lists_like_pod_list_are_read(sim: Any) -> None:
    r = sim({"kind": "NodeList", "items": [node("n1")]}, pending("p").obj())
    assert r.json["placements"] == {"default/p": "n1"}


def test_ignored_kinds_are_noted_on_stderr(sim: Any, tmp_path: Path) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
    r = sim(node("n1"), cm, pending("p").obj())
    assert r.code == 0
    assert f"note: {tmp_path / 'cluster.yaml'}: document 2: kind 'ConfigMap' ignored" in r.err
    assert r.json["placements"] == {"default/p": "n1"}


def test_empty_documents_are_skipped(sim: Any, tmp_path: Path) -> None:
    path = tmp_path / "gaps.yaml"
    path.write_text("---\n---\n" + yaml.safe_dump(node("n1")) + "---\n")
    assert sim.files(str(path)).code == 0


# ------------------------------------------------------------------------- output


def test_text_output(sim: Any) -> None:
    r = sim(
        node("n1", cpu="1"),
        bound("low", "n1"),
        pending("high", priority=10).obj(),
        pending("stuck", cpu="5", created=1).obj(),
        args=("-o", "text"),
    )
    lines = r.out.splitlines()
    assert lines[0] == "DECISIONS"
    assert lines[1].split() == ["#", "POD", "OUTCOME", "NODE", "DETAIL"]
    assert lines[2].split()[:5] == ["1", "default/high", "preempting", "n1", "victims:"]
    assert "default/low" in lines[2]
    assert "0/1 nodes are available: 1 Insufficient cpu." in r.out
    assert "PLACEMENTS" in lines and "EVICTED" in lines
    assert any(line.split() == ["default/stuck", "(not", "placed)"] for line in lines)
    assert lines[-1] == "default/low"


def test_json_is_the_default_when_stdout_is_not_a_tty(sim: Any) -> None:
    r = sim(node("n1"))
    assert json.loads(r.out) == {"decisions": [], "placements": {}, "evicted": []}


# ------------------------------------------------------------------------- bad input


def _bad(tmp_path: Path, text: str) -> str:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "kind: Node\nmetadata: {name: [\n",
            "document 1: not valid YAML at line",
            id="malformed YAML",
        ),
        pytest.param(
            "kind: Node\n---\nkind: Pod\nmetadata: {name: p\n  x: [\n",
            "document 2: not valid YAML at line 5",
            id="malformed YAML in the second document",
        ),
        pytest.param(
            "kind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: lots}}\n",
            "document 1: Node n1: status.allocatable.cpu: invalid quantity 'lots'",
            id="bad quantity",
        ),
        pytest.param(
            ("kind: Node\nmetadata: {name: n1}\nspec: {taints: [{key: k, effect: Sometimes}]}\n"),
            "document 1: Node n1: spec.taints[0].effect: unknown 'Sometimes'",
            id="bad taint effect",
        ),
        pytest.param(
            "metadata: {name: n1}\n",
            "document 1: kind: missing",
            id="missing kind",
        ),
        pytest.param(
            "- a\n- b\n",
            "document 1: expected a mapping, got list",
            id="not a mapping",
        ),
        pytest.param(
            "kind: List\nitems: {a: 1}\n",
            "document 1: items: expected a list",
            id="items not a list",
        ),
        pytest.param(
            (
                "kind: List\nitems: [{kind: Node, metadata: {name: n1}, status: {capaci"
                "ty: {cpu: x}}}]\n"
            ),
            "document 1: items[0]: Node n1: status.capacity.cpu: invalid quantity",
            id="bad item of a List",
        ),
        pytest.param(
            (
                "kind: Pod\nmetadata: {name: p}\nspec: {schedulerName: py-scheduler, co"
                "ntainers: 3}\n"
            ),
            "document 1: Pod default/p: spec.containers: expected a list, got int",
            id="containers not a list",
        ),
        pytest.param(
            (
                "kind: Pod\nmetadata: {name: p}\nspec: {schedulerName: py-scheduler, pr"
                "iority: high}\n"
            ),
            "document 1: Pod default/p: spec.priority: expected an integer",
            id="priority not an integer",
        ),
        pytest.param(
            "kind: Pod\nmetadata: 7\n",
            "document 1: metadata: expected a mapping, got int",
            id="metadata not a mapping",
        ),
        pytest.param(
            ("kind: PodDisruptionBudget\nmetadata: {name: d}\nspec: {minAvailable: lots}\n"),
            (
                "document 1: PodDisruptionBudget default/d: spec.minAvailable: expected"
                " an integer or a percentage"
            ),
            id="bad minAvailable",
        ),
        pytest.param(
            "kind: PriorityClass\nmetadata: {name: c}\nvalue: high\n",
            "document 1: PriorityClass c: value: expected an integer",
            id="bad class value",
        ),
        pytest.param(
            ("kind: Node\nmetadata: {name: n1}\n---\nkind: Node\nmetadata: {name: n1}\n"),
            "document 2: Node n1: duplicate of",
            id="duplicate object",
        ),
    ],
)
def test_bad_input_exits_2_naming_file_document_and_field(
    sim: Any, tmp_path: Path, text: str, expected: str
) -> None:
    path = _bad(tmp_path, text)
    r = sim.files(path)
    assert r.code == 2
    assert r.out == ""
    assert r.err.count("\n") == 1, r.err
    assert r.err.startswith(f"py-scheduler simulate: {path}: "), r.err
    assert expected in r.err, r.err


def test_missing_file_exits_2(sim: Any, tmp_path: Path) -> None:
    r = sim.files(str(tmp_path / "nope.yaml"))
    assert (r.code, r.out) == (2, "")
    missing = tmp_path / "nope.yaml"
    assert r.err == f"py-scheduler simulate: {missing}: cannot read: No such file or directory\n"


def test_bad_config_exits_2(sim: Any, tmp_path: Path) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nbogus: 1\n"
    )
    r = sim(node("n1"), args=("--config", str(cfg)))
    assert (r.code, r.out) == (2, "")
    assert r.err.startswith("py-scheduler simulate: invalid configuration: ") and "bogus" in r.err


def test_other_schedulers_malformed_pending_pods_are_not_read(sim: Any, tmp_path: Path) -> None:
    path = _bad(
        tmp_path,
        "kind: Pod\nmetadata: {name: p}\nspec: {schedulerName: other, containers: 3}\n",
    )
    assert sim.files(path).code == 0


# ------------------------------------------------------------------------- determinism


def _tie() -> list[dict[str, Any]]:
    return [node("n1"), node("n2"), pending("p").obj()]


def test_same_seed_same_output(sim: Any) -> None:
    objs = _pdb_scenario(make_pdb_obj("db", match_labels={"app": "db"}, min_available=1))
    for seed in ("0", "7"):
        first = sim(*objs, args=("--seed", seed))
        second = sim(*objs, args=("--seed", seed))
        assert first.out == second.out and first.err == second.err
    assert sim(*_tie()).out == sim(*_tie()).out


def test_score_ties_are_broken_by_the_seed(sim: Any) -> None:
    """Identical nodes: each seed picks one of them, always the same for that seed, and
    the seeds between them pick both (the default seed is 0)."""
    picks = {}
    for seed in range(16):
        picks[seed] = sim(*_tie(), args=("--seed", str(seed))).json["placements"]["default/p"]
    assert set(picks.values()) == {"n1", "n2"}
    assert sim(*_tie()).json["placements"]["default/p"] == picks[0]


# ------------------------------------------------------------------------- golden


def test_golden_nginx(sim: Any) -> None:
    """The seeds' nginx example: nginx-a (high-priority, 5 cpu) preempts the one replica
    on test-worker (test-worker2 would take two victims and break the PDB); nginx-b
    (priority 0) can preempt nobody."""
    r = sim.files(str(GOLDEN / "nginx" / "cluster.yaml"))
    assert r.code == 0 and r.err == ""
    expected = json.loads((GOLDEN / "nginx" / "expected.json").read_text())
    assert r.json == expected


# ------------------------------------------------------------------------- what-if


def _owned(o: dict[str, Any]) -> dict[str, Any]:
    o["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": "web",
            "uid": "rs-1",
            "controller": True,
        }
    ]
    return o


def _pdb(name: str, app: str, allowed: int) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": app}}},
        "status": {"disruptionsAllowed": allowed},
    }


def test_drain_evicts_as_the_eviction_api_and_shows_where_replacements_land(sim: Any) -> None:
    r = sim(
        node("n1"),
        node("n2"),
        _owned(bound("web-0", "n1", labels={"app": "web"})),
        _owned(bound("web-1", "n1", labels={"app": "web"})),
        bound("solo", "n1", labels={"app": "solo"}),
        _pdb("web", "web", 1),
        args=("--drain", "n1"),
    )
    assert r.code == 0, r.err
    drain = {d["pod"]: d for d in r.json["drain"]}
    # The PDB allows one disruption: the first web pod goes, the second is blocked.
    assert drain["default/web-0"]["outcome"] == "evicted"
    assert drain["default/web-0"]["replacement"] == "default/web-0-replacement"
    assert drain["default/web-1"] == {
        "node": "n1",
        "pod": "default/web-1",
        "outcome": "blocked",
        "pdb": ["default/web"],
        "reason": "PDB allows no disruption",
    }
    assert (
        drain["default/solo"]["outcome"] == "evicted" and "replacement" not in drain["default/solo"]
    )
    # The replacement lands on n2 (n1 is cordoned); nothing moves in the plain run.
    assert r.json["whatIf"]["placements"]["default/web-0-replacement"] == "n2"
    assert r.json["diff"]["placements"] == [
        {"pod": "default/web-0-replacement", "before": None, "after": "n2"}
    ]
    assert r.json["diff"]["drained"] == ["default/web-0", "default/solo"]


def test_cordon_and_add_show_what_the_new_pods_would_preempt(sim: Any, tmp_path: Path) -> None:
    new = write(tmp_path, "new.yaml", pending("new", cpu="2", priority=100).obj())
    r = sim(
        node("n1"),
        node("n2"),
        bound("low", "n2", cpu="2", priority=0),
        args=("--cordon", "n1", "--add", new, "-o", "json"),
    )
    assert r.code == 0, r.err
    assert r.json["whatIf"]["placements"]["default/new"] == "n2"  # after its victim went
    assert r.json["diff"]["preempted"] == {"added": ["default/low"], "removed": []}
    assert r.json["baseline"]["evicted"] == []


def test_what_if_on_an_unknown_node_is_an_input_error(sim: Any) -> None:
    r = sim(node("n1"), args=("--drain", "nope"))
    assert r.code == 2 and r.out == ""
    assert "--drain nope: no node of that name in the input" in r.err


def test_strict_pdb_policy_in_simulate(sim: Any, tmp_path: Path) -> None:
    cfg = tmp_path / "strict.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "profiles": [
                    {
                        "pluginConfig": [
                            {"name": "DefaultPreemption", "args": {"pdbPolicy": "Strict"}}
                        ]
                    }
                ]
            }
        )
    )
    objs = (
        node("n1", cpu="1"),
        bound("db-0", "n1", labels={"app": "db"}),
        _pdb("db", "db", 0),
        pending("high", priority=1000).obj(),
    )
    strict = sim(*objs, args=("--config", str(cfg)))
    assert strict.code == 0, strict.err
    assert strict.json["evicted"] == [] and strict.json["placements"]["default/high"] is None
    assert "pdbPolicy: Strict" in strict.json["decisions"][-1]["message"]
    best_effort = sim(*objs)
    assert best_effort.json["evicted"] == ["default/db-0"]


def _owned_by_rs(obj: dict[str, Any], app: str) -> dict[str, Any]:
    obj["metadata"].setdefault("labels", {})["app"] = app
    obj["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{app}-rs", "uid": f"{app}-uid"}
        | {"controller": True}
    ]
    return obj


def _replicaset(app: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": f"{app}-rs", "namespace": "default", "uid": f"{app}-uid"},
        "spec": {"selector": {"matchLabels": {"app": app}}},
    }


def test_system_default_spreading_selects_through_the_dumps_replicasets(sim: Any) -> None:
    """As kube-scheduler: the pending pod's ReplicaSet selects its peers (3 on n1), so the
    default hostname constraint steers it to n2, where 3 pods of another app use the same
    room. Without the ReplicaSet in the dump, nothing selects them: a note says so."""
    objs = [node("n1", cpu="8"), node("n2", cpu="8")]
    objs += [_owned_by_rs(bound(f"web-{i}", "n1"), "web") for i in range(3)]
    objs += [_owned_by_rs(bound(f"db-{i}", "n2"), "db") for i in range(3)]
    new = _owned_by_rs(pending("web-new").obj(), "web")
    for seed in range(6):  # without the ReplicaSets, a score tie: the seed decides
        r = sim(*objs, _replicaset("web"), _replicaset("db"), new, args=("--seed", str(seed)))
        assert r.code == 0, r.err
        assert r.json["placements"] == {"default/web-new": "n2"}, seed
        assert "system default topology spreading" not in r.err
    picks = set()
    for seed in range(6):
        r = sim(*objs, new, args=("--seed", str(seed)))
        assert r.code == 0, r.err
        picks.add(r.json["placements"]["default/web-new"])
        assert "7 pod(s) are owned by ReplicaSets" in r.err
    assert picks == {"n1", "n2"}
    assert "csinodes,csidrivers,volumeattachments,csistoragecapacities -A -o json" in r.err


@pytest.mark.parametrize(
    "args",
    [
        pytest.param((), id="plain run"),
        pytest.param(("--cordon", "n1"), id="what-if run"),
        pytest.param(("-f", "/nonexistent.yaml"), id="bad input"),
    ],
)
def test_the_garbage_collector_is_left_as_it_was_found(sim: Any, args: tuple[str, ...]) -> None:
    """simulate pauses and freezes the collector while it loads (see ``main``)."""
    import gc

    assert gc.isenabled()
    sim(node("n1"), make_pod("p").req(cpu="1").obj(), args=args)
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0


@pytest.mark.parametrize(
    ("args", "code"),
    [
        pytest.param(("-o", "json"), 0, id="json: the whole output, then os._exit"),
        pytest.param(("-o", "text", "--drain", "n0"), 0, id="text with a drain"),
        pytest.param(("-o", "json", "--drain", "nowhere"), 2, id="bad input: exit code 2"),
    ],
)
def test_the_console_entry_prints_what_main_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...], code: int
) -> None:
    """``python -m scheduler simulate`` (``console_main``, which leaves through os._exit
    after simulate) writes the same stdout and stderr, with the same exit code, as ``main``
    in process; the output (more than a pipe holds) arrives whole."""
    import subprocess
    import sys

    objs = [node(f"n{i}") for i in range(4)]
    objs += [bound(f"b{i}", f"n{i % 4}", cpu="100m") for i in range(8)]
    objs += [make_pod(f"p{i}").req(cpu="10m").scheduler("py-scheduler").obj() for i in range(600)]
    path = write(tmp_path, "cluster.yaml", *objs)
    argv = ["simulate", "-f", path, *args]
    assert main(argv) == code
    want = capsys.readouterr()
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-m", "scheduler", *argv], capture_output=True, text=True, cwd=root
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (code, want.out, want.err)
    assert len(proc.stdout) > 65_536 or code


def test_namespace_labels_from_the_dump_feed_namespace_selectors(sim: Any) -> None:
    """Anti-affinity to app=x pods in namespaces labelled team=a: the bound one on n1 is in
    such a namespace only if the dump's Namespace says so."""
    term = {
        "labelSelector": {"matchLabels": {"app": "x"}},
        "namespaceSelector": {"matchLabels": {"team": "a"}},
        "topologyKey": "kubernetes.io/hostname",
    }
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    # n1 is much the emptier: the scores pick it unless the filter rules it out.
    nodes = [
        make_node(n)
        .alloc(cpu=cpu, memory="64Gi", pods="110")
        .label("kubernetes.io/hostname", n)
        .obj()
        for n, cpu in (("n1", "64"), ("n2", "2"))
    ]
    there = make_pod("there").namespace("ns-a").label("app", "x").node("n1")
    there = there.scheduler("default-scheduler").obj()
    pod = pending("p").affinity(anti).obj()
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "ns-a", "labels": {"team": "a"}},
    }
    for seed in range(4):
        r = sim(*nodes, namespace, there, pod, args=("--seed", str(seed)))
        assert r.code == 0, r.err
        assert r.json["placements"] == {"default/p": "n2"}, seed
    placed = {
        sim(*nodes, there, pod, args=("--seed", str(s))).json["placements"]["default/p"]
        for s in range(8)
    }
    assert placed == {"n1"}  # without it the term selects no pod: the emptier node
