"""VolumeBinding against the real API server and kube-controller-manager's PV controller: a
pod follows its bound claim's local volume to that volume's node; a pod whose claim is
not bound yet waits ("pod has unbound immediate PersistentVolumeClaims") until the PV
controller binds it, then follows it; a pod whose claim does not exist is told so; a
claim that waits for its first consumer is bound by the scheduler's choice, to an existing
local volume or to one provisioned on the node it selects."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from tests.e2e.conftest import wait_for
from tests.e2e.kit import Kit, pod_manifest


def _pv(name: str, disk: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "local": {"path": "/mnt/disks/x"},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "disk", "operator": "In", "values": [disk]}]}
                    ]
                }
            },
        },
    }


def _pvc(name: str, volume: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "",
            "volumeName": volume,
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }


@pytest.fixture
def volumes(kit: Kit) -> Iterator[list[str]]:
    """PersistentVolumes the test makes (cluster-scoped: deleted after it)."""
    made: list[str] = []
    yield made
    for name in made:
        try:
            kit.core.delete_persistent_volume(name)
        except ApiException as e:
            if e.status != 404:
                raise


@pytest.fixture
def storage_class(kit: Kit) -> Iterator[Callable[..., str]]:
    """Makes StorageClasses that wait for the first consumer (cluster-scoped: deleted
    after the test)."""
    api = k8s.StorageV1Api(kit.cluster.api)
    made: list[str] = []

    def make(provisioner: str, allowed: dict[str, str] | None = None) -> str:
        name = f"{kit.ns}-wait-{len(made)}"
        body: dict[str, Any] = {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": name},
            "provisioner": provisioner,
            "volumeBindingMode": "WaitForFirstConsumer",
        }
        if allowed:
            body["allowedTopologies"] = [
                {"matchLabelExpressions": [{"key": k, "values": [v]} for k, v in allowed.items()]}
            ]
        api.create_storage_class(body)
        made.append(name)
        return name

    yield make
    for name in made:
        api.delete_storage_class(name)


def _with_claim(kit: Kit, name: str, claim: str) -> None:
    body = pod_manifest(name, node_selector=kit.selector)
    body["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    kit.core.create_namespaced_pod(kit.ns, body)


def _claim_bound(kit: Kit, name: str) -> bool:
    pvc = kit.core.read_namespaced_persistent_volume_claim(name, kit.ns)
    return pvc.status.phase == "Bound"


def test_pods_follow_their_claims_volumes_and_wait_for_unbound_ones(
    kit: Kit, py_scheduler: Any, volumes: list[str]
) -> None:
    kit.nodes(1)  # a node with no volume: never the answer
    (near_a,) = kit.nodes(1, labels={"disk": f"a-{kit.ns}"})
    (near_b,) = kit.nodes(1, labels={"disk": f"b-{kit.ns}"})
    pv_a, pv_b = f"{kit.ns}-a", f"{kit.ns}-b"
    kit.core.create_persistent_volume(_pv(pv_a, f"a-{kit.ns}"))
    volumes.append(pv_a)
    kit.core.create_namespaced_persistent_volume_claim(kit.ns, _pvc("data-a", pv_a))
    wait_for(lambda: _claim_bound(kit, "data-a"), 60, "claim data-a bound by the PV controller")
    _with_claim(kit, "on-a", "data-a")
    assert kit.wait_bound("on-a") == near_a

    # A claim whose volume does not exist yet stays unbound: the pod waits for it.
    kit.core.create_namespaced_persistent_volume_claim(kit.ns, _pvc("data-b", pv_b))
    _with_claim(kit, "on-b", "data-b")
    kit.wait_failed_with("on-b", "pod has unbound immediate PersistentVolumeClaims")
    assert kit.node_of("on-b") == ""
    kit.core.create_persistent_volume(_pv(pv_b, f"b-{kit.ns}"))
    volumes.append(pv_b)
    # The PV controller binds the claim; its update brings the pod back.
    assert kit.wait_bound("on-b", timeout=60) == near_b

    _with_claim(kit, "lost", "no-such-claim")
    kit.wait_failed_with("lost", 'persistentvolumeclaim "no-such-claim" not found')
    assert kit.node_of("lost") == ""


def _delayed_claim(name: str, storage_class: str) -> dict[str, Any]:
    claim = _pvc(name, "")
    del claim["spec"]["volumeName"]
    claim["spec"]["storageClassName"] = storage_class
    return claim


def test_a_claim_that_waits_for_its_first_consumer_takes_a_local_volume_on_its_node(
    kit: Kit, py_scheduler: Any, volumes: list[str], storage_class: Callable[..., str]
) -> None:
    """The scheduler chooses the volume (Filter), writes its claimRef (PreBind), waits for
    kube-controller-manager's PV controller to bind the claim to it, then binds the pod to
    the volume's node."""
    local = storage_class("kubernetes.io/no-provisioner")
    kit.nodes(2)  # nodes without the volume
    (near,) = kit.nodes(1, labels={"disk": f"w-{kit.ns}"})
    pv = _pv(f"{kit.ns}-w", f"w-{kit.ns}")
    pv["spec"]["storageClassName"] = local
    kit.core.create_persistent_volume(pv)
    volumes.append(pv["metadata"]["name"])
    kit.core.create_namespaced_persistent_volume_claim(kit.ns, _delayed_claim("data", local))
    _with_claim(kit, "consumer", "data")
    assert kit.wait_bound("consumer", timeout=60) == near
    claim = kit.core.read_namespaced_persistent_volume_claim("data", kit.ns)
    assert (claim.status.phase, claim.spec.volume_name) == ("Bound", pv["metadata"]["name"])
    ref = kit.core.read_persistent_volume(pv["metadata"]["name"]).spec.claim_ref
    assert (ref.namespace, ref.name, ref.uid) == (kit.ns, "data", claim.metadata.uid)
    # The event is written after the Binding, by the event writer: wait for it.
    scheduled = kit.wait_event("consumer", "Scheduled")
    assert scheduled["message"] == f"Successfully assigned {kit.ns}/consumer to {near}"


