"""Extended resources backed by devices (upstream's DRAExtendedResource, GA in v1.37): a pod
that asks for an extended resource a DeviceClass backs (its ``extendedResourceName``, or
``deviceclass.resource.kubernetes.io/<class>``) gets devices on a node whose allocatable
does not offer the resource: NodeResourcesFit leaves it to DynamicResources, which
allocates a claim made for the pod (one request per container), creates it in PreBind
(owned by the pod, annotated), and names it in the pod's
``status.extendedResourceClaimStatus``."""

from __future__ import annotations

import asyncio
import copy
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from scheduler.backend.cache.snapshot import Snapshot
from scheduler.backend.queue import UNSCHEDULABLE_Q
from scheduler.config import SchedulerConfig
from scheduler.decode import Document
from scheduler.draapi import (
    EXTENDED_CLAIM_ANNOTATION,
    FINALIZER,
    device_class_from_dict,
    resource_claim_from_dict,
)
from scheduler.framework.interface import CycleState, QueueingHint
from scheduler.framework.plugins.dynamicresources import _extended_claim_for
from scheduler.framework.plugins.noderesources.balanced_allocation import BalancedAllocation
from scheduler.framework.plugins.noderesources.fit import NodeResourcesFit, ResourceSpec
from scheduler.metrics import Metrics
from scheduler.schedule_one import SchedulerCore, binding_step_outcome
from scheduler.simulate import simulate
from scheduler.types import ContainerExtendedRequest, NodeInfo, pod_from_dict
from tests.builders import make_node, make_pod
from tests.unit.fakes import RecordingBinder
from tests.unit.framework.plugins.test_dynamicresources import (
    _core,
    _node_obj,
    _one,
    _plugin,
    dev,
    device_class,
    slice_,
)

GPU = "example.com/gpu"
API = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"


def backed_class(name: str = "gpu", resource: str | None = GPU, created: int = 0) -> dict[str, Any]:
    obj = device_class(name)
    if resource is not None:
        obj["spec"]["extendedResourceName"] = resource
    obj["metadata"]["creationTimestamp"] = f"2026-01-01T00:00:{created:02d}Z"
    return obj


TWO_GPUS_ON_N2 = (backed_class(), slice_("n2-gpus", dev("gpu-0"), dev("gpu-1"), node="n2"))


def gpu_pod(name: str, count: int = 1, resource: str = GPU) -> Any:
    return make_pod(name).uid(f"uid-{name}").req(cpu="1", **{resource: str(count)})


class FakeApi:
    """Creates claims (a generated name), patches them and pods' status, deletes claims."""

    def __init__(self) -> None:
        self.claims: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str, Any, str]] = []
        self.fail: dict[tuple[str, str], Exception] = {}
        self.rv = 100

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> dict[str, Any]:
        self.calls.append((method, path, copy.deepcopy(body), content_type))
        failure = self.fail.get((method, path))
        if failure is not None:
            raise failure
        self.rv += 1
        if path.startswith("/api/v1/"):
            return {}
        if method == "POST":
            obj = copy.deepcopy(body)
            meta = obj["metadata"]
            meta["name"] = meta.pop("generateName") + "x7k2q"
            meta.update(uid=f"uid-claim-{self.rv}", resourceVersion=str(self.rv))
            self.claims[meta["name"]] = obj
            return copy.deepcopy(obj)
        name = path.removesuffix("/status").rsplit("/", 1)[1]
        if method == "DELETE":
            return self.claims.pop(name)
        obj = self.claims[name]
        obj["metadata"]["resourceVersion"] = str(self.rv)
        if "status" in body:
            obj.setdefault("status", {}).update(body["status"])
        gone = body.get("metadata", {}).get("$deleteFromPrimitiveList/finalizers", ())
        obj["metadata"]["finalizers"] = [
            f for f in obj["metadata"].get("finalizers", ()) if f not in gone
        ]
        return copy.deepcopy(obj)


