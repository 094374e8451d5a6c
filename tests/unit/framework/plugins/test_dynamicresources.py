"""DynamicResources (structured parameters): PreEnqueue, the allocator through Filter,
Score, Reserve/Unreserve, PreBind's writes, PostFilter's deallocation, hints, parsing."""

from __future__ import annotations

import asyncio
import copy
import random
from collections.abc import Mapping
from typing import Any

import pytest

from scheduler.backend.queue import GATED_Q, UNSCHEDULABLE_Q
from scheduler.clock import FakeClock
from scheduler.config import SchedulerConfig
from scheduler.decode import Document
from scheduler.draapi import (
    FINALIZER,
    device_class_from_dict,
    device_taint_rule_from_dict,
    resource_claim_from_dict,
    resource_slice_from_dict,
)
from scheduler.explain import explain
from scheduler.framework.plugins.dynamicresources import DynamicResources
from scheduler.schedule_one import SchedulerCore, binding_step_outcome
from scheduler.simulate import simulate
from scheduler.types import ParseError
from tests.builders import make_node, make_pod
from tests.unit.fakes import RecordingBinder, RecordingRecorder

DRIVER = "gpu.example.com"


def device_class(name: str = "gpu", expr: str = f'device.driver == "{DRIVER}"') -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": expr}}]}
    return {"kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def dev(name: str, taints: list[dict[str, Any]] | None = None, **attrs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    if attrs:
        out["attributes"] = {
            k: {"int" if isinstance(v, int) else "string": v} for k, v in attrs.items()
        }
    if taints:
        out["taints"] = taints
    return out


def slice_(
    name: str,
    *devices: dict[str, Any],
    node: str = "",
    pool: str = "",
    generation: int = 1,
    count: int = 1,
    selector: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "driver": DRIVER,
        "pool": {
            "name": pool or node or name,
            "generation": generation,
            "resourceSliceCount": count,
        },
        "devices": list(devices),
    }
    if node:
        spec["nodeName"] = node
    elif selector is not None:
        spec["nodeSelector"] = selector
    else:
        spec["allNodes"] = True
    return {"kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


def claim(
    name: str,
    *requests: dict[str, Any],
    rv: int = 5,
    owner: str = "",
    constraints: list[dict[str, Any]] | None = None,
    status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "uid": f"uid-{name}",
        "resourceVersion": str(rv),
    }
    if owner:
        meta["ownerReferences"] = [
            {"kind": "Pod", "name": owner, "uid": f"uid-{owner}", "controller": True}
        ]
    devices: dict[str, Any] = {
        "requests": list(requests) or [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]
    }
    if constraints:
        devices["constraints"] = constraints
    out: dict[str, Any] = {"kind": "ResourceClaim", "metadata": meta, "spec": {"devices": devices}}
    if status:
        out["status"] = status
    return out


PARSE = {
    "DeviceClass": device_class_from_dict,
    "ResourceSlice": resource_slice_from_dict,
    "ResourceClaim": resource_claim_from_dict,
}


class FakeClient:
    """Keeps the claims; a merge PATCH updates them and answers the whole object."""

    def __init__(self, *claims: dict[str, Any]) -> None:
        self.objects = {c["metadata"]["name"]: copy.deepcopy(c) for c in claims}
        self.calls: list[tuple[str, str, Any, str]] = []
        self.fail: dict[str, Exception] = {}
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
        self.calls.append((method, path, body, content_type))
        if path in self.fail:
            raise self.fail[path]
        name = path.removesuffix("/status").rsplit("/", 1)[1]
        obj = self.objects[name]
        self.rv += 1
        obj["metadata"].update({k: v for k, v in body.get("metadata", {}).items() if k != "uid"})
        obj["metadata"]["resourceVersion"] = str(self.rv)
        if "status" in body:
            obj.setdefault("status", {}).update(body["status"])
        return copy.deepcopy(obj)


def _core(
    *objs: dict[str, Any], client: FakeClient | None = None
) -> tuple[SchedulerCore, RecordingBinder]:
    binder = RecordingBinder()
    core = SchedulerCore(
        SchedulerConfig(),
        FakeClock(),
        binder,
        RecordingRecorder(),
        rng=random.Random(0),
        api_client=client,
    )
    for name, zone in (("n1", "a"), ("n2", "a"), ("n3", "b")):
        core.on_node_add(
            make_node(name)
            .alloc(cpu="4", memory="8Gi", pods=110)
            .label("kubernetes.io/hostname", name)
            .label("zone", zone)
            .record()
        )
    for o in objs:
        core.on_dra_object_set(PARSE[o["kind"]](o))
    return core, binder


def with_claims(name: str, *claims: str, template: str = "") -> Any:
    entries: list[dict[str, str]] = [{"name": c, "resourceClaimName": c} for c in claims]
    if template:
        entries.append({"name": "t", "resourceClaimTemplateName": template})
    return make_pod(name).uid(f"uid-{name}").req(cpu="1").spec_field("resourceClaims", entries)


def _one(core: SchedulerCore, pod: Any) -> Any:
    core.on_pod_add(pod.info())
    r = core.schedule_one()
    assert r is not None
    return r


def _plugin(core: SchedulerCore) -> DynamicResources:
    (p,) = [p for p in core.framework.pre_bind_plugins if isinstance(p, DynamicResources)]
    return p


def _bind(core: SchedulerCore, binder: RecordingBinder, key: str) -> Any:
    cycle = binder.cycles[key]
    assert cycle.begin() == (None, True)
    return asyncio.run(cycle.finish_async())


GPUS = (device_class(), slice_("n2-gpus", dev("gpu-0"), node="n2"))


def test_a_pod_without_claims_skips_the_plugin() -> None:
    core, _ = _core(*GPUS)
    r = _one(core, make_pod("p").req(cpu="1"))
    assert r.outcome == "assumed"


def test_the_claim_is_allocated_on_the_node_with_the_device() -> None:
    core, _ = _core(*GPUS, claim("c1"))
    r = _one(core, with_claims("p", "c1"))
    assert (r.outcome, r.node, r.feasible_nodes) == ("assumed", "n2", 1)


def test_a_device_held_by_one_pod_is_not_given_to_the_next() -> None:
    core, _ = _core(*GPUS, claim("c1"), claim("c2"))
    assert _one(core, with_claims("p", "c1")).node == "n2"
    r = _one(core, with_claims("q", "c2"))
    assert r.outcome == "unschedulable"
    assert "cannot allocate all claims" in r.message
    assert "DynamicResources" in core.queue.get("default/q").unschedulable_plugins  # type: ignore[union-attr]


def test_pre_bind_writes_the_finalizer_then_the_allocation_and_the_reservation() -> None:
    client = FakeClient(claim("c1"))
    core, binder = _core(*GPUS, claim("c1"), client=client)
    pod = with_claims("p", "c1")
    assert _one(core, pod).node == "n2"
    assert _bind(core, binder, "default/p") is None
    (m1, p1, b1, t1), (m2, p2, b2, t2) = client.calls
    base = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/c1"
    assert (m1, p1, t1) == ("PATCH", base, "application/merge-patch+json")
    assert b1["metadata"] == {"resourceVersion": "5", "finalizers": [FINALIZER]}
    assert (m2, p2, t2) == ("PATCH", base + "/status", "application/merge-patch+json")
    assert b2["metadata"] == {"resourceVersion": "101"}
    assert b2["status"]["reservedFor"] == [{"resource": "pods", "name": "p", "uid": "uid-p"}]
    assert b2["status"]["allocation"] == {
        "devices": {
            "results": [{"request": "gpu", "driver": DRIVER, "pool": "n2", "device": "gpu-0"}]
        },
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}
            ]
        },
        # When it was made (the core's clock: FakeClock's 1e6 s after the epoch).
        "allocationTimestamp": "1970-01-12T13:46:40Z",
    }
    # The written claim is assumed: its device stays in use, the pod is its consumer.
    written = core.dra.claim("default/c1")
    assert written is not None and written.allocation is not None
    assert [c.name for c in written.reserved_for] == ["p"]
    assert "default/c1" not in core.dra.in_flight


