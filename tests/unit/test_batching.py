"""OpportunisticBatching (scheduler/framework/batch.py): pods signed by the profile's
plugins, the hint a pod like the last one gets, the node chosen last scored again, and
every reason the kept scores are dropped, through SchedulerCore with a FakeClock (upstream's
batch_test.go and schedule_one_test.go cases where they mirror one)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from scheduler.clock import FakeClock
from scheduler.config import (
    FILTER_PLUGINS,
    ConfigError,
    InterPodAffinityArgs,
    PodTopologySpreadArgs,
    SchedulerConfig,
    feature_gates,
    with_feature_gates,
)
from scheduler.framework import batch as batching
from scheduler.framework.batch import MAX_BATCH_AGE
from scheduler.framework.interface import SUCCESS, CycleState, SignFragment, Status
from scheduler.framework.runtime import Framework, _Weighted
from scheduler.metrics import Metrics
from scheduler.schedule_one import CycleResult, SchedulerCore
from scheduler.types import NodeInfo, NodeRecord, PodInfo
from tests.builders import make_node, make_pod
from tests.unit.fakes import FakeFilter, RecordingBinder, RecordingRecorder

# A profile where pods can be signed: PodTopologySpread with no default constraints.
SIGNING = SchedulerConfig(topology_spread=PodTopologySpreadArgs(system_defaulting=False))
# The filters of test_schedule_one (the default ones up to NodeResourcesFit), and one
# score plugin of ours (``Ranked``).
FILTERS = FILTER_PLUGINS[: FILTER_PLUGINS.index("NodeResourcesFit") + 1]
RANKED = SchedulerConfig(filters=FILTERS, scores=())
# A spread constraint of the pod's own: it cannot be signed.
SPREAD_WEB = {
    "maxSkew": 1,
    "topologyKey": "zone",
    "whenUnsatisfiable": "ScheduleAnyway",
    "labelSelector": {"matchLabels": {"app": "web"}},
}


@dataclass
class Ranked:
    """A score plugin that signs pods: a node's score is its rank (fixed, so that no two
    nodes tie), less ``per_pod`` for each pod on it."""

    rank: dict[str, int]
    per_pod: int = 0
    name: str = "Ranked"
    scored: list[str] = field(default_factory=list)

    def sign_pod(self, pod: PodInfo) -> tuple[list[SignFragment], Status]:
        return [], SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int:
        self.scored.append(node_info.name)
        return self.rank[node_info.name] - self.per_pod * len(node_info.pods)

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        return None


@dataclass
class H:
    core: SchedulerCore
    clock: FakeClock
    binder: RecordingBinder
    metrics: Metrics

    def run(self, *pods: PodInfo) -> list[CycleResult]:
        out = []
        for p in pods:
            self.core.on_pod_add(p)
            r = self.core.schedule_one()
            assert r is not None
            out.append(r)
        return out

    def counts(self, metric: Any) -> dict[tuple[str, ...], float]:
        return {
            tuple(s.labels.values()): s.value
            for m in metric.collect()
            for s in m.samples
            if s.name.endswith("_total")
        }

    @property
    def batch(self) -> batching.OpportunisticBatch:
        return self.core.batches["py-scheduler"]


def harness(
    nodes: Sequence[NodeRecord],
    config: SchedulerConfig = RANKED,
    *,
    ranked: Ranked | None = None,
    seed: int = 0,
    vectorized: bool = True,
) -> H:
    clock = FakeClock()
    metrics = Metrics()
    core = SchedulerCore(
        config,
        clock,
        RecordingBinder(),
        RecordingRecorder(),
        rng=random.Random(seed),
        observer=metrics,
        vectorized=vectorized,
    )
    if ranked is not None:
        fw = core.framework
        fw.score_plugins.append(_Weighted(ranked, 1))
        fw._find_signers()
    for n in nodes:
        core.on_node_add(n)
    assert isinstance(core.binder, RecordingBinder)
    return H(core, clock, core.binder, metrics)


def node(name: str, cpu: str = "1", memory: str = "8Gi") -> NodeRecord:
    return make_node(name).alloc(cpu=cpu, memory=memory, pods=110).record()


def replica(i: int, cpu: str = "1") -> PodInfo:
    """Pods of one template: alike but for their names."""
    return make_pod(f"web-{i}").label("app", "web").req(cpu=cpu, memory="1Gi").info()


NAMES = [f"n{i}" for i in range(6)]
# n3 ranks best, then n0, n5, n1, n4, n2.
RANK = {"n0": 50, "n1": 30, "n2": 10, "n3": 60, "n4": 20, "n5": 40}
BEST_FIRST = sorted(NAMES, key=lambda n: -RANK[n])


# ----------------------------------------------------------------------------- signatures


def _fw(config: SchedulerConfig = SIGNING) -> Framework:
    core = SchedulerCore(config, FakeClock(), RecordingBinder(), RecordingRecorder())
    return core.framework


def test_the_default_profile_signs_no_pod() -> None:
    """Upstream's default PodTopologySpread has default constraints: no pod is signed, so
    the default profile never batches."""
    fw = _fw(SchedulerConfig())
    assert fw.signers is not None and fw.signs_no_pod
    assert fw.sign_pod(replica(0)) is None


def test_pods_of_one_template_sign_alike() -> None:
    fw = _fw()
    a, b = replica(0), replica(1)
    assert fw.sign_pod(a) is not None
    assert fw.sign_pod(a) == fw.sign_pod(b)
    keys = [k for k, _ in fw.sign_pod(a) or ()]
    assert keys == sorted(keys)
    assert "v1.Pod.Spec.SchedulerName" in keys and "v1.Pod.Spec.Tolerations" in keys


def _pod(name: str = "p") -> Any:
    return make_pod(name).label("app", "web").req(cpu="1")


@pytest.mark.parametrize(
    "other",
    [
        pytest.param(lambda: _pod("q").req(cpu="2").info(), id="requests"),
        pytest.param(lambda: _pod("q").label("tier", "a").info(), id="labels"),
        pytest.param(lambda: _pod("q").node_selector(zone="a").info(), id="node selector"),
        pytest.param(lambda: _pod("q").toleration("k", "v").info(), id="tolerations"),
        pytest.param(lambda: _pod("q").host_port(8080).info(), id="host ports"),
        pytest.param(lambda: _pod("q").images("nginx").info(), id="images"),
        pytest.param(lambda: _pod("q").scheduler("other").info(), id="scheduler name"),
        pytest.param(
            lambda: (
                _pod("q")
                .affinity(
                    {
                        "nodeAffinity": {
                            "preferredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "weight": 1,
                                    "preference": {
                                        "matchExpressions": [
                                            {"key": "a", "operator": "Exists"},
                                        ]
                                    },
                                }
                            ]
                        }
                    }
                )
                .info()
            ),
            id="node affinity",
        ),
    ],
)
def test_what_a_plugin_reads_tells_pods_apart(other: Any) -> None:
    fw = _fw()
    assert fw.sign_pod(_pod().info()) != fw.sign_pod(other())


def test_labels_do_not_count_when_only_pods_with_affinity_are_read() -> None:
    """InterPodAffinity's ignorePreferredTermsOfExistingPods: the pod's labels are read only
    by terms of pods that have affinity, so they are not signed (upstream)."""
    fw = _fw(replace(SIGNING, inter_pod_affinity=InterPodAffinityArgs(1, True)))
    assert fw.sign_pod(_pod().info()) == fw.sign_pod(_pod("q").label("tier", "a").info())


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param(
            lambda: (
                _pod()
                .affinity(
                    {
                        "podAntiAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "topologyKey": "kubernetes.io/hostname",
                                    "labelSelector": {"matchLabels": {"app": "web"}},
                                }
                            ]
                        }
                    }
                )
                .info()
            ),
            id="pod anti-affinity (InterPodAffinity)",
        ),
        pytest.param(
            lambda: _pod().spread(SPREAD_WEB).info(),
            id="topology spread constraints (PodTopologySpread)",
        ),
        pytest.param(
            lambda: (
                _pod()
                .spec_field("resourceClaims", [{"name": "gpu", "resourceClaimName": "gpu-0"}])
                .info()
            ),
            id="resource claims (DynamicResources)",
        ),
    ],
)
def test_pods_that_depend_on_other_pods_are_not_signed(pod: Any) -> None:
    assert _fw().sign_pod(pod()) is None


def test_generic_ephemeral_volumes_of_one_template_sign_alike() -> None:
    """A generic ephemeral volume's claim is named after its pod; replicas are alike all
    the same (upstream signs the volume's source)."""

    def with_volume(name: str) -> PodInfo:
        template = {"spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "fast"}}
        return (
            _pod(name)
            .spec_field(
                "volumes", [{"name": "data", "ephemeral": {"volumeClaimTemplate": template}}]
            )
            .info()
        )

    fw = _fw()
    assert fw.sign_pod(with_volume("a")) == fw.sign_pod(with_volume("b"))
    assert fw.sign_pod(with_volume("a")) != fw.sign_pod(_pod("c").info())


def test_a_plugin_that_does_not_sign_turns_signing_off() -> None:
    """Upstream's computeBatchablePlugins: a Filter plugin without SignPod means no pod of
    the profile is signed."""
    core = SchedulerCore(SIGNING, FakeClock(), RecordingBinder(), RecordingRecorder())
    fw = core.framework
    fw.filter_plugins.append(FakeFilter())
    fw._find_signers()
    assert fw.signers is None and fw.sign_pod(replica(0)) is None


def test_a_plugin_that_cannot_sign_a_pod_leaves_it_unsigned() -> None:
    @dataclass
    class Picky:
        name: str = "Picky"

        def sign_pod(self, pod: PodInfo) -> tuple[list[SignFragment], Status]:
            if pod.name.startswith("odd"):
                return [], Status.unschedulable("not this one")
            return [SignFragment("picky", pod.labels.get("app"))], SUCCESS

        def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status:
            return SUCCESS

    core = SchedulerCore(SIGNING, FakeClock(), RecordingBinder(), RecordingRecorder())
    fw = core.framework
    fw.filter_plugins.append(Picky())
    fw._find_signers()
    assert fw.sign_pod(_pod("odd").info()) is None
    signed = dict(fw.sign_pod(_pod("even").info()) or ())
    assert signed["picky"] == "web"


# ----------------------------------------------------------------------------- hints


def test_pods_alike_take_the_next_best_node_without_a_search() -> None:
    """One pod per node: the first pod filters and scores every node; each next one gets
    the best node left as its hint, filtered alone and taken (upstream's batch test
    "one pod per node")."""
    ranked = Ranked(RANK)
    h = harness([node(n) for n in NAMES], ranked=ranked)
    results = h.run(*(replica(i) for i in range(6)))
    assert [r.node for r in results] == BEST_FIRST
    assert [(r.feasible_nodes, r.evaluated_nodes) for r in results] == [(6, 6)] + [(1, 1)] * 5
    assert len(ranked.scored) == 6  # only the first pod's cycle scored nodes
    assert h.batch.batched_pods == 5
    attempts = h.counts(h.metrics.batch_attempts)
    assert attempts == {("py-scheduler", "no_hint"): 1, ("py-scheduler", "hint_used"): 5}


def test_hints_place_pods_where_a_full_search_would() -> None:
    """Without batching, each pod would search and score every node: the same nodes."""
    plain = harness([node(n) for n in NAMES], replace(RANKED, opportunistic_batching=False))
    plain.core.framework.score_plugins.append(_Weighted(Ranked(RANK), 1))
    got = [r.node for r in plain.run(*(replica(i) for i in range(6)))]
    assert got == BEST_FIRST and plain.core.batches == {}


def test_the_node_chosen_last_is_scored_again_when_the_pod_fits_there_too() -> None:
    """Nodes with room for two pods: the node chosen last still fits the next pod, so it
    is rescored (PreScore over the kept nodes and it, then normalised with them) and
    competes with the kept nodes; placements are those of a full search each time."""
    per_pod = 15  # n3 with one pod (65) falls below n0 (70) but above n5 (60)
    ranks = {n: r + 20 for n, r in RANK.items()}  # every score stays in 0..100
    rank = Ranked(ranks, per_pod=per_pod)
    h = harness([node(n, cpu="2") for n in NAMES], ranked=rank)
    got = [r.node for r in h.run(*(replica(i) for i in range(12)))]

    plain = harness(
        [node(n, cpu="2") for n in NAMES], replace(RANKED, opportunistic_batching=False)
    )
    plain.core.framework.score_plugins.append(_Weighted(Ranked(ranks, per_pod=per_pod), 1))
    want = [r.node for r in plain.run(*(replica(i) for i in range(12)))]
    assert got == want
    assert got[:4] == ["n3", "n0", "n3", "n5"]
    # Every pod after the first takes its hint; the node chosen last was rescored each
    # time it had room left (its first pod of two).
    assert h.batch.batched_pods == 11
    assert h.counts(h.metrics.batch_rescores) == {("py-scheduler",): 6}
    assert _flushes(h) == {}
    # Upstream's timings of the three steps: a hint asked in each cycle (the first found
    # none), a store in each, a rescoring timed as counted.
    assert _timed(h.metrics.batch_hint_seconds) == {
        ("no_hint", "py-scheduler"): 1,
        ("hint", "py-scheduler"): 11,
    }
    assert _timed(h.metrics.batch_store_seconds) == {("py-scheduler",): 12}
    assert _timed(h.metrics.batch_rescore_seconds) == {("py-scheduler",): 6}


def _timed(metric: Any) -> dict[tuple[str, ...], float]:
    """A histogram's observation counts, by its labels."""
    return {
        tuple(s.labels.values()): s.value
        for m in metric.collect()
        for s in m.samples
        if s.name.endswith("_count")
    }


def test_a_hint_that_no_longer_fits_falls_back_to_a_full_search() -> None:
    """The best kept node filled up (another scheduler's pod, say): the hint fails its
    Filter, the pod searches every node, and what that search scored is kept instead."""
    h = harness([node(n) for n in NAMES], ranked=Ranked(RANK))
    h.run(replica(0))
    h.core.on_pod_add(make_pod("other").req(cpu="1").node(BEST_FIRST[1]).info())
    (r,) = h.run(replica(1))
    assert r.node == BEST_FIRST[2] and r.evaluated_nodes == 6
    assert h.counts(h.metrics.batch_attempts)[("py-scheduler", "hint_not_used")] == 1
    (r,) = h.run(replica(2))
    assert (r.node, r.evaluated_nodes) == (BEST_FIRST[3], 1)


def _flushes(h: H, profile: str = "py-scheduler") -> dict[str, float]:
    counts = h.counts(h.metrics.batch_flushes)
    return {reason: v for (p, reason), v in counts.items() if p == profile}


def test_kept_scores_expire_after_half_a_second() -> None:
    h = harness([node(n) for n in NAMES], ranked=Ranked(RANK))
    h.run(replica(0))
    h.clock.step(MAX_BATCH_AGE + 0.01)
    (r,) = h.run(replica(1))
    assert r.evaluated_nodes == 6 and _flushes(h) == {"expired": 1}
    h.clock.step(MAX_BATCH_AGE)  # not older than 0.5 s: still used
    (r,) = h.run(replica(2))
    assert r.evaluated_nodes == 1


def test_a_pod_unlike_the_last_one_searches() -> None:
    h = harness([node(n, cpu="4") for n in NAMES], ranked=Ranked(RANK))
    h.run(replica(0))
    (r,) = h.run(replica(1, cpu="2"))
    assert r.evaluated_nodes == 6 and _flushes(h) == {"pod_incompatible": 1}


def test_a_pod_that_could_not_be_signed_drops_the_kept_scores() -> None:
    h = harness([node(n, cpu="4") for n in NAMES], SIGNING)
    h.run(replica(0))
    (r,) = h.run(make_pod("spread").label("app", "web").req(cpu="1").spread(SPREAD_WEB).info())
    assert r.evaluated_nodes == 6
    assert _flushes(h) == {"pod_incompatible": 1, "pod_not_batchable": 1}
    assert h.batch.kept is None


def test_a_cycle_of_another_profile_in_between_drops_the_kept_scores() -> None:
    """The next pod's cycle is not the one after the kept scores' when a pod of another
    profile was scheduled in between (upstream's pod_skipped)."""
    other = replace(RANKED, scheduler_name="other")
    h = harness(
        [node(n, cpu="4") for n in NAMES],
        replace(RANKED, more_profiles=(other,)),
        ranked=Ranked(RANK),
    )
    h.run(replica(0))
    (r,) = h.run(make_pod("elsewhere").scheduler("other").req(cpu="1").info())
    assert r.outcome == "assumed"
    (r,) = h.run(replica(1))
    assert r.evaluated_nodes == 6 and _flushes(h) == {"pod_skipped": 1}


def test_a_pod_that_fails_keeps_nothing() -> None:
    """A pod no node fits ends its cycle without a choice: the next pod like the first
    one finds no kept scores (the failed pod, unlike it, dropped them)."""
    h = harness([node(n) for n in NAMES], ranked=Ranked(RANK))
    h.run(replica(0))
    (failed,) = h.run(make_pod("huge").req(cpu="64").info())
    assert failed.outcome == "unschedulable"
    (r,) = h.run(replica(1))
    assert r.evaluated_nodes == 6 and _flushes(h) == {"pod_incompatible": 1}


def test_a_nominated_pod_takes_no_hint() -> None:
    h = harness([node(n, cpu="4") for n in NAMES], ranked=Ranked(RANK))
    h.run(replica(0))
    nominated = make_pod("web-n").label("app", "web").req(cpu="1", memory="1Gi")
    (r,) = h.run(nominated.nominated(BEST_FIRST[-1]).info())
    # It takes its nominated node, the one feasible node it looked at: nothing is kept.
    assert r.node == BEST_FIRST[-1] and _flushes(h) == {"pod_nominated": 1, "empty_list": 1}


def test_the_node_chosen_last_gone_drops_the_kept_scores() -> None:
    h = harness([node(n) for n in NAMES], ranked=Ranked(RANK))
    h.run(replica(0))
    h.core.on_node_delete(BEST_FIRST[0])
    (r,) = h.run(replica(1))
    assert r.evaluated_nodes == 5 and _flushes(h) == {"node_missing": 1}


def test_a_single_feasible_node_keeps_nothing() -> None:
    h = harness([node("only")], ranked=Ranked({"only": 1}))
    h.run(replica(0))
    assert h.batch.kept is None and _flushes(h) == {"empty_list": 1}


def test_the_default_profile_counts_every_pod_as_not_batchable() -> None:
    """As upstream's metrics: each cycle asks for a hint (none) and keeps nothing."""
    h = harness([node(n, cpu="4") for n in NAMES], SchedulerConfig())
    h.run(replica(0), replica(1))
    assert h.counts(h.metrics.batch_attempts) == {("py-scheduler", "no_hint"): 2}
    assert _flushes(h) == {"pod_not_batchable": 2}


@pytest.mark.parametrize("seed", range(5))
def test_the_bulk_and_node_by_node_paths_batch_alike(seed: int) -> None:
    """The same placements, hints and flushes whichever path filters and scores."""
    nodes = [node(f"n{i}", cpu=str(1 + i % 3), memory=f"{4 + i % 5}Gi") for i in range(30)]
    rng = random.Random(seed)
    pods = [replica(i, cpu=rng.choice(["500m", "1", "1"])) for i in range(40)]
    out = []
    for vectorized in (True, False):
        h = harness(nodes, SIGNING, seed=seed, vectorized=vectorized)
        placed = [(r.node, r.evaluated_nodes) for r in h.run(*pods)]
        out.append((placed, h.counts(h.metrics.batch_attempts), _flushes(h)))
    assert out[0] == out[1]
    assert out[0][1].get(("py-scheduler", "hint_used"), 0) > 0


def test_no_batching_with_extenders_or_with_the_gate_off() -> None:
    off = SchedulerCore(
        replace(SIGNING, opportunistic_batching=False),
        FakeClock(),
        RecordingBinder(),
        RecordingRecorder(),
    )
    assert off.batches == {}


# ----------------------------------------------------------------------------- the flag


def test_feature_gates_flag() -> None:
    assert feature_gates("OpportunisticBatching=false") == {"OpportunisticBatching": False}
    assert feature_gates(" OpportunisticBatching=True ,") == {"OpportunisticBatching": True}
    assert not with_feature_gates(SIGNING, "OpportunisticBatching=0").opportunistic_batching
    assert with_feature_gates(SIGNING, None) is SIGNING


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "SchedulerAsyncAPICalls=true",
            "--feature-gates: unrecognized feature gate 'SchedulerAsyncAPICalls' "
            "(py-scheduler sets OpportunisticBatching; the others are fixed at their "
            "v1.37 defaults)",
            id="a gate we do not set",
        ),
        pytest.param(
            "OpportunisticBatching",
            "--feature-gates: 'OpportunisticBatching': missing =true or =false",
            id="no value",
        ),
        pytest.param(
            "OpportunisticBatching=maybe",
            "--feature-gates: OpportunisticBatching='maybe': not a boolean (true or false)",
            id="not a boolean",
        ),
    ],
)
def test_feature_gates_flag_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        feature_gates(text)
    assert str(e.value) == message