def _selected_node(kit: Kit, claim: str) -> str | None:
    pvc = kit.core.read_namespaced_persistent_volume_claim(claim, kit.ns)
    return (pvc.metadata.annotations or {}).get("volume.kubernetes.io/selected-node")


def test_a_claim_is_provisioned_on_the_node_the_scheduler_selects(
    kit: Kit, py_scheduler: Any, volumes: list[str], storage_class: Callable[..., str]
) -> None:
    """The scheduler writes ``volume.kubernetes.io/selected-node`` (a node the class's
    allowedTopologies admit) and waits; the test is the provisioner. Its first answer is a
    refusal (it takes the annotation away, as a provisioner that fails does): the binding
    fails and says so, the pod is retried, the node selected again; then the provisioner
    makes a volume there and the PV controller binds it: the pod is bound to that node."""
    cls = storage_class(f"example.com/{kit.ns}", {"zone-x": f"z-{kit.ns}"})
    kit.nodes(2)  # outside the class's allowed topology
    (allowed,) = kit.nodes(1, labels={"zone-x": f"z-{kit.ns}", "disk": f"p-{kit.ns}"})
    kit.core.create_namespaced_persistent_volume_claim(kit.ns, _delayed_claim("data", cls))
    _with_claim(kit, "consumer", "data")

    assert wait_for(lambda: _selected_node(kit, "data"), 30, "selected-node written") == allowed
    assert kit.node_of("consumer") == ""  # it waits for the volume
    annotations = {"volume.kubernetes.io/selected-node": None}
    kit.core.patch_namespaced_persistent_volume_claim(
        "data", kit.ns, {"metadata": {"annotations": annotations}}
    )
    kit.wait_failed_with("consumer", 'binding volumes: provisioning failed for PVC "data"')
    assert kit.node_of("consumer") == ""

    assert wait_for(lambda: _selected_node(kit, "data"), 60, "selected-node again") == allowed
    claim = kit.core.read_namespaced_persistent_volume_claim("data", kit.ns)
    pv = _pv(f"{kit.ns}-p", f"p-{kit.ns}")
    pv["spec"]["storageClassName"] = cls
    pv["spec"]["claimRef"] = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "namespace": kit.ns,
        "name": "data",
        "uid": claim.metadata.uid,
    }
    kit.core.create_persistent_volume(pv)
    volumes.append(pv["metadata"]["name"])
    assert kit.wait_bound("consumer", timeout=60) == allowed
    claim = kit.core.read_namespaced_persistent_volume_claim("data", kit.ns)
    assert (claim.status.phase, claim.spec.volume_name) == ("Bound", pv["metadata"]["name"])


def test_a_pod_follows_its_bound_volume_s_zone(
    kit: Kit, py_scheduler: Any, volumes: list[str]
) -> None:
    """VolumeZone: a claim bound (by the PV controller) to a volume labelled with a zone
    keeps the pod to the nodes of that zone; no node affinity on the volume."""
    zone = "topology.kubernetes.io/zone"
    kit.nodes(2, labels={zone: f"other-{kit.ns}"})
    (inside,) = kit.nodes(1, labels={zone: f"here-{kit.ns}"})
    pv = _pv(f"{kit.ns}-z", "unused")
    del pv["spec"]["nodeAffinity"], pv["spec"]["local"]  # a local volume needs an affinity
    pv["spec"]["hostPath"] = {"path": "/tmp/zoned"}
    pv["metadata"]["labels"] = {zone: f"here-{kit.ns}"}
    kit.core.create_persistent_volume(pv)
    volumes.append(pv["metadata"]["name"])
    kit.core.create_namespaced_persistent_volume_claim(
        kit.ns, _pvc("zoned", pv["metadata"]["name"])
    )
    wait_for(lambda: _claim_bound(kit, "zoned"), 60, "claim zoned bound by the PV controller")
    _with_claim(kit, "zoned-pod", "zoned")
    assert kit.wait_bound("zoned-pod") == inside


def test_a_read_write_once_pod_claim_serves_one_pod_at_a_time(
    kit: Kit, py_scheduler: Any, volumes: list[str]
) -> None:
    """VolumeRestrictions: while one pod uses a ReadWriteOncePod claim, a second one that
    names it is told so and waits; once the first is deleted, the second is bound."""
    kit.nodes(2)
    pv = _pv(f"{kit.ns}-solo", "unused")
    del pv["spec"]["nodeAffinity"], pv["spec"]["local"]
    pv["spec"]["hostPath"] = {"path": "/tmp/solo"}
    pv["spec"]["accessModes"] = ["ReadWriteOncePod"]
    kit.core.create_persistent_volume(pv)
    volumes.append(pv["metadata"]["name"])
    solo = _pvc("solo", pv["metadata"]["name"])
    solo["spec"]["accessModes"] = ["ReadWriteOncePod"]
    kit.core.create_namespaced_persistent_volume_claim(kit.ns, solo)
    wait_for(lambda: _claim_bound(kit, "solo"), 60, "claim solo bound by the PV controller")
    _with_claim(kit, "first", "solo")
    kit.wait_bound("first")
    _with_claim(kit, "second", "solo")
    kit.wait_failed_with("second", "ReadWriteOncePod access mode already in-use by another pod")
    assert kit.node_of("second") == ""
    kit.core.delete_namespaced_pod("first", kit.ns, grace_period_seconds=0)
    assert kit.wait_bound("second", timeout=60)
