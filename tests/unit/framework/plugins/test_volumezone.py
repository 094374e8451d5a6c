"""VolumeZone (scheduler/framework/plugins/volumezone.py), driven through SchedulerCore: a
pod follows its bound volumes' zone and region labels; the messages are upstream's
(volume_zone.go) where the case is upstream's."""

from __future__ import annotations

import random
from typing import Any

import pytest

from scheduler.clock import FakeClock
from scheduler.config import SchedulerConfig
from scheduler.framework.interface import ClusterEvent
from scheduler.schedule_one import SchedulerCore
from scheduler.types import pv_from_dict, pvc_from_dict, storage_class_from_dict
from tests.builders import make_node, make_pod
from tests.unit.fakes import RecordingBinder, RecordingRecorder

ZONE = "topology.kubernetes.io/zone"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"


def claim(name: str, volume: str = "", storage_class: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if volume:
        meta["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
    spec: dict[str, Any] = {"volumeName": volume, "storageClassName": storage_class}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}


def volume(name: str, labels: dict[str, str], rv: str = "1") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": labels, "resourceVersion": rv},
        "spec": {"capacity": {"storage": "1Gi"}},
    }


def klass(name: str, mode: str) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": "example.com/x",
        "volumeBindingMode": mode,
    }


PARSE = {
    "PersistentVolumeClaim": pvc_from_dict,
    "PersistentVolume": pv_from_dict,
    "StorageClass": storage_class_from_dict,
}


def _core(*objs: dict[str, Any], nodes: dict[str, dict[str, str]] | None = None) -> SchedulerCore:
    core = SchedulerCore(
        SchedulerConfig(),
        FakeClock(),
        RecordingBinder(),
        RecordingRecorder(),
        rng=random.Random(0),
    )
    layout = nodes or {
        "a1": {ZONE: "a", REGION: "r1"},
        "b1": {ZONE: "b", REGION: "r1"},
        "c2": {ZONE: "c", REGION: "r2"},
    }
    for name, labels in layout.items():
        n = make_node(name).alloc(cpu="4", memory="8Gi", pods=110)
        for k, v in labels.items():
            n = n.label(k, v)
        core.on_node_add(n.record())
    for o in objs:
        core.on_volume_object_set(PARSE[o["kind"]](o))  # type: ignore[operator]
    return core


def _with_claim(name: str, claim_name: str) -> Any:
    vol = {"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}
    return make_pod(name).req(cpu="1").spec_field("volumes", [vol])


def _one(core: SchedulerCore, pod: Any) -> Any:
    core.on_pod_add(pod.info())
    r = core.schedule_one()
    assert r is not None
    return r


def test_a_pod_follows_its_volume_s_zone() -> None:
    core = _core(claim("data", "pv"), volume("pv", {ZONE: "b"}))
    r = _one(core, _with_claim("p", "data"))
    assert (r.outcome, r.node, r.feasible_nodes) == ("assumed", "b1", 1)


def test_a_multi_zone_value_and_a_region() -> None:
    core = _core(claim("data", "pv"), volume("pv", {ZONE: "a__c", REGION: "r2"}))
    r = _one(core, _with_claim("p", "data"))
    assert (r.node, r.feasible_nodes) == ("c2", 1)


def test_a_beta_label_on_the_volume_matches_the_node_s_ga_label() -> None:
    core = _core(claim("data", "pv"), volume("pv", {BETA_ZONE: "a"}))
    r = _one(core, _with_claim("p", "data"))
    assert (r.node, r.feasible_nodes) == ("a1", 1)


def test_no_node_in_the_zone_and_nodes_without_zone_labels() -> None:
    core = _core(claim("data", "pv"), volume("pv", {ZONE: "z"}))
    r = _one(core, _with_claim("p", "data"))
    assert r.message.startswith("0/3 nodes are available: 3 node(s) had no available volume zone.")
    assert {st.plugin for st in r.node_statuses.values()} == {"VolumeZone"}
    # A node with no zone or region label at all is not constrained (upstream's rule).
    core = _core(
        claim("data", "pv"), volume("pv", {ZONE: "z"}), nodes={"bare": {}, "a1": {ZONE: "a"}}
    )
    r = _one(core, _with_claim("p", "data"))
    assert (r.node, r.feasible_nodes) == ("bare", 1)


def test_an_empty_element_in_the_list_makes_the_label_ignored() -> None:
    core = _core(claim("data", "pv"), volume("pv", {ZONE: "a__"}))
    assert _one(core, _with_claim("p", "data")).feasible_nodes == 3


@pytest.mark.parametrize(
    ("objs", "message"),
    [
        pytest.param(
            [claim("data", storage_class="")],
            "PersistentVolumeClaim had no pv name and storageClass name",
            id="no volume, no class",
        ),
        pytest.param(
            [claim("data", storage_class="gone")],
            'storageclass.storage.k8s.io "gone" not found',
            id="unknown class",
        ),
        pytest.param(
            [claim("data", storage_class="fast"), klass("fast", "Immediate")],
            "PersistentVolume had no name",
            id="immediate class, unbound",
        ),
    ],
)
def test_claims_volume_zone_refuses_before_any_filter(
    objs: list[dict[str, Any]], message: str
) -> None:
    """VolumeZone's PreFilter runs after VolumeBinding's, which refuses these first unless
    it is disabled; with it disabled, VolumeZone's own messages, upstream's."""
    config = SchedulerConfig(
        filters=tuple(f for f in SchedulerConfig().filters if f != "VolumeBinding")
    )
    core = SchedulerCore(
        config, FakeClock(), RecordingBinder(), RecordingRecorder(), rng=random.Random(0)
    )
    core.on_node_add(make_node("n").alloc(cpu="4", memory="8Gi", pods=110).record())
    for o in objs:
        core.on_volume_object_set(PARSE[o["kind"]](o))  # type: ignore[operator]
    r = _one(core, _with_claim("p", "data"))
    assert r.message.startswith(f"0/1 nodes are available: {message}.")


def test_a_claim_waiting_for_its_first_consumer_is_left_to_volume_binding() -> None:
    core = _core(claim("data", storage_class="late"), klass("late", "WaitForFirstConsumer"))
    r = _one(core, _with_claim("p", "data"))
    # Its class's provisioner may provision it anywhere: every node fits.
    assert (r.outcome, r.feasible_nodes) == ("assumed", 3)


def test_hints_a_volume_s_topology_change_brings_the_pod_back_a_label_elsewhere_does_not() -> None:
    core = _core(claim("data", "pv"), volume("pv", {ZONE: "z"}))
    r = _one(core, _with_claim("p", "data"))
    assert r.outcome == "unschedulable"
    hints = [
        h
        for h in core.framework.hints["VolumeZone"]
        if h.event == ClusterEvent("PersistentVolume", "Update")
    ]
    (reg,) = hints
    assert reg.hint is not None
    old = pv_from_dict(volume("pv", {ZONE: "z"}))
    same = pv_from_dict(volume("pv", {ZONE: "z", "other": "x"}, rv="2"))
    moved = pv_from_dict(volume("pv", {ZONE: "b"}, rv="3"))
    pod = _with_claim("p", "data").info()
    assert reg.hint(pod, old, same).name == "SKIP"
    assert reg.hint(pod, old, moved).name == "QUEUE"
    core.on_volume_object_set(moved)
    core.clock.step(20)  # type: ignore[attr-defined]
    core.flush()
    r = core.schedule_one()
    assert r is not None and (r.outcome, r.node) == ("assumed", "b1")
