"""Out-of-tree plugins: discovery from the configuration, argument validation, and the guard
that turns a plugin's exception into an Error for that pod while the scheduler goes on."""

from __future__ import annotations

import asyncio
import random
import re
import sys
import types
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

import pytest
import structlog.testing

from scheduler.clock import FakeClock
from scheduler.config import ConfigError, parse_config
from scheduler.plugins import (
    SUCCESS,
    ClusterEvent,
    Code,
    CSINodeInfo,
    CycleState,
    DeviceClassInfo,
    EventRegistration,
    FrameworkHandle,
    LabelSelector,
    NodeInfo,
    PDBInfo,
    PodInfo,
    PriorityClassInfo,
    PVCInfo,
    PVInfo,
    QueuedPodInfo,
    QueueingHint,
    ResourceClaimInfo,
    ResourceSliceInfo,
    SelectorObject,
    ServiceInfo,
    Status,
    StorageClassInfo,
)
from scheduler.schedule_one import SchedulerCore
from tests.builders import make_node, make_pod
from tests.unit.fakes import RecordingBinder, RecordingRecorder


def _simulate(tmp_path: Any, objs: list[dict[str, Any]], cfg: Any) -> Any:
    """``simulate`` on ``objs`` written as a YAML dump, under configuration ``cfg``."""
    import yaml

    from scheduler.decode import load_documents
    from scheduler.simulate import simulate

    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(objs, sort_keys=False))
    return simulate(load_documents([str(path)]), cfg)


class Fragile:
    """Raises at the extension point named in its args, for pods named "bad" only."""

    name = "Fragile"

    def __init__(self, args: Mapping[str, Any]) -> None:
        if args.get("at") not in ("filter", "score"):
            raise ValueError(f"at: expected 'filter' or 'score', got {args.get('at')!r}")
        self.at = args["at"]

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status:
        if self.at == "filter" and pod.name == "bad":
            raise RuntimeError("boom in filter")
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int:
        if self.at == "score" and pod.name == "bad":
            raise KeyError("boom in score")
        return 0


@pytest.fixture(autouse=True)
def plugin_module() -> Iterator[None]:
    mod = types.ModuleType("fragile_plugin")
    mod.Fragile = Fragile  # type: ignore[attr-defined]
    sys.modules["fragile_plugin"] = mod
    yield
    del sys.modules["fragile_plugin"]


def _config(at: str) -> dict[str, Any]:
    return {
        "pluginModules": {"Fragile": "fragile_plugin:Fragile"},
        "profiles": [
            {
                "plugins": {"multiPoint": {"enabled": [{"name": "Fragile"}]}},
                "pluginConfig": [{"name": "Fragile", "args": {"at": at}}],
            }
        ],
    }


@pytest.mark.parametrize(
    ("at", "message"),
    [
        pytest.param(
            "filter", "Filter plugin Fragile raised RuntimeError: boom in filter", id="in Filter"
        ),
        pytest.param(
            "score", "running Score plugin Fragile: KeyError: 'boom in score'", id="in Score"
        ),
    ],
)
def test_a_plugin_that_raises_gives_that_pod_an_error_and_the_scheduler_goes_on(
    at: str, message: str
) -> None:
    cfg = parse_config(_config(at), "sched.yaml")
    recorder = RecordingRecorder()
    core = SchedulerCore(cfg, FakeClock(), RecordingBinder(), recorder, rng=random.Random(0))
    core.on_node_add(make_node("n1").record())
    core.on_node_add(make_node("n2").record())  # two nodes: Score runs
    core.on_pod_add(make_pod("bad").req(cpu="1").priority(10).info())
    core.on_pod_add(make_pod("good").req(cpu="1").info())
    bad = core.schedule_one()
    assert bad is not None and bad.outcome == "error" and bad.pod.name == "bad"
    assert message in bad.message
    (failed,) = recorder.failed_calls
    assert failed.reason == "SchedulerError" and "Fragile" in failed.message
    good = core.schedule_one()
    assert good is not None and good.outcome == "assumed"


@pytest.mark.parametrize(
    ("raw", "field", "problem"),
    [
        pytest.param(
            {**_config("filter"), "pluginModules": {"Fragile": "fragile_plugin"}},
            "pluginModules",
            "expected 'module:Class'",
            id="not module:Class",
        ),
        pytest.param(
            {**_config("filter"), "pluginModules": {"Fragile": "no_such_module:X"}},
            "pluginModules",
            "cannot import 'no_such_module'",
            id="a module that is not there",
        ),
        pytest.param(
            {**_config("filter"), "pluginModules": {"NodeAffinity": "fragile_plugin:Fragile"}},
            "pluginModules",
            "in-tree plugin",
            id="an in-tree name",
        ),
        pytest.param(
            _config("nowhere"), "profiles[0].pluginConfig[0].args", "at: expected", id="bad args"
        ),
    ],
)
def test_configuration_errors_name_the_file_and_the_field(
    raw: Any, field: str, problem: str
) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config(raw, "sched.yaml")
    assert "sched.yaml" in str(e.value) and field in str(e.value) and problem in str(e.value)


def test_an_out_of_tree_plugin_is_off_until_enabled() -> None:
    raw = _config("filter")
    raw["profiles"][0]["plugins"] = {}
    raw["profiles"][0]["pluginConfig"] = []
    cfg = parse_config(raw, "sched.yaml")
    assert cfg.out_of_tree == () and "Fragile" not in cfg.filters


class PreferNode:
    """OrderedScoreFuncs: candidates on the node named in args first."""

    name = "PreferNode"

    def __init__(self, args: Mapping[str, Any]) -> None:
        self.node = str(args.get("node", ""))

    def ordered_score_funcs(self, candidates: Any) -> list[Any]:
        return [lambda node: 1 if node == self.node else 0]


@pytest.mark.parametrize("prefer", ["n1", "n2"])
def test_ordered_score_funcs_replace_pick_one_criteria(prefer: str) -> None:
    mod = types.ModuleType("prefer_plugin")
    mod.PreferNode = PreferNode  # type: ignore[attr-defined]
    sys.modules["prefer_plugin"] = mod
    try:
        cfg = parse_config(
            {
                "pluginModules": {"PreferNode": "prefer_plugin:PreferNode"},
                "profiles": [
                    {
                        "plugins": {"postFilter": {"enabled": [{"name": "PreferNode"}]}},
                        "pluginConfig": [{"name": "PreferNode", "args": {"node": prefer}}],
                    }
                ],
            },
            "sched.yaml",
        )
    finally:
        del sys.modules["prefer_plugin"]
    from tests.unit.fakes import RecordingActions

    core = SchedulerCore(
        cfg,
        FakeClock(),
        RecordingBinder(),
        RecordingRecorder(),
        RecordingActions(),
        rng=random.Random(0),
    )
    for n in ("n1", "n2"):
        core.on_node_add(make_node(n).alloc(cpu="1", memory="1Gi", pods=10).record())
        core.on_pod_add(make_pod(f"low-{n}").req(cpu="1").node(n).info())
    core.on_pod_add(make_pod("high").req(cpu="1").priority(100).info())
    r = core.schedule_one()
    assert r is not None and r.outcome == "preempting" and r.node == prefer