# ----------------------------------------------------------------------------- Python plugins


class ZoneScore:
    """An out-of-tree score plugin that signs what it reads (nothing of the pod) or, with
    ``{"sign": "raise"}``, raises in Sign, or with ``{"sign": "none"}`` has no Sign."""

    name = "ZoneScore"

    def __init__(self, args: dict[str, Any]) -> None:
        self.mode = args.get("sign", "ok")
        if self.mode == "none":
            self.sign_pod = None  # type: ignore[assignment]

    def sign_pod(self, pod: PodInfo) -> tuple[list[SignFragment], Status]:
        if self.mode == "raise":
            raise RuntimeError("boom in sign")
        if self.mode == "garbage":
            return "not fragments", SUCCESS  # type: ignore[return-value]
        return [SignFragment("zone-score", "v1")], SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int:
        return int(node_info.name.removeprefix("n")) * 10


@pytest.fixture
def zone_plugin() -> Any:
    import sys
    import types

    mod = types.ModuleType("zone_score_plugin")
    mod.ZoneScore = ZoneScore  # type: ignore[attr-defined]
    sys.modules["zone_score_plugin"] = mod
    yield
    del sys.modules["zone_score_plugin"]


def _plugin_config(mode: str) -> SchedulerConfig:
    from scheduler.config import parse_config

    return parse_config(
        {
            "pluginModules": {"ZoneScore": "zone_score_plugin:ZoneScore"},
            "profiles": [
                {
                    "schedulerName": "py-scheduler",
                    "plugins": {"score": {"enabled": [{"name": "ZoneScore", "weight": 5}]}},
                    "pluginConfig": [
                        {"name": "ZoneScore", "args": {"sign": mode}},
                        {
                            "name": "PodTopologySpread",
                            "args": {"defaultingType": "List"},
                        },
                    ],
                }
            ],
        },
        "sched.yaml",
    )