def _settled(core: SchedulerCore, step: Callable[[], Any]) -> Any:
    """``step`` run in an event loop (as the scheduler runs it; an awaitable it returns is
    awaited), then every background call the plugin started; ``step``'s result."""

    async def run() -> Any:
        out = step()
        if inspect.isawaitable(out):
            out = await out
        await asyncio.gather(*_plugin(core)._tasks)
        return out

    return asyncio.run(run())


def _bind_settled(core: SchedulerCore, binder: RecordingBinder, key: str) -> Any:
    """The binding cycle, then every background call the plugin started."""
    cycle = binder.cycles[key]
    assert cycle.begin() == (None, True)
    return _settled(core, cycle.finish_async)


def _unreserved(core: SchedulerCore, key: str, failed: Any) -> None:
    """The failed binding reported (Unreserve runs), then its background calls."""
    _settled(core, lambda: core.on_bind_result(key, binding_step_outcome(failed), failed.message()))


def _entries(*rows: tuple[int, str, bool, str, int, int]) -> tuple[ContainerExtendedRequest, ...]:
    return tuple(ContainerExtendedRequest(*r) for r in rows)


def test_the_pod_s_containers_are_parsed_with_their_request_positions() -> None:
    pod = (
        make_pod("p")
        .requests({"cpu": "1", GPU: "1"})
        .init_container({GPU: "2"})
        .init_container({GPU: "1", "example.com/other": "500m"}, sidecar=True)
        .info()
    )
    # Init containers first (i0, i1), then the regular one; a fraction makes no request.
    assert pod.extended_requests == _entries(
        (0, "i0", True, GPU, 0, 2), (1, "i1", False, GPU, 0, 1), (2, "c0", False, GPU, 1, 1)
    )
    assert make_pod("q").req(cpu="1", gpu="1").info().extended_requests == _entries(
        (0, "c", False, "nvidia.com/gpu", 1, 1)
    )
    assert make_pod("r").req(cpu="1").info().extended_requests == ()


def _requests_and_mappings(pod: Any) -> tuple[list[tuple[str, str, int]], list[tuple[str, ...]]]:
    info = pod.info()
    classes = {GPU: device_class_from_dict(backed_class())}
    memory = resource_claim_from_dict(
        {"metadata": {"name": "m", "namespace": "default"}, "spec": {"devices": {"requests": []}}}
    )
    made = _extended_claim_for(info, memory, [GPU], classes.get)
    requests = []
    for r in made.claim.requests:
        assert r.exactly is not None
        requests.append((r.name, r.exactly.device_class, r.exactly.count))
    mappings = [(m["containerName"], m["resourceName"], m["requestName"]) for m in made.mappings]
    return requests, mappings


def test_an_init_container_uses_the_requests_of_the_containers_after_it() -> None:
    # i0 (runs first, wants 2) is covered by the sidecar's and the container's devices.
    pod = (
        make_pod("p")
        .requests({GPU: "1"})
        .init_container({GPU: "2"})
        .init_container({GPU: "1"}, sidecar=True)
    )
    requests, mappings = _requests_and_mappings(pod)
    assert requests == [("container-1-request-0", "gpu", 1), ("container-2-request-0", "gpu", 1)]
    assert mappings == [
        ("i1", GPU, "container-1-request-0"),
        ("c0", GPU, "container-2-request-0"),
        ("i0", GPU, "container-1-request-0"),
        ("i0", GPU, "container-2-request-0"),
    ]