class Quota:
    """PreEnqueue: pods of namespaces over their quota wait gated; a PDB event (standing in
    for whatever the quota watches) makes its hint queue them for another check. ``over``
    is the set of namespaces over quota, shared with the test."""

    name = "Quota"
    over: ClassVar[set[str]] = set()
    checks: ClassVar[list[str]] = []

    def __init__(self, args: Mapping[str, Any]) -> None:
        pass

    def pre_enqueue(self, pod: PodInfo) -> Status:
        Quota.checks.append(pod.name)
        if pod.name == "explode":
            raise RuntimeError("quota service down")
        if pod.namespace in Quota.over:
            return Status.unresolvable(f"namespace {pod.namespace} is over quota")
        return SUCCESS

    def events_to_register(self) -> list[EventRegistration]:
        return [
            EventRegistration(
                ClusterEvent("PDB", "Update"), lambda pod, old, new: QueueingHint.QUEUE
            )
        ]


@pytest.fixture
def quota_module() -> Iterator[None]:
    mod = types.ModuleType("quota_plugin")
    mod.Quota = Quota  # type: ignore[attr-defined]
    sys.modules["quota_plugin"] = mod
    Quota.over, Quota.checks = set(), []
    yield
    del sys.modules["quota_plugin"]


@pytest.fixture
def quota_core(quota_module: None) -> tuple[SchedulerCore, RecordingRecorder]:
    Quota.over = {"team-a"}
    raw = {
        "pluginModules": {"Quota": "quota_plugin:Quota"},
        "profiles": [{"plugins": {"preEnqueue": {"enabled": [{"name": "Quota"}]}}}],
    }
    cfg = parse_config(raw, "sched.yaml")
    assert (
        cfg.pre_enqueue == ("SchedulingGates", "DynamicResources", "Quota")
        and "Quota" not in cfg.filters
    )
    recorder = RecordingRecorder()
    core = SchedulerCore(cfg, FakeClock(), RecordingBinder(), recorder, rng=random.Random(0))
    core.on_node_add(make_node("n1").record())
    return core, recorder


def test_a_pre_enqueue_plugin_keeps_pods_out_until_its_hint_queues_them(
    quota_core: tuple[SchedulerCore, RecordingRecorder],
) -> None:
    core, recorder = quota_core
    core.on_pod_add(make_pod("a").namespace("team-a").req(cpu="1").info())
    core.on_pod_add(make_pod("b").namespace("team-b").req(cpu="1").info())
    gated = core.queue.pending_pods()["gated"]
    assert [p.name for p in gated] == ["a"]
    b = core.schedule_one()
    assert b is not None and b.pod.name == "b" and b.outcome == "assumed"
    assert core.schedule_one() is None  # "a" never runs Filter: no event, no failure
    assert recorder.failed_calls == []
    Quota.over.clear()
    core.queue.move_all_to_active_or_backoff(ClusterEvent("Node", "Add"), None, None)
    assert core.schedule_one() is None  # not an event the plugin registered for
    core.queue.move_all_to_active_or_backoff(ClusterEvent("PDB", "Update"), None, None)
    a = core.schedule_one()
    assert a is not None and a.pod.name == "a" and a.outcome == "assumed"


def test_a_pre_enqueue_plugin_that_raises_keeps_the_pod_gated_and_the_scheduler_going(
    quota_core: tuple[SchedulerCore, RecordingRecorder],
) -> None:
    core, _ = quota_core
    core.on_pod_add(make_pod("explode").namespace("team-b").req(cpu="1").info())
    core.on_pod_add(make_pod("fine").namespace("team-b").req(cpu="1").info())
    st = core.queue.gated_by(make_pod("explode").namespace("team-b").info())
    assert st is not None and st.plugin == "Quota"
    assert "PreEnqueue plugin Quota raised RuntimeError: quota service down" in st.message()
    assert [p.name for p in core.queue.pending_pods()["gated"]] == ["explode"]
    fine = core.schedule_one()
    assert fine is not None and fine.pod.name == "fine" and fine.outcome == "assumed"


def test_pre_enqueue_plugins_join_through_multipoint_and_run_after_scheduling_gates(
    quota_module: None,
) -> None:
    raw = {
        "pluginModules": {"Quota": "quota_plugin:Quota"},
        "profiles": [{"plugins": {"multiPoint": {"enabled": [{"name": "Quota"}]}}}],
    }
    cfg = parse_config(raw, "sched.yaml")
    assert cfg.pre_enqueue == ("SchedulingGates", "DynamicResources", "Quota")
    core = SchedulerCore(cfg, FakeClock(), RecordingBinder(), RecordingRecorder())
    core.on_pod_add(make_pod("g").gates("example.com/x").info())
    st = core.queue.gated_by(make_pod("g").gates("example.com/x").info())
    assert st is not None and st.plugin == "SchedulingGates"
    assert Quota.checks == []  # the first plugin that keeps a pod out ends the checks


class Ledger:
    """Reserve/Unreserve/PostBind: a per-node budget of reserved pods (``budget`` pods a
    node); Reserve of a pod named "broken" raises. Every call is logged in ``calls``, which
    the test shares, as ``(point, plugin, pod, node)``."""

    calls: ClassVar[list[tuple[str, str, str, str]]] = []

    def __init__(self, args: Mapping[str, Any]) -> None:
        self.name = str(args.get("name", "Ledger"))
        budget = args.get("budget", 1)
        if not isinstance(budget, int) or budget < 0:
            raise ValueError(f"budget: expected a non-negative integer, got {budget!r}")
        self.budget = budget
        self.held: dict[str, set[str]] = {}

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        Ledger.calls.append(("reserve", self.name, pod.name, node_name))
        if pod.name == "broken":
            raise RuntimeError("ledger unreachable")
        held = self.held.setdefault(node_name, set())
        if len(held) >= self.budget:
            return Status.unschedulable(f"node {node_name} has no budget left")
        held.add(pod.key)
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        Ledger.calls.append(("unreserve", self.name, pod.name, node_name))
        self.held.get(node_name, set()).discard(pod.key)

    def post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        Ledger.calls.append(("post_bind", self.name, pod.name, node_name))
        if pod.name == "noisy":
            raise ValueError("post-bind hook failed")


class HalfLedger:
    name = "HalfLedger"

    def __init__(self, args: Mapping[str, Any]) -> None:
        pass

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        return SUCCESS