def test_a_failed_write_gives_the_device_back() -> None:
    client = FakeClient(claim("c1"), claim("c2"))
    client.fail["/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/c1/status"] = (
        RuntimeError("conflict")
    )
    core, binder = _core(*GPUS, claim("c1"), claim("c2"), client=client)
    assert _one(core, with_claims("p", "c1")).node == "n2"
    failed = _bind(core, binder, "default/p")
    assert failed is not None
    assert failed.message().startswith(
        "running PreBind plugin DynamicResources: add allocation and reservation to claim "
        "default/c1: conflict"
    )
    core.on_bind_result("default/p", binding_step_outcome(failed), failed.message())
    assert not core.dra.in_flight
    assert _one(core, with_claims("q", "c2")).node == "n2"


def test_a_missing_claim_keeps_the_pod_gated_until_it_is_created() -> None:
    core, _ = _core(*GPUS)
    core.on_pod_add(with_claims("p", "c1").info())
    assert core.queue.where("default/p") == GATED_Q
    assert core.schedule_one() is None
    core.on_dra_object_set(resource_claim_from_dict(claim("c1")))
    assert core.queue.where("default/p") != GATED_Q
    r = core.schedule_one()
    assert r is not None and r.node == "n2"


def test_a_template_s_claim_must_be_named_in_the_status_and_owned_by_the_pod() -> None:
    core, _ = _core(*GPUS, claim("p-t-abc", owner="p"), claim("other", owner="x"))
    plugin = _plugin(core)
    pod = with_claims("p", template="tmpl")
    st = plugin.pre_enqueue(pod.info())
    assert st.reasons == ('pod "default/p": ResourceClaim not created yet',)
    named = with_claims("p", template="tmpl").status_field(
        "resourceClaimStatuses", [{"name": "t", "resourceClaimName": "other"}]
    )
    assert plugin.pre_enqueue(named.info()).reasons == (
        "ResourceClaim default/other was not created for Pod default/p (Pod is not owner)",
    )
    core.on_pod_add(pod.info())
    assert core.queue.where("default/p") == GATED_Q
    ok = with_claims("p", template="tmpl").status_field(
        "resourceClaimStatuses", [{"name": "t", "resourceClaimName": "p-t-abc"}]
    )
    core.on_pod_update(pod.info(), ok.info())
    r = core.schedule_one()
    assert r is not None and (r.outcome, r.node) == ("assumed", "n2")


