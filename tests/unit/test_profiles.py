"""Several profiles (``profiles`` of KubeSchedulerConfiguration), as upstream: each pod is
scheduled by the profile its ``spec.schedulerName`` names, with that profile's plugins and
args; the queue, cache, nominator and the pods held at Permit are shared; every profile
must order the queue alike."""

from __future__ import annotations

import random
import sys
import types
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from scheduler.backend.queue import UNSCHEDULABLE_Q, QueuedPodInfo
from scheduler.backend.queue.events import ClusterEvent, EventRegistration, QueueingHint
from scheduler.clock import FakeClock
from scheduler.config import ConfigError, SchedulerConfig, parse_config
from scheduler.decode import Document
from scheduler.explain import explain
from scheduler.framework.interface import CycleState, Status
from scheduler.metrics import Metrics
from scheduler.schedule_one import SchedulerCore
from scheduler.simulate import simulate
from scheduler.types import NodeInfo, PodInfo
from tests.builders import make_node, make_pod
from tests.unit.fakes import RecordingBinder, RecordingRecorder


class ByRank:
    """A QueueSort plugin: by the ``rank`` label (``reverse`` in its args: highest first)."""

    name = "ByRank"

    def __init__(self, args: Mapping[str, Any]) -> None:
        self.reverse = bool(args.get("reverse", False))

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        ra, rb = int(a.pod.labels.get("rank", "0")), int(b.pod.labels.get("rank", "0"))
        return ra > rb if self.reverse else ra < rb


class Hold:
    """A Filter plugin that rejects pods labelled ``hold``; its args name the one kind of
    cluster event after which it lets its rejected pods be tried again (``wake_on``)."""

    name = "Hold"

    def __init__(self, args: Mapping[str, Any]) -> None:
        self.wake_on = str(args.get("wake_on", "Node"))

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status:
        if "hold" in pod.labels:
            return Status.unschedulable("held", plugin=self.name)
        return Status()

    def events_to_register(self) -> list[EventRegistration]:
        return [
            EventRegistration(
                ClusterEvent(self.wake_on, "Add"), lambda pod, old, new: QueueingHint.QUEUE
            )
        ]


@pytest.fixture(autouse=True)
def plugin_module(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    mod = types.ModuleType("profiles_test_plugins")
    mod.ByRank = ByRank  # type: ignore[attr-defined]
    mod.Hold = Hold  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "profiles_test_plugins", mod)
    yield


MODULES = {"ByRank": "profiles_test_plugins:ByRank", "Hold": "profiles_test_plugins:Hold"}
RANKED = {"queueSort": {"disabled": [{"name": "PrioritySort"}], "enabled": [{"name": "ByRank"}]}}
MOST_ALLOCATED = {
    "name": "NodeResourcesFit",
    "args": {"scoringStrategy": {"type": "MostAllocated"}},
}


def _two(spread: dict[str, Any], packed: dict[str, Any], **top: Any) -> SchedulerConfig:
    return parse_config(
        {
            "pluginModules": MODULES,
            **top,
            "profiles": [
                {"schedulerName": "spread", **spread},
                {"schedulerName": "packed", **packed},
            ],
        },
        "sched.yaml",
    )


# ---------------------------------------------------------------------- configuration
def test_each_profile_has_its_own_plugins_and_args_and_shares_everything_else() -> None:
    cfg = _two(
        {},
        {
            "plugins": {"score": {"disabled": [{"name": "ImageLocality"}]}},
            "pluginConfig": [
                MOST_ALLOCATED,
                {"name": "DefaultPreemption", "args": {"minCandidateNodesAbsolute": 5}},
            ],
        },
        percentageOfNodesToScore=30,
        clientConnection={"qps": 70},
    )
    assert cfg.scheduler_names == ("spread", "packed")
    spread, packed = cfg.profiles
    assert spread is cfg and packed.more_profiles == ()
    assert (spread.fit.strategy, packed.fit.strategy) == ("LeastAllocated", "MostAllocated")
    assert "ImageLocality" in spread.scores and "ImageLocality" not in packed.scores
    assert spread.preemption.min_candidate_nodes_absolute == 100
    assert packed.preemption.min_candidate_nodes_absolute == 5
    for p in (spread, packed):
        assert (p.qps, p.percentage_of_nodes_to_score) == (70.0, 30)


def test_no_profiles_or_an_empty_list_is_the_one_default_profile() -> None:
    assert parse_config({"profiles": []}).scheduler_names == ("py-scheduler",)
    assert parse_config({}).profiles == (parse_config({}),)