@pytest.fixture
def ledger_module() -> Iterator[None]:
    mod = types.ModuleType("ledger_plugin")
    mod.Ledger = Ledger  # type: ignore[attr-defined]
    mod.HalfLedger = HalfLedger  # type: ignore[attr-defined]
    sys.modules["ledger_plugin"] = mod
    Ledger.calls = []
    yield
    del sys.modules["ledger_plugin"]


def _ledger_core(
    plugins: dict[str, Any], budget: int = 1
) -> tuple[SchedulerCore, RecordingBinder, RecordingRecorder]:
    raw = {
        "pluginModules": {"Ledger": "ledger_plugin:Ledger", "Second": "ledger_plugin:Ledger"},
        "profiles": [
            {
                "plugins": plugins,
                "pluginConfig": [
                    {"name": "Ledger", "args": {"budget": budget}},
                    {"name": "Second", "args": {"name": "Second", "budget": 100}},
                ],
            }
        ],
    }
    cfg = parse_config(raw, "sched.yaml")
    binder, recorder = RecordingBinder(), RecordingRecorder()
    core = SchedulerCore(cfg, FakeClock(), binder, recorder, rng=random.Random(0))
    core.on_node_add(make_node("n1").record())
    return core, binder, recorder


def test_a_reserve_rejection_unreserves_forgets_the_pod_and_leaves_it_unschedulable(
    ledger_module: None,
) -> None:
    core, binder, recorder = _ledger_core(
        {"reserve": {"enabled": [{"name": "Second"}, {"name": "Ledger"}]}}
    )
    core.on_pod_add(make_pod("a").req(cpu="1").info())
    core.on_pod_add(make_pod("b").req(cpu="1").info())
    a = core.schedule_one()
    assert a is not None and a.outcome == "assumed" and a.node == "n1"
    b = core.schedule_one()
    assert b is not None and b.outcome == "unschedulable"
    assert b.message == "0/1 nodes are available: 1 node n1 has no budget left."
    assert [p.name for p, _ in binder.calls] == ["a"]
    assert core.cache.get_pod("default/b") is None  # forgotten: n1 holds only "a"
    # Reserve in order, Unreserve of every Reserve plugin in reverse order, for "b" only.
    assert Ledger.calls == [
        ("reserve", "Second", "a", "n1"),
        ("reserve", "Ledger", "a", "n1"),
        ("reserve", "Second", "b", "n1"),
        ("reserve", "Ledger", "b", "n1"),
        ("unreserve", "Ledger", "b", "n1"),
        ("unreserve", "Second", "b", "n1"),
    ]
    (failed,) = recorder.failed_calls
    assert failed.reason == "Unschedulable" and failed.nominated_node == ""
    assert core.queue.pending_pods()["unschedulable"][0].name == "b"
    # Ledger registers no queueing hints: as upstream, it is told of every cluster event.
    assert core.queue.move_all_to_active_or_backoff(ClusterEvent("PDB", "Update")) == 1
    assert core.queue.pending_pods()["unschedulable"] == []


def test_a_reserve_exception_is_an_error_for_that_pod_and_unreserves(
    ledger_module: None,
) -> None:
    core, binder, recorder = _ledger_core({"multiPoint": {"enabled": [{"name": "Ledger"}]}})
    core.on_pod_add(make_pod("broken").req(cpu="1").priority(10).info())
    core.on_pod_add(make_pod("fine").req(cpu="1").info())
    broken = core.schedule_one()
    assert broken is not None and broken.outcome == "error"
    assert "running Reserve plugin Ledger: Reserve plugin Ledger raised RuntimeError" in (
        broken.message
    )
    assert ("unreserve", "Ledger", "broken", "n1") in Ledger.calls
    assert recorder.failed_calls[0].reason == "SchedulerError"
    fine = core.schedule_one()
    assert fine is not None and fine.outcome == "assumed"
    assert [p.name for p, _ in binder.calls] == ["fine"]


def test_a_failed_binding_unreserves_and_a_bound_pod_runs_post_bind(
    ledger_module: None,
) -> None:
    core, _, recorder = _ledger_core({"multiPoint": {"enabled": [{"name": "Ledger"}]}}, budget=5)
    for name in ("gone", "ok", "noisy"):
        core.on_pod_add(make_pod(name).req(cpu="100m").info())
    for _ in range(3):
        result = core.schedule_one()
        assert result is not None and result.outcome == "assumed"
    core.on_bind_result("default/gone", "error", "the API server refused")
    core.on_bind_result("default/ok", "ok")
    with structlog.testing.capture_logs() as logs:
        core.on_bind_result("default/noisy", "ok")  # its PostBind raises: logged, no more
    assert [(e["event"], e["plugin"], e["extension_point"], e["pod"]) for e in logs] == [
        ("plugin_raised", "Ledger", "PostBind", "default/noisy")
    ]
    assert logs[0]["error"] == "ValueError: post-bind hook failed"
    after = [c for c in Ledger.calls if c[0] != "reserve"]
    assert after == [
        ("unreserve", "Ledger", "gone", "n1"),
        ("post_bind", "Ledger", "ok", "n1"),
        ("post_bind", "Ledger", "noisy", "n1"),
    ]
    assert core.cache.get_pod("default/gone") is None
    assert [k for k, _ in recorder.scheduled_calls] == ["default/ok", "default/noisy"]


def test_reserve_and_post_bind_points_are_configured_like_the_others(
    ledger_module: None,
) -> None:
    base = {"pluginModules": {"Ledger": "ledger_plugin:Ledger"}}
    cfg = parse_config(
        {**base, "profiles": [{"plugins": {"multiPoint": {"enabled": [{"name": "Ledger"}]}}}]},
        "sched.yaml",
    )
    assert cfg.reserve == ("VolumeBinding", "DynamicResources", "Ledger") and cfg.post_bind == (
        "Ledger",
    )
    cfg = parse_config(
        {
            **base,
            "profiles": [
                {
                    "plugins": {
                        "multiPoint": {"enabled": [{"name": "Ledger"}]},
                        "postBind": {"disabled": [{"name": "Ledger"}]},
                    }
                }
            ],
        },
        "sched.yaml",
    )
    assert cfg.reserve == ("VolumeBinding", "DynamicResources", "Ledger") and cfg.post_bind == ()
    with pytest.raises(ConfigError, match=r"profiles\[0\]\.plugins\.reserve\.enabled\[0\]"):
        parse_config(
            {"profiles": [{"plugins": {"reserve": {"enabled": [{"name": "NodeName"}]}}}]},
            "sched.yaml",
        )
    half = {
        "pluginModules": {"HalfLedger": "ledger_plugin:HalfLedger"},
        "profiles": [{"plugins": {"reserve": {"enabled": [{"name": "HalfLedger"}]}}}],
    }
    with pytest.raises(ConfigError, match="HalfLedger implements reserve without unreserve"):
        parse_config(half, "sched.yaml")


