"""The CSI storage objects against the real API server, read through the scheduler's
informers: NodeVolumeLimits' CSINodes, CSIDrivers and VolumeAttachments, and VolumeBinding's
CSIStorageCapacities. A node whose CSINode gives a CSI driver an attach
limit takes no more of that driver's volumes (the pods' claims bound, by
kube-controller-manager's PV controller, to CSI volumes, and volumes still attached by a
VolumeAttachment); a VolumeAttachment deleted, or a pod with volumes deleted, brings the
waiting pod back. A driver whose CSIDriver says ``preventPodSchedulingIfMissing`` keeps the
pod off nodes whose CSINode does not list it, until a CSINode that does is added.

A claim whose StorageClass waits for its first consumer, of a driver that publishes its
capacity, is provisioned only on a node a CSIStorageCapacity with room for it selects; with
none, the pod is told `node(s) did not have enough free storage` until one is published.

kwok's nodes run no kubelet and no driver runs, so nothing else writes these objects: the
test writes them as a node's kubelet (CSINode), a driver's installer (CSIDriver) and its
external-provisioner (CSIStorageCapacity, and the provisioned volume) would."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from tests.e2e.conftest import wait_for
from tests.e2e.kit import Kit, pod_manifest

EXCEEDED = "node(s) exceed max volume count"


def _seen(scheduler: Any, event: str) -> Callable[[], None]:
    """Call before writing an object: the returned function waits until the scheduler has
    handled one more ``event`` (its informers' handling of, say, a CSINode added, counted by
    scheduler_event_handling_duration_seconds): the test's next pod is then decided with
    the object in the cache (the watches of different kinds are separate streams)."""
    name = "scheduler_event_handling_duration_seconds_count"
    before = scheduler.metric(name, {"event": event})

    def wait() -> None:
        wait_for(
            lambda: scheduler.metric(name, {"event": event}) > before,
            30,
            f"py-scheduler handled {event}",
        )

    return wait


@pytest.fixture
def storage(kit: Kit) -> Iterator[Callable[[str, dict[str, Any]], None]]:
    """Creates cluster-scoped storage.k8s.io objects (kind, body) and PersistentVolumes;
    deletes them after the test."""
    api = k8s.StorageV1Api(kit.cluster.api)
    create = {
        "CSINode": api.create_csi_node,
        "CSIDriver": api.create_csi_driver,
        "VolumeAttachment": api.create_volume_attachment,
        "StorageClass": api.create_storage_class,
        "PersistentVolume": kit.core.create_persistent_volume,
    }
    delete = {
        "CSINode": api.delete_csi_node,
        "CSIDriver": api.delete_csi_driver,
        "VolumeAttachment": api.delete_volume_attachment,
        "StorageClass": api.delete_storage_class,
        "PersistentVolume": kit.core.delete_persistent_volume,
    }
    made: list[tuple[str, str]] = []

    def make(kind: str, body: dict[str, Any]) -> None:
        create[kind](body)
        made.append((kind, body["metadata"]["name"]))

    yield make
    for kind, name in reversed(made):
        try:
            delete[kind](name)
        except ApiException as e:
            if e.status != 404:
                raise


def _driver(name: str, *, prevent: bool = False, capacity: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"attachRequired": False}  # no attach-detach controller work
    if prevent:
        spec["preventPodSchedulingIfMissing"] = True
    if capacity:
        spec["storageCapacity"] = True
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIDriver",
        "metadata": {"name": name},
        "spec": spec,
    }


def _csi_node(node: str, driver: str, count: int | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": driver, "nodeID": node}
    if count is not None:
        entry["allocatable"] = {"count": count}
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": node},
        "spec": {"drivers": [entry]},
    }


def _bound_csi_claim(
    kit: Kit, storage: Callable[[str, dict[str, Any]], None], claim: str, driver: str
) -> str:
    """A CSI volume of ``driver`` and a claim the PV controller binds to it; the volume's
    name."""
    pv = f"{kit.ns}-{claim}"
    storage(
        "PersistentVolume",
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": pv},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "",
                "csi": {"driver": driver, "volumeHandle": f"handle-{pv}"},
            },
        },
    )
    kit.core.create_namespaced_persistent_volume_claim(
        kit.ns,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "",
                "volumeName": pv,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
    )
    return pv


def _claims_bound(kit: Kit, *claims: str) -> None:
    def bound() -> bool:
        return all(
            kit.core.read_namespaced_persistent_volume_claim(c, kit.ns).status.phase == "Bound"
            for c in claims
        )

    wait_for(bound, 60, f"claims {claims} bound by the PV controller")


def _with_claim(kit: Kit, name: str, claim: str) -> None:
    body = pod_manifest(name, node_selector=kit.selector)
    body["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    kit.core.create_namespaced_pod(kit.ns, body)


def test_a_node_takes_no_more_csi_volumes_than_its_limit(
    kit: Kit, py_scheduler: Any, storage: Callable[[str, dict[str, Any]], None]
) -> None:
    driver = f"{kit.ns}.csi.example.com"
    (node,) = kit.nodes(1)
    storage("CSIDriver", _driver(driver))
    for claim in ("a", "b", "c"):
        _bound_csi_claim(kit, storage, claim, driver)
    left = _bound_csi_claim(kit, storage, "left", driver)  # attached, used by no pod
    _claims_bound(kit, "a", "b", "c", "left")
    csi_node_seen = _seen(py_scheduler, "CSINodeAdd")
    attachment_seen = _seen(py_scheduler, "VolumeAttachmentAdd")
    storage("CSINode", _csi_node(node, driver, 2))
    storage(
        "VolumeAttachment",
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "VolumeAttachment",
            "metadata": {"name": f"{kit.ns}-left"},
            "spec": {
                "attacher": driver,
                "nodeName": node,
                "source": {"persistentVolumeName": left},
            },
        },
    )

    csi_node_seen()
    attachment_seen()
    _with_claim(kit, "first", "a")
    assert kit.wait_bound("first") == node
    # a, plus the attached volume: the node is at its limit of 2.
    _with_claim(kit, "second", "b")
    kit.wait_failed_with("second", EXCEEDED)
    assert kit.node_of("second") == ""
    # The attachment goes (the volume was detached): its deletion brings the pod back.
    k8s.StorageV1Api(kit.cluster.api).delete_volume_attachment(f"{kit.ns}-left")
    assert kit.wait_bound("second", timeout=60) == node

    _with_claim(kit, "third", "c")
    kit.wait_failed_with("third", EXCEEDED)
    assert kit.node_of("third") == ""
    # A pod with volumes leaves the node: the third takes its place.
    kit.core.delete_namespaced_pod("first", kit.ns, grace_period_seconds=0)
    assert kit.wait_bound("third", timeout=60) == node


def test_a_driver_that_must_be_installed_waits_for_a_node_that_has_it(
    kit: Kit, py_scheduler: Any, storage: Callable[[str, dict[str, Any]], None]
) -> None:
    driver = f"{kit.ns}.required.example.com"
    _, later = kit.nodes(2)
    driver_seen = _seen(py_scheduler, "CSIDriverAdd")
    storage("CSIDriver", _driver(driver, prevent=True))
    _bound_csi_claim(kit, storage, "data", driver)
    _claims_bound(kit, "data")
    driver_seen()
    _with_claim(kit, "consumer", "data")
    kit.wait_failed_with("consumer", f"{driver} CSI driver is not installed on the node")
    assert kit.node_of("consumer") == ""
    # The driver registers on one node (its kubelet writes the CSINode): the pod goes there.
    storage("CSINode", _csi_node(later, driver, None))
    assert kit.wait_bound("consumer", timeout=60) == later


def _capacity(kit: Kit, name: str, storage_class: str, zone: str, size: str) -> None:
    """A CSIStorageCapacity in the test's namespace (deleted with it)."""
    k8s.StorageV1Api(kit.cluster.api).create_namespaced_csi_storage_capacity(
        kit.ns,
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSIStorageCapacity",
            "metadata": {"name": name},
            "storageClassName": storage_class,
            "nodeTopology": {"matchLabels": {"capacity-zone": zone}},
            "capacity": size,
        },
    )


