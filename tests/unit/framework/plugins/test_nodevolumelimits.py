"""NodeVolumeLimits (scheduler/framework/plugins/nodevolumelimits.py): CSI attach limits per
node from CSINodes, counted over the pods on the node, their claims' volumes, their migrated
inline volumes and the node's VolumeAttachments; VolumeLimitScaling's installed-driver check;
the hints; and the in-tree translation (scheduler/csimigration.py). Messages upstream's
(nodevolumelimits/csi.go)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from scheduler.clock import FakeClock
from scheduler.config import SchedulerConfig, parse_config
from scheduler.csimigration import Translated, migratable, translate
from scheduler.decode import Document
from scheduler.framework.interface import Code, CycleState, QueueingHint
from scheduler.framework.plugins.nodevolumelimits import (
    ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,
    NodeVolumeLimits,
    _attachment_freed,
    _limit_raised,
    _pod_with_volumes_left,
)
from scheduler.framework.plugins.volumebinding import VolumeObjects
from scheduler.schedule_one import SchedulerCore
from scheduler.simulate import simulate
from scheduler.types import (
    CSIDriverInfo,
    CSINodeInfo,
    NodeInfo,
    ParseError,
    VolumeAttachmentInfo,
    csi_driver_from_dict,
    csi_node_from_dict,
    pv_from_dict,
    pvc_from_dict,
    storage_class_from_dict,
    volume_attachment_from_dict,
)
from tests.builders import make_node, make_pod
from tests.unit.fakes import RecordingBinder, RecordingRecorder

DRIVER = "csi.example.com"
EBS = "ebs.csi.aws.com"
GCE = "pd.csi.storage.gke.io"
ONLY_N1 = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
            ]
        }
    }
}


def csi_node(name: str, **drivers: int | None) -> dict[str, Any]:
    items = []
    for driver, count in drivers.items():
        item: dict[str, Any] = {"name": driver.replace("_", "."), "nodeID": name}
        if count is not None:
            item["allocatable"] = {"count": count}
        items.append(item)
    return {"kind": "CSINode", "metadata": {"name": name}, "spec": {"drivers": items}}


def claim(name: str, volume: str = "", storage_class: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if volume:
        meta["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
    return {
        "kind": "PersistentVolumeClaim",
        "metadata": meta,
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "volumeName": volume,
            "storageClassName": storage_class,
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }


def csi_volume(name: str, driver: str = DRIVER, handle: str = "") -> dict[str, Any]:
    return {
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "csi": {"driver": driver, "volumeHandle": handle or f"h-{name}"},
        },
    }


def _core(
    *objects: dict[str, Any],
    nodes: tuple[str, ...] = ("n1", "n2"),
    config: SchedulerConfig | None = None,
) -> SchedulerCore:
    core = SchedulerCore(
        config or SchedulerConfig(),
        FakeClock(),
        RecordingBinder(),
        RecordingRecorder(),
        rng=random.Random(0),
    )
    for name in nodes:
        core.on_node_add(make_node(name).alloc(cpu="8", memory="8Gi", pods=110).record())
    parse = {
        "CSINode": csi_node_from_dict,
        "CSIDriver": csi_driver_from_dict,
        "VolumeAttachment": volume_attachment_from_dict,
        "PersistentVolumeClaim": pvc_from_dict,
        "PersistentVolume": pv_from_dict,
        "StorageClass": storage_class_from_dict,
    }
    for obj in objects:
        core.on_volume_object_set(parse[obj["kind"]](obj))
    return core


def bound_claims(*names: str) -> list[dict[str, Any]]:
    """A claim bound to a CSI volume of DRIVER for each name."""
    out = []
    for n in names:
        out += [claim(n, f"pv-{n}"), csi_volume(f"pv-{n}")]
    return out


def using(name: str, *claims: str) -> Any:
    vols = [
        {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)
    ]
    return make_pod(name).req(cpu="1").spec_field("volumes", vols)


def inline(name: str, *sources: dict[str, Any]) -> Any:
    vols = [{"name": f"d{i}", **s} for i, s in enumerate(sources)]
    return make_pod(name).req(cpu="1").spec_field("volumes", vols)


def _one(core: SchedulerCore, pod: Any) -> Any:
    core.on_pod_add(pod.info())
    r = core.schedule_one()
    assert r is not None
    return r


# ------------------------------------------------------------------ through the core


def test_a_node_takes_no_more_volumes_of_a_driver_than_its_limit() -> None:
    core = _core(csi_node("n1", csi_example_com=2), *bound_claims("a", "b", "c", "d"))
    core.on_pod_add(using("there", "a").node("n1").info())
    r = _one(core, using("second", "b").affinity(ONLY_N1))
    assert (r.outcome, r.node) == ("assumed", "n1")
    r = _one(core, using("third", "c").affinity(ONLY_N1))
    assert r.outcome == "unschedulable"
    assert r.message.startswith(
        "0/2 nodes are available: 1 node(s) didn't satisfy plugin(s) [NodeAffinity], "
        f"1 {ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED}. "
    )
    assert r.node_statuses["n1"].code == Code.UNSCHEDULABLE
    assert r.node_statuses["n1"].plugin == "NodeVolumeLimits"
    # n2 has no CSINode: no limit there.
    r = _one(core, using("fourth", "c", "d"))
    assert (r.outcome, r.node) == ("assumed", "n2")


def test_a_volume_the_node_has_counts_once() -> None:
    core = _core(csi_node("n1", csi_example_com=1), *bound_claims("a", "b"))
    core.on_pod_add(using("there", "a").node("n1").info())
    # The same claim again (a ReadWriteOnce volume two pods on one node may share).
    assert (_one(core, using("again", "a").affinity(ONLY_N1)).node) == "n1"
    # Another volume of the same CSI volume handle counts as the same volume too.
    core.on_volume_object_set(pvc_from_dict(claim("alias", "pv-alias")))
    core.on_volume_object_set(pv_from_dict(csi_volume("pv-alias", handle="h-pv-a")))
    assert _one(core, using("alias", "alias").affinity(ONLY_N1)).node == "n1"
    assert _one(core, using("new", "b").affinity(ONLY_N1)).outcome == "unschedulable"


def test_other_drivers_and_drivers_without_a_limit_are_not_limited() -> None:
    other = [claim("o", "pv-o"), csi_volume("pv-o", driver="other.example.com")]
    core = _core(csi_node("n1", csi_example_com=1, other_example_com=None), *other)
    core.on_volume_object_set(pvc_from_dict(claim("a", "pv-a")))
    core.on_volume_object_set(pv_from_dict(csi_volume("pv-a")))
    core.on_pod_add(using("there", "a").node("n1").info())
    assert _one(core, using("other", "o").affinity(ONLY_N1)).node == "n1"


def test_volume_attachments_to_the_node_count_and_their_deletion_is_a_hint() -> None:
    attachment = {
        "kind": "VolumeAttachment",
        "metadata": {"name": "va-1"},
        "spec": {
            "attacher": DRIVER,
            "nodeName": "n1",
            "source": {"persistentVolumeName": "pv-left"},
        },
    }
    core = _core(
        csi_node("n1", csi_example_com=1),
        csi_volume("pv-left"),
        attachment,
        *bound_claims("b"),
    )
    r = _one(core, using("p", "b").affinity(ONLY_N1))
    assert r.outcome == "unschedulable"
    assert ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED in r.message
    core.on_volume_object_delete(volume_attachment_from_dict(attachment))
    core.clock.step(20)  # type: ignore[attr-defined]
    core.flush()
    r = core.schedule_one()
    assert r is not None and (r.outcome, r.node) == ("assumed", "n1")


def test_the_deletion_of_a_pod_with_volumes_brings_the_pod_back() -> None:
    core = _core(csi_node("n1", csi_example_com=1), *bound_claims("a", "b"))
    there = using("there", "a").node("n1").info()
    core.on_pod_add(there)
    assert _one(core, using("p", "b").affinity(ONLY_N1)).outcome == "unschedulable"
    core.on_pod_delete(there)
    core.clock.step(20)  # type: ignore[attr-defined]
    core.flush()
    r = core.schedule_one()
    assert r is not None and (r.outcome, r.node) == ("assumed", "n1")


def test_a_raised_limit_or_a_new_csinode_brings_the_pod_back() -> None:
    core = _core(csi_node("n1", csi_example_com=1), *bound_claims("a", "b"), nodes=("n1",))
    core.on_pod_add(using("there", "a").node("n1").info())
    assert _one(core, using("p", "b")).outcome == "unschedulable"
    core.on_volume_object_set(csi_node_from_dict(csi_node("n1", csi_example_com=1)))
    core.clock.step(20)  # type: ignore[attr-defined]
    core.flush()
    assert core.schedule_one() is None  # the same limit: not moved
    core.on_volume_object_set(csi_node_from_dict(csi_node("n1", csi_example_com=2)))
    core.clock.step(20)  # type: ignore[attr-defined]
    core.flush()
    r = core.schedule_one()
    assert r is not None and r.outcome == "assumed"


def test_a_higher_priority_pod_preempts_a_volume_user_on_a_full_node() -> None:
    """No PreFilter extensions: the dry run counts the pods left on the node."""
    core = _core(csi_node("n1", csi_example_com=1), *bound_claims("a", "b"), nodes=("n1",))
    core.on_pod_add(using("low", "a").priority(1).node("n1").info())
    r = _one(core, using("high", "b").priority(1000))
    assert r.outcome == "preempting"
    assert [v.name for v in r.victims] == ["low"]


def test_a_claim_without_its_volume_counts_as_a_new_volume_of_its_provisioner() -> None:
    wffc = {
        "kind": "StorageClass",
        "metadata": {"name": "fast"},
        "provisioner": DRIVER,
        "volumeBindingMode": "WaitForFirstConsumer",
    }
    core = _core(
        csi_node("n1", csi_example_com=1),
        wffc,
        claim("new-1", storage_class="fast"),
        claim("new-2", storage_class="fast"),
        nodes=("n1",),
    )
    r = _one(core, using("two", "new-1", "new-2"))
    assert r.outcome == "unschedulable"
    assert ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED in r.message
    assert _one(core, using("one", "new-1")).outcome == "assumed"


def test_migrated_inline_volumes_count_under_their_csi_driver() -> None:
    core = _core(csi_node("n1", ebs_csi_aws_com=1, pd_csi_storage_gke_io=1), nodes=("n1",))
    core.on_pod_add(
        inline("there", {"awsElasticBlockStore": {"volumeID": "vol-1"}}).node("n1").info()
    )
    r = _one(core, inline("p", {"awsElasticBlockStore": {"volumeID": "aws://z/vol-2"}}))
    assert r.outcome == "unschedulable"
    assert ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED in r.message
    # A GCE disk shared read-only: counted once.
    ro = {"gcePersistentDisk": {"pdName": "d", "readOnly": True}}
    assert _one(core, inline("g1", ro)).outcome == "assumed"
    assert _one(core, inline("g2", ro)).outcome == "assumed"


def test_migrated_inline_volumes_are_not_counted_without_a_csinode() -> None:
    core = _core(nodes=("n1",))
    for i in range(3):
        pod = inline(f"p{i}", {"awsElasticBlockStore": {"volumeID": f"vol-{i}"}})
        assert _one(core, pod).outcome == "assumed"


def test_an_inline_volume_that_does_not_translate_is_an_error() -> None:
    core = _core(csi_node("n1", ebs_csi_aws_com=3), nodes=("n1",))
    r = _one(core, inline("p", {"awsElasticBlockStore": {"volumeID": "aws://z/bad"}}))
    assert r.outcome == "error"
    assert r.message == (
        "running Filter plugin NodeVolumeLimits: converting volume(d0) from inline to csi: "
        "failed to translate Kubernetes ID to EBS Volume ID Invalid format for AWS volume "
        "(aws://z/bad)"
    )


def test_a_driver_that_must_be_installed_rules_out_nodes_without_it() -> None:
    driver = {
        "kind": "CSIDriver",
        "metadata": {"name": DRIVER},
        "spec": {"preventPodSchedulingIfMissing": True},
    }
    core = _core(
        driver,
        csi_node("n1", other_example_com=5),
        csi_node("n2", csi_example_com=5),
        *bound_claims("a"),
        nodes=("n1", "n2", "n3"),
    )
    r = _one(core, using("p", "a"))
    assert (r.outcome, r.node) == ("assumed", "n2")
    core = _core(
        driver, csi_node("n1", other_example_com=5), *bound_claims("a"), nodes=("n1", "n3")
    )
    r = _one(core, using("p", "a"))
    assert r.outcome == "unschedulable"
    msg = f"{DRIVER} CSI driver is not installed on the node"
    assert r.message == f"0/2 nodes are available: 2 {msg}. preemption: 0/2 nodes are " + (
        "available: 2 No preemption victims found for incoming pod."
    )


# ------------------------------------------------------------------ the plugin alone


def _plugin(*objects: Any) -> tuple[NodeVolumeLimits, NodeInfo]:
    vo = VolumeObjects()
    for o in objects:
        vo.set(o)
    ni = NodeInfo(make_node("n1").record())
    return NodeVolumeLimits(vo, prefix="p"), ni


def test_a_missing_claim_of_the_pod_is_unresolvable_of_a_pod_there_not_counted() -> None:
    pl, ni = _plugin(CSINodeInfo("n1", {DRIVER: 1}))
    st = pl.filter(CycleState(), using("p", "nope").info(), ni)
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.reasons == ('looking up PVC default/nope: persistentvolumeclaim "nope" not found',)
    ni.add_pod(using("there", "gone").node("n1").info())
    pl.objects.set(pvc_from_dict(claim("a", "pv-a")))
    pl.objects.set(pv_from_dict(csi_volume("pv-a")))
    assert pl.filter(CycleState(), using("p", "a").info(), ni).is_success()


def test_an_ephemeral_claim_not_owned_by_the_pod_is_an_error() -> None:
    pl, ni = _plugin(pvc_from_dict(claim("p-scratch", "pv-x")))
    pod = make_pod("p").spec_field("volumes", [{"name": "scratch", "ephemeral": {}}]).info()
    st = pl.filter(CycleState(), pod, ni)
    assert st.code == Code.ERROR
    assert st.reasons == (
        "PVC default/p-scratch was not created for pod default/p (pod is not owner)",
    )


def test_a_pod_without_claims_or_migratable_volumes_skips_the_plugin() -> None:
    pl, _ = _plugin()
    pod = inline("p", {"emptyDir": {}}, {"iscsi": {"iqn": "q", "targetPortal": "t", "lun": 0}})
    assert pl.pre_filter(CycleState(), pod.info(), None)[1].is_skip()  # type: ignore[arg-type]
    vsphere = inline("v", {"vsphereVolume": {"volumePath": "[ds] v.vmdk"}}).info()
    assert not pl.pre_filter(CycleState(), vsphere, None)[1].is_skip()  # type: ignore[arg-type]


def test_vsphere_and_azure_file_volumes_are_migratable_but_not_counted() -> None:
    pl, ni = _plugin(CSINodeInfo("n1", {"csi.vsphere.vmware.com": 0, "file.csi.azure.com": 0}))
    pod = inline(
        "p",
        {"vsphereVolume": {"volumePath": "[ds] v.vmdk"}},
        {"azureFile": {"secretName": "s", "shareName": "x"}},
    ).info()
    assert pl.filter(CycleState(), pod, ni).is_success()


def test_hints() -> None:
    pod = using("p", "a").info()
    old, new = CSINodeInfo("n1", {DRIVER: 1}), CSINodeInfo("n1", {DRIVER: 2})
    assert _limit_raised(pod, old, new) == QueueingHint.QUEUE
    assert _limit_raised(pod, new, old) == QueueingHint.SKIP
    assert _limit_raised(pod, old, CSINodeInfo("n1", {DRIVER: 1, "x": None})) == QueueingHint.SKIP
    assert _limit_raised(pod, old, CSINodeInfo("n1", {DRIVER: 1, "x": 1})) == QueueingHint.QUEUE
    there = using("q", "b").node("n1").info()
    assert _pod_with_volumes_left(pod, there, None) == QueueingHint.QUEUE
    assert _pod_with_volumes_left(pod, make_pod("q").node("n1").info(), None) == QueueingHint.SKIP
    assert _pod_with_volumes_left(pod, using("q", "b").info(), None) == QueueingHint.SKIP
    va = VolumeAttachmentInfo("va", "n1", EBS, "pv")
    assert _attachment_freed(pod, va, None) == QueueingHint.QUEUE
    ebs = inline("e", {"awsElasticBlockStore": {"volumeID": "vol-1"}}).info()
    gce = inline("g", {"gcePersistentDisk": {"pdName": "d"}}).info()
    assert _attachment_freed(ebs, va, None) == QueueingHint.QUEUE
    assert _attachment_freed(gce, va, None) == QueueingHint.SKIP
    eph = make_pod("x").spec_field("volumes", [{"name": "s", "ephemeral": {}}]).info()
    assert _attachment_freed(eph, va, None) == QueueingHint.SKIP


# ------------------------------------------------------------------ parsing, translation


def test_csinode_csidriver_and_volume_attachment_parse() -> None:
    node = csi_node_from_dict(csi_node("n1", csi_example_com=3, other_example_com=None))
    assert node == CSINodeInfo("n1", {DRIVER: 3, "other.example.com": None})
    assert node.limits() == {DRIVER: 3}
    bad = csi_node("n1", csi_example_com=3)
    bad["spec"]["drivers"][0]["allocatable"]["count"] = "three"
    with pytest.raises(ParseError, match=r"CSINode n1.*spec\.drivers\[0\]\.allocatable\.count"):
        csi_node_from_dict(bad)
    with pytest.raises(ParseError, match=r"CSIDriver <unnamed>.*metadata\.name"):
        csi_driver_from_dict({"metadata": {}})
    assert csi_driver_from_dict({"metadata": {"name": "d"}}) == CSIDriverInfo("d", False)
    inline_va = {
        "metadata": {"name": "va"},
        "spec": {"attacher": "a", "nodeName": "n", "source": {}},
    }
    assert volume_attachment_from_dict(inline_va) == VolumeAttachmentInfo("va", "n", "a", "")


def test_a_persistent_volume_keeps_its_csi_source_or_its_migration() -> None:
    assert pv_from_dict(csi_volume("v", handle="h")).csi == (DRIVER, "h")
    ebs = {
        "metadata": {"name": "e"},
        "spec": {"awsElasticBlockStore": {"volumeID": "aws://z/vol-9"}},
    }
    pv = pv_from_dict(ebs)
    assert (pv.csi, pv.migrated) == (None, Translated("kubernetes.io/aws-ebs", "vol-9"))
    gce = {
        "metadata": {"name": "g", "labels": {"topology.kubernetes.io/zone": "us-east1-b"}},
        "spec": {"gcePersistentDisk": {"pdName": "d"}},
    }
    assert pv_from_dict(gce).migrated == Translated(
        "kubernetes.io/gce-pd", "projects/UNSPECIFIED/zones/us-east1-b/disks/d"
    )
    with pytest.raises(ParseError, match=r"PersistentVolume e.*spec\.awsElasticBlockStore"):
        pv_from_dict({"metadata": {"name": "e"}, "spec": {"awsElasticBlockStore": "vol-1"}})


@pytest.mark.parametrize(
    ("source", "labels", "expected"),
    [
        (
            {"awsElasticBlockStore": {"volumeID": "vol-1"}},
            None,
            ("kubernetes.io/aws-ebs", "vol-1", ""),
        ),
        (
            {"awsElasticBlockStore": {"volumeID": "aws://us-east-1a/vol-1"}},
            None,
            ("kubernetes.io/aws-ebs", "vol-1", ""),
        ),
        (
            {"awsElasticBlockStore": {"volumeID": "aws://us-east-1a/x/y"}},
            None,
            (
                "kubernetes.io/aws-ebs",
                "",
                "failed to translate Kubernetes ID to EBS Volume ID Invalid format for AWS volume (aws://us-east-1a/x/y)",
            ),
        ),
        (
            {"gcePersistentDisk": {"pdName": "d"}},
            None,
            ("kubernetes.io/gce-pd", "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/d", ""),
        ),
        (
            {"gcePersistentDisk": {"pdName": "d"}},
            {"failure-domain.beta.kubernetes.io/zone": "us-east1-b__us-east1-c"},
            ("kubernetes.io/gce-pd", "projects/UNSPECIFIED/regions/us-east1/disks/d", ""),
        ),
        (
            {"gcePersistentDisk": {"pdName": "d"}},
            {"topology.kubernetes.io/zone": "us-east1-b__europe-west1-c"},
            (
                "kubernetes.io/gce-pd",
                "",
                "failed to get region from zones: multiple or no regions gotten from zones, "
                "got: map[europe-west1:{} us-east1:{}]",
            ),
        ),
        (
            {"azureDisk": {"diskURI": "/sub/d", "diskName": "d"}},
            None,
            ("kubernetes.io/azure-disk", "/sub/d", ""),
        ),
        (
            {"azureDisk": {"diskURI": "/sub/d", "kind": "managed"}},
            None,
            ("kubernetes.io/azure-disk", "/sub/d", ""),
        ),
        (
            {"azureDisk": {"diskURI": "/sub/d", "kind": "Shared"}},
            None,
            ("kubernetes.io/azure-disk", "", "kind(Shared) is not supported in csi migration"),
        ),
        ({"cinder": {"volumeID": "c1"}}, None, ("kubernetes.io/cinder", "c1", "")),
        ({"portworxVolume": {"volumeID": "px"}}, None, ("kubernetes.io/portworx-volume", "px", "")),
    ],
)
def test_translation(
    source: dict[str, Any], labels: dict[str, str] | None, expected: tuple[str, str, str]
) -> None:
    found = migratable(source)
    assert found is not None
    key, plugin = found
    assert translate(plugin, source[key], labels) == Translated(*expected)


def test_sources_that_do_not_migrate() -> None:
    assert migratable({"name": "x", "emptyDir": {}}) is None
    assert migratable({"iscsi": {"iqn": "q"}}) is None
    assert migratable({"csi": {"driver": DRIVER}}) is None


def test_simulate_reads_csinodes_and_volume_attachments_from_the_dump() -> None:
    """n1's limit of 2 is taken by its pod's volume and an attachment: the pending pod goes
    to n2, although n1 has more room (cpu) and would win the score."""
    attachment = {
        "kind": "VolumeAttachment",
        "metadata": {"name": "va"},
        "spec": {"attacher": DRIVER, "nodeName": "n1", "source": {"persistentVolumeName": "x"}},
    }
    objs = [
        make_node("n1").alloc(cpu="16", memory="32Gi", pods=110).obj(),
        make_node("n2").alloc(cpu="2", memory="2Gi", pods=110).obj(),
        csi_node("n1", csi_example_com=2),
        attachment,
        csi_volume("x"),
        *bound_claims("a", "b"),
        using("there", "a").node("n1").scheduler("default-scheduler").obj(),
        using("p", "b").scheduler("py-scheduler").obj(),
    ]
    docs = [Document("dump.yaml", i + 1, o) for i, o in enumerate(objs)]
    assert simulate(docs, SchedulerConfig()).placements["default/p"] == "n2"
    docs = [d for d in docs if d.obj is not attachment]
    assert simulate(docs, SchedulerConfig()).placements["default/p"] == "n1"


def test_the_plugin_is_in_the_default_filters_and_may_be_disabled() -> None:
    objs = (csi_node("n1", csi_example_com=0), *bound_claims("a"))
    assert _one(_core(*objs, nodes=("n1",)), using("p", "a")).outcome == "unschedulable"
    disabled = {"plugins": {"filter": {"disabled": [{"name": "NodeVolumeLimits"}]}}}
    config = parse_config({"profiles": [disabled]}, "sched.yaml")
    assert "NodeVolumeLimits" not in config.filters
    assert _one(_core(*objs, nodes=("n1",), config=config), using("p", "a")).outcome == "assumed"
