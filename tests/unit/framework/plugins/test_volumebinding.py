"""VolumeBinding (scheduler/framework/plugins/volumebinding.py) for bound and immediate
claims, driven through SchedulerCore: the messages are upstream's (volume_binding.go,
binder.go) where the case is upstream's."""

from __future__ import annotations

import random
from typing import Any

import pytest

from scheduler.backend.queue import UNSCHEDULABLE_Q
from scheduler.clock import FakeClock
from scheduler.config import FILTER_PLUGINS, SchedulerConfig
from scheduler.decode import Document
from scheduler.explain import explain
from scheduler.schedule_one import SchedulerCore
from scheduler.simulate import simulate
from scheduler.types import ParseError, pv_from_dict, pvc_from_dict, storage_class_from_dict
from tests.builders import make_node, make_pod
from tests.unit.fakes import RecordingBinder, RecordingRecorder


def pvc(
    name: str,
    *,
    volume: str = "",
    storage_class: str | None = None,
    deleting: bool = False,
    owner_uid: str = "",
    completed: bool = True,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if volume and completed:
        meta["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-29T00:00:00Z"
    if owner_uid:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": owner_uid, "controller": True}
        ]
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"]}
    if volume:
        spec["volumeName"] = volume
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}


def pv(name: str, on_nodes: tuple[str, ...] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"capacity": {"storage": "1Gi"}, "local": {"path": "/mnt/x"}}
    if on_nodes is not None:
        spec["nodeAffinity"] = {
            "required": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": "kubernetes.io/hostname",
                                "operator": "In",
                                "values": list(on_nodes),
                            }
                        ]
                    }
                ]
            }
        }
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": spec,
    }


def storage_class(name: str, mode: str) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": "example.com/x",
        "volumeBindingMode": mode,
    }


def node(name: str) -> Any:
    return (
        make_node(name).alloc(cpu="4", memory="8Gi", pods=110).label("kubernetes.io/hostname", name)
    )


def with_claim(name: str, claim: str) -> Any:
    vol = {"name": "data", "persistentVolumeClaim": {"claimName": claim}}
    return make_pod(name).req(cpu="1").spec_field("volumes", [vol])


def _core(
    *objs: dict[str, Any], config: SchedulerConfig | None = None
) -> tuple[SchedulerCore, RecordingRecorder]:
    recorder = RecordingRecorder()
    core = SchedulerCore(
        config or SchedulerConfig(), FakeClock(), RecordingBinder(), recorder, rng=random.Random(0)
    )
    for name in ("n1", "n2", "n3"):
        core.on_node_add(node(name).record())
    parse = {
        "PersistentVolumeClaim": pvc_from_dict,
        "PersistentVolume": pv_from_dict,
        "StorageClass": storage_class_from_dict,
    }
    for o in objs:
        core.on_volume_object_set(parse[o["kind"]](o))
    return core, recorder


def _one(core: SchedulerCore, pod: Any) -> Any:
    core.on_pod_add(pod.info())
    r = core.schedule_one()
    assert r is not None
    return r


def test_a_pod_without_claims_skips_the_plugin() -> None:
    core, _ = _core()
    r = _one(core, make_pod("p").req(cpu="1"))
    assert r.outcome == "assumed"


def test_a_bound_claim_s_volume_decides_the_node() -> None:
    core, _ = _core(pvc("data", volume="pv-1"), pv("pv-1", on_nodes=("n2",)))
    r = _one(core, with_claim("p", "data"))
    assert (r.outcome, r.node, r.feasible_nodes) == ("assumed", "n2", 1)


def test_no_node_satisfies_the_volume_s_node_affinity() -> None:
    core, _ = _core(pvc("data", volume="pv-1"), pv("pv-1", on_nodes=("gone",)))
    r = _one(core, with_claim("p", "data"))
    assert r.outcome == "unschedulable"
    assert r.message.startswith(
        "0/3 nodes are available: 3 node(s) had volume node affinity conflict."
    )
    # UnschedulableAndUnresolvable: preemption cannot help.
    assert {st.code.name for st in r.node_statuses.values()} == {"UNSCHEDULABLE_AND_UNRESOLVABLE"}


def test_a_volume_without_node_affinity_fits_every_node() -> None:
    core, _ = _core(pvc("data", volume="pv-1"), pv("pv-1"))
    assert _one(core, with_claim("p", "data")).feasible_nodes == 3