def _selected_node(kit: Kit, claim: str) -> str | None:
    pvc = kit.core.read_namespaced_persistent_volume_claim(claim, kit.ns)
    return (pvc.metadata.annotations or {}).get("volume.kubernetes.io/selected-node")


def test_a_claim_is_provisioned_only_where_the_driver_has_room(
    kit: Kit, py_scheduler: Any, storage: Callable[[str, dict[str, Any]], None]
) -> None:
    driver = f"{kit.ns}.capacity.example.com"
    kit.nodes(1, labels={"capacity-zone": f"small-{kit.ns}"})
    (big,) = kit.nodes(1, labels={"capacity-zone": f"big-{kit.ns}"})
    cls = f"{kit.ns}-capacity"
    driver_seen = _seen(py_scheduler, "CSIDriverAdd")
    class_seen = _seen(py_scheduler, "StorageClassAdd")
    capacity_seen = _seen(py_scheduler, "CSIStorageCapacityAdd")
    storage("CSIDriver", _driver(driver, capacity=True))
    storage(
        "StorageClass",
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": cls},
            "provisioner": driver,
            "volumeBindingMode": "WaitForFirstConsumer",
        },
    )
    _capacity(kit, "small", cls, f"small-{kit.ns}", "500Mi")  # less than the claim
    driver_seen()
    class_seen()
    capacity_seen()
    kit.core.create_namespaced_persistent_volume_claim(
        kit.ns,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": cls,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
    )
    _with_claim(kit, "consumer", "data")
    kit.wait_failed_with("consumer", "2 node(s) did not have enough free storage")
    assert _selected_node(kit, "data") is None

    # The driver publishes room on the other node: the scheduler selects it.
    _capacity(kit, "big", cls, f"big-{kit.ns}", "10Gi")
    assert wait_for(lambda: _selected_node(kit, "data"), 60, "selected-node written") == big
    # The test provisions the volume there, as the driver's external-provisioner would.
    claim = kit.core.read_namespaced_persistent_volume_claim("data", kit.ns)
    storage(
        "PersistentVolume",
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": f"{kit.ns}-provisioned"},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": cls,
                "csi": {"driver": driver, "volumeHandle": f"{kit.ns}-provisioned"},
                "claimRef": {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "namespace": kit.ns,
                    "name": "data",
                    "uid": claim.metadata.uid,
                },
            },
        },
    )
    assert kit.wait_bound("consumer", timeout=60) == big