class Prep:
    """PreBind (with PreBindPreFlight) and Reserve/Unreserve: pods labelled ``prep=skip``
    need no preparation (pre-flight SKIP); ``prep=deny`` is rejected at PreBind, ``prep=
    fail`` errors there. Calls are logged in ``calls`` as ``(point, pod)``."""

    name = "Prep"
    calls: ClassVar[list[tuple[str, str]]] = []

    def __init__(self, args: Mapping[str, Any]) -> None:
        pass

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        Prep.calls.append(("reserve", pod.name))
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        Prep.calls.append(("unreserve", pod.name))

    def pre_bind_pre_flight(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        Prep.calls.append(("pre_flight", pod.name))
        return Status(Code.SKIP) if pod.labels.get("prep") == "skip" else SUCCESS

    def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        Prep.calls.append(("pre_bind", pod.name))
        how = pod.labels.get("prep")
        if how == "deny":
            return Status.unschedulable(f"volume for {pod.name} cannot attach to {node_name}")
        if how == "fail":
            return Status.error("storage API down")
        return SUCCESS


class FlightOnly:
    name = "FlightOnly"

    def __init__(self, args: Mapping[str, Any]) -> None:
        pass

    def pre_bind_pre_flight(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        return SUCCESS


@pytest.fixture
def prep_core() -> Iterator[tuple[SchedulerCore, RecordingBinder, RecordingRecorder]]:
    mod = types.ModuleType("prep_plugin")
    mod.Prep = Prep  # type: ignore[attr-defined]
    mod.FlightOnly = FlightOnly  # type: ignore[attr-defined]
    sys.modules["prep_plugin"] = mod
    Prep.calls = []
    raw = {
        "pluginModules": {"Prep": "prep_plugin:Prep"},
        "profiles": [{"plugins": {"multiPoint": {"enabled": [{"name": "Prep"}]}}}],
    }
    cfg = parse_config(raw, "sched.yaml")
    assert cfg.pre_bind == ("VolumeBinding", "DynamicResources", "Prep") and cfg.reserve == (
        "VolumeBinding",
        "DynamicResources",
        "Prep",
    )
    binder, recorder = RecordingBinder(), RecordingRecorder()
    core = SchedulerCore(cfg, FakeClock(), binder, recorder, rng=random.Random(0))
    core.on_node_add(make_node("n1").record())
    yield core, binder, recorder
    del sys.modules["prep_plugin"]


@pytest.mark.parametrize(
    ("label", "flight", "outcome", "reason", "message"),
    [
        pytest.param("", Code.SUCCESS, "", "", "", id="prepared"),
        pytest.param("skip", Code.SKIP, "", "", "", id="nothing to prepare"),
        pytest.param(
            "deny",
            Code.SUCCESS,
            "rejected",
            "Unschedulable",
            "volume for p cannot attach to n1",
            id="rejected",
        ),
        pytest.param(
            "fail",
            Code.SUCCESS,
            "prebind",
            "SchedulerError",
            "running PreBind plugin Prep: storage API down",
            id="error",
        ),
    ],
)
def test_pre_bind_runs_in_the_binding_cycle_and_a_failure_unreserves(
    prep_core: tuple[SchedulerCore, RecordingBinder, RecordingRecorder],
    label: str,
    flight: Code,
    outcome: str,
    reason: str,
    message: str,
) -> None:
    core, binder, recorder = prep_core
    pod = make_pod("p").req(cpu="1")
    if label:
        pod = pod.label("prep", label)
    core.on_pod_add(pod.info())
    result = core.schedule_one()
    assert result is not None and result.outcome == "assumed"
    cycle = binder.cycles["default/p"]  # the binder runs these before the Binding
    assert Prep.calls == [("reserve", "p")]
    assert cycle.pre_flight().code is flight
    st = cycle.pre_bind()
    assert [c[0] for c in Prep.calls] == (
        ["reserve", "pre_flight"] + ([] if label == "skip" else ["pre_bind"])
    )
    if not outcome:
        assert st.is_success()
        core.on_bind_result("default/p", "ok")
        assert core.cache.get_pod("default/p") is not None
        assert recorder.failed_calls == []
        return
    assert st.message() == message
    core.on_bind_result("default/p", outcome, st.message())
    assert Prep.calls[-1] == ("unreserve", "p")
    assert core.cache.get_pod("default/p") is None
    (failed,) = recorder.failed_calls
    assert (failed.reason, failed.message, failed.nominated_node) == (reason, message, "")
    assert [p.name for p in core.queue.pending_pods()["backoff"]] == ["p"]


def test_pre_bind_configuration(prep_core: Any) -> None:
    only = {
        "pluginModules": {"FlightOnly": "prep_plugin:FlightOnly"},
        "profiles": [{"plugins": {"preBind": {"enabled": [{"name": "FlightOnly"}]}}}],
    }
    with pytest.raises(ConfigError, match="implements pre_bind_pre_flight without pre_bind"):
        parse_config(only, "sched.yaml")
    cfg = parse_config(
        {
            "pluginModules": {"Prep": "prep_plugin:Prep"},
            "profiles": [
                {
                    "plugins": {
                        "multiPoint": {"enabled": [{"name": "Prep"}]},
                        "preBind": {"disabled": [{"name": "*"}]},
                    }
                }
            ],
        },
        "sched.yaml",
    )
    assert cfg.pre_bind == () and cfg.reserve == ("VolumeBinding", "DynamicResources", "Prep")


def test_simulate_runs_pre_bind_and_reports_a_rejected_binding(
    prep_core: Any, tmp_path: Any
) -> None:
    objs = [
        make_node("n1").alloc(cpu="2", memory="8Gi", pods="110").obj(),
        make_pod("ok").req(cpu="1").obj(),
        make_pod("denied").req(cpu="1").label("prep", "deny").obj(),
    ]
    cfg = parse_config(
        {
            "pluginModules": {"Prep": "prep_plugin:Prep"},
            "profiles": [{"plugins": {"preBind": {"enabled": [{"name": "Prep"}]}}}],
        },
        "sched.yaml",
    )
    result = _simulate(tmp_path, objs, cfg)
    assert result.placements == {"default/ok": "n1", "default/denied": None}
    assert result.decisions == [
        {"pod": "default/ok", "outcome": "scheduled", "node": "n1"},
        {
            "pod": "default/denied",
            "outcome": "unschedulable",
            "message": "volume for denied cannot attach to n1",
        },
    ]


class AsyncPrep:
    """An async PreBind plugin (pods labelled prep=deny are rejected) and, with
    ``{"async_filter": true}``, an async Filter, which is refused."""

    name = "AsyncPrep"

    def __init__(self, args: Mapping[str, Any]) -> None:
        if args.get("async_filter"):
            self.filter = self._filter  # an instance attribute: the check sees it too

    async def _filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status:
        return SUCCESS

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        if pod.labels.get("prep") == "deny":
            return Status.unschedulable(f"no volume for {pod.name}")
        return SUCCESS


def test_only_pre_bind_may_be_async_and_simulate_awaits_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    mod = types.ModuleType("asyncprep_plugin")
    mod.AsyncPrep = AsyncPrep  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "asyncprep_plugin", mod)
    raw: dict[str, Any] = {
        "pluginModules": {"AsyncPrep": "asyncprep_plugin:AsyncPrep"},
        "profiles": [{"plugins": {"multiPoint": {"enabled": [{"name": "AsyncPrep"}]}}}],
    }
    bad = {
        **raw,
        "profiles": [
            {
                **raw["profiles"][0],
                "pluginConfig": [{"name": "AsyncPrep", "args": {"async_filter": True}}],
            }
        ],
    }
    with pytest.raises(ConfigError, match=r"AsyncPrep\.filter is a coroutine function: only "):
        parse_config(bad, "sched.yaml")
    cfg = parse_config(raw, "sched.yaml")
    objs = [
        make_node("n1").alloc(cpu="2", memory="8Gi", pods="110").obj(),
        make_pod("ok").req(cpu="1").obj(),
        make_pod("denied").req(cpu="1").label("prep", "deny").obj(),
    ]
    result = _simulate(tmp_path, objs, cfg)
    assert result.placements == {"default/ok": "n1", "default/denied": None}
    assert result.decisions[-1] == {
        "pod": "default/denied",
        "outcome": "unschedulable",
        "message": "no volume for denied",
    }


class LabelBinder:
    """A Bind plugin: pods labelled ``bind=mine`` it binds itself (SUCCESS), ``bind=deny``
    it rejects, ``bind=fail`` errors, ``bind=raise`` raises; any other pod it leaves to the
    next Bind plugin (SKIP). ``bind`` is async when the args say so."""

    name = "LabelBinder"
    calls: ClassVar[list[str]] = []

    def __init__(self, args: Mapping[str, Any]) -> None:
        if args.get("async"):
            self.bind = self._bind_async  # type: ignore[method-assign]

    def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        LabelBinder.calls.append(pod.name)
        how = pod.labels.get("bind")
        if how == "mine":
            return SUCCESS
        if how == "deny":
            return Status.unschedulable(f"{node_name} takes no {pod.name}")
        if how == "fail":
            return Status.error("binding API of the other system is down")
        if how == "raise":
            raise RuntimeError("boom in bind")
        return Status(Code.SKIP)

    async def _bind_async(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        await asyncio.sleep(0)  # a real wait: other tasks run meanwhile
        return LabelBinder.bind(self, state, pod, node_name)


def _bind_config(bind: Mapping[str, Any] | None, multi: bool = False, **args: Any) -> Any:
    plugins: dict[str, Any] = {}
    if multi:
        plugins["multiPoint"] = {"enabled": [{"name": "LabelBinder"}]}
    if bind is not None:
        plugins["bind"] = bind
    profile: dict[str, Any] = {"plugins": plugins}
    if args:
        profile["pluginConfig"] = [{"name": "LabelBinder", "args": args}]
    return parse_config(
        {"pluginModules": {"LabelBinder": "labelbinder_plugin:LabelBinder"}, "profiles": [profile]},
        "sched.yaml",
    )


@pytest.fixture
def label_binder(monkeypatch: pytest.MonkeyPatch) -> None:
    mod = types.ModuleType("labelbinder_plugin")
    mod.LabelBinder = LabelBinder  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "labelbinder_plugin", mod)
    LabelBinder.calls = []


def test_bind_plugins_are_configured_in_order_with_default_binder(label_binder: None) -> None:
    """As upstream: DefaultBinder is the default Bind plugin; a Bind plugin enabled at
    multiPoint or at bind comes after it (and so binds nothing) unless DefaultBinder is
    disabled; a profile without any Bind plugin is refused."""
    assert parse_config({}, "sched.yaml").bind == ("DefaultBinder",)
    assert _bind_config(None, multi=True).bind == ("DefaultBinder", "LabelBinder")
    enabled = {"enabled": [{"name": "LabelBinder"}]}
    assert _bind_config(enabled).bind == ("DefaultBinder", "LabelBinder")
    first = {
        "disabled": [{"name": "*"}],
        "enabled": [{"name": "LabelBinder"}, {"name": "DefaultBinder"}],
    }
    assert _bind_config(first).bind == ("LabelBinder", "DefaultBinder")
    alone = {"disabled": [{"name": "DefaultBinder"}]}
    assert _bind_config(alone, multi=True).bind == ("LabelBinder",)
    with pytest.raises(ConfigError, match=r"plugins: at least one bind plugin is needed"):
        parse_config({"profiles": [{"plugins": {"bind": alone}}]}, "sched.yaml")
    scratch = {
        "multiPoint": {
            "disabled": [{"name": "*"}],
            "enabled": [{"name": "NodeName"}, {"name": "PrioritySort"}],
        }
    }
    with pytest.raises(ConfigError, match="DefaultBinder is disabled"):  # as upstream refuses
        parse_config({"profiles": [{"plugins": scratch}]}, "sched.yaml")
    with pytest.raises(ConfigError, match="unknown or unsupported plugin 'NodeAffinity'"):
        _bind_config({"enabled": [{"name": "NodeAffinity"}]})


def _bind_core(cfg: Any) -> tuple[SchedulerCore, RecordingBinder, RecordingRecorder]:
    binder, recorder = RecordingBinder(), RecordingRecorder()
    core = SchedulerCore(cfg, FakeClock(), binder, recorder, rng=random.Random(0))
    core.on_node_add(make_node("n1").record())
    return core, binder, recorder


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize(
    ("label", "code", "outcome", "message"),
    [
        pytest.param("mine", Code.SUCCESS, "ok", "", id="bound by the plugin"),
        pytest.param("other", Code.SKIP, "", "", id="left to DefaultBinder"),
        pytest.param("deny", Code.UNSCHEDULABLE, "rejected", "n1 takes no p", id="rejected"),
        pytest.param(
            "fail",
            Code.ERROR,
            "prebind",
            "running Bind plugin LabelBinder: binding API of the other system is down",
            id="error",
        ),
        pytest.param(
            "raise",
            Code.ERROR,
            "prebind",
            "running Bind plugin LabelBinder: Bind plugin LabelBinder raised RuntimeError: "
            "boom in bind",
            id="raises",
        ),
    ],
)
def test_bind_plugins_run_before_default_binder(
    label_binder: None, is_async: bool, label: str, code: Code, outcome: str, message: str
) -> None:
    """RunBindPlugins up to DefaultBinder: the first plugin that does not skip decides."""

    args = {"async": True} if is_async else {}
    first = {
        "disabled": [{"name": "*"}],
        "enabled": [{"name": "LabelBinder"}, {"name": "DefaultBinder"}],
    }
    core, binder, recorder = _bind_core(_bind_config(first, **args))
    core.on_pod_add(make_pod("p").req(cpu="1").label("bind", label).info())
    result = core.schedule_one()
    assert result is not None and result.outcome == "assumed"
    cycle = binder.cycles["default/p"]  # Bind plugins make a binding cycle of their own
    assert cycle.bind is not None
    st = asyncio.run(cycle.bind())
    assert LabelBinder.calls == ["p"]
    assert st.code is code and st.message() == message
    if code in (Code.SUCCESS, Code.SKIP):
        assert st.plugin == ("LabelBinder" if code is Code.SUCCESS else "")
        return
    core.on_bind_result("default/p", outcome, st.message())
    assert core.cache.get_pod("default/p") is None
    (failed,) = recorder.failed_calls
    reason = "Unschedulable" if code is Code.UNSCHEDULABLE else "SchedulerError"
    assert (failed.reason, failed.message) == (reason, message)
    assert [p.name for p in core.queue.pending_pods()["backoff"]] == ["p"]


def test_bind_plugins_after_default_binder_never_run_and_without_it_a_skip_fails(
    label_binder: None,
) -> None:

    core, binder, _ = _bind_core(_bind_config(None, multi=True))
    assert core.framework.bind_plugins == [] and core.framework.default_binder
    core.on_pod_add(make_pod("p").req(cpu="1").label("bind", "mine").info())
    core.schedule_one()
    assert "default/p" not in binder.cycles and LabelBinder.calls == []  # a plain Binding
    core, binder, _ = _bind_core(_bind_config({"disabled": [{"name": "DefaultBinder"}]}, True))
    core.on_pod_add(make_pod("q").req(cpu="1").label("bind", "other").info())
    core.schedule_one()
    st = asyncio.run(binder.cycles["default/q"].bind())  # type: ignore[misc]
    assert st.code is Code.ERROR
    assert st.message() == (
        "no Bind plugin bound the pod: LabelBinder returned Skip and DefaultBinder is off"
    )


def test_simulate_binds_pods_itself_without_calling_bind_plugins(
    label_binder: None, tmp_path: Any
) -> None:
    objs = [
        make_node("n1").alloc(cpu="2", memory="8Gi", pods="110").obj(),
        make_pod("p").req(cpu="1").label("bind", "deny").obj(),
    ]
    cfg = _bind_config({"disabled": [{"name": "DefaultBinder"}]}, multi=True)
    result = _simulate(tmp_path, objs, cfg)
    assert result.placements == {"default/p": "n1"} and LabelBinder.calls == []


class RankSort:
    """A QueueSort plugin: the pod's ``rank`` label, lowest first, whatever the priorities
    (pods without one last); a pod labelled ``rank=boom`` makes ``less`` raise."""

    name = "RankSort"

    def __init__(self, args: Mapping[str, Any]) -> None:
        pass

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        ra, rb = a.pod.labels.get("rank", "99"), b.pod.labels.get("rank", "99")
        if "boom" in (ra, rb):
            raise RuntimeError("boom in less")
        return int(ra) < int(rb)


@pytest.fixture
def rank_sort(monkeypatch: pytest.MonkeyPatch) -> None:
    mod = types.ModuleType("ranksort_plugin")
    mod.RankSort = RankSort  # type: ignore[attr-defined]
    mod.LabelBinder = LabelBinder  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ranksort_plugin", mod)


def _sort_config(plugins: Mapping[str, Any]) -> Any:
    modules = {"RankSort": "ranksort_plugin:RankSort", "LabelBinder": "ranksort_plugin:LabelBinder"}
    return parse_config(
        {"pluginModules": modules, "profiles": [{"plugins": dict(plugins)}]}, "sched.yaml"
    )


NO_PRIORITY_SORT = {"disabled": [{"name": "PrioritySort"}]}
RANK_SORT = {"disabled": [{"name": "PrioritySort"}], "enabled": [{"name": "RankSort"}]}


def test_one_queue_sort_plugin_per_profile_as_upstream(rank_sort: None) -> None:
    """PrioritySort by default; a plugin with ``less`` replaces it once PrioritySort is
    disabled (at queueSort or multiPoint); none, or two, are refused (upstream: "only one
    queue sort plugin required for profile"), and so is a plugin named at queueSort
    without ``less``."""
    assert parse_config({}, "sched.yaml").queue_sort == "PrioritySort"
    assert _sort_config({"queueSort": RANK_SORT}).queue_sort == "RankSort"
    multi = {"multiPoint": {"enabled": [{"name": "RankSort"}], **NO_PRIORITY_SORT}}
    assert _sort_config(multi).queue_sort == "RankSort"
    both = {"multiPoint": {"enabled": [{"name": "RankSort"}]}}
    with pytest.raises(
        ConfigError,
        match=r"plugins\.queueSort: exactly one queue sort plugin is needed, got 2 "
        r"\(PrioritySort, RankSort\): disable PrioritySort",
    ):
        _sort_config(both)
    with pytest.raises(ConfigError, match=r"got 0 \(none\): enable PrioritySort or a plugin"):
        _sort_config({"queueSort": NO_PRIORITY_SORT})
    binder = {"disabled": [{"name": "PrioritySort"}], "enabled": [{"name": "LabelBinder"}]}
    with pytest.raises(ConfigError, match=r"queueSort: plugin LabelBinder does not implement less"):
        _sort_config({"queueSort": binder})
    # A plugin with less enabled at another point only does not sort the queue.
    assert _sort_config({"preEnqueue": {"enabled": [{"name": "RankSort"}]}}).queue_sort == (
        "PrioritySort"
    )


def test_a_queue_sort_plugin_orders_the_scheduling_cycles(rank_sort: None) -> None:
    """The core schedules pods in the plugin's order, here against priority and creation
    time; a ``less`` that raises orders that pair as PrioritySort and is logged once."""
    cfg = _sort_config({"queueSort": RANK_SORT})
    binder, recorder = RecordingBinder(), RecordingRecorder()
    core = SchedulerCore(cfg, FakeClock(), binder, recorder, rng=random.Random(0))
    core.on_node_add(make_node("n1").alloc(cpu="8", memory="8Gi", pods="110").record())
    for name, rank, prio in (("c", "3", 100), ("a", "1", 0), ("b", "2", 50)):
        core.on_pod_add(make_pod(name).req(cpu="1").label("rank", rank).priority(prio).info())
    while core.schedule_one() is not None:
        pass
    assert [p.name for p, _ in binder.calls] == ["a", "b", "c"]
    with structlog.testing.capture_logs() as logs:
        for name, rank, prio in (("x", "boom", 0), ("y", "1", 5), ("z", "boom", 9)):
            core.on_pod_add(make_pod(name).req(cpu="1").label("rank", rank).priority(prio).info())
        while core.schedule_one() is not None:
            pass
    assert [p.name for p, _ in binder.calls[3:]] == ["z", "y", "x"]
    raised = [e for e in logs if e["event"] == "plugin_raised"]
    assert len(raised) == 1 and raised[0]["plugin"] == "RankSort"
    assert raised[0]["extension_point"] == "QueueSort"
    assert raised[0]["error"] == "RuntimeError: boom in less"


def test_simulate_orders_its_queue_with_the_queue_sort_plugin(
    rank_sort: None, tmp_path: Any
) -> None:
    objs = [
        make_node("n1").alloc(cpu="1", memory="8Gi", pods="110").obj(),
        make_pod("early").req(cpu="1").label("rank", "2").created(100).obj(),
        make_pod("late").req(cpu="1").label("rank", "1").created(200).obj(),
    ]
    plain = _simulate(tmp_path, objs, parse_config({}, "sched.yaml"))
    assert plain.placements == {"default/early": "n1", "default/late": None}
    ranked = _simulate(tmp_path, objs, _sort_config({"queueSort": RANK_SORT}))
    assert ranked.placements == {"default/early": None, "default/late": "n1"}


class StorageAware:
    """Filters out nodes whose zone differs from the ``zone`` label of the pod's first
    claim's volume, read through the handle's listers, and pods in namespaces labelled
    ``frozen``: a plugin reading what the scheduler watches."""

    name = "StorageAware"

    def __init__(self, args: Mapping[str, Any], handle: FrameworkHandle) -> None:
        self.handle = handle

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status:
        if self.handle.namespace_labels(pod.namespace).get("frozen") == "true":
            return Status.unresolvable("namespace is frozen")
        if not pod.claims:
            return SUCCESS
        claim: PVCInfo | None = self.handle.persistent_volume_claim(pod.namespace, pod.claims[0][0])
        volume: PVInfo | None = (
            None if claim is None else self.handle.persistent_volume(claim.volume_name)
        )
        klass: StorageClassInfo | None = self.handle.storage_class("standard")
        csi: CSINodeInfo | None = self.handle.csi_node(node_info.name)
        assert klass is not None and klass.provisioner == "example.com/x"
        assert csi is None or csi.drivers == {"example.com/x": 3}
        zone = None if volume is None else volume.labels.get("zone")
        node = node_info.node
        if zone is not None and node is not None and node.labels.get("zone") != zone:
            return Status.unschedulable("volume elsewhere")
        return SUCCESS


def test_a_plugin_reads_claims_volumes_classes_csinodes_and_namespaces_through_its_handle(
    tmp_path: Any,
) -> None:
    mod = types.ModuleType("storage_aware_plugin")
    mod.StorageAware = StorageAware  # type: ignore[attr-defined]
    sys.modules["storage_aware_plugin"] = mod
    try:
        cfg = parse_config(
            {
                "pluginModules": {"StorageAware": "storage_aware_plugin:StorageAware"},
                "profiles": [{"plugins": {"filter": {"enabled": [{"name": "StorageAware"}]}}}],
            },
            "sched.yaml",
        )
        pod = make_pod("p").req(cpu="1").scheduler("py-scheduler")
        pod.spec_field("volumes", [{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}])
        frozen = make_pod("f").namespace("cold").req(cpu="1").scheduler("py-scheduler")
        objs = [
            make_node("n1").label("zone", "a").obj(),
            make_node("n2").label("zone", "b").obj(),
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": "cold", "labels": {"frozen": "true"}},
            },
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {"name": "standard"},
                "provisioner": "example.com/x",
            },
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "CSINode",
                "metadata": {"name": "n2"},
                "spec": {
                    "drivers": [
                        {"name": "example.com/x", "nodeID": "n2", "allocatable": {"count": 3}}
                    ]
                },
            },
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": "pv", "labels": {"zone": "b"}},
                "spec": {
                    "capacity": {"storage": "1Gi"},
                    "storageClassName": "",
                    "hostPath": {"path": "/x"},
                },
            },
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {
                    "name": "c",
                    "namespace": "default",
                    "annotations": {"pv.kubernetes.io/bind-completed": "yes"},
                },
                "spec": {"volumeName": "pv", "storageClassName": ""},
            },
            pod.obj(),
            frozen.obj(),
        ]
        result = _simulate(tmp_path, objs, cfg)
        assert result.placements["default/p"] == "n2"
        assert result.placements["cold/f"] is None
    finally:
        del sys.modules["storage_aware_plugin"]


