"""LabelPolicy on its own (the API a plugin author uses), and through py-scheduler's
configuration and simulate."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

from labelpolicy import LabelPolicy  # noqa: E402
from objects import node, pod  # noqa: E402

from scheduler.config import ConfigError, parse_config  # noqa: E402
from scheduler.plugins import ClusterEvent, Code, CycleState, NodeInfo, QueueingHint  # noqa: E402
from scheduler.types import node_from_dict, pod_from_dict  # noqa: E402

CONFIG = {
    "pluginModules": {"LabelPolicy": "labelpolicy:LabelPolicy"},
    "profiles": [
        {
            "plugins": {"multiPoint": {"enabled": [{"name": "LabelPolicy", "weight": 3}]}},
            "pluginConfig": [
                {"name": "LabelPolicy", "args": {"avoid": "maintenance=true", "prefer": "disk=ssd"}}
            ],
        }
    ],
}


def test_filter_and_score() -> None:
    p = LabelPolicy({"avoid": "maintenance=true", "prefer": "disk=ssd"})
    busy = NodeInfo(node_from_dict(node("a", labels={"maintenance": "true"})))
    ssd = NodeInfo(node_from_dict(node("b", labels={"disk": "ssd"})))
    plain = pod_from_dict(pod("p"))
    assert p.filter(CycleState(), plain, busy).code == Code.UNSCHEDULABLE
    assert p.filter(CycleState(), plain, ssd).is_success()
    opted_in = pod_from_dict(pod("q", labels={"maintenance": "true"}))
    assert p.filter(CycleState(), opted_in, busy).is_success()
    assert (p.score(CycleState(), plain, ssd), p.score(CycleState(), plain, busy)) == (100, 0)


def test_pods_alike_to_it_sign_alike() -> None:
    """Sign: two pods that differ only in labels the plugin does not read sign alike; the
    opt-in label tells them apart."""
    p = LabelPolicy({"avoid": "maintenance=true", "prefer": "disk=ssd"})

    def signed(**labels: str) -> object:
        fragments, status = p.sign_pod(pod_from_dict(pod("p", labels=labels)))
        assert status.is_success()
        return fragments

    assert signed(app="web") == signed(app="db")
    assert signed(app="web") != signed(app="web", maintenance="true")


def test_a_profile_with_it_batches_pods_alike() -> None:
    """Every plugin of the profile at PreFilter, Filter, PreScore and Score signs (the
    in-tree ones and this one): with PodTopologySpread's List defaulting, pods are signed
    and the second of two alike takes its hint."""
    import random

    from scheduler.clock import FakeClock
    from scheduler.schedule_one import SchedulerCore

    raw = {**CONFIG, "profiles": [dict(CONFIG["profiles"][0])]}
    raw["profiles"][0]["pluginConfig"] = [
        *CONFIG["profiles"][0]["pluginConfig"],
        {"name": "PodTopologySpread", "args": {"defaultingType": "List"}},
    ]
    cfg = parse_config(raw, "sched.yaml")

    class Ports:
        def bind(self, pod: object, node: str, cycle: object = None) -> None: ...

        def scheduled(self, pod: object, node: str) -> None: ...

        def failed(self, pod: object, **kw: object) -> None: ...

    core = SchedulerCore(cfg, FakeClock(), Ports(), Ports(), rng=random.Random(0))
    for name in ("a", "b", "c"):
        core.on_node_add(node_from_dict(node(name, cpu="4", labels={"disk": "ssd"})))
    assert core.framework.sign_pod(pod_from_dict(pod("p", cpu="3"))) is not None
    placed = []
    for name in ("p", "q"):
        core.on_pod_add(pod_from_dict(pod(name, cpu="3")))
        result = core.schedule_one()
        assert result is not None and result.outcome == "assumed"
        placed.append((result.node, result.evaluated_nodes))
    assert placed[0][1] == 3 and placed[1][1] == 1 and placed[0][0] != placed[1][0]
    assert core.batches[cfg.scheduler_name].batched_pods == 1


def test_hints_bring_a_pod_back_only_when_a_node_could_now_fit() -> None:
    p = LabelPolicy({"avoid": "maintenance=true"})
    add, update = p.events_to_register()
    assert add.event == ClusterEvent("Node", "Add") and add.hint is None  # always: new room
    assert update.event == ClusterEvent("Node", "Update") and update.hint is not None
    busy = node_from_dict(node("a", labels={"maintenance": "true"}))
    done = node_from_dict(node("a"))
    plain = pod_from_dict(pod("p"))
    assert update.hint(plain, busy, done) is QueueingHint.QUEUE  # the label was lifted
    assert update.hint(plain, done, busy) is QueueingHint.SKIP
    assert update.hint(plain, done, done) is QueueingHint.SKIP


def test_configuration_loads_it_and_refuses_bad_args_naming_the_field() -> None:
    cfg = parse_config(CONFIG, "sched.yaml")
    assert [n for n, _, _ in cfg.out_of_tree] == ["LabelPolicy"]
    assert "LabelPolicy" in cfg.filters and "LabelPolicy" in cfg.scores
    assert cfg.score_weights["LabelPolicy"] == 3
    bad = yaml.safe_load(yaml.safe_dump(CONFIG))
    bad["profiles"][0]["pluginConfig"][0]["args"]["avoid"] = "nope"
    with pytest.raises(ConfigError) as e:
        parse_config(bad, "sched.yaml")
    assert "sched.yaml" in str(e.value)
    assert "profiles[0].pluginConfig[0].args" in str(e.value)
    assert "avoid: expected 'key=value'" in str(e.value)


def test_simulate_places_pods_by_the_plugin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from scheduler.cli import main

    (tmp_path / "sched.yaml").write_text(yaml.safe_dump(CONFIG))
    objs = [
        node("busy", cpu="4", labels={"maintenance": "true"}),
        node("plain", cpu="4"),
        node("fast", cpu="4", labels={"disk": "ssd"}),
        pod("p"),
    ]
    (tmp_path / "dump.yaml").write_text(yaml.safe_dump_all(objs))
    argv = ["simulate", "-f", str(tmp_path / "dump.yaml"), "--config", str(tmp_path / "sched.yaml")]
    code = main([*argv, "-o", "json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert '"default/p": "fast"' in out.out