def test_a_claim_bound_to_an_unknown_volume() -> None:
    """VolumeZone's PreFilter finds the volume missing first (PreFilters run before any
    Filter), as upstream's; with VolumeZone disabled, VolumeBinding's Filter says it."""
    core, _ = _core(pvc("data", volume="pv-1"))
    r = _one(core, with_claim("p", "data"))
    assert r.message.startswith('0/3 nodes are available: persistentvolume "pv-1" not found.')
    assert {st.plugin for st in r.node_statuses.values()} == {"VolumeZone"}
    config = SchedulerConfig(filters=tuple(f for f in FILTER_PLUGINS if f != "VolumeZone"))
    core, _ = _core(pvc("data", volume="pv-1"), config=config)
    r = _one(core, with_claim("p", "data"))
    assert r.message.startswith(
        "0/3 nodes are available: 3 node(s) unavailable due to one or more pvc(s) bound to "
        "non-existent pv(s)."
    )


@pytest.mark.parametrize(
    ("objs", "message"),
    [
        pytest.param((), 'persistentvolumeclaim "data" not found', id="missing"),
        pytest.param(
            (pvc("data", volume="pv-1", deleting=True), pv("pv-1")),
            'persistentvolumeclaim "data" is being deleted',
            id="being deleted",
        ),
        pytest.param(
            (pvc("data"),), "pod has unbound immediate PersistentVolumeClaims", id="no class"
        ),
        pytest.param(
            (pvc("data", storage_class="fast"), storage_class("fast", "Immediate")),
            "pod has unbound immediate PersistentVolumeClaims",
            id="immediate class",
        ),
    ],
)
def test_claims_that_keep_the_pod_off_every_node(
    objs: tuple[dict[str, Any], ...], message: str
) -> None:
    core, _ = _core(*objs)
    r = _one(core, with_claim("p", "data"))
    assert r.outcome == "unschedulable"
    assert r.message.startswith(f"0/3 nodes are available: {message}.")
    assert core.queue.where("default/p") == UNSCHEDULABLE_Q


@pytest.mark.parametrize(
    "claim",
    [
        pytest.param(pvc("data", storage_class="nope"), id="a class that does not exist"),
        pytest.param(
            pvc("data", storage_class="local", volume="pv-1", completed=False),
            id="named its volume, binding not completed",
        ),
    ],
)
def test_claims_that_count_as_unbound_immediate_ones(claim: dict[str, Any]) -> None:
    """As upstream: a class it cannot find binds immediately, and a claim pre-bound to its
    volume is unbound until the PV controller completes the binding."""
    core, _ = _core(claim, storage_class("local", "WaitForFirstConsumer"), pv("pv-1"))
    r = _one(core, with_claim("p", "data"))
    assert r.message.startswith(
        "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims."
    )


def test_an_ephemeral_volume_s_claim_must_be_the_pod_s_own() -> None:
    vol = {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}
    pod = make_pod("p").req(cpu="1").spec_field("volumes", [vol])
    uid = pod.info().uid
    core, _ = _core(pvc("p-scratch", volume="pv-1", owner_uid="someone-else"), pv("pv-1"))
    r = _one(core, pod)
    assert r.message.startswith(
        "0/3 nodes are available: PVC default/p-scratch was not created for pod default/p "
        "(pod is not owner)."
    )
    core2, _ = _core(pvc("p-scratch", volume="pv-1", owner_uid=uid), pv("pv-1", on_nodes=("n3",)))
    assert _one(core2, pod).node == "n3"


def test_the_pod_is_tried_again_once_its_claim_is_bound() -> None:
    core, _ = _core(pvc("data"), pv("pv-1", on_nodes=("n1",)))
    assert _one(core, with_claim("p", "data")).outcome == "unschedulable"
    core.on_node_delete("n3")  # an event VolumeBinding does not wait for
    assert core.queue.where("default/p") == UNSCHEDULABLE_Q
    # The PV controller binds the claim (as upstream, any claim change is worth a try).
    core.on_volume_object_set(pvc_from_dict(pvc("data", volume="pv-1")))
    assert core.queue.where("default/p") != UNSCHEDULABLE_Q
    core.clock.step(20)  # type: ignore[attr-defined]
    core.flush()
    r = core.schedule_one()
    assert r is not None and (r.outcome, r.node) == ("assumed", "n1")