def test_init_containers_share_one_request_the_size_of_the_largest_need() -> None:
    # i0 needs 3 and i1 needs 2; each uses c0's device, then needs 2 and 1 more: one
    # request of 2 serves both (they run one at a time). c0's gpu is its second request name.
    pod = (
        make_pod("p")
        .requests({"cpu": "1", GPU: "1"})
        .init_container({GPU: "3"})
        .init_container({GPU: "2"})
    )
    requests, mappings = _requests_and_mappings(pod)
    assert requests == [("container-0-request-0", "gpu", 2), ("container-2-request-1", "gpu", 1)]
    assert mappings == [
        ("c0", GPU, "container-2-request-1"),
        ("i0", GPU, "container-2-request-1"),
        ("i0", GPU, "container-0-request-0"),
        ("i1", GPU, "container-2-request-1"),
        ("i1", GPU, "container-0-request-0"),
    ]


def test_a_pod_gets_devices_for_an_extended_resource_on_a_node_without_it() -> None:
    api = FakeApi()
    core, binder = _core(*TWO_GPUS_ON_N2, client=api)  # type: ignore[arg-type]
    _plugin(core).metrics = metrics = Metrics()
    r = _one(core, gpu_pod("p", 2))
    assert (r.outcome, r.node, r.feasible_nodes) == ("assumed", "n2", 1)
    assert _bind_settled(core, binder, "default/p") is None
    created = metrics.resourceclaim_creates.labels("success", "false", "", "Pod")
    assert created.value == 1
    (create, status, pod_status) = api.calls
    assert create[:2] == ("POST", API)
    meta = create[2]["metadata"]
    assert meta["generateName"] == "p-extended-resources-"
    assert meta["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "uid-p", "controller": True}
    ]
    assert meta["annotations"] == {EXTENDED_CLAIM_ANNOTATION: "true"}
    assert meta["finalizers"] == [FINALIZER]  # (so no separate write adds it)
    assert create[2]["spec"]["devices"]["requests"] == [
        {
            "name": "container-0-request-1",
            "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2},
        }
    ]
    name = "p-extended-resources-x7k2q"
    assert status[:2] == ("PATCH", f"{API}/{name}/status")
    results = status[2]["status"]["allocation"]["devices"]["results"]
    assert [(x["request"], x["device"]) for x in results] == [
        ("container-0-request-1", "gpu-0"),
        ("container-0-request-1", "gpu-1"),
    ]
    assert status[2]["status"]["reservedFor"] == [{"resource": "pods", "name": "p", "uid": "uid-p"}]
    assert pod_status[:2] == ("PATCH", "/api/v1/namespaces/default/pods/p/status")
    assert pod_status[2]["status"] == {
        "extendedResourceClaimStatus": {
            "requestMappings": [
                {"containerName": "c", "resourceName": GPU, "requestName": "container-0-request-1"}
            ],
            "resourceClaimName": name,
        }
    }
    # The created claim is assumed (its devices in use), nothing is left in flight.
    written = core.dra.claim(f"default/{name}")
    assert written is not None and written.allocation is not None and written.extended
    assert not core.dra.in_flight
    q = _one(core, gpu_pod("q"))
    assert q.outcome == "unschedulable" and "cannot allocate all claims" in q.message


def test_a_node_that_offers_the_resource_itself_needs_no_claim() -> None:
    api = FakeApi()
    core, binder = _core(*TWO_GPUS_ON_N2, client=api)  # type: ignore[arg-type]
    n9 = make_node("n9").alloc(cpu="4", memory="8Gi", pods=110, **{GPU: "1"})
    core.on_node_add(n9.label("kubernetes.io/hostname", "n9").record())
    # n9's device plugin resource is counted as always, and needs no claim.
    pinned = gpu_pod("p").spec_field("nodeSelector", {"kubernetes.io/hostname": "n9"})
    assert _one(core, pinned).node == "n9"
    assert _bind_settled(core, binder, "default/p") is None
    assert api.calls == []
    big = _one(core, gpu_pod("big", 3))
    assert big.outcome == "unschedulable"
    assert f"Insufficient {GPU}" in big.message  # n9's one is taken
    assert "cannot allocate all claims" in big.message  # n2 has 2 devices
    assert (_one(core, gpu_pod("q")).node, _one(core, gpu_pod("r")).node) == ("n2", "n2")


