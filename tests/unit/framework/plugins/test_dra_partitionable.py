"""DynamicResources with partitionable devices: devices that consume a pool's shared
counters, slices that select nodes per device (upstream's DRAPartitionableDevices, beta
and on in v1.37)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.draapi import (
    device_class_from_dict,
    resource_claim_from_dict,
    resource_slice_from_dict,
)
from scheduler.framework.plugins.draallocator import Search, gather_pools
from scheduler.types import ParseError
from tests.builders import make_node
from tests.unit.framework.plugins.test_dynamicresources import (
    DRIVER,
    FakeClient,
    _bind,
    _core,
    _one,
    claim,
    device_class,
    with_claims,
)


def part(name: str, uses: dict[str, dict[str, str]] | None = None, **place: Any) -> dict[str, Any]:
    """A device; ``uses``: counter set -> counter -> quantity it consumes; ``place``: its
    own nodeName/allNodes/nodeSelector (for a slice with perDeviceNodeSelection)."""
    out: dict[str, Any] = {"name": name, "attributes": {"profile": {"string": name}}, **place}
    if uses:
        out["consumesCounters"] = [
            {"counterSet": s, "counters": {c: {"value": v} for c, v in cs.items()}}
            for s, cs in uses.items()
        ]
    return out


def pslice(
    name: str,
    *devices: dict[str, Any],
    pool: str,
    count: int,
    node: str = "",
    counters: dict[str, dict[str, str]] | None = None,
    per_device: bool = False,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "driver": DRIVER,
        "pool": {"name": pool, "generation": 1, "resourceSliceCount": count},
    }
    if devices:
        spec["devices"] = list(devices)
    if counters:
        spec["sharedCounters"] = [
            {"name": s, "counters": {c: {"value": v} for c, v in cs.items()}}
            for s, cs in counters.items()
        ]
    if node:
        spec["nodeName"] = node
    elif per_device:
        spec["perDeviceNodeSelection"] = True
    else:
        spec["allNodes"] = True
    return {"kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


def wants(profile: str, count: int = 1) -> dict[str, Any]:
    return {
        "name": "gpu",
        "exactly": {
            "deviceClassName": "gpu",
            "count": count,
            "selectors": [
                {"cel": {"expression": f'device.attributes["{DRIVER}"].profile == "{profile}"'}}
            ],
        },
    }


ANY = {"name": "gpu", "exactly": {"deviceClassName": "gpu"}}
TWO = {"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": 2}}
# One GPU of 40Gi on n2, offered whole or as two halves (a MIG-like layout): the counters
# in a slice of their own, the devices in another.
GPU_LAYOUT = (
    device_class(),
    pslice("n2-counters", pool="n2", count=2, node="n2", counters={"gpu-0": {"mem": "40Gi"}}),
    pslice(
        "n2-gpus",
        part("full", {"gpu-0": {"mem": "40Gi"}}),
        part("half-a", {"gpu-0": {"mem": "20Gi"}}),
        part("half-b", {"gpu-0": {"mem": "20Gi"}}),
        pool="n2",
        count=2,
        node="n2",
    ),
)


def _held(core: Any, key: str) -> set[str]:
    return {d.device for d, _ in core.dra.in_flight[key].devices}


def test_devices_that_share_counters_are_not_given_beyond_them() -> None:
    core, _ = _core(
        *GPU_LAYOUT, claim("c1", wants("half-a")), claim("c2", wants("full")), claim("c3", ANY)
    )
    assert _one(core, with_claims("p", "c1")).node == "n2"
    # "full" is free, but half of the GPU's memory is taken.
    r = _one(core, with_claims("q", "c2"))
    assert r.outcome == "unschedulable"
    assert "cannot allocate all claims" in r.message
    # Any device: "full" does not fit, "half-a" is in use, "half-b" does.
    assert _one(core, with_claims("r", "c3")).node == "n2"
    assert _held(core, "default/c3") == {"half-b"}


def test_the_search_backtracks_out_of_a_device_that_takes_every_counter() -> None:
    core, _ = _core(*GPU_LAYOUT, claim("c1", TWO))
    assert _one(core, with_claims("p", "c1")).node == "n2"
    assert _held(core, "default/c1") == {"half-a", "half-b"}


def test_devices_in_use_on_other_nodes_consume_the_pool_s_counters() -> None:
    # A fabric with one link, usable from n1 or from n2: each node's device in a slice of
    # its own, the counter in a third. The pool is incomplete on either node alone.
    fabric = (
        device_class(),
        pslice("links", pool="fabric", count=3, counters={"fabric": {"links": "1"}}),
        pslice("n1-port", part("a", {"fabric": {"links": "1"}}), pool="fabric", count=3, node="n1"),
        pslice("n2-port", part("b", {"fabric": {"links": "1"}}), pool="fabric", count=3, node="n2"),
    )
    client = FakeClient(claim("c1", wants("a")))
    core, binder = _core(*fabric, claim("c1", wants("a")), claim("c2", ANY), client=client)
    assert _one(core, with_claims("p", "c1")).node == "n1"
    assert _bind(core, binder, "default/p") is None
    assert client.calls[-1][2]["status"]["allocation"]["nodeSelector"] == {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
        ]
    }
    r = _one(core, with_claims("q", "c2"))
    assert (r.outcome, r.feasible_nodes) == ("unschedulable", 0)


def test_a_device_s_own_node_selection_places_the_pod_and_the_allocation() -> None:
    zone_b = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}
        ]
    }
    devices = pslice(
        "per-device",
        part("on-n1", nodeName="n1"),
        part("in-b", nodeSelector=zone_b),
        part("anywhere", allNodes=True),
        pool="mixed",
        count=1,
        per_device=True,
    )
    client = FakeClient(claim("c1", wants("in-b")), claim("c2", wants("anywhere")))
    core, binder = _core(
        device_class(),
        devices,
        claim("c1", wants("in-b")),
        claim("c2", wants("anywhere")),
        claim("c3", wants("on-n1")),
        client=client,
    )
    r = _one(core, with_claims("p", "c1"))
    assert (r.node, r.feasible_nodes) == ("n3", 1)
    assert _bind(core, binder, "default/p") is None
    assert client.calls[-1][2]["status"]["allocation"]["nodeSelector"] == zone_b
    assert _one(core, with_claims("q", "c2")).feasible_nodes == 3
    assert _bind(core, binder, "default/q") is None
    assert "nodeSelector" not in client.calls[-1][2]["status"]["allocation"]
    r = _one(core, with_claims("r", "c3"))
    assert (r.node, r.feasible_nodes) == ("n1", 1)


@pytest.mark.parametrize(
    ("counters", "uses", "why"),
    [
        ({"gpu-0": {"mem": "40Gi"}}, {"gpu-1": {"mem": "1"}}, "counter set gpu-1 not found"),
        ({"gpu-0": {"mem": "40Gi"}}, {"gpu-0": {"sm": "1"}}, "counter sm not found"),
    ],
)
def test_a_device_that_consumes_a_missing_counter_makes_its_pool_invalid(
    counters: dict[str, dict[str, str]], uses: dict[str, dict[str, str]], why: str
) -> None:
    core, _ = _core(
        device_class(),
        pslice("c", pool="p", count=2, node="n2", counters=counters),
        pslice("d", part("x", uses), pool="p", count=2, node="n2"),
        claim("c1"),
    )
    r = _one(core, with_claims("p", "c1"))
    assert r.outcome == "unschedulable"
    assert "invalid resource pools were encountered" in r.message
    pools = core.dra.node_pools(core.snapshot.get("n2"))  # type: ignore[arg-type]
    assert why in pools[0].invalid


def test_an_overdrawn_counter_closes_its_whole_pool_as_upstream_s() -> None:
    # Two allocated devices take 2 of set "a"'s 1 (the slice shrank after they were
    # allocated): no device that consumes counters of this pool is given, even from "b".
    def allocated(device: str) -> dict[str, Any]:
        results = [{"request": "gpu", "driver": DRIVER, "pool": "p", "device": device}]
        return {"allocation": {"devices": {"results": results}}}

    core, _ = _core(
        device_class(),
        pslice("c", pool="p", count=2, node="n2", counters={"a": {"n": "1"}, "b": {"n": "1"}}),
        pslice(
            "d",
            part("x", {"a": {"n": "1"}}),
            part("y", {"a": {"n": "1"}}),
            part("z", {"b": {"n": "1"}}),
            pool="p",
            count=2,
            node="n2",
        ),
        claim("held-x", status=allocated("x")),
        claim("held-y", status=allocated("y")),
        claim("c1", wants("z")),
    )
    assert _one(core, with_claims("p", "c1")).outcome == "unschedulable"


@pytest.mark.parametrize(
    ("spec", "where"),
    [
        (
            {"sharedCounters": [{"name": "g", "counters": {"mem": {"value": "lots"}}}]},
            "ResourceSlice s: spec.sharedCounters[0].counters[mem].value",
        ),
        ({"sharedCounters": [{"counters": {}}]}, "ResourceSlice s: spec.sharedCounters[0].name"),
        (
            {"devices": [{"name": "d", "consumesCounters": [{"counters": {}}]}]},
            "ResourceSlice s: spec.devices[0].consumesCounters[0].counterSet",
        ),
        (
            {
                "perDeviceNodeSelection": True,
                "devices": [{"name": "d", "nodeSelector": {"nodeSelectorTerms": "x"}}],
            },
            "ResourceSlice s: spec.devices[0].nodeSelector.nodeSelectorTerms",
        ),
    ],
)
def test_parsing_names_the_counter_or_the_placement(spec: dict[str, Any], where: str) -> None:
    obj = {
        "kind": "ResourceSlice",
        "metadata": {"name": "s"},
        "spec": {"driver": DRIVER, "pool": {"name": "p"}, **spec},
    }
    with pytest.raises(ParseError) as e:
        resource_slice_from_dict(obj)
    assert str(e.value).startswith(where)


def test_a_request_s_devices_are_tried_as_a_set_not_in_every_order() -> None:
    # Ten devices on distinct NUMA nodes, two wanted on the same one: no answer. Each
    # pair is tried once (ten first devices, then C(10, 2) = 45 second ones), as upstream's
    # incubating allocator; in every order it would be 10 + 90.
    devices = [{"name": f"d{i}", "attributes": {"numa": {"int": i}}} for i in range(10)]
    slice_ = resource_slice_from_dict(pslice("n1-gpus", *devices, pool="n1", count=1, node="n1"))
    node = make_node("n1").record()
    pools = gather_pools([slice_], node, lambda driver, pool: [slice_])
    two = claim("c1", TWO, constraints=[{"matchAttribute": f"{DRIVER}/numa"}])
    search = Search(
        [resource_claim_from_dict(two)],
        pools,
        {"gpu": device_class_from_dict(device_class())},
        lambda did: False,
        lambda did: (),
        node,
    )
    search.prepare()
    tried = 0
    add = search._add

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal tried
        tried += 1
        return add(*args, **kwargs)

    search._add = counting  # type: ignore[method-assign]
    assert not search.one(0, 0, 0, 0, False)
    assert tried == 10 + 45


def test_counters_published_for_another_node_complete_the_pool() -> None:
    # As upstream's incubating allocator: n2's slice is relevant to n2 only, its pool is
    # incomplete there, and the rest of the pool (the counters, published for n1) is read.
    core, _ = _core(
        device_class(),
        pslice("n1-counters", pool="p", count=2, node="n1", counters={"g": {"mem": "1"}}),
        pslice("n2-gpus", part("x", {"g": {"mem": "1"}}), pool="p", count=2, node="n2"),
        claim("c1"),
        claim("c2"),
    )
    # Per-node counter slices are not every node's candidates (with one per node, each
    # node would gather every node's pools).
    assert [s.name for s in core.dra.candidates("n2")] == ["n2-gpus"]
    r = _one(core, with_claims("p", "c1"))
    assert (r.node, r.feasible_nodes) == ("n2", 1)
    # The only counter is taken: nothing else of the pool is given.
    assert _one(core, with_claims("q", "c2")).outcome == "unschedulable"