class DeviceAware:
    """Keeps pods with ResourceClaims off nodes that publish no ResourceSlice of the
    drivers their claims' device classes name (read through the handle's DRA listers):
    a plugin reading the DRA objects the scheduler watches."""

    name = "DeviceAware"

    def __init__(self, args: Mapping[str, Any], handle: FrameworkHandle) -> None:
        self.handle = handle

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status:
        if not pod.resource_claims:
            return SUCCESS
        (entry,) = pod.resource_claims
        claim: ResourceClaimInfo | None = self.handle.resource_claim(pod.namespace, entry[1])
        assert claim is not None and claim in self.handle.resource_claims()
        (request,) = claim.requests
        assert request.exactly is not None
        klass: DeviceClassInfo | None = self.handle.device_class(request.exactly.device_class)
        assert klass is not None
        slices: Sequence[ResourceSliceInfo] = self.handle.resource_slices()
        if any(s.node_name == node_info.name for s in slices):
            return SUCCESS
        return Status.unschedulable("no devices published here")


def test_a_plugin_reads_resource_claims_slices_and_classes_through_its_handle(
    tmp_path: Any,
) -> None:
    mod = types.ModuleType("device_aware_plugin")
    mod.DeviceAware = DeviceAware  # type: ignore[attr-defined]
    sys.modules["device_aware_plugin"] = mod
    try:
        cfg = parse_config(
            {
                "pluginModules": {"DeviceAware": "device_aware_plugin:DeviceAware"},
                "profiles": [
                    {
                        "plugins": {
                            "filter": {
                                "enabled": [{"name": "DeviceAware"}],
                                "disabled": [{"name": "DynamicResources"}],
                            }
                        }
                    }
                ],
            },
            "sched.yaml",
        )
        pod = make_pod("p").req(cpu="1").scheduler("py-scheduler")
        pod.spec_field("resourceClaims", [{"name": "gpu", "resourceClaimName": "c"}])
        api = "resource.k8s.io/v1"
        objs = [
            # n1 would score higher (emptier): only DeviceAware sends the pod to n2.
            make_node("n1").alloc(cpu="64", memory="64Gi", pods=110).obj(),
            make_node("n2").alloc(cpu="2", memory="2Gi", pods=110).obj(),
            {
                "apiVersion": api,
                "kind": "DeviceClass",
                "metadata": {"name": "gpu"},
                "spec": {"selectors": [{"cel": {"expression": "true"}}]},
            },
            {
                "apiVersion": api,
                "kind": "ResourceSlice",
                "metadata": {"name": "n2-gpus"},
                "spec": {
                    "driver": "gpu.example.com",
                    "nodeName": "n2",
                    "pool": {"name": "n2", "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": "gpu-0"}],
                },
            },
            {
                "apiVersion": api,
                "kind": "ResourceClaim",
                "metadata": {"name": "c", "namespace": "default"},
                "spec": {
                    "devices": {
                        "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]
                    }
                },
            },
            pod.obj(),
        ]
        result = _simulate(tmp_path, objs, cfg)
        assert result.placements["default/p"] == "n2"
    finally:
        del sys.modules["device_aware_plugin"]


