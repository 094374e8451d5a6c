"""SchedulingGates (PreEnqueue), as upstream's pkg/scheduler/framework/plugins/schedulinggates:
the message, the gated set, the config switch, and bad input."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from scheduler.clock import FakeClock
from scheduler.config import SchedulerConfig, parse_config
from scheduler.framework.interface import Code
from scheduler.framework.plugins.schedulinggates import SchedulingGates
from scheduler.schedule_one import SchedulerCore
from scheduler.types import ParseError, pod_from_dict
from tests.builders import make_node, make_pod
from tests.unit.fakes import RecordingBinder, RecordingRecorder


@pytest.mark.parametrize(
    ("gates", "code", "message"),
    [
        pytest.param((), Code.SUCCESS, "", id="no gates: enqueued"),
        pytest.param(
            ("a",),
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            "waiting for scheduling gates: [a]",
            id="one gate",
        ),
        pytest.param(
            ("a", "b"),
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            "waiting for scheduling gates: [a b]",
            id="gates printed as Go prints a []string",
        ),
    ],
)
def test_pre_enqueue(gates: tuple[str, ...], code: Code, message: str) -> None:
    st = SchedulingGates().pre_enqueue(make_pod("p").gates(*gates).info())
    assert st.code == code and st.message() == message


def _core(config: SchedulerConfig) -> SchedulerCore:
    core = SchedulerCore(
        config, FakeClock(), RecordingBinder(), RecordingRecorder(), rng=random.Random(0)
    )
    core.on_node_add(make_node("n1").record())
    return core


def test_a_gated_pod_is_never_attempted_and_is_scheduled_once_ungated() -> None:
    core = _core(SchedulerConfig())
    gated = make_pod("p").req(cpu="1").gates("example.com/quota").info()
    core.on_pod_add(gated)
    assert core.queue.counts()["gated"] == 1
    assert core.schedule_one() is None  # no Filter, no preemption, no failure recorded
    assert core.recorder.failed_calls == []  # type: ignore[attr-defined]
    core.on_pod_update(gated, replace(gated, scheduling_gates=()))
    r = core.schedule_one()
    assert r is not None and r.outcome == "assumed" and r.node == "n1"


def test_disabling_the_plugin_schedules_gated_pods_as_if_ungated() -> None:
    cfg = parse_config(
        {"profiles": [{"plugins": {"preEnqueue": {"disabled": [{"name": "SchedulingGates"}]}}}]}
    )
    assert cfg.pre_enqueue == ("DynamicResources",)
    core = _core(cfg)
    core.on_pod_add(make_pod("p").req(cpu="1").gates("x").info())
    r = core.schedule_one()
    assert r is not None and r.outcome == "assumed"


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        pytest.param({"a": 1}, "spec.schedulingGates", id="not a list"),
        pytest.param([{"nom": "x"}], "spec.schedulingGates[0].name", id="a gate without a name"),
        pytest.param(["x"], "spec.schedulingGates[0].name", id="a gate that is not a map"),
    ],
)
def test_bad_gates_name_the_field(raw: object, field: str) -> None:
    obj = make_pod("p").obj()
    obj["spec"]["schedulingGates"] = raw
    with pytest.raises(ParseError) as e:
        pod_from_dict(obj)
    assert field in str(e.value) and "default/p" in str(e.value)