def test_a_class_s_own_resource_name_and_the_newest_class_win() -> None:
    core, _ = _core(
        backed_class("old", created=1),
        backed_class("new", created=2),
        slice_("n2-gpus", dev("gpu-0"), node="n2"),
    )
    assert core.dra.extended_class(GPU).name == "new"  # type: ignore[union-attr]
    assert core.dra.extended_class("deviceclass.resource.kubernetes.io/old").name == "old"  # type: ignore[union-attr]
    r = _one(core, gpu_pod("p", resource="deviceclass.resource.kubernetes.io/old"))
    assert (r.outcome, r.node) == ("assumed", "n2")
    core.on_dra_object_delete(device_class_from_dict(backed_class("new", created=2)))
    assert core.dra.extended_class(GPU).name == "old"  # type: ignore[union-attr]


def test_without_a_class_the_resource_is_the_node_s_to_offer() -> None:
    core, _ = _core(device_class(), slice_("n2-gpus", dev("gpu-0"), node="n2"))
    r = _one(core, gpu_pod("p"))
    assert r.outcome == "unschedulable"
    assert f"Insufficient {GPU}" in r.message


def test_a_failed_binding_deletes_the_created_claim_and_frees_its_devices() -> None:
    api = FakeApi()
    api.fail[("PATCH", "/api/v1/namespaces/default/pods/p/status")] = RuntimeError("gone")
    core, binder = _core(*TWO_GPUS_ON_N2, client=api)  # type: ignore[arg-type]
    assert _one(core, gpu_pod("p", 2)).node == "n2"
    failed = _bind_settled(core, binder, "default/p")
    assert failed is not None
    assert "update pod default/p ExtendedResourceClaimStatus: gone" in failed.message()
    _unreserved(core, "default/p", failed)
    name = "p-extended-resources-x7k2q"
    smp, delete = api.calls[-2:]
    assert smp[:2] == ("PATCH", f"{API}/{name}")
    assert smp[2]["metadata"]["$deleteFromPrimitiveList/finalizers"] == [FINALIZER]
    assert delete[:2] == ("DELETE", f"{API}/{name}")
    assert name not in api.claims
    # The devices come back with the claim's deletion.
    written = core.dra.claim(f"default/{name}")
    assert written is not None
    core.on_dra_object_delete(written)
    assert _one(core, gpu_pod("q", 2)).node == "n2"


def test_a_claim_left_by_an_earlier_attempt_is_deleted_and_the_pod_tried_again() -> None:
    api = FakeApi()
    left = {
        "kind": "ResourceClaim",
        "metadata": {
            "name": "p-extended-resources-old00",
            "namespace": "default",
            "uid": "uid-left",
            "resourceVersion": "7",
            "annotations": {EXTENDED_CLAIM_ANNOTATION: "true"},
            "ownerReferences": [{"kind": "Pod", "name": "p", "uid": "uid-p", "controller": True}],
        },
        "spec": {
            "devices": {
                "requests": [
                    {"name": "container-0-request-1", "exactly": {"deviceClassName": "gpu"}}
                ]
            }
        },
    }
    api.claims[left["metadata"]["name"]] = copy.deepcopy(left)
    core, _ = _core(*TWO_GPUS_ON_N2, left, client=api)  # type: ignore[arg-type]
    r = _settled(core, lambda: _one(core, gpu_pod("p")))
    assert core.queue.where("default/p") == UNSCHEDULABLE_Q
    assert r.outcome == "unschedulable"
    assert "cannot schedule extended resource claim" in r.message
    assert [c[0] for c in api.calls] == ["PATCH", "DELETE"]
    assert api.claims == {}
    # Its deletion brings the pod back.
    core.on_dra_object_delete(resource_claim_from_dict(left))
    assert core.queue.where("default/p") != UNSCHEDULABLE_Q


