"""DynamicResources against the real API server (resource.k8s.io/v1) and
kube-controller-manager's resourceclaim controller: a pod's ResourceClaim is allocated a
device from the ResourceSlice of a node and the pod is bound there (the claim's finalizer,
allocation and reservation written by the scheduler); a pod whose claim comes from a
template waits until the controller has created it; a second pod finds no free device
(FailedScheduling says so) until the first is deleted and the controller deallocates its
claim; a claim's CEL selector picks among devices; a DeviceTaintRule keeps a device
unallocated until it is deleted; partitionable devices: a device whose shared counters
are taken by another is not given, and a device's own node selection places the pod."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from tests.e2e.kit import Kit, pod_manifest

GROUP, VERSION = "resource.k8s.io", "v1"


@pytest.fixture
def dra(kit: Kit) -> Iterator[tuple[k8s.CustomObjectsApi, list[tuple[str, str]]]]:
    """The API for resource.k8s.io objects, and the cluster-scoped ones the test makes
    (deleted after it)."""
    api = k8s.CustomObjectsApi(kit.cluster.api)
    made: list[tuple[str, str]] = []
    yield api, made
    for plural, name in made:
        try:
            api.delete_cluster_custom_object(GROUP, VERSION, plural, name)
        except ApiException as e:
            if e.status != 404:
                raise


def _cluster_object(
    dra: tuple[k8s.CustomObjectsApi, list[tuple[str, str]]], plural: str, body: dict[str, Any]
) -> None:
    api, made = dra
    body = {"apiVersion": f"{GROUP}/{VERSION}", **body}
    api.create_cluster_custom_object(GROUP, VERSION, plural, body)
    made.append((plural, body["metadata"]["name"]))


def _device_class(
    dra: tuple[k8s.CustomObjectsApi, list[tuple[str, str]]], name: str, driver: str
) -> str:
    """A DeviceClass of the driver's devices; its name."""
    _cluster_object(
        dra,
        "deviceclasses",
        {
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
        },
    )
    return name


def _slice(name: str, driver: str, node: str, devices: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def _spec(device_class: str, selector: str = "") -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}


def _claim(kit: Kit, api: k8s.CustomObjectsApi, name: str, spec: dict[str, Any]) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": spec,
    }
    api.create_namespaced_custom_object(GROUP, VERSION, kit.ns, "resourceclaims", body)


def _read_claim(kit: Kit, api: k8s.CustomObjectsApi, name: str) -> dict[str, Any]:
    out: dict[str, Any] = api.get_namespaced_custom_object(
        GROUP, VERSION, kit.ns, "resourceclaims", name
    )
    return out


def _pod(kit: Kit, name: str, claim: dict[str, str]) -> None:
    body = pod_manifest(name, node_selector=kit.selector)
    body["spec"]["resourceClaims"] = [{"name": "gpu", **claim}]
    kit.core.create_namespaced_pod(kit.ns, body)