class WorkloadAware:
    """Keeps a pod off nodes labelled ``draining`` when a PodDisruptionBudget protecting it
    allows no disruption, and off nodes already running a pod of its own workload (the
    Services and controller that select it: upstream's DefaultSelector) unless its
    PriorityClass is ``critical``: a plugin reading the PDBs, Services, controllers and
    PriorityClasses the scheduler watches, through its handle."""

    name = "WorkloadAware"

    def __init__(self, args: Mapping[str, Any], handle: FrameworkHandle) -> None:
        self.handle = handle

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status:
        node = node_info.node
        assert node is not None
        pdbs: Sequence[PDBInfo] = self.handle.pod_disruption_budgets(pod.namespace)
        assert self.handle.pod_disruption_budgets("elsewhere") == ()
        protected = any(
            p.selector is not None and p.selector.matches(pod.labels) and p.disruptions_allowed == 0
            for p in pdbs
        )
        if protected and node.labels.get("draining") == "true":
            return Status.unschedulable("protected pod kept off a draining node")
        services: Sequence[ServiceInfo] = self.handle.services(pod.namespace)
        assert [s.name for s in services] == ["web"]
        replica_set: SelectorObject | None = self.handle.controller(
            "ReplicaSet", "default", "web-1"
        )
        assert replica_set is not None and replica_set.selector is not None
        klass: PriorityClassInfo | None = self.handle.priority_class(pod.priority_class_name)
        if klass is not None and klass.name == "critical":
            assert klass.value == 1000
            return SUCCESS
        selector: LabelSelector | None = self.handle.default_selector(pod)
        if selector is None:
            return SUCCESS
        if any(
            p.namespace == pod.namespace and selector.matches(p.labels)
            for p in node_info.pods.values()
        ):
            return Status.unschedulable("a pod of this workload runs here")
        return SUCCESS