def test_a_class_that_backs_the_resource_brings_the_pod_back() -> None:
    fit = NodeResourcesFit()
    (add,) = [
        e.hint
        for e in fit.events_to_register()
        if e.event.resource == "DeviceClass" and e.event.action == "Add"
    ]
    (update,) = [
        e.hint
        for e in fit.events_to_register()
        if e.event.resource == "DeviceClass" and e.event.action == "Update"
    ]
    assert add is not None and update is not None
    pod = gpu_pod("p").info()
    implicit = gpu_pod("q", resource="deviceclass.resource.kubernetes.io/gpu").info()
    plain = device_class_from_dict(backed_class(resource=None))
    named = device_class_from_dict(backed_class())
    assert add(pod, None, named) == QueueingHint.QUEUE
    assert add(pod, None, plain) == QueueingHint.SKIP
    assert add(implicit, None, plain) == QueueingHint.QUEUE
    assert update(pod, plain, named) == QueueingHint.QUEUE
    assert update(pod, named, named) == QueueingHint.SKIP


def test_simulate_gives_pods_devices_for_their_extended_resources() -> None:
    objs = [
        _node_obj("n1"),
        _node_obj("n2"),
        *TWO_GPUS_ON_N2,
        gpu_pod("p").obj(),
        gpu_pod("q").obj(),
        gpu_pod("r").obj(),
    ]
    docs = [Document("dump.yaml", i + 1, o) for i, o in enumerate(objs)]
    result = simulate(docs, SchedulerConfig())
    assert result.placements == {"default/p": "n2", "default/q": "n2", "default/r": None}


def test_pod_parsing_keeps_the_requests_of_a_pod_from_the_api() -> None:
    obj = gpu_pod("p").obj()
    assert pod_from_dict(obj).extended_requests == _entries((0, "c", False, GPU, 1, 1))


def test_a_scoring_strategy_that_names_the_resource_counts_the_node_s_devices() -> None:
    core, _ = _core(
        backed_class(),
        slice_("n1-gpus", dev("gpu-0"), dev("gpu-1"), node="n1"),
        slice_("n2-gpus", dev("gpu-0"), dev("gpu-1"), node="n2"),
    )
    pinned = gpu_pod("p").spec_field("nodeSelector", {"kubernetes.io/hostname": "n2"})
    assert _one(core, pinned).node == "n2"  # one of n2's devices in flight
    n1, n2 = (
        NodeInfo(make_node(n).alloc(cpu="4", memory="8Gi", pods=110).record()) for n in ("n1", "n2")
    )
    assert n2.node is not None
    assert core.dra.extended_devices(n2.node, GPU) == (2, 1)
    assert core.dra.extended_devices(n2.node, "example.com/other") == (0, 0)
    pod = gpu_pod("q").info()
    most = NodeResourcesFit(
        strategy="MostAllocated", resources=(ResourceSpec(GPU, 1),), dra=core.dra
    )
    state = CycleState()
    assert (most.score(state, pod, n1), most.score(state, pod, n2)) == (50, 100)
    # Balance over cpu (1 of 4) and the devices (1 of 2 on n1): the devices count.
    both = (ResourceSpec("cpu", 1), ResourceSpec(GPU, 1))
    balanced = BalancedAllocation(both, dra=core.dra)
    assert (balanced.score(state, pod, n1), BalancedAllocation(both).score(state, pod, n1)) == (
        68,
        75,
    )
    # Without the classes (as before), a resource no allocatable offers is not scored.
    blind = NodeResourcesFit(strategy="MostAllocated", resources=(ResourceSpec(GPU, 1),))
    assert (blind.score(state, pod, n1), blind.score(state, pod, n2)) == (0, 0)