def test_an_allocated_claim_decides_the_node() -> None:
    allocated = {
        "allocation": {
            "devices": {
                "results": [{"request": "gpu", "driver": DRIVER, "pool": "n3", "device": "d"}]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n3"]}]}
                ]
            },
        },
        "reservedFor": [{"resource": "pods", "name": "other", "uid": "uid-other"}],
    }
    core, _ = _core(*GPUS, claim("shared", status=allocated))
    r = _one(core, with_claims("p", "shared"))
    assert (r.outcome, r.node, r.feasible_nodes) == ("assumed", "n3", 1)


def test_first_available_takes_the_first_subrequest_that_fits_and_scores_it() -> None:
    big = device_class(
        "big", f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].mem >= 80'
    )
    small = device_class("small", f'device.driver == "{DRIVER}"')
    request = {
        "name": "gpu",
        "firstAvailable": [
            {"name": "large", "deviceClassName": "big"},
            {"name": "any", "deviceClassName": "small", "count": 2},
        ],
    }
    client = FakeClient(claim("c1", request))
    core, binder = _core(
        big,
        small,
        slice_("n1-gpus", dev("a", mem=40), dev("b", mem=40), node="n1"),
        slice_("n3-gpus", dev("c", mem=80), node="n3"),
        claim("c1", request),
        client=client,
    )
    r = _one(core, with_claims("p", "c1"))
    # Both nodes fit; n3 gives the first choice (score 8 -> 100, n1 7 -> 87, weight 2).
    assert (r.outcome, r.node, r.feasible_nodes) == ("assumed", "n3", 2)
    assert _bind(core, binder, "default/p") is None
    results = client.calls[-1][2]["status"]["allocation"]["devices"]["results"]
    assert [(x["request"], x["device"]) for x in results] == [("gpu/large", "c")]


def test_a_match_attribute_constraint_keeps_devices_together() -> None:
    two = {"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": 2}}
    core, _ = _core(
        device_class(),
        slice_("n1-gpus", dev("a", numa=0), dev("b", numa=1), node="n1"),
        slice_("n2-gpus", dev("c", numa=0), dev("d", numa=1), dev("e", numa=1), node="n2"),
        claim("c1", two, constraints=[{"matchAttribute": f"{DRIVER}/numa"}]),
    )
    r = _one(core, with_claims("p", "c1"))
    assert (r.outcome, r.node, r.feasible_nodes) == ("assumed", "n2", 1)
    assert {d.device for d, _ in core.dra.in_flight["default/c1"].devices} == {"d", "e"}