@pytest.mark.usefixtures("zone_plugin")
def test_a_python_plugin_that_signs_lets_its_profile_batch() -> None:
    h = harness([node(n) for n in NAMES], _plugin_config("ok"))
    signature = dict(h.core.framework.sign_pod(replica(0)) or ())
    assert signature["zone-score"] == "v1"
    results = h.run(*(replica(i) for i in range(6)))
    assert [r.node for r in results] == ["n5", "n4", "n3", "n2", "n1", "n0"]
    assert h.batch.batched_pods == 5


@pytest.mark.usefixtures("zone_plugin")
@pytest.mark.parametrize("mode", ["raise", "garbage", "none"])
def test_a_python_plugin_that_cannot_sign_leaves_pods_to_full_cycles(mode: str) -> None:
    """Sign raising or answering nonsense leaves the pod unsigned; a plugin without Sign
    turns signing off for the profile. Either way every pod is scheduled, each with its
    own search."""
    h = harness([node(n) for n in NAMES], _plugin_config(mode))
    assert h.core.framework.sign_pod(replica(0)) is None
    assert (h.core.framework.signers is None) == (mode == "none")
    results = h.run(*(replica(i) for i in range(6)))
    assert [r.node for r in results] == ["n5", "n4", "n3", "n2", "n1", "n0"]
    assert [r.evaluated_nodes for r in results] == [6] * 6
    assert h.batch.batched_pods == 0


