"""DynamicResources with consumable capacity (upstream's DRAConsumableCapacity, beta and
on in v1.37): requests for part of a device's capacity, rounded up to its request
policy, and devices with ``allowMultipleAllocations`` shared by several claims, each with
a share id and the capacity it takes."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from scheduler.draapi import CapacityPolicy, DeviceID, resource_slice_from_dict
from scheduler.framework.plugins.draallocator import consumed_capacity
from scheduler.quantity import parse_nanos
from scheduler.types import ParseError
from tests.unit.framework.plugins.test_dynamicresources import (
    DRIVER,
    FakeClient,
    _bind,
    _core,
    _one,
    claim,
    device_class,
    slice_,
    with_claims,
)


def nic(
    name: str = "nic-0",
    *,
    bandwidth: str = "10G",
    policy: dict[str, Any] | None = None,
    multi: bool = True,
    **extra: Any,
) -> dict[str, Any]:
    cap: dict[str, Any] = {"value": bandwidth}
    if policy is not None:
        cap["requestPolicy"] = policy
    out = {"name": name, "capacity": {"bandwidth": cap}, **extra}
    if multi:
        out["allowMultipleAllocations"] = True
    return out


def asks(bandwidth: str | None = None, **caps: str) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": "gpu"}
    wanted = dict(caps)
    if bandwidth is not None:
        wanted["bandwidth"] = bandwidth
    if wanted:
        exactly["capacity"] = {"requests": wanted}
    return {"name": "net", "exactly": exactly}


def Q(text: str) -> int:
    return parse_nanos(text)


NIC0 = DeviceID(DRIVER, "n2", "nic-0")


def test_a_shared_device_gives_each_claim_a_share_of_its_capacity() -> None:
    client = FakeClient(claim("c1", asks("4G")))
    core, binder = _core(
        device_class(),
        slice_("n2-nics", nic(), node="n2"),
        claim("c1", asks("4G")),
        claim("c2", asks("4G")),
        claim("c3", asks("4G")),
        client=client,
    )
    assert _one(core, with_claims("p", "c1")).node == "n2"
    assert _bind(core, binder, "default/p") is None
    (result,) = client.calls[-1][2]["status"]["allocation"]["devices"]["results"]
    assert uuid.UUID(result["shareID"])
    assert {k: Q(v) for k, v in result["consumedCapacity"].items()} == {"bandwidth": Q("4G")}
    # The second claim shares the device; the third would take it past 10G.
    assert _one(core, with_claims("q", "c2")).node == "n2"
    assert core.dra.shared(NIC0) == {"bandwidth": Q("8G")}
    assert not core.dra.in_use(NIC0)
    r = _one(core, with_claims("r", "c3"))
    assert r.outcome == "unschedulable"
    assert "cannot allocate all claims" in r.message


def test_a_share_that_asks_nothing_takes_the_whole_capacity_or_the_policy_s_default() -> None:
    core, _ = _core(
        device_class(),
        slice_("n2-nics", nic(), node="n2"),
        claim("c1", asks()),
        claim("c2", asks()),
    )
    assert _one(core, with_claims("p", "c1")).node == "n2"
    assert _one(core, with_claims("q", "c2")).outcome == "unschedulable"
    core, _ = _core(
        device_class(),
        slice_("n2-nics", nic(policy={"default": "5G"}), node="n2"),
        claim("c1", asks()),
        claim("c2", asks()),
    )
    assert _one(core, with_claims("p", "c1")).node == "n2"
    assert _one(core, with_claims("q", "c2")).node == "n2"
    assert core.dra.shared(NIC0) == {"bandwidth": Q("10G")}


def test_requests_are_rounded_up_to_the_request_policy() -> None:
    steps = CapacityPolicy(range_min=Q("1Gi"), range_step=Q("1Gi"), range_max=Q("8Gi"))
    assert consumed_capacity(Q("1.5Gi"), Q("10Gi"), steps) == Q("2Gi")
    assert consumed_capacity(Q("100Mi"), Q("10Gi"), steps) == Q("1Gi")  # up to the minimum
    assert consumed_capacity(None, Q("10Gi"), steps) == Q("10Gi")  # no default: everything
    values = CapacityPolicy(valid_values=(Q("1G"), Q("5G"), Q("10G")))
    assert consumed_capacity(Q("3G"), Q("10G"), values) == Q("5G")
    # Thousandths when the range's bounds allow them (DRAFractionalCapacityRange) ...
    milli = CapacityPolicy(range_min=Q("100m"), range_step=Q("250m"))
    assert consumed_capacity(Q("300m"), Q("4"), milli) == Q("350m")
    # ... else whole units, each bound rounded up (upstream's Value()).
    whole = CapacityPolicy(range_min=Q("1n"), range_step=Q("2"))
    assert consumed_capacity(Q("4"), Q("10"), whole) == Q("5")


def test_a_request_outside_the_policy_or_the_capacity_does_not_fit() -> None:
    policy = {"validRange": {"min": "1G", "step": "1G", "max": "8G"}}
    core, _ = _core(
        device_class(),
        slice_("n2-nics", nic(policy=policy), node="n2"),
        claim("too-much", asks("9G")),  # past the range's maximum
        claim("unknown", asks("1G", latency="1")),  # a capacity the device does not have
        claim("rounded", asks("2.5G")),
    )
    assert _one(core, with_claims("p", "too-much")).outcome == "unschedulable"
    assert _one(core, with_claims("q", "unknown")).outcome == "unschedulable"
    assert _one(core, with_claims("r", "rounded")).node == "n2"
    assert core.dra.shared(NIC0) == {"bandwidth": Q("3G")}


def test_a_device_not_shared_is_taken_whole_if_its_capacity_is_enough() -> None:
    core, _ = _core(
        device_class(),
        slice_("n1-nics", nic("small", bandwidth="1G", multi=False), node="n1"),
        slice_("n3-nics", nic("large", bandwidth="40G", multi=False), node="n3"),
        claim("c1", asks("10G")),
    )
    r = _one(core, with_claims("p", "c1"))
    assert (r.node, r.feasible_nodes) == ("n3", 1)
    assert core.dra.in_use(DeviceID(DRIVER, "n3", "large"))


def test_a_shared_device_s_counters_are_taken_once() -> None:
    counters = {
        "kind": "ResourceSlice",
        "metadata": {"name": "n2-counters"},
        "spec": {
            "driver": DRIVER,
            "nodeName": "n2",
            "pool": {"name": "n2", "generation": 1, "resourceSliceCount": 2},
            "sharedCounters": [{"name": "port", "counters": {"lanes": {"value": "1"}}}],
        },
    }
    uses = [{"counterSet": "port", "counters": {"lanes": {"value": "1"}}}]
    devices = slice_("n2-nics", nic(consumesCounters=uses), node="n2", count=2)
    core, _ = _core(
        device_class(), counters, devices, claim("c1", asks("4G")), claim("c2", asks("4G"))
    )
    assert _one(core, with_claims("p", "c1")).node == "n2"
    assert _one(core, with_claims("q", "c2")).node == "n2"


def test_shares_written_in_claims_count_and_a_selector_sees_allow_multiple() -> None:
    share = {
        "request": "net",
        "driver": DRIVER,
        "pool": "n2",
        "device": "nic-0",
        "shareID": str(uuid.uuid4()),
        "consumedCapacity": {"bandwidth": "7G"},
    }
    held = {"allocation": {"devices": {"results": [share]}}}
    multi_only = device_class(
        expr=f'device.driver == "{DRIVER}" && device.allowMultipleAllocations'
    )
    core, _ = _core(
        multi_only,
        slice_("n2-nics", nic(), node="n2"),
        slice_("n3-nics", nic(multi=False), node="n3"),  # never: not shared
        claim("held", status=held),
        claim("c1", asks("4G")),
        claim("c2", asks("3G")),
    )
    assert core.dra.shared(NIC0) == {"bandwidth": Q("7G")}
    assert _one(core, with_claims("p", "c1")).outcome == "unschedulable"
    r = _one(core, with_claims("q", "c2"))
    assert (r.node, r.feasible_nodes) == ("n2", 1)


def test_a_request_policy_names_its_field_when_it_is_bad() -> None:
    bad = slice_("s", nic(policy={"validRange": {"step": "1"}}), node="n1")
    with pytest.raises(ParseError) as e:
        resource_slice_from_dict(bad)
    assert str(e.value).startswith(
        "ResourceSlice s: spec.devices[0].capacity[bandwidth].requestPolicy.validRange.min"
    )