def test_a_distinct_attribute_constraint_keeps_devices_apart() -> None:
    two = {"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": 2}}
    core, _ = _core(
        device_class(),
        slice_("n1-gpus", dev("a", numa=0), dev("b", numa=0), node="n1"),
        slice_("n2-gpus", dev("c", numa=0), dev("d", numa=0), dev("e", numa=1), node="n2"),
        claim("c1", two, constraints=[{"distinctAttribute": f"{DRIVER}/numa"}]),
    )
    r = _one(core, with_claims("p", "c1"))
    assert (r.outcome, r.node, r.feasible_nodes) == ("assumed", "n2", 1)
    assert {d.device for d, _ in core.dra.in_flight["default/c1"].devices} == {"c", "e"}


def test_all_mode_takes_every_matching_device_and_needs_a_complete_pool() -> None:
    every = {"name": "gpu", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}}
    core, _ = _core(
        device_class(),
        slice_("n2-gpus", dev("b"), dev("c"), node="n2"),
        slice_("n3-gpus", node="n3"),  # a pool without devices: "All" of nothing fails
        claim("c1", every),
    )
    r = _one(core, with_claims("p", "c1"))
    assert (r.outcome, r.node, r.feasible_nodes) == ("assumed", "n2", 1)
    assert {d.device for d, _ in core.dra.in_flight["default/c1"].devices} == {"b", "c"}
    # A pool whose slices are not all there yet: "All" cannot be answered (an error).
    core, _ = _core(
        device_class(),
        slice_("n1-a", dev("a"), node="n1", pool="p1", count=2),
        claim("c1", every),
    )
    r = _one(core, with_claims("p", "c1"))
    assert r.outcome == "error"
    assert (
        "asks for all devices, but resource pool gpu.example.com/p1 is currently being updated"
        in r.message
    )


def test_a_cel_error_is_an_error_that_names_the_class_and_the_device() -> None:
    core, _ = _core(
        device_class(expr=f'device.attributes["{DRIVER}"].missing == 1'),
        slice_("n2-gpus", dev("gpu-0"), node="n2"),
        claim("c1"),
    )
    r = _one(core, with_claims("p", "c1"))
    assert r.outcome == "error"
    assert (
        f"class gpu: selector #0 on device {DRIVER}/n2/gpu-0: "
        "CEL runtime error: no such key: missing" in r.message
    )


def test_an_untolerated_device_taint_rules_the_device_out() -> None:
    taint = [{"key": "broken", "effect": "NoSchedule"}]
    tolerating = {
        "name": "gpu",
        "exactly": {
            "deviceClassName": "gpu",
            "tolerations": [{"key": "broken", "operator": "Exists"}],
        },
    }
    core, _ = _core(
        device_class(),
        slice_("n2-gpus", dev("gpu-0", taints=taint), node="n2"),
        claim("c1"),
        claim("c2", tolerating),
    )
    assert _one(core, with_claims("p", "c1")).outcome == "unschedulable"
    assert _one(core, with_claims("q", "c2")).node == "n2"


def test_admin_access_may_take_a_device_in_use() -> None:
    admin = {"name": "gpu", "exactly": {"deviceClassName": "gpu", "adminAccess": True}}
    core, _ = _core(*GPUS, claim("c1"), claim("c2", admin))
    assert _one(core, with_claims("p", "c1")).node == "n2"
    assert _one(core, with_claims("q", "c2")).node == "n2"


def test_a_shared_slice_s_selector_is_the_allocation_s() -> None:
    sel = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}
        ]
    }
    client = FakeClient(claim("c1"))
    core, binder = _core(
        device_class(), slice_("net", dev("x"), selector=sel), claim("c1"), client=client
    )
    r = _one(core, with_claims("p", "c1"))
    assert (r.node, r.feasible_nodes) == ("n3", 1)
    assert _bind(core, binder, "default/p") is None
    assert client.calls[-1][2]["status"]["allocation"]["nodeSelector"] == sel


def test_a_missing_class_leaves_the_pod_waiting_for_one() -> None:
    core, _ = _core(slice_("n2-gpus", dev("gpu-0"), node="n2"), claim("c1"))
    r = _one(core, with_claims("p", "c1"))
    assert r.outcome == "unschedulable"
    assert "request gpu: device class gpu does not exist" in r.message
    assert core.queue.where("default/p") == UNSCHEDULABLE_Q
    core.on_dra_object_set(device_class_from_dict(device_class()))
    assert core.queue.where("default/p") != UNSCHEDULABLE_Q