def test_a_plugin_reads_pdbs_services_controllers_and_priority_classes_through_its_handle(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    mod = types.ModuleType("workload_aware_plugin")
    mod.WorkloadAware = WorkloadAware  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "workload_aware_plugin", mod)
    cfg = parse_config(
        {
            "pluginModules": {"WorkloadAware": "workload_aware_plugin:WorkloadAware"},
            "profiles": [{"plugins": {"filter": {"enabled": [{"name": "WorkloadAware"}]}}}],
        },
        "sched.yaml",
    )
    owner = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "web-1",
        "uid": "rs-uid",
        "controller": True,
    }

    def web(name: str, *, critical: bool = False) -> dict[str, Any]:
        b = make_pod(name).req(cpu="100m").label("app", "web").scheduler("py-scheduler")
        if critical:
            b.priority_class("critical")
        obj = b.obj()
        obj["metadata"]["ownerReferences"] = [owner]
        return obj

    objs = [
        make_node("n1").label("draining", "true").obj(),
        make_node("n2").obj(),
        make_node("n3").obj(),
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "critical"},
            "value": 1000,
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"app": "web"}},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "web-1", "namespace": "default", "uid": "rs-uid"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}},
        },
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
            "status": {"disruptionsAllowed": 0},
        },
        web("w1"),
        web("w2"),
        web("w3"),
        web("w4", critical=True),
    ]
    result = _simulate(tmp_path, objs, cfg)
    placed = dict(result.placements)
    # n1 is draining: no web pod goes there. The critical pod comes first (priority
    # 1000) to n2 or n3; of the others one takes the other node, two wait: a pod of
    # their workload runs on each. The critical pod alone could have shared a node.
    critical = placed["default/w4"]
    assert critical in ("n2", "n3")
    others = {placed[f"default/w{i}"] for i in (1, 2, 3)}
    assert sorted(map(str, others)) == sorted(["None", "n3" if critical == "n2" else "n2"])
    assert list(placed.values()).count(None) == 2, placed