def test_disable_preemption_turns_it_off_in_every_profile() -> None:
    cfg = _two({}, {}, disablePreemption=True)
    assert [p.preemption_enabled for p in cfg.profiles] == [False, False]


@pytest.mark.parametrize(
    ("spread", "packed", "field", "problem"),
    [
        pytest.param(
            {"plugins": RANKED},
            {},
            "profiles[1].plugins.queueSort",
            "must be the same for all profiles: PrioritySort here, ByRank in profiles[0]",
            id="another plugin",
        ),
        pytest.param(
            {"plugins": RANKED},
            {
                "plugins": RANKED,
                "pluginConfig": [{"name": "ByRank", "args": {"reverse": True}}],
            },
            "profiles[1].pluginConfig",
            "the args of queue sort plugin ByRank must be the same for all profiles",
            id="other args",
        ),
    ],
)
def test_every_profile_orders_the_one_queue_alike(
    spread: dict[str, Any], packed: dict[str, Any], field: str, problem: str
) -> None:
    """Upstream's validateCommonQueueSort: one queue serves every profile."""
    with pytest.raises(ConfigError) as e:
        _two(spread, packed)
    assert str(e.value) == f"sched.yaml: {field}: {problem}"
    same = {"plugins": RANKED, "pluginConfig": [{"name": "ByRank", "args": {"reverse": True}}]}
    assert _two(same, same).profiles[1].queue_sort == "ByRank"


# ---------------------------------------------------------------------- the core
def _core(cfg: SchedulerConfig, **kw: Any) -> tuple[SchedulerCore, RecordingBinder]:
    binder = RecordingBinder()
    core = SchedulerCore(cfg, FakeClock(), binder, RecordingRecorder(), rng=random.Random(0), **kw)
    for name in ("a", "b"):
        core.on_node_add(make_node(name).alloc(cpu="4", memory="8Gi", pods=110).record())
    return core, binder


def _pod(name: str, scheduler: str, **labels: str) -> PodInfo:
    b = make_pod(name).req(cpu="1", memory="2Gi").scheduler(scheduler)
    for k, v in labels.items():
        b.label(k, v)
    return b.info()


def test_each_pod_is_placed_by_its_own_profile_s_plugins() -> None:
    """``packed`` scores by MostAllocated, ``spread`` by LeastAllocated: one cache, so each
    sees the other's pods, and each places its own pods its own way."""
    core, binder = _core(_two({}, {"pluginConfig": [MOST_ALLOCATED]}))
    order = ["p0", "p1", "s0", "p2", "s1"]
    for name in order:
        core.on_pod_add(_pod(name, "packed" if name.startswith("p") else "spread"))
        r = core.schedule_one()
        assert r is not None and r.outcome == "assumed", r
    placed = {p.name: node for p, node in binder.calls}
    assert placed["p1"] == placed["p2"] == placed["p0"]
    assert placed["s0"] == placed["s1"] != placed["p0"]


def test_a_pod_of_a_scheduler_without_a_profile_here_is_left_alone() -> None:
    core, _ = _core(_two({}, {}))
    core.on_pod_add(_pod("theirs", "default-scheduler"))
    core.on_pod_add(_pod("ours", "packed"))
    assert not core.queue.contains("default/theirs") and core.queue.contains("default/ours")
    assert core.responsible_for(_pod("x", "spread"))


def test_a_rejected_pod_is_moved_by_its_own_profile_s_queueing_hints() -> None:
    """The same plugin in both profiles, with args that register different events: a
    node's arrival moves only the pod whose profile's Hold waits for nodes."""
    hold = {"plugins": {"filter": {"enabled": [{"name": "Hold"}]}}}
    core, _ = _two_hold(hold)
    for name, scheduler in (("on-node", "spread"), ("on-pod", "packed")):
        core.on_pod_add(_pod(name, scheduler, hold="yes"))
        r = core.schedule_one()
        assert r is not None and r.outcome == "unschedulable"
    assert core.queue.where("default/on-node") == UNSCHEDULABLE_Q
    core.on_node_add(make_node("c").alloc(cpu="4", memory="8Gi", pods=110).record())
    assert core.queue.where("default/on-node") != UNSCHEDULABLE_Q
    assert core.queue.where("default/on-pod") == UNSCHEDULABLE_Q


def _two_hold(hold: dict[str, Any]) -> tuple[SchedulerCore, RecordingBinder]:
    cfg = _two(
        {**hold, "pluginConfig": [{"name": "Hold", "args": {"wake_on": "Node"}}]},
        {**hold, "pluginConfig": [{"name": "Hold", "args": {"wake_on": "Pod"}}]},
    )
    return _core(cfg)