def test_claims_get_devices_on_the_node_that_has_them(
    kit: Kit, py_scheduler: Any, dra: tuple[k8s.CustomObjectsApi, list[tuple[str, str]]]
) -> None:
    api, _ = dra
    driver = f"gpu.{kit.ns}.example.com"
    kit.nodes(2)  # nodes without devices: never the answer
    (gpu_node,) = kit.nodes(1)
    klass = _device_class(dra, f"{kit.ns}-gpu", driver)
    _cluster_object(
        dra,
        "resourceslices",
        _slice(f"{kit.ns}-gpus", driver, gpu_node, [{"name": "gpu-0"}]),
    )
    _claim(kit, api, "first", _spec(klass))
    _pod(kit, "p1", {"resourceClaimName": "first"})
    assert kit.wait_bound("p1") == gpu_node
    claim = _read_claim(kit, api, "first")
    assert "resource.kubernetes.io/delete-protection" in claim["metadata"]["finalizers"]
    results = claim["status"]["allocation"]["devices"]["results"]
    assert [(r["request"], r["driver"], r["pool"], r["device"]) for r in results] == [
        ("gpu", driver, gpu_node, "gpu-0")
    ]
    p1 = kit.pod("p1")
    assert p1 is not None
    assert claim["status"]["reservedFor"] == [
        {"resource": "pods", "name": "p1", "uid": p1["metadata"]["uid"]}
    ]

    # A template's claim: created by kube-controller-manager, named in the pod's status.
    templates = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "gpu-template"},
        "spec": {"spec": _spec(klass)},
    }
    api.create_namespaced_custom_object(GROUP, VERSION, kit.ns, "resourceclaimtemplates", templates)
    _pod(kit, "p2", {"resourceClaimTemplateName": "gpu-template"})
    # The only device is taken: p2 waits, and the event says why.
    kit.wait_failed_with("p2", "cannot allocate all claims")
    assert kit.node_of("p2") == ""

    # p1 goes; the controller takes it out of reservedFor and deallocates the claim: the
    # device is free again, and that claim change brings p2 back.
    kit.delete("p1", grace=0)
    assert kit.wait_bound("p2", timeout=60) == gpu_node
    p2 = kit.pod("p2")
    assert p2 is not None
    (generated,) = p2["status"]["resourceClaimStatuses"]
    mine = _read_claim(kit, api, generated["resourceClaimName"])
    assert mine["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-0"
    assert mine["metadata"]["ownerReferences"][0]["uid"] == p2["metadata"]["uid"]


def test_a_selector_picks_the_device_a_taint_rule_keeps_one_free_and_an_unknown_class_is_named(
    kit: Kit, py_scheduler: Any, dra: tuple[k8s.CustomObjectsApi, list[tuple[str, str]]]
) -> None:
    api, _ = dra
    driver = f"acc.{kit.ns}.example.com"
    small, big = kit.nodes(2)
    klass = _device_class(dra, f"{kit.ns}-acc", driver)
    for node, memory in ((small, "16Gi"), (big, "80Gi")):
        dev = {
            "name": "acc-0",
            "attributes": {"model": {"string": f"m-{memory}"}},
            "capacity": {"memory": {"value": memory}},
        }
        _cluster_object(dra, "resourceslices", _slice(f"{kit.ns}-{node}", driver, node, [dev]))
    wants = f'device.capacity["{driver}"].memory.compareTo(quantity("40Gi")) >= 0'
    _claim(kit, api, "large", _spec(klass, wants))
    _pod(kit, "needs-large", {"resourceClaimName": "large"})
    assert kit.wait_bound("needs-large") == big

    # A DeviceTaintRule on the small node's device: a claim that takes any device finds
    # none (the large one is taken) until the rule is deleted.
    rule = f"{kit.ns}-maintenance"
    _cluster_object(
        dra,
        "devicetaintrules",
        {
            "kind": "DeviceTaintRule",
            "metadata": {"name": rule},
            "spec": {
                "deviceSelector": {"driver": driver, "pool": small},
                "taint": {"key": "maintenance", "effect": "NoSchedule"},
            },
        },
    )
    _claim(kit, api, "any", _spec(klass))
    _pod(kit, "needs-any", {"resourceClaimName": "any"})
    kit.wait_failed_with("needs-any", "cannot allocate all claims")
    api.delete_cluster_custom_object(GROUP, VERSION, "devicetaintrules", rule)
    assert kit.wait_bound("needs-any", timeout=60) == small

    _claim(kit, api, "nowhere", _spec(f"{kit.ns}-no-such-class"))
    _pod(kit, "no-class", {"resourceClaimName": "nowhere"})
    kit.wait_failed_with("no-class", f"device class {kit.ns}-no-such-class does not exist")
    assert kit.node_of("no-class") == ""


def test_partitionable_devices_share_counters_and_choose_their_nodes(
    kit: Kit, py_scheduler: Any, dra: tuple[k8s.CustomObjectsApi, list[tuple[str, str]]]
) -> None:
    api, _ = dra
    driver = f"mig.{kit.ns}.example.com"
    gpu_node, port_node = kit.nodes(2)
    klass = _device_class(dra, f"{kit.ns}-mig", driver)
    # One GPU's 40Gi offered whole or as two halves: the counters in one slice, the
    # devices (each taking its share) in another, both of the node's pool.
    pool = {"name": gpu_node, "generation": 1, "resourceSliceCount": 2}
    counters = {"driver": driver, "nodeName": gpu_node, "pool": pool}
    counters["sharedCounters"] = [{"name": "gpu-0", "counters": {"mem": {"value": "40Gi"}}}]
    _cluster_object(
        dra,
        "resourceslices",
        {"kind": "ResourceSlice", "metadata": {"name": f"{kit.ns}-counters"}, "spec": counters},
    )
    devices = [
        {
            "name": name,
            "attributes": {"profile": {"string": profile}},
            "consumesCounters": [{"counterSet": "gpu-0", "counters": {"mem": {"value": mem}}}],
        }
        for name, profile, mem in (
            ("full", "full", "40Gi"),
            ("half-a", "half", "20Gi"),
            ("half-b", "half", "20Gi"),
        )
    ]
    gpus = _slice(f"{kit.ns}-gpus", driver, gpu_node, devices)
    gpus["spec"]["pool"]["resourceSliceCount"] = 2
    _cluster_object(dra, "resourceslices", gpus)

    def profile(p: str) -> str:
        return f'device.attributes["{driver}"].profile == "{p}"'

    _claim(kit, api, "half", _spec(klass, profile("half")))
    _pod(kit, "half", {"resourceClaimName": "half"})
    assert kit.wait_bound("half") == gpu_node
    # "full" is free, but half of the GPU's memory is not.
    _claim(kit, api, "full", _spec(klass, profile("full")))
    _pod(kit, "full", {"resourceClaimName": "full"})
    kit.wait_failed_with("full", "cannot allocate all claims")
    assert kit.node_of("full") == ""
    # The half's pod goes, the controller deallocates its claim: the memory is back.
    kit.delete("half", grace=0)
    assert kit.wait_bound("full", timeout=60) == gpu_node
    results = _read_claim(kit, api, "full")["status"]["allocation"]["devices"]["results"]
    assert [r["device"] for r in results] == ["full"]

    # A slice whose devices name their nodes: the pod goes where its device is, and the
    # allocation says so.
    ports = {
        "driver": driver,
        "perDeviceNodeSelection": True,
        "pool": {"name": f"{kit.ns}-fabric", "generation": 1, "resourceSliceCount": 1},
        "devices": [
            {"name": "port-0", "attributes": {"profile": {"string": "port"}}, "nodeName": port_node}
        ],
    }
    _cluster_object(
        dra,
        "resourceslices",
        {"kind": "ResourceSlice", "metadata": {"name": f"{kit.ns}-ports"}, "spec": ports},
    )
    _claim(kit, api, "port", _spec(klass, profile("port")))
    _pod(kit, "port", {"resourceClaimName": "port"})
    assert kit.wait_bound("port") == port_node
    allocation = _read_claim(kit, api, "port")["status"]["allocation"]
    assert allocation["nodeSelector"]["nodeSelectorTerms"] == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [port_node]}]}
    ]


