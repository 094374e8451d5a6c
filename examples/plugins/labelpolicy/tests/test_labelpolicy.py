"""LabelPolicy on its own (the API a plugin author uses), and through py-scheduler's
configuration and simulate."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from labelpolicy import LabelPolicy

from scheduler.config import ConfigError, parse_config
from scheduler.plugins import Code, CycleState
from scheduler.types import NodeInfo
from tests.builders import make_node, make_pod

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
    busy = NodeInfo(make_node("a").label("maintenance", "true").record())
    ssd = NodeInfo(make_node("b").label("disk", "ssd").record())
    pod = make_pod("p").info()
    assert p.filter(CycleState(), pod, busy).code == Code.UNSCHEDULABLE
    assert p.filter(CycleState(), pod, ssd).is_success()
    opted_in = make_pod("q").label("maintenance", "true").info()
    assert p.filter(CycleState(), opted_in, busy).is_success()
    assert (p.score(CycleState(), pod, ssd), p.score(CycleState(), pod, busy)) == (100, 0)


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
        make_node("busy").label("maintenance", "true").alloc(cpu="4", memory="8Gi", pods=10).obj(),
        make_node("plain").alloc(cpu="4", memory="8Gi", pods=10).obj(),
        make_node("fast").label("disk", "ssd").alloc(cpu="4", memory="8Gi", pods=10).obj(),
        make_pod("p").req(cpu="1").obj(),
    ]
    (tmp_path / "dump.yaml").write_text(yaml.safe_dump_all(objs))
    code = main(
        [
            "simulate",
            "-f",
            str(tmp_path / "dump.yaml"),
            "--config",
            str(tmp_path / "sched.yaml"),
            "-o",
            "json",
        ]
    )
    out = capsys.readouterr()
    assert code == 0, out.err
    assert '"default/p": "fast"' in out.out
