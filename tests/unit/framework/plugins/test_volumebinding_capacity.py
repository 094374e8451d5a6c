"""VolumeBinding with CSIStorageCapacity (scheduler/framework/plugins/volumebinding.py): a
claim to provision needs, when its driver's CSIDriver says ``storageCapacity: true``, a
CSIStorageCapacity of its class whose node topology selects the node and whose
``maximumVolumeSize`` (else ``capacity``) holds it (upstream's hasEnoughCapacity); nodes
are scored by how much of that capacity the claims would use (StorageCapacityScoring);
the hints of CSIStorageCapacity, CSIDriver and CSINode events."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.framework.interface import QueueingHint
from scheduler.types import (
    CSIDriverInfo,
    CSINodeInfo,
    CSIStorageCapacityInfo,
    LabelSelector,
    ParseError,
    csi_driver_from_dict,
    csi_node_from_dict,
    csi_storage_capacity_from_dict,
)
from tests.unit.framework.plugins.test_volumebinding_delayed import (
    PARSE,
    _core,
    _one,
    _plugin,
    claim,
    klass,
    with_claims,
)

DRIVER = "example.com/csi"
NOT_ENOUGH = "node(s) did not have enough free storage"

PARSE.update(
    {
        "CSIDriver": csi_driver_from_dict,
        "CSIStorageCapacity": csi_storage_capacity_from_dict,
        "CSINode": csi_node_from_dict,
    }
)


def driver(capacity: bool = True) -> dict[str, Any]:
    return {
        "kind": "CSIDriver",
        "metadata": {"name": DRIVER},
        "spec": {"storageCapacity": capacity},
    }


def capacity(
    name: str,
    zone: str | None,
    size: str | None,
    *,
    largest: str | None = None,
    storage_class: str = "fast",
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "kind": "CSIStorageCapacity",
        "metadata": {"name": name, "namespace": "kube-system"},
        "storageClassName": storage_class,
    }
    if zone is not None:
        obj["nodeTopology"] = {"matchLabels": {"zone": zone}}
    if size is not None:
        obj["capacity"] = size
    if largest is not None:
        obj["maximumVolumeSize"] = largest
    return obj


def fast() -> dict[str, Any]:
    return klass("fast", provisioner=DRIVER)


def test_a_driver_that_publishes_capacity_provisions_only_where_there_is_room() -> None:
    # Zone a (n1, n2) has 5Gi, zone b (n3) 500Mi: a 1Gi claim fits zone a only.
    core, _, _ = _core(
        driver(),
        fast(),
        capacity("a", "a", "5Gi"),
        capacity("b", "b", "500Mi"),
        claim("data", storage_class="fast"),
    )
    r = _one(core, with_claims("p", "data"))
    assert (r.outcome, r.feasible_nodes) == ("assumed", 2)
    assert r.node in ("n1", "n2")


def test_no_room_anywhere_is_not_enough_free_storage() -> None:
    core, _, _ = _core(
        driver(),
        fast(),
        capacity("a", "a", "500Mi"),
        capacity("b", None, "100Gi"),  # no node topology: no node has access
        capacity("c", "b", "100Gi", storage_class="other"),  # another class
        claim("data", storage_class="fast"),
    )
    r = _one(core, with_claims("p", "data"))
    assert r.outcome == "unschedulable"
    assert r.message.startswith(f"0/3 nodes are available: 3 {NOT_ENOUGH}.")


def test_maximum_volume_size_is_preferred_to_capacity() -> None:
    core, _, _ = _core(
        driver(),
        fast(),
        capacity("a", "a", "100Gi", largest="512Mi"),  # lots left, but no volume over 512Mi
        capacity("b", "b", "1Gi"),
        claim("data", storage_class="fast"),
    )
    r = _one(core, with_claims("p", "data"))
    assert (r.outcome, r.node) == ("assumed", "n3")


def test_a_driver_that_does_not_publish_capacity_is_not_checked() -> None:
    for objs in ((driver(capacity=False),), ()):
        core, _, _ = _core(
            *objs, fast(), capacity("a", "a", "1Mi"), claim("d", storage_class="fast")
        )
        r = _one(core, with_claims("p", "d"))
        assert (r.outcome, r.feasible_nodes) == ("assumed", 3)


@pytest.mark.parametrize(
    ("a", "b", "winners"), [("2Gi", "10Gi", {"n3"}), ("10Gi", "2Gi", {"n1", "n2"})]
)
def test_nodes_are_scored_by_how_little_of_the_capacity_the_claims_use(
    a: str, b: str, winners: set[str]
) -> None:
    """StorageCapacityScoring for provisioned claims: the claim would use 1Gi of one
    zone's capacity; the default shape prefers the emptier (both ways round, so that a
    tie-breaker cannot pass the test)."""
    core, _, _ = _core(
        driver(),
        fast(),
        capacity("a", "a", a),
        capacity("b", "b", b),
        claim("data", storage_class="fast"),
    )
    r = _one(core, with_claims("p", "data"))
    assert (r.outcome, r.feasible_nodes) == ("assumed", 3)
    assert r.node in winners


@pytest.mark.parametrize(
    ("a", "b", "winners"), [("2Gi", "3Gi", {"n3"}), ("3Gi", "2Gi", {"n1", "n2"})]
)
def test_two_claims_of_one_class_share_its_capacity_on_the_node(
    a: str, b: str, winners: set[str]
) -> None:
    """Both claims' requests count against the class's capacity on the node (upstream
    sets the capacity once per class rather than adding it up per claim): 2 x 1Gi fill a
    2Gi capacity (score 0) and two thirds of a 3Gi one (score 3)."""
    core, _, _ = _core(
        driver(),
        fast(),
        capacity("a", "a", a),
        capacity("b", "b", b),
        claim("x", storage_class="fast"),
        claim("y", storage_class="fast"),
    )
    r = _one(core, with_claims("p", "x", "y"))
    assert r.outcome == "assumed"
    assert r.node in winners


def test_hints() -> None:
    core, _, _ = _core(
        driver(), fast(), capacity("a", "a", "500Mi"), claim("data", storage_class="fast")
    )
    plugin = _plugin(core)
    hints = {(r.event.resource, r.event.action): r.hint for r in plugin.events_to_register()}
    pod = with_claims("p", "data").info()
    small = CSIStorageCapacityInfo("ns", "c", "fast", LabelSelector(), 10, None)
    larger = CSIStorageCapacityInfo("ns", "c", "fast", LabelSelector(), 20, None)
    limited = CSIStorageCapacityInfo("ns", "c", "fast", LabelSelector(), 20, 5)
    cap_update = hints[("CSIStorageCapacity", "Update")]
    assert cap_update is not None
    assert cap_update(pod, small, larger) == QueueingHint.QUEUE
    assert cap_update(pod, larger, small) == QueueingHint.SKIP
    assert cap_update(pod, larger, limited) == QueueingHint.SKIP
    cap_add = hints[("CSIStorageCapacity", "Add")]
    assert cap_add is not None and cap_add(pod, None, small) == QueueingHint.QUEUE
    drv = hints[("CSIDriver", "Update")]
    assert drv is not None
    on, off = CSIDriverInfo(DRIVER, storage_capacity=True), CSIDriverInfo(DRIVER)
    assert drv(pod, on, off) == QueueingHint.QUEUE
    assert drv(pod, off, on) == QueueingHint.SKIP
    node = hints[("CSINode", "Update")]
    assert node is not None
    assert node(pod, CSINodeInfo("n1"), CSINodeInfo("n1", {"d": 3})) == QueueingHint.SKIP
    migrated = CSINodeInfo("n1", migrated_plugins="kubernetes.io/aws-ebs")
    assert node(pod, CSINodeInfo("n1"), migrated) == QueueingHint.QUEUE


def test_a_raised_capacity_brings_the_pod_back() -> None:
    core, _, _ = _core(
        driver(), fast(), capacity("a", "a", "500Mi"), claim("data", storage_class="fast")
    )
    assert _one(core, with_claims("p", "data")).outcome == "unschedulable"
    core.on_volume_object_set(csi_storage_capacity_from_dict(capacity("a", "a", "5Gi")))
    core.clock.step(20)  # type: ignore[attr-defined]
    core.flush()
    r = core.schedule_one()
    assert r is not None and r.outcome == "assumed" and r.node in ("n1", "n2")


def test_parsing_names_the_object_and_the_field() -> None:
    obj = capacity("a", "a", "lots")
    try:
        csi_storage_capacity_from_dict(obj)
    except ParseError as e:
        assert "CSIStorageCapacity kube-system/a" in str(e) and "capacity" in str(e)
    else:
        raise AssertionError("a bad capacity was accepted")
    got = csi_storage_capacity_from_dict(capacity("a", "a", "1Ki", largest="512"))
    assert (got.key, got.storage_class, got.capacity_nanos, got.volume_limit) == (
        "kube-system/a",
        "fast",
        1024 * 10**9,
        512 * 10**9,
    )
    assert csi_driver_from_dict(driver()).storage_capacity
