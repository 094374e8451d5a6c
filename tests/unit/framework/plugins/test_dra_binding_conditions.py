"""DynamicResources with device binding conditions (upstream's DRADeviceBindingConditions,
beta and on in v1.37): the conditions are copied into the allocation, PreBind waits until
the claim's status says they are all True, fails on a failure condition or after
``bindingTimeout``, and the next attempt finds such a claim unavailable (PostFilter
deallocates it)."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from scheduler.draapi import resource_claim_from_dict, resource_slice_from_dict
from scheduler.metrics import Metrics
from scheduler.schedule_one import binding_step_outcome
from scheduler.types import ParseError
from tests.unit.framework.plugins.test_dynamicresources import (
    DRIVER,
    FakeClient,
    _core,
    _one,
    _plugin,
    claim,
    device_class,
    slice_,
    with_claims,
)

ATTACHABLE = {
    "name": "fabric-0",
    "bindingConditions": ["attached"],
    "bindingFailureConditions": ["attach-failed"],
    "bindsToNode": True,
}
# A device of the fabric, reachable from every node, attached to the chosen one by a
# controller that reports it in the claim's status.
FABRIC = (device_class(), slice_("fabric", ATTACHABLE, pool="fabric"))


def _reported(client: FakeClient, name: str, **conditions: str) -> dict[str, Any]:
    """The claim as written by PreBind, with the controller's conditions in its status."""
    obj = copy.deepcopy(client.objects[name])
    client.rv += 1
    obj["metadata"]["resourceVersion"] = str(client.rv)
    obj["status"]["devices"] = [
        {
            "driver": DRIVER,
            "pool": "fabric",
            "device": "fabric-0",
            "conditions": [
                {"type": t, "status": s, "reason": f"{t}-reason", "message": f"{t} said so"}
                for t, s in conditions.items()
            ],
        }
    ]
    return obj


def _binding(core: Any, binder: Any, key: str) -> Any:
    cycle = binder.cycles[key]
    assert cycle.begin() == (None, True)
    return asyncio.run(cycle.finish_async())


def test_pre_bind_waits_until_the_binding_conditions_are_true() -> None:
    client = FakeClient(claim("c1"))
    core, binder = _core(*FABRIC, claim("c1"), client=client)
    plugin = _plugin(core)
    polls: list[float] = []

    async def controller(seconds: float) -> None:
        # First poll: not yet attached; second: attached.
        polls.append(seconds)
        attached = "False" if len(polls) == 1 else "True"
        core.on_dra_object_set(resource_claim_from_dict(_reported(client, "c1", attached=attached)))

    plugin.sleep = controller
    plugin.metrics = metrics = Metrics()
    r = _one(core, with_claims("p", "c1"))
    assert r.outcome == "assumed"
    assert _binding(core, binder, "default/p") is None
    assert polls == [5.0, 5.0]  # upstream's 5 s between checks
    # Upstream's metrics: one allocation with binding conditions, and the wait, by driver.
    success = ("py-scheduler", DRIVER, "success")
    assert metrics.dra_binding_allocations.labels(*success).value == 1
    assert sum(metrics.dra_binding_wait_seconds.labels(*success).counts) == 1
    allocation = client.calls[-1][2]["status"]["allocation"]
    (result,) = allocation["devices"]["results"]
    assert result["bindingConditions"] == ["attached"]
    assert result["bindingFailureConditions"] == ["attach-failed"]
    # bindsToNode: the allocation is pinned to the node it was made for.
    assert allocation["nodeSelector"] == {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [r.node]}]}
        ]
    }
    assert allocation["allocationTimestamp"] == "1970-01-12T13:46:40Z"