def test_parsing_names_the_object_and_the_field() -> None:
    bad = {
        **pv("pv-1"),
        "spec": {
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Near"}]}]
                }
            }
        },
    }
    with pytest.raises(
        ParseError,
        match=r"^PersistentVolume pv-1: spec\.nodeAffinity\.required"
        r"\.nodeSelectorTerms\[0\]\.matchExpressions\[0\]\.operator: unknown",
    ):
        pv_from_dict(bad)
    with pytest.raises(ParseError, match=r"^PersistentVolume v: spec\.nodeAffinity\.required: "):
        pv_from_dict({"metadata": {"name": "v"}, "spec": {"nodeAffinity": {"required": []}}})
    with pytest.raises(ParseError, match=r"^StorageClass s: volumeBindingMode: unknown 'Later'"):
        storage_class_from_dict(storage_class("s", "Later"))
    bad_pod = make_pod("p").spec_field("volumes", [{"name": "d", "persistentVolumeClaim": {}}])
    with pytest.raises(
        ParseError, match=r"spec\.volumes\[0\]\.persistentVolumeClaim\.claimName: expected a name"
    ):
        bad_pod.info()
    parsed = pvc_from_dict(pvc("c", volume="v", storage_class="s"))
    assert (parsed.key, parsed.bound, parsed.storage_class) == ("default/c", True, "s")
    beta = pvc("c", storage_class="s")
    beta["metadata"]["annotations"] = {"volume.beta.kubernetes.io/storage-class": "old"}
    assert pvc_from_dict(beta).storage_class == "old"  # the annotation first, as upstream


def test_simulate_reads_claims_volumes_and_classes_from_the_dump() -> None:
    objs = [
        node("n1").obj(),
        node("n2").obj(),
        pvc("data", volume="pv-1"),
        pv("pv-1", on_nodes=("n2",)),
        with_claim("p", "data").scheduler("py-scheduler").obj(),
    ]
    docs = [Document("dump.yaml", i + 1, o) for i, o in enumerate(objs)]
    assert simulate(docs, SchedulerConfig()).placements == {"default/p": "n2"}


def test_only_the_pod_s_own_claims_and_relabelled_nodes_bring_it_back() -> None:
    """The queueing hints, as upstream's: another claim, or another namespace's claim of
    that name, or a node changed but for its labels (a heartbeat), does not move the pod;
    its own claim's change and a relabelled node do."""
    core, _ = _core(pvc("data"))
    assert _one(core, with_claim("p", "data")).outcome == "unschedulable"
    core.on_volume_object_set(pvc_from_dict(pvc("other")))
    theirs = pvc("data")
    theirs["metadata"]["namespace"] = "elsewhere"
    core.on_volume_object_set(pvc_from_dict(theirs))
    old = node("n1").record()
    core.on_node_update(old, node("n1").taint("k", "v").record())
    assert core.queue.where("default/p") == UNSCHEDULABLE_Q
    core.on_volume_object_set(storage_class_from_dict(storage_class("fast", "Immediate")))
    assert core.queue.where("default/p") != UNSCHEDULABLE_Q  # a class's addition moves it
    core.clock.step(20)  # type: ignore[attr-defined]
    core.flush()
    assert core.schedule_one() is not None  # tried again, still unbound
    assert core.queue.where("default/p") == UNSCHEDULABLE_Q
    core.on_volume_object_set(storage_class_from_dict(storage_class("fast", "Immediate")))
    assert core.queue.where("default/p") == UNSCHEDULABLE_Q  # a class's update: no
    core.on_node_update(old, node("n1").label("zone", "z").record())
    assert core.queue.where("default/p") != UNSCHEDULABLE_Q


def test_explain_lists_claims_volumes_and_classes_and_names_the_conflict() -> None:
    objs = {
        "nodes": [node("n1").obj(), node("n2").obj()],
        "pods": [with_claim("p", "data").scheduler("py-scheduler").obj()],
        "persistentvolumeclaims": [pvc("data", volume="pv-1")],
        "persistentvolumes": [pv("pv-1", on_nodes=("n2",))],
    }
    e = explain("default/p", lambda kind: objs.get(kind, []), SchedulerConfig())
    assert {v.node: (v.fits, v.plugin, v.reasons) for v in e.nodes} == {
        "n1": (False, "VolumeBinding", ("node(s) had volume node affinity conflict",)),
        "n2": (True, "", ()),
    }