def test_a_claim_the_api_server_refuses_fails_the_binding_and_is_counted() -> None:
    api = FakeApi()
    api.fail[("POST", API)] = RuntimeError("quota exceeded")
    core, binder = _core(*TWO_GPUS_ON_N2, client=api)  # type: ignore[arg-type]
    _plugin(core).metrics = metrics = Metrics()
    assert _one(core, gpu_pod("p", 2)).node == "n2"
    failed = _bind_settled(core, binder, "default/p")
    assert failed is not None
    assert failed.message() == (
        "running PreBind plugin DynamicResources: create claim for extended resources of pod "
        "default/p: quota exceeded"
    )
    assert metrics.resourceclaim_creates.labels("failure", "false", "", "Pod").value == 1
    _unreserved(core, "default/p", failed)
    assert [c[0] for c in api.calls] == ["POST"]  # nothing was created: nothing to delete
    assert not core.dra.in_flight
    assert _one(core, gpu_pod("q", 2)).node == "n2"  # the devices are free again


def test_node_resources_fit_s_bulk_filter_agrees_with_its_node_filter() -> None:
    core, _ = _core(*TWO_GPUS_ON_N2)
    nodes = [
        make_node("plain").alloc(cpu="4", memory="8Gi", pods=110),
        make_node("offers").alloc(cpu="4", memory="8Gi", pods=110, **{GPU: "1"}),
        make_node("offers-none").alloc(cpu="4", memory="8Gi", pods=110, **{GPU: "0"}),
        make_node("other").alloc(cpu="4", memory="8Gi", pods=110, **{"example.com/nic": "2"}),
        make_node("small").alloc(cpu="500m", memory="8Gi", pods=110),
    ]
    snap = Snapshot.from_node_infos([NodeInfo(n.record()) for n in nodes])
    fit = NodeResourcesFit(dra=core.dra)
    for pod in (gpu_pod("one").info(), gpu_pod("two", 2).info()):
        mask = fit.filter_batch(CycleState(), pod, snap)
        assert mask is not None
        one_by_one = [fit.filter(CycleState(), pod, ni).is_success() for ni in snap.node_info_list]
        # Where the mask admits, the node filter does; nodes that offer an extended
        # resource are left to it (offers: 1 of 1 for "one", too few for "two").
        assert all(one_by_one[i] for i, m in enumerate(mask.tolist()) if m)
        assert mask.tolist() == [True, False, True, False, False]
        assert one_by_one == [True, pod.name == "one", True, True, False]
    # A resource no class backs: no bulk answer (as before).
    assert (
        fit.filter_batch(CycleState(), gpu_pod("x", resource="example.com/nic").info(), snap)
        is None
    )


def test_a_node_s_new_allocatable_brings_back_a_pod_whose_resource_devices_back() -> None:
    core, _ = _core(*TWO_GPUS_ON_N2)
    fit = NodeResourcesFit(dra=core.dra)
    (update,) = [
        e.hint
        for e in fit.events_to_register()
        if e.event.resource == "Node" and e.event.action == "Update"
    ]
    assert update is not None
    pod = gpu_pod("p").info()
    old = make_node("n1").alloc(cpu="4", memory="8Gi", pods=110).record()
    relabelled = make_node("n1").alloc(cpu="4", memory="8Gi", pods=110).label("a", "b").record()
    disk = {"ephemeral-storage": "100Gi"}  # an allocatable the pod does not ask for
    changed = make_node("n1").alloc(cpu="4", memory="8Gi", pods=110, **disk).record()
    # As upstream, whose hint runs for allocatable updates: devices may provide the
    # resource there. A label alone changes nothing this plugin reads.
    assert update(pod, old, changed) == QueueingHint.QUEUE
    assert update(pod, old, relabelled) == QueueingHint.SKIP
    # Without a backing class, only what the pod asks for counts (as before).
    (plain,) = [
        e.hint
        for e in NodeResourcesFit().events_to_register()
        if e.event.resource == "Node" and e.event.action == "Update"
    ]
    assert plain is not None
    assert plain(make_pod("q").req(cpu="1").info(), old, changed) == QueueingHint.SKIP