def test_binding_conditions_hold_the_pod_until_the_device_is_attached(
    kit: Kit, py_scheduler: Any, dra: tuple[k8s.CustomObjectsApi, list[tuple[str, str]]]
) -> None:
    api, _ = dra
    driver = f"fabric.{kit.ns}.example.com"
    kit.nodes(2)
    klass = _device_class(dra, f"{kit.ns}-fabric", driver)
    # A device every node can reach, usable only once a controller has attached it to the
    # chosen node (the test plays that controller).
    fabric = {
        "driver": driver,
        "allNodes": True,
        "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1},
        "devices": [
            {
                "name": "gpu-0",
                "bindingConditions": ["attached"],
                "bindingFailureConditions": ["attach-failed"],
                "bindsToNode": True,
            }
        ],
    }
    _cluster_object(
        dra,
        "resourceslices",
        {"kind": "ResourceSlice", "metadata": {"name": f"{kit.ns}-fabric"}, "spec": fabric},
    )
    _claim(kit, api, "attach", _spec(klass))
    _pod(kit, "attach", {"resourceClaimName": "attach"})
    event = kit.wait_event("attach", "BindingConditionsPending")
    # The allocation is written (pinned to one node) and the pod is not bound yet.
    claim = _read_claim(kit, api, "attach")
    allocation = claim["status"]["allocation"]
    ((match,),) = [t["matchFields"] for t in allocation["nodeSelector"]["nodeSelectorTerms"]]
    node = match["values"][0]
    assert event["message"] == f"waiting for binding conditions for device on node {node}"
    (result,) = allocation["devices"]["results"]
    assert result["bindingConditions"] == ["attached"]
    assert "allocationTimestamp" in allocation
    assert kit.node_of("attach") == ""
    status = {
        "devices": [
            {
                "driver": driver,
                "pool": "fabric",
                "device": "gpu-0",
                "conditions": [
                    {
                        "type": "attached",
                        "status": "True",
                        "reason": "Attached",
                        "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                ],
            }
        ]
    }
    api.patch_namespaced_custom_object_status(
        GROUP, VERSION, kit.ns, "resourceclaims", "attach", {"status": status}
    )
    assert kit.wait_bound("attach", timeout=30) == node


def test_a_shared_device_is_split_between_claims_by_capacity(
    kit: Kit, py_scheduler: Any, dra: tuple[k8s.CustomObjectsApi, list[tuple[str, str]]]
) -> None:
    api, _ = dra
    driver = f"nic.{kit.ns}.example.com"
    (node,) = kit.nodes(1)
    klass = _device_class(dra, f"{kit.ns}-nic", driver)
    nic = {
        "name": "nic-0",
        "allowMultipleAllocations": True,
        "capacity": {
            "bandwidth": {
                "value": "10G",
                "requestPolicy": {"default": "1G", "validRange": {"min": "1G", "step": "1G"}},
            }
        },
    }
    _cluster_object(dra, "resourceslices", _slice(f"{kit.ns}-nics", driver, node, [nic]))

    def wants(bandwidth: str) -> dict[str, Any]:
        spec = _spec(klass)
        spec["devices"]["requests"][0]["exactly"]["capacity"] = {
            "requests": {"bandwidth": bandwidth}
        }
        return spec

    # 3.5G is rounded up to the policy's 4G: two shares fit in 10G, a third does not.
    for name in ("a", "b", "c"):
        _claim(kit, api, name, wants("3.5G"))
    _pod(kit, "a", {"resourceClaimName": "a"})
    _pod(kit, "b", {"resourceClaimName": "b"})
    assert kit.wait_bound("a") == node
    assert kit.wait_bound("b") == node
    shares = []
    for name in ("a", "b"):
        (result,) = _read_claim(kit, api, name)["status"]["allocation"]["devices"]["results"]
        assert result["device"] == "nic-0"
        assert result["consumedCapacity"] == {"bandwidth": "4G"}
        shares.append(result["shareID"])
    assert shares[0] != shares[1]
    _pod(kit, "c", {"resourceClaimName": "c"})
    kit.wait_failed_with("c", "cannot allocate all claims")
    assert kit.node_of("c") == ""


def test_an_extended_resource_backed_by_devices_gets_a_claim_of_its_own(
    kit: Kit, py_scheduler: Any, dra: tuple[k8s.CustomObjectsApi, list[tuple[str, str]]]
) -> None:
    api, _ = dra
    driver = f"xr.{kit.ns}.example.com"
    resource = f"{kit.ns}.example.com/gpu"
    kit.nodes(1)  # a node without devices (and without the resource): never the answer
    (gpu_node,) = kit.nodes(1)
    klass = f"{kit.ns}-xr"
    _cluster_object(
        dra,
        "deviceclasses",
        {
            "kind": "DeviceClass",
            "metadata": {"name": klass},
            "spec": {
                "selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}],
                "extendedResourceName": resource,
            },
        },
    )
    devices = [{"name": "gpu-0"}, {"name": "gpu-1"}]
    _cluster_object(dra, "resourceslices", _slice(f"{kit.ns}-xr", driver, gpu_node, devices))

    def wants(name: str, count: int, resource: str = resource) -> None:
        body = pod_manifest(name, node_selector=kit.selector)
        res = body["spec"]["containers"][0]["resources"]
        res["requests"][resource] = str(count)
        res["limits"] = {resource: str(count)}
        kit.core.create_namespaced_pod(kit.ns, body)

    # The pod asks for the extended resource no node's allocatable offers: the scheduler
    # creates a claim for it (owned by the pod), allocates the node's device and names
    # the claim in the pod's status.
    creates = "dynamic_resource_allocation_resourceclaim_creates_total"
    created = {"status": "success", "owner_api_kind": "Pod"}
    before = py_scheduler.metric(creates, created)
    wants("one", 1)
    assert kit.wait_bound("one") == gpu_node
    one = kit.pod("one")
    assert one is not None
    status = one["status"]["extendedResourceClaimStatus"]
    name = status["resourceClaimName"]
    assert name.startswith("one-extended-resources-")
    claim = _read_claim(kit, api, name)
    assert claim["metadata"]["annotations"] == {
        "resource.kubernetes.io/extended-resource-claim": "true"
    }
    (owner,) = claim["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == (
        "Pod",
        one["metadata"]["uid"],
        True,
    )
    (request,) = claim["spec"]["devices"]["requests"]
    assert request["exactly"]["deviceClassName"] == klass
    assert request["exactly"]["count"] == 1
    results = claim["status"]["allocation"]["devices"]["results"]
    assert [(r["request"], r["pool"]) for r in results] == [(request["name"], gpu_node)]
    assert claim["status"]["reservedFor"] == [
        {"resource": "pods", "name": "one", "uid": one["metadata"]["uid"]}
    ]
    assert status["requestMappings"] == [
        {"containerName": "app", "resourceName": resource, "requestName": request["name"]}
    ]
    assert py_scheduler.metric(creates, created) == before + 1

    # Two more by the class's own name: one device is left, so the pod waits until the
    # first pod goes and its claim with it (kube-controller-manager's garbage collector).
    wants("two", 2, f"deviceclass.resource.kubernetes.io/{klass}")
    kit.wait_failed_with("two", "cannot allocate all claims")
    assert kit.node_of("two") == ""
    kit.delete("one", grace=0)
    assert kit.wait_bound("two", timeout=90) == gpu_node
    two = kit.pod("two")
    assert two is not None
    claim = _read_claim(kit, api, two["status"]["extendedResourceClaimStatus"]["resourceClaimName"])
    devices_given = claim["status"]["allocation"]["devices"]["results"]
    assert sorted(r["device"] for r in devices_given) == ["gpu-0", "gpu-1"]
