"""NodeDeclaredFeatures: the features a pod needs, inferred from its spec as
k8s.io/component-helpers/nodedeclaredfeatures v0.37 does, against a node's
status.declaredFeatures; the Node hints; the plugin in the default profile through the core,
with the failure message upstream prints (bad input: tests/unit/test_types.py's parse-error
tables). Case names follow upstream's nodedeclaredfeatures_test.go where they exist."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from scheduler.backend.cache.snapshot import Snapshot
from scheduler.clock import FakeClock
from scheduler.config import SchedulerConfig, parse_config
from scheduler.framework.interface import Code, CycleState, QueueingHint
from scheduler.framework.plugins.nodedeclaredfeatures import ERR_REASON, NodeDeclaredFeatures
from scheduler.schedule_one import SchedulerCore
from scheduler.types import (
    FEATURE_RESTART_ALL_CONTAINERS,
    FEATURE_USER_NAMESPACES_HOST_NETWORK,
    FEATURE_VOLUME_BIND_MOUNT_OPTIONS,
    NodeInfo,
    NodeRecord,
    PodInfo,
)
from tests.builders import make_node, make_pod
from tests.unit.fakes import RecordingBinder, RecordingRecorder

RESTART_ALL = [{"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}]
RESTART = [{"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}]
BIND_MOUNT = [{"name": "data", "mountPath": "/data", "bindMountOptions": ["nosuid"]}]
PLAIN_MOUNT = [{"name": "data", "mountPath": "/data"}]


def restart_all_pod() -> PodInfo:
    return make_pod("p").container_field("restartPolicyRules", RESTART_ALL).info()


@pytest.mark.parametrize(
    ("build", "want"),
    [
        pytest.param(lambda b: b, frozenset(), id="a plain pod needs nothing"),
        pytest.param(
            lambda b: b.container_field("restartPolicyRules", RESTART_ALL),
            {FEATURE_RESTART_ALL_CONTAINERS},
            id="container restart rule RestartAllContainers",
        ),
        pytest.param(
            lambda b: b.container_field("restartPolicyRules", RESTART),
            frozenset(),
            id="a Restart rule needs no feature",
        ),
        pytest.param(
            lambda b: b.spec_field(
                "initContainers",
                [{"name": "i", "image": "x", "restartPolicyRules": RESTART_ALL}],
            ),
            {FEATURE_RESTART_ALL_CONTAINERS},
            id="init container restart rule RestartAllContainers",
        ),
        pytest.param(
            lambda b: b.spec_field("hostNetwork", True).spec_field("hostUsers", False),
            {FEATURE_USER_NAMESPACES_HOST_NETWORK},
            id="hostNetwork with hostUsers false",
        ),
        pytest.param(
            lambda b: b.spec_field("hostNetwork", True),
            frozenset(),
            id="hostNetwork with hostUsers unset (true)",
        ),
        pytest.param(
            lambda b: b.spec_field("hostUsers", False),
            frozenset(),
            id="hostUsers false without hostNetwork",
        ),
        pytest.param(
            lambda b: b.container_field("volumeMounts", BIND_MOUNT),
            {FEATURE_VOLUME_BIND_MOUNT_OPTIONS},
            id="bindMountOptions on a container's mount",
        ),
        pytest.param(
            lambda b: b.container_field("volumeMounts", PLAIN_MOUNT),
            frozenset(),
            id="a mount without bindMountOptions",
        ),
        pytest.param(
            lambda b: b.spec_field(
                "ephemeralContainers", [{"name": "debug", "image": "x", "volumeMounts": BIND_MOUNT}]
            ),
            {FEATURE_VOLUME_BIND_MOUNT_OPTIONS},
            id="bindMountOptions on an ephemeral container's mount",
        ),
        pytest.param(
            lambda b: (
                b.container_field("restartPolicyRules", RESTART_ALL)
                .container_field("volumeMounts", BIND_MOUNT)
                .spec_field("hostNetwork", True)
                .spec_field("hostUsers", False)
            ),
            {
                FEATURE_RESTART_ALL_CONTAINERS,
                FEATURE_USER_NAMESPACES_HOST_NETWORK,
                FEATURE_VOLUME_BIND_MOUNT_OPTIONS,
            },
            id="all three",
        ),
    ],
)
def test_required_features_inferred_from_the_spec(build: Any, want: set[str]) -> None:
    assert build(make_pod("p")).info().required_features == frozenset(want)


@pytest.mark.parametrize(
    ("declared", "fits"),
    [
        pytest.param((), False, id="node declares nothing"),
        pytest.param(("SomethingElse",), False, id="node declares another feature"),
        pytest.param((FEATURE_RESTART_ALL_CONTAINERS,), True, id="node declares the feature"),
        pytest.param(
            (FEATURE_RESTART_ALL_CONTAINERS, "Unknown"), True, id="unknown features are ignored"
        ),
    ],
)
def test_filter(declared: tuple[str, ...], fits: bool) -> None:
    ni = make_node("n1").declared_features(*declared).info()
    st = NodeDeclaredFeatures().filter(CycleState(), restart_all_pod(), ni)
    if fits:
        assert st.is_success()
    else:
        assert (st.code, st.reasons, st.plugin) == (
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            (ERR_REASON,),
            "NodeDeclaredFeatures",
        )


def test_a_pod_that_needs_every_feature_needs_them_all_on_one_node() -> None:
    pod = (
        make_pod("p")
        .container_field("restartPolicyRules", RESTART_ALL)
        .container_field("volumeMounts", BIND_MOUNT)
        .info()
    )
    plugin = NodeDeclaredFeatures()
    partial = make_node("n1").declared_features(FEATURE_RESTART_ALL_CONTAINERS).info()
    full = (
        make_node("n2")
        .declared_features(FEATURE_RESTART_ALL_CONTAINERS, FEATURE_VOLUME_BIND_MOUNT_OPTIONS)
        .info()
    )
    assert not plugin.filter(CycleState(), pod, partial).is_success()
    assert plugin.filter(CycleState(), pod, full).is_success()


def test_pre_filter_skips_a_pod_that_needs_nothing() -> None:
    snap = Snapshot()
    _, st = NodeDeclaredFeatures().pre_filter(CycleState(), make_pod("p").info(), snap)
    assert st.code == Code.SKIP
    _, st = NodeDeclaredFeatures().pre_filter(CycleState(), restart_all_pod(), snap)
    assert st.is_success()


def test_filter_batch_agrees_with_filter() -> None:
    records = [
        make_node("n0").record(),
        make_node("n1").declared_features(FEATURE_RESTART_ALL_CONTAINERS).record(),
        make_node("n2").declared_features("Other").record(),
        make_node("n3").declared_features(FEATURE_RESTART_ALL_CONTAINERS, "Other").record(),
    ]
    snap = Snapshot.from_node_infos([NodeInfo(r) for r in records])
    plugin = NodeDeclaredFeatures()
    for pod in (restart_all_pod(), make_pod("plain").info()):
        mask = plugin.filter_batch(CycleState(), pod, snap)
        one_by_one = [
            plugin.filter(CycleState(), pod, ni).is_success() for ni in snap.node_info_list
        ]
        assert mask.tolist() == one_by_one
        assert mask.dtype == np.bool_
    assert plugin.filter_batch(CycleState(), restart_all_pod(), snap).tolist() == [
        False,
        True,
        False,
        True,
    ]


def _hint(action: str) -> Any:
    for reg in NodeDeclaredFeatures().events_to_register():
        if (reg.event.resource, reg.event.action) == ("Node", action):
            return reg.hint
    raise AssertionError(action)


def _node(*features: str) -> NodeRecord:
    return make_node("n1").declared_features(*features).record()


@pytest.mark.parametrize(
    ("action", "old", "new", "want"),
    [
        pytest.param("Add", None, _node(), QueueingHint.QUEUE, id="node added"),
        pytest.param(
            "Update",
            _node(),
            _node(FEATURE_RESTART_ALL_CONTAINERS),
            QueueingHint.QUEUE,
            id="declared features changed",
        ),
        pytest.param(
            "Update",
            _node(FEATURE_RESTART_ALL_CONTAINERS),
            replace(_node(FEATURE_RESTART_ALL_CONTAINERS), labels={"a": "b"}),
            QueueingHint.SKIP,
            id="declared features unchanged",
        ),
    ],
)
def test_node_hints(
    action: str, old: NodeRecord | None, new: NodeRecord, want: QueueingHint
) -> None:
    assert _hint(action)(restart_all_pod(), old, new) == want


def _core(config: SchedulerConfig, *nodes: NodeRecord) -> SchedulerCore:
    core = SchedulerCore(
        config, FakeClock(), RecordingBinder(), RecordingRecorder(), rng=random.Random(0)
    )
    for n in nodes:
        core.on_node_add(n)
    return core


def test_in_the_default_profile_a_pod_waits_for_a_node_that_declares_its_feature() -> None:
    core = _core(SchedulerConfig(), make_node("n1").record(), make_node("n2").record())
    pod = restart_all_pod()
    core.on_pod_add(pod)
    r = core.schedule_one()
    assert r is not None and r.outcome != "assumed"
    failed = core.recorder.failed_calls[-1]  # type: ignore[attr-defined]
    assert failed.message == (
        "0/2 nodes are available: 2 node(s) didn't match Pod's required features. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )
    # The kubelet of n2 starts declaring the feature: the Node update moves the pod back.
    assert core.queue.counts()["unschedulable"] == 1
    core.on_node_update(make_node("n1").record(), make_node("n1").label("a", "b").record())
    assert core.queue.counts()["unschedulable"] == 1, "an unrelated update must not move it"
    core.on_node_update(make_node("n2").record(), _node_n2_with_feature())
    assert core.queue.counts()["unschedulable"] == 0
    core.clock.step(10)  # type: ignore[attr-defined]
    core.flush()
    r = core.schedule_one()
    assert r is not None and r.outcome == "assumed" and r.node == "n2"


def _node_n2_with_feature() -> NodeRecord:
    return make_node("n2").declared_features(FEATURE_RESTART_ALL_CONTAINERS).record()


def test_disabled_in_configuration_the_pod_is_placed_anywhere() -> None:
    cfg = parse_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {
                    "schedulerName": "py-scheduler",
                    "plugins": {"filter": {"disabled": [{"name": "NodeDeclaredFeatures"}]}},
                }
            ],
        },
        "cfg.yaml",
    )
    core = _core(cfg, make_node("n1").record())
    core.on_pod_add(restart_all_pod())
    r = core.schedule_one()
    assert r is not None and r.outcome == "assumed" and r.node == "n1"