class Loud:
    """Scores every node ``args["score"]``: 150 is above the 0..100 a normalised score
    must be in, and None is no score at all."""

    name = "Loud"

    def __init__(self, args: Mapping[str, Any]) -> None:
        self.value = args.get("score", 150)

    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int:
        return self.value  # type: ignore[no-any-return]


@pytest.mark.parametrize("vectorized", [True, False], ids=["bulk", "node by node"])
@pytest.mark.parametrize("value", [150, -1, None])
def test_a_score_outside_0_to_100_is_an_error_for_that_pod(
    vectorized: bool, value: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Upstream's normalizeScores refuses a score outside [0, 100] with an error for the
    pod's cycle; so do we (it would outweigh every in-tree plugin)."""
    monkeypatch.setitem(sys.modules, "loud_plugin", types.SimpleNamespace(Loud=Loud))
    raw = {
        "pluginModules": {"Loud": "loud_plugin:Loud"},
        "profiles": [
            {
                "plugins": {"score": {"enabled": [{"name": "Loud"}]}},
                "pluginConfig": [{"name": "Loud", "args": {"score": value}}],
            }
        ],
    }
    cfg = parse_config(raw, "sched.yaml")
    recorder = RecordingRecorder()
    core = SchedulerCore(
        cfg, FakeClock(), RecordingBinder(), recorder, rng=random.Random(0), vectorized=vectorized
    )
    core.on_node_add(make_node("n1").record())
    core.on_node_add(make_node("n2").record())
    core.on_pod_add(make_pod("p").req(cpu="1").info())
    r = core.schedule_one()
    assert r is not None and r.outcome == "error"
    # The first node in the search's order (it starts at a rotating offset).
    assert re.fullmatch(
        rf"Score plugin Loud gave node n[12] the score {value!r} after normalizing: "
        r"scores must be within \[0, 100\]",
        r.message,
    ), r.message
    (failed,) = recorder.failed_calls
    assert failed.reason == "SchedulerError"