def test_a_new_slice_or_a_deallocated_claim_brings_the_pod_back() -> None:
    allocated = {
        "allocation": {
            "devices": {
                "results": [{"request": "gpu", "driver": DRIVER, "pool": "n2", "device": "gpu-0"}]
            }
        },
        "reservedFor": [{"resource": "pods", "name": "x", "uid": "uid-x"}],
    }
    core, _ = _core(*GPUS, claim("held", status=allocated), claim("c1"))
    assert _one(core, with_claims("p", "c1")).outcome == "unschedulable"
    core.on_dra_object_set(resource_claim_from_dict(claim("held", rv=9)))  # deallocated
    assert core.queue.where("default/p") != UNSCHEDULABLE_Q
    r = core.schedule_one()
    assert r is not None and r.node == "n2"


def test_an_unrelated_claim_change_leaves_the_pod_waiting() -> None:
    core, _ = _core(*GPUS, claim("c1"), claim("c2"))
    assert _one(core, with_claims("p", "c1")).outcome == "assumed"
    assert _one(core, with_claims("q", "c2")).outcome == "unschedulable"
    core.on_dra_object_set(resource_claim_from_dict(claim("c3")))
    assert core.queue.where("default/q") == UNSCHEDULABLE_Q


@pytest.mark.parametrize(
    ("obj", "where"),
    [
        (slice_("s", {"attributes": {}}, node="n1"), "ResourceSlice s: spec.devices[0].name"),
        (
            slice_("s", {"name": "d", "attributes": {"x": {"float": 1.5}}}, node="n1"),
            "ResourceSlice s: spec.devices[0].attributes[x]",
        ),
        (
            claim(
                "c", {"name": "r", "exactly": {"deviceClassName": "gpu", "allocationMode": "Some"}}
            ),
            "ResourceClaim default/c: spec.devices.requests[0].exactly.allocationMode",
        ),
        (
            {"metadata": {"name": "k"}, "spec": {"selectors": [{"cel": {}}]}},
            "DeviceClass k: spec.selectors[0].cel.expression",
        ),
    ],
)
def test_parsing_names_the_object_and_the_field(obj: dict[str, Any], where: str) -> None:
    parse = PARSE.get(obj.get("kind", "DeviceClass"), device_class_from_dict)
    with pytest.raises(ParseError) as e:
        parse(obj)
    assert str(e.value).startswith(where)


def _node_obj(name: str) -> dict[str, Any]:
    built: dict[str, Any] = (
        make_node(name)
        .alloc(cpu="4", memory="8Gi", pods=110)
        .label("kubernetes.io/hostname", name)
        .obj()
    )
    return built


def test_simulate_allocates_from_the_dump_s_slices_one_device_per_claim() -> None:
    objs = [
        _node_obj("n1"),
        _node_obj("n2"),
        *GPUS,
        claim("c1"),
        claim("c2"),
        with_claims("p", "c1").obj(),
        with_claims("q", "c2").obj(),
    ]
    docs = [Document("dump.yaml", i + 1, o) for i, o in enumerate(objs)]
    result = simulate(docs, SchedulerConfig())
    assert result.placements == {"default/p": "n2", "default/q": None}


def test_explain_names_the_nodes_without_a_free_device() -> None:
    objs = {
        "nodes": [_node_obj("n1"), _node_obj("n2")],
        "pods": [with_claims("p", "c1").obj()],
        "resourceclaims": [claim("c1")],
        "resourceslices": [GPUS[1]],
        "deviceclasses": [GPUS[0]],
    }
    e = explain("default/p", lambda kind: objs.get(kind, []), SchedulerConfig())
    assert {v.node: (v.fits, v.plugin, v.reasons) for v in e.nodes} == {
        "n1": (False, "DynamicResources", ("cannot allocate all claims",)),
        "n2": (True, "", ()),
    }


def test_a_device_taint_rule_taints_the_devices_it_selects_until_deleted() -> None:
    rule = {
        "kind": "DeviceTaintRule",
        "metadata": {"name": "maintenance"},
        "spec": {
            "deviceSelector": {"driver": DRIVER, "pool": "n2"},
            "taint": {"key": "maintenance", "effect": "NoExecute"},
        },
    }
    unselective = {
        "kind": "DeviceTaintRule",
        "metadata": {"name": "no-selector"},
        "spec": {"taint": {"key": "everything", "effect": "NoSchedule"}},
    }
    core, _ = _core(*GPUS, claim("c1"))
    core.on_dra_object_set(device_taint_rule_from_dict(unselective))  # applies to nothing
    core.on_dra_object_set(device_taint_rule_from_dict(rule))
    assert _one(core, with_claims("p", "c1")).outcome == "unschedulable"
    core.on_dra_object_delete(device_taint_rule_from_dict(rule))  # as a slice update
    assert core.queue.where("default/p") != UNSCHEDULABLE_Q
    core.clock.step(20)  # type: ignore[attr-defined]
    core.flush()
    r = core.schedule_one()
    assert r is not None and r.node == "n2"