# ----------------------------------------------------------------------------- simulate


def test_simulate_batches_and_its_flag_turns_it_off(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    import yaml

    from scheduler.cli import main

    objs = [make_node(n).alloc(cpu="1", memory="8Gi", pods="110").obj() for n in NAMES]
    objs += [
        make_pod(f"web-{i}").label("app", "web").req(cpu="1").scheduler("py-scheduler").obj()
        for i in range(7)
    ]
    dump = tmp_path / "cluster.yaml"
    dump.write_text(yaml.safe_dump_all(objs, sort_keys=False))
    config = tmp_path / "list.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [
                    {
                        "schedulerName": "py-scheduler",
                        "pluginConfig": [
                            {"name": "PodTopologySpread", "args": {"defaultingType": "List"}}
                        ],
                    }
                ],
            }
        )
    )
    base = ["simulate", "-f", str(dump), "--config", str(config), "-o", "json"]
    outcomes = {}
    for gate in ("true", "false"):
        assert main([*base, "--feature-gates", f"OpportunisticBatching={gate}"]) == 0
        decisions = json.loads(capsys.readouterr().out)["decisions"]
        outcomes[gate] = sorted((d["outcome"], d.get("node") or "") for d in decisions)
    # Six pods on six nodes, the seventh unschedulable, with batching or without.
    want = sorted([("scheduled", n) for n in NAMES] + [("unschedulable", "")])
    assert outcomes == {"true": want, "false": want}
    assert main([*base, "--feature-gates", "Nope=true"]) == 2
    err = capsys.readouterr().err
    assert "--feature-gates: unrecognized feature gate 'Nope'" in err


def test_rescoring_after_a_node_joined_finds_the_kept_nodes_by_name() -> None:
    """A node added between two pods rebuilds the snapshot's rows: the kept nodes are
    found by name then (the new node, never scored, is not among them)."""
    ranks = {**{n: r + 20 for n, r in RANK.items()}, "late": 100}
    h = harness([node(n, cpu="2") for n in NAMES], ranked=Ranked(ranks, per_pod=15))
    (first,) = h.run(replica(0))
    h.core.on_node_add(node("late", cpu="2"))
    (second,) = h.run(replica(1))
    assert (first.node, second.node, second.evaluated_nodes) == ("n3", "n0", 1)
    assert h.counts(h.metrics.batch_rescores) == {("py-scheduler",): 1}
    # The kept nodes run out in time; a full search then finds the new node.
    placed = [r.node for r in h.run(*(replica(i) for i in range(2, 13)))]
    assert "late" in placed
