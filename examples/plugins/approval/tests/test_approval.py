"""Approval alone, through the configuration, in the scheduler core's queue, and in simulate."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]

from approval import Approval  # noqa: E402

from scheduler.clock import FakeClock  # noqa: E402
from scheduler.config import ConfigError, parse_config  # noqa: E402
from scheduler.schedule_one import SchedulerCore  # noqa: E402
from scheduler.types import node_from_dict, pod_from_dict  # noqa: E402

CONFIG = {
    "pluginModules": {"Approval": "approval:Approval"},
    "profiles": [
        {
            "plugins": {"preEnqueue": {"enabled": [{"name": "Approval"}]}},
            "pluginConfig": [{"name": "Approval", "args": {"namespaces": ["prod"]}}],
        }
    ],
}


def api_pod(name: str, namespace: str, **labels: str) -> dict[str, Any]:
    """A pending pod as the API serves it (requests: 1 cpu)."""
    container = {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": name, "labels": labels},
        "spec": {"schedulerName": "py-scheduler", "containers": [container]},
    }


NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}},
    "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
}


class Ports:
    """Binder and Recorder that accept every call."""

    def bind(self, pod: Any, node_name: str) -> None: ...

    def scheduled(self, pod: Any, node_name: str) -> None: ...

    def failed(self, pod: Any, **kw: Any) -> None: ...


def test_only_unapproved_pods_of_the_listed_namespaces_wait() -> None:
    plugin = Approval({"namespaces": ["prod"], "label": "ok"})
    waiting = plugin.pre_enqueue(pod_from_dict(api_pod("a", "prod")))
    assert not waiting.is_success() and waiting.message() == "waiting for approval: label ok=true"
    assert plugin.pre_enqueue(pod_from_dict(api_pod("b", "prod", ok="true"))).is_success()
    assert plugin.pre_enqueue(pod_from_dict(api_pod("c", "dev"))).is_success()


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ({}, "namespaces: expected a non-empty list"),
        ({"namespaces": "prod"}, "namespaces: expected a non-empty list"),
        ({"namespaces": ["prod"], "label": ""}, "label: expected a label key"),
        ({"namespaces": ["prod"], "approver": "me"}, "approver: unknown field"),
    ],
)
def test_bad_args_name_the_file_and_field(args: dict[str, Any], problem: str) -> None:
    bad = yaml.safe_load(yaml.safe_dump(CONFIG))
    bad["profiles"][0]["pluginConfig"][0]["args"] = args
    with pytest.raises(ConfigError) as e:
        parse_config(bad, "sched.yaml")
    assert "sched.yaml" in str(e.value) and "pluginConfig[0].args" in str(e.value)
    assert problem in str(e.value)


def test_the_pod_waits_gated_until_the_label_update_lets_it_in() -> None:
    cfg = parse_config(CONFIG, "sched.yaml")
    ports = Ports()
    core = SchedulerCore(cfg, FakeClock(), ports, ports, rng=random.Random(0))
    core.on_node_add(node_from_dict(NODE))
    waiting = pod_from_dict(api_pod("web-0", "prod"))
    core.on_pod_add(waiting)
    core.on_pod_add(pod_from_dict(api_pod("tool", "dev")))
    first = core.schedule_one()
    assert first is not None and first.pod.name == "tool" and first.outcome == "assumed"
    assert core.schedule_one() is None  # web-0 is gated: no cycle at all
    assert [p.name for p in core.queue.pending_pods()["gated"]] == ["web-0"]
    approved = pod_from_dict(api_pod("web-0", "prod", approved="true"))
    core.on_pod_update(waiting, approved)
    second = core.schedule_one()
    assert second is not None and second.pod.name == "web-0" and second.outcome == "assumed"


def test_simulate_reports_the_unapproved_pod_gated_and_unplaced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from scheduler.cli import main

    (tmp_path / "sched.yaml").write_text(yaml.safe_dump(CONFIG))
    objs = [NODE, api_pod("web-0", "prod"), api_pod("web-1", "prod", approved="true")]
    (tmp_path / "dump.yaml").write_text(yaml.safe_dump_all(objs))
    argv = ["simulate", "-f", str(tmp_path / "dump.yaml"), "--config", str(tmp_path / "sched.yaml")]
    code = main([*argv, "-o", "json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    result = json.loads(out.out)
    assert result["placements"] == {"prod/web-0": None, "prod/web-1": "n1"}
    assert result["decisions"] == [
        {"pod": "prod/web-1", "outcome": "scheduled", "node": "n1"},
        {
            "pod": "prod/web-0",
            "outcome": "gated",
            "plugin": "Approval",
            "message": "waiting for approval: label approved=true",
        },
    ]