def test_a_search_past_its_filter_timeout_is_an_error_naming_the_node() -> None:
    """Four devices per node, none sharing the attribute a claim of two asks to match:
    every pair is tried; with a deadline already past, the search stops."""
    two = {"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": 2}}
    core, _ = _core(
        device_class(),
        *(
            slice_(f"{n}-gpus", *(dev(f"d{i}", numa=i) for i in range(40)), node=n)
            for n in ("n1", "n2", "n3")
        ),
        claim("c1", two, constraints=[{"matchAttribute": f"{DRIVER}/numa"}]),
    )
    _plugin(core).filter_timeout = 1e-9
    r = _one(core, with_claims("p", "c1"))
    assert r.outcome == "error"
    assert "timed out trying to allocate devices" in r.message
    _plugin(core).filter_timeout = 0  # no limit: the whole search, which finds nothing
    core.clock.step(20)  # type: ignore[attr-defined]
    core.flush()
    r = core.schedule_one()
    assert r is not None and r.outcome == "unschedulable"


def test_dynamic_resources_args() -> None:
    from scheduler.config import ConfigError, parse_config

    def cfg(args: dict[str, Any]) -> SchedulerConfig:
        return parse_config(
            {"profiles": [{"pluginConfig": [{"name": "DynamicResources", "args": args}]}]}
        )

    assert SchedulerConfig().dynamic_resources.filter_timeout_seconds == 10.0
    assert cfg({"filterTimeout": "2s"}).dynamic_resources.filter_timeout_seconds == 2.0
    assert cfg({"filterTimeout": "0s"}).dynamic_resources.filter_timeout_seconds == 0.0
    assert SchedulerConfig().dynamic_resources.binding_timeout_seconds == 600.0
    assert cfg({"bindingTimeout": "10m"}).dynamic_resources.binding_timeout_seconds == 600.0
    with pytest.raises(ConfigError, match=r"args\.bindingTimeout: 500ms: must be at least 1 s"):
        cfg({"bindingTimeout": "500ms"})
    with pytest.raises(ConfigError, match=r"args\.filterTimeout: expected a duration"):
        cfg({"filterTimeout": 5})


def test_a_pod_waiting_for_a_claim_in_flight_is_tried_again_when_it_is_given_up() -> None:
    client = FakeClient(claim("shared"))
    client.fail["/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/shared"] = RuntimeError(
        "conflict"
    )
    core, binder = _core(*GPUS, claim("shared"), client=client)
    assert _one(core, with_claims("p", "shared")).node == "n2"  # Reserve holds the claim
    r = _one(core, with_claims("q", "shared"))
    assert r.outcome == "unschedulable"
    assert "resource claim default/shared is in the process of being allocated" in r.message
    assert core.queue.where("default/q") == UNSCHEDULABLE_Q
    failed = _bind(core, binder, "default/p")  # the finalizer's write fails
    assert failed is not None
    core.on_bind_result("default/p", binding_step_outcome(failed), failed.message())
    assert core.queue.where("default/q") != UNSCHEDULABLE_Q


def test_a_claim_written_before_a_failed_pre_bind_stays_as_the_api_server_answered() -> None:
    # c1's allocation is written, c2's write fails: the binding fails, and Unreserve must
    # take the pod out of c1's reservedFor, which needs c1 as written (not the informer's
    # older copy, without an allocation).
    client = FakeClient(claim("c1"), claim("c2"))
    client.fail["/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/c2/status"] = (
        RuntimeError("conflict")
    )
    core, binder = _core(
        device_class(),
        slice_("n2-gpus", dev("gpu-0"), dev("gpu-1"), node="n2"),
        claim("c1"),
        claim("c2"),
        client=client,
    )
    assert _one(core, with_claims("p", "c1", "c2")).node == "n2"
    failed = _bind(core, binder, "default/p")
    assert failed is not None and "claim default/c2: conflict" in failed.message()
    core.on_bind_result("default/p", binding_step_outcome(failed), failed.message())
    written = core.dra.claim("default/c1")
    assert written is not None and written.allocation is not None
    assert written.resource_version > 5
