"""VolumeRestrictions (scheduler/framework/plugins/volumerestrictions.py), driven through
SchedulerCore: ReadWriteOncePod claims used by one pod at a time (preemption may free one)
and inline disks kept apart on a node; messages upstream's (volume_restrictions.go)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from scheduler.backend.cache.cache import Cache
from scheduler.clock import FakeClock
from scheduler.config import SchedulerConfig
from scheduler.framework.interface import Code
from scheduler.schedule_one import SchedulerCore
from scheduler.types import InlineDisk, ParseError, pv_from_dict, pvc_from_dict
from tests.builders import make_node, make_pod
from tests.unit.fakes import RecordingBinder, RecordingRecorder

RWOP_MESSAGE = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode "
    "already in-use by another pod"
)


def claim(name: str, mode: str = "ReadWriteOncePod") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": name,
            "namespace": "default",
            "annotations": {"pv.kubernetes.io/bind-completed": "yes"},
        },
        "spec": {"accessModes": [mode], "volumeName": f"pv-{name}", "storageClassName": ""},
    }


def _core(*claims: dict[str, Any]) -> SchedulerCore:
    core = SchedulerCore(
        SchedulerConfig(), FakeClock(), RecordingBinder(), RecordingRecorder(), rng=random.Random(0)
    )
    for name in ("n1", "n2", "n3"):
        core.on_node_add(make_node(name).alloc(cpu="4", memory="8Gi", pods=110).record())
    for c in claims:
        core.on_volume_object_set(pvc_from_dict(c))
        volume = {"metadata": {"name": c["spec"]["volumeName"]}, "spec": {}}
        core.on_volume_object_set(pv_from_dict(volume))
    return core


def using(name: str, *claims: str) -> Any:
    vols = [
        {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)
    ]
    return make_pod(name).req(cpu="1").spec_field("volumes", vols)


def with_disk(name: str, source: dict[str, Any]) -> Any:
    return make_pod(name).req(cpu="1").spec_field("volumes", [{"name": "d", **source}])


def _one(core: SchedulerCore, pod: Any) -> Any:
    core.on_pod_add(pod.info())
    r = core.schedule_one()
    assert r is not None
    return r


def test_a_read_write_once_pod_claim_serves_one_pod_at_a_time() -> None:
    core = _core(claim("solo"))
    core.on_pod_add(using("first", "solo").node("n1").info())
    r = _one(core, using("second", "solo"))
    assert r.outcome == "unschedulable"
    assert r.message.startswith(f"0/3 nodes are available: 3 {RWOP_MESSAGE}.")
    # Unschedulable, not unresolvable: preemption may free the claim.
    assert {st.code for st in r.node_statuses.values()} == {Code.UNSCHEDULABLE}
    # The user goes: the deletion is the hint that brings the pod back.
    core.on_pod_delete(using("first", "solo").node("n1").info())
    core.clock.step(20)  # type: ignore[attr-defined]
    core.flush()
    r = core.schedule_one()
    assert r is not None and r.outcome == "assumed"


def test_an_assumed_user_counts_too_and_other_access_modes_share() -> None:
    core = _core(claim("solo"), claim("shared", "ReadWriteOnce"))
    assert _one(core, using("a", "solo", "shared")).outcome == "assumed"
    assert _one(core, using("b", "shared")).outcome == "assumed"
    assert _one(core, using("c", "solo")).outcome == "unschedulable"


def test_a_higher_priority_pod_preempts_the_claim_s_user() -> None:
    """The PreFilter extensions: the dry run that removes the user from its node frees the
    claim there, so that node is the candidate."""
    core = _core(claim("solo"))
    core.on_pod_add(using("low", "solo").priority(1).node("n2").info())
    r = _one(core, using("high", "solo").priority(1000))
    assert r.outcome == "preempting"
    assert r.nominated_node == "n2"
    assert [v.name for v in r.victims] == ["low"]


def test_a_missing_claim_is_named_by_this_plugin_first() -> None:
    core = _core()
    r = _one(core, using("p", "nope"))
    assert r.message.startswith('0/3 nodes are available: persistentvolumeclaim "nope" not found.')
    assert {st.plugin for st in r.node_statuses.values()} == {"VolumeRestrictions"}


@pytest.mark.parametrize(
    ("mine", "theirs", "conflict"),
    [
        pytest.param(
            {"gcePersistentDisk": {"pdName": "d1"}},
            {"gcePersistentDisk": {"pdName": "d1"}},
            True,
            id="gce",
        ),
        pytest.param(
            {"gcePersistentDisk": {"pdName": "d1", "readOnly": True}},
            {"gcePersistentDisk": {"pdName": "d1", "readOnly": True}},
            False,
            id="gce both read-only",
        ),
        pytest.param(
            {"gcePersistentDisk": {"pdName": "d1"}},
            {"gcePersistentDisk": {"pdName": "d2"}},
            False,
            id="gce other disk",
        ),
        pytest.param(
            {"awsElasticBlockStore": {"volumeID": "v", "readOnly": True}},
            {"awsElasticBlockStore": {"volumeID": "v", "readOnly": True}},
            True,
            id="ebs even read-only",
        ),
        pytest.param(
            {"iscsi": {"iqn": "q", "targetPortal": "t", "lun": 0}},
            {"iscsi": {"iqn": "q", "targetPortal": "t", "lun": 0}},
            True,
            id="iscsi",
        ),
        pytest.param(
            {"rbd": {"monitors": ["m1", "m2"], "image": "i"}},
            {"rbd": {"monitors": ["m2"], "image": "i", "pool": "rbd"}},
            True,
            id="rbd common monitor",
        ),
        pytest.param(
            {"rbd": {"monitors": ["m1"], "image": "i"}},
            {"rbd": {"monitors": ["m2"], "image": "i"}},
            False,
            id="rbd no common monitor",
        ),
    ],
)
def test_inline_disks_are_kept_apart_on_a_node(
    mine: dict[str, Any], theirs: dict[str, Any], conflict: bool
) -> None:
    core = _core()
    core.on_pod_add(with_disk("there", theirs).node("n1").info())
    only_n1 = {"key": "metadata.name", "operator": "In", "values": ["n1"]}
    required = {"nodeSelectorTerms": [{"matchFields": [only_n1]}]}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
    r = _one(core, with_disk("p", mine).affinity(affinity))
    if conflict:
        assert r.message.startswith("0/3 nodes are available: 1 node(s) had no available disk,")
    else:
        assert (r.outcome, r.node) == ("assumed", "n1")


def test_the_cache_counts_a_claim_s_users() -> None:
    cache = Cache()
    cache.add_node(make_node("n1").record())
    pod = using("p", "c", "c").node("n1").info()  # two volumes, one claim: one user
    cache.add_pod(pod)
    assert cache.claim_in_use("default/c")
    assumed = cache.assume_pod(using("q", "c").info(), "n1")
    cache.remove_pod(pod.key)
    assert cache.claim_in_use("default/c")
    cache.forget_pod(assumed.key)
    assert not cache.claim_in_use("default/c")


def test_an_inline_disk_of_the_wrong_shape_names_the_field() -> None:
    with pytest.raises(ParseError, match=r"spec\.volumes\[0\]\.rbd\.monitors"):
        with_disk("p", {"rbd": {"monitors": "m1", "image": "i"}}).info()
    assert with_disk("p", {"rbd": {"monitors": ["m"], "image": "i"}}).info().disks == (
        InlineDisk("rbd", "rbd/i", False, frozenset({"m"})),
    )