def test_the_cycle_s_metrics_name_the_pod_s_profile() -> None:
    metrics = Metrics()
    core, _ = _core(_two({}, {}), observer=metrics)
    core.on_pod_add(_pod("s", "spread"))
    core.on_pod_add(_pod("p", "packed"))
    core.on_pod_add(_pod("p2", "packed"))
    while core.schedule_one() is not None:
        pass

    def filters(profile: str) -> float:
        labels = {"extension_point": "Filter", "status": "Success", "profile": profile}
        name = "scheduler_framework_extension_point_duration_seconds_count"
        return metrics.registry.get_sample_value(name, labels) or 0.0

    assert (filters("spread"), filters("packed")) == (1.0, 2.0)


def test_profiles_share_the_pods_at_permit_and_in_pre_bind_and_keep_a_framework_each() -> None:
    core, _ = _core(_two({}, {"pluginConfig": [MOST_ALLOCATED]}))
    spread, packed = (core.framework_for(_pod("x", n)) for n in ("spread", "packed"))
    assert spread is not packed
    assert spread.waiting_pods is packed.waiting_pods is core.waiting_pods
    assert spread.pods_in_pre_bind is packed.pods_in_pre_bind is core.pods_in_pre_bind
    assert core.evaluator_for(_pod("x", "packed")) is not core.evaluator_for(_pod("x", "spread"))
    # A pod of no profile here (explain shows one as if it were ours): the first profile's.
    assert core.framework_for(_pod("x", "other")) is spread


# ---------------------------------------------------------------------- simulate, explain
NO_TAINT_FILTER = {"plugins": {"filter": {"disabled": [{"name": "TaintToleration"}]}}}


def _tainted_cluster() -> list[dict[str, Any]]:
    return [
        make_node("t").alloc(cpu="4", memory="8Gi", pods="110").taint("dedicated", "x").obj(),
        *(
            make_pod(name).req(cpu="1").scheduler(scheduler).obj()
            for name, scheduler in (("s", "spread"), ("p", "packed"), ("o", "other"))
        ),
    ]


def test_simulate_schedules_the_pods_of_every_profile_each_by_its_own() -> None:
    docs = [Document("in.yaml", i + 1, o) for i, o in enumerate(_tainted_cluster())]
    result = simulate(docs, _two({}, NO_TAINT_FILTER))
    # Only ``packed`` ignores the taint; the other scheduler's pod is not ours to place.
    assert result.placements == {"default/s": None, "default/p": "t"}


def test_explain_asks_the_profile_the_pod_names() -> None:
    objs = _tainted_cluster()

    def lister(kind: str) -> list[dict[str, Any]]:
        plural = {"nodes": "Node", "pods": "Pod"}
        return [o for o in objs if o["kind"] == plural.get(kind)]

    cfg = _two({}, NO_TAINT_FILTER)
    verdicts = {
        name: [v.fits for v in explain(f"default/{name}", lister, cfg).nodes]
        for name in ("s", "p", "o")
    }
    assert verdicts == {"s": [False], "p": [True], "o": [False]}
    (note,) = [n for n in explain("default/o", lister, cfg).notes if "schedulerName" in n]
    assert note == (
        "schedulerName is 'other', not one of the profiles ('spread', 'packed'): none would "
        "schedule it; shown as profile 'spread' would"
    )


def test_a_profile_s_percentage_of_nodes_to_score_overrides_the_top_level_one() -> None:
    """As upstream: the profile's ``percentageOfNodesToScore`` when set, else the top
    level's; a cycle of 200 equal nodes stops after that many feasible ones."""
    cfg = _two({}, {"percentageOfNodesToScore": 100}, percentageOfNodesToScore=60)
    assert [p.percentage_of_nodes_to_score for p in cfg.profiles] == [60, 100]
    core = SchedulerCore(cfg, FakeClock(), RecordingBinder(), RecordingRecorder())
    for i in range(200):
        core.on_node_add(make_node(f"n{i}").alloc(cpu="4", memory="8Gi", pods=110).record())
    evaluated = {}
    for scheduler in ("spread", "packed"):
        core.on_pod_add(_pod(scheduler, scheduler))
        r = core.schedule_one()
        assert r is not None and r.outcome == "assumed"
        evaluated[scheduler] = r.evaluated_nodes
    assert evaluated == {"spread": 120, "packed": 200}
    with pytest.raises(ConfigError, match=r"profiles\[1\]\.percentageOfNodesToScore: 101 is out"):
        _two({}, {"percentageOfNodesToScore": 101})
