"""MinAge alone, in the scheduler core's preemption, and through the configuration."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

import minage  # noqa: E402
from minage import MinAge  # noqa: E402
from objects import node, pod  # noqa: E402

from scheduler.clock import FakeClock  # noqa: E402
from scheduler.config import ConfigError, parse_config  # noqa: E402
from scheduler.plugins import Status  # noqa: E402
from scheduler.schedule_one import SchedulerCore  # noqa: E402
from scheduler.types import node_from_dict, pod_from_dict  # noqa: E402

CONFIG = {
    "pluginModules": {"MinAge": "minage:MinAge"},
    "profiles": [
        {
            "plugins": {"postFilter": {"enabled": [{"name": "MinAge"}]}},
            "pluginConfig": [{"name": "MinAge", "args": {"minAgeSeconds": 600}}],
        }
    ],
}


class Ports:
    """Binder, Recorder and PreemptionActions that only accept."""

    def bind(self, pod: Any, node_name: str) -> None: ...

    def scheduled(self, pod: Any, node_name: str) -> None: ...

    def failed(self, pod: Any, **kw: Any) -> None: ...

    def prepare_candidate(self, preemptor: Any, candidate: Any, lower: Any) -> Status:
        return Status()


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(minage, "CLOCK", lambda: 10_000.0)


def test_young_pods_are_not_eligible_victims() -> None:
    hook = MinAge({"minAgeSeconds": 600})
    high = pod_from_dict(pod("high", priority=100))
    assert not hook.is_eligible_victim(pod_from_dict(pod("young", node="n", started=9_500)), high)
    assert hook.is_eligible_victim(pod_from_dict(pod("old", node="n", started=9_000)), high)
    with pytest.raises(ValueError, match="minAgeSeconds: expected a number"):
        MinAge({"minAgeSeconds": "soon"})


def test_preemption_takes_the_old_pod_and_spares_the_young_one() -> None:
    cfg = parse_config(CONFIG, "sched.yaml")
    ports = Ports()
    core = SchedulerCore(cfg, FakeClock(), ports, ports, ports, rng=random.Random(0))
    assert len(core.evaluator.eligibility_hooks) == 1
    for name, started in (("n-young", 9_900), ("n-old", 1_000)):
        core.on_node_add(node_from_dict(node(name)))
        core.on_pod_add(pod_from_dict(pod(f"on-{name}", node=name, started=started)))
    core.on_pod_add(pod_from_dict(pod("high", priority=100)))
    r = core.schedule_one()
    assert r is not None and r.outcome == "preempting"
    assert [v.name for v in r.victims] == ["on-n-old"]


def test_bad_args_name_the_file_and_field() -> None:
    bad = yaml.safe_load(yaml.safe_dump(CONFIG))
    bad["profiles"][0]["pluginConfig"][0]["args"] = {"minAge": 1}
    with pytest.raises(ConfigError, match=r"sched\.yaml.*pluginConfig\[0\]\.args.*minAge: unknown"):
        parse_config(bad, "sched.yaml")


def test_simulate_spares_the_young_pod(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from scheduler.cli import main

    (tmp_path / "sched.yaml").write_text(yaml.safe_dump(CONFIG))
    objs = [
        node("n-young"),
        node("n-old"),
        pod("young", node="n-young", started=9_900),
        pod("old", node="n-old", started=1_000),
        pod("high", priority=100),
    ]
    (tmp_path / "dump.yaml").write_text(yaml.safe_dump_all(objs))
    argv = ["simulate", "-f", str(tmp_path / "dump.yaml"), "--config", str(tmp_path / "sched.yaml")]
    code = main([*argv, "-o", "json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    result = json.loads(out.out)
    assert result["evicted"] == ["default/old"]
    assert result["placements"]["default/high"] == "n-old"
