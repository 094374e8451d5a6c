"""VolumeBinding against the real API server and kube-controller-manager's PV controller: a
pod follows its bound claim's local volume to that volume's node; a pod whose claim is
not bound yet waits ("pod has unbound immediate PersistentVolumeClaims") until the PV
controller binds it, then follows it; a pod whose claim does not exist is told so."""

from __future__ import annotations

from collections.abc import Iterator
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
def storage_class(kit: Kit) -> Iterator[str]:
    """A StorageClass that waits for the first consumer (cluster-scoped: deleted after)."""
    name = f"{kit.ns}-wait"
    api = k8s.StorageV1Api(kit.cluster.api)
    api.create_storage_class(
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": name},
            "provisioner": "example.com/nobody",
            "volumeBindingMode": "WaitForFirstConsumer",
        }
    )
    yield name
    api.delete_storage_class(name)


def _with_claim(kit: Kit, name: str, claim: str) -> None:
    body = pod_manifest(name, node_selector=kit.selector)
    body["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    kit.core.create_namespaced_pod(kit.ns, body)


def _failed_with(kit: Kit, pod: str, text: str) -> str:
    """Wait for a FailedScheduling event of ``pod`` whose message has ``text`` (an earlier
    one may tell of an earlier state: the scheduler's watch may see the pod before the
    claim or class it names); its message."""

    def found() -> str | None:
        for ev in kit.events(pod, "FailedScheduling"):
            if text in str(ev.get("message")):
                return str(ev["message"])
        return None

    return str(wait_for(found, 30, f"FailedScheduling of {pod} saying {text!r}"))


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
    _failed_with(kit, "on-b", "pod has unbound immediate PersistentVolumeClaims")
    assert kit.node_of("on-b") == ""
    kit.core.create_persistent_volume(_pv(pv_b, f"b-{kit.ns}"))
    volumes.append(pv_b)
    # The PV controller binds the claim; its update brings the pod back.
    assert kit.wait_bound("on-b", timeout=60) == near_b

    _with_claim(kit, "lost", "no-such-claim")
    _failed_with(kit, "lost", 'persistentvolumeclaim "no-such-claim" not found')
    assert kit.node_of("lost") == ""


def test_a_claim_that_waits_for_its_first_consumer_keeps_its_pod_pending_with_a_reason(
    kit: Kit, py_scheduler: Any, storage_class: str
) -> None:
    """Not built: binding such claims. The pod is not bound to a node where its claim would
    stay unbound; its FailedScheduling event says why."""
    kit.nodes(1)
    claim = _pvc("later", "")
    del claim["spec"]["volumeName"]
    claim["spec"]["storageClassName"] = storage_class
    kit.core.create_namespaced_persistent_volume_claim(kit.ns, claim)
    _with_claim(kit, "waits", "later")
    _failed_with(
        kit,
        "waits",
        f'persistentvolumeclaim "later" waits for its first consumer (StorageClass '
        f'"{storage_class}"): py-scheduler does not bind such claims',
    )
    assert kit.node_of("waits") == ""