def test_a_failure_condition_fails_the_binding_and_the_claim_is_deallocated_next() -> None:
    client = FakeClient(claim("c1"))
    core, binder = _core(*FABRIC, claim("c1"), client=client)
    plugin = _plugin(core)

    async def controller(seconds: float) -> None:
        reported = _reported(client, "c1", **{"attach-failed": "True"})
        core.on_dra_object_set(resource_claim_from_dict(reported))

    plugin.sleep = controller
    plugin.metrics = metrics = Metrics()
    assert _one(core, with_claims("p", "c1")).outcome == "assumed"
    failed = _binding(core, binder, "default/p")
    assert failed is not None
    assert failed.message() == (
        "running PreBind plugin DynamicResources: device binding failed: claim=c1, "
        'reason=attach-failed-reason, message="attach-failed said so"'
    )
    assert metrics.dra_binding_allocations.labels("py-scheduler", DRIVER, "failure").value == 1
    core.on_bind_result("default/p", binding_step_outcome(failed), failed.message())
    # The claim stays allocated (the API server has it), its binding failed: available on
    # no node, and PostFilter asks for its deallocation.
    core.clock.step(20)  # past the pod's backoff
    core.flush()

    async def attempt() -> Any:
        out = core.schedule_one()
        await asyncio.sleep(0)  # PostFilter's deallocation is sent in the background
        return out

    r = asyncio.run(attempt())
    assert r is not None and r.outcome == "unschedulable"
    assert "resourceclaim not available on the node" in r.message
    deallocation = client.calls[-1]
    assert deallocation[1].endswith("/resourceclaims/c1/status")
    assert deallocation[2]["status"]["allocation"] is None


def test_the_wait_ends_after_the_binding_timeout() -> None:
    client = FakeClient(claim("c1"))
    core, binder = _core(*FABRIC, claim("c1"), client=client)
    plugin = _plugin(core)
    plugin.binding_timeout = 0.05
    plugin.poll_interval = 0.01
    plugin.sleep = asyncio.sleep  # real time: nobody reports the condition
    assert _one(core, with_claims("p", "c1")).outcome == "assumed"
    failed = _binding(core, binder, "default/p")
    assert failed is not None
    assert failed.message().endswith("device binding timeout: context deadline exceeded")


def test_an_allocation_older_than_the_binding_timeout_is_available_nowhere() -> None:
    def waiting(stamp: str) -> dict[str, Any]:
        result = {"request": "gpu", "driver": DRIVER, "pool": "fabric", "device": "fabric-0"}
        result["bindingConditions"] = ["attached"]
        return {
            "allocation": {
                "devices": {"results": [result]},
                "allocationTimestamp": stamp,
            }
        }

    # 1e6 s after the epoch is the core's clock; 600 s is the default timeout.
    core, _ = _core(*FABRIC, claim("young", status=waiting("1970-01-12T13:40:00Z")))
    assert _one(core, with_claims("p", "young")).outcome == "assumed"
    core, _ = _core(*FABRIC, claim("old", status=waiting("1970-01-12T13:30:00Z")))
    r = _one(core, with_claims("q", "old"))
    assert r.outcome == "unschedulable"
    assert "resourceclaim not available on the node" in r.message


def test_a_binding_condition_must_be_named() -> None:
    bad = slice_("s", {"name": "d", "bindingConditions": ["attached", ""]}, node="n1")
    with pytest.raises(ParseError) as e:
        resource_slice_from_dict(bad)
    assert str(e.value).startswith("ResourceSlice s: spec.devices[0].bindingConditions[1]")


def test_devices_without_binding_conditions_are_preferred() -> None:
    # Pool "a-fabric" sorts first by name, but its device waits on a condition: the
    # device of pool "b-local" is chosen, as upstream's (pools with binding conditions last).
    core, _ = _core(
        device_class(),
        slice_("a", ATTACHABLE, pool="a-fabric"),
        slice_("b", {"name": "plain"}, pool="b-local"),
        claim("c1"),
    )
    assert _one(core, with_claims("p", "c1")).outcome == "assumed"
    assert {d.device for d, _ in core.dra.in_flight["default/c1"].devices} == {"plain"}
