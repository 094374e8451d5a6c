"""VolumeBinding for claims that wait for their first consumer (WaitForFirstConsumer):
choosing a volume or a provisioning node in Filter, assuming it in Reserve, writing it and
waiting for the PV controller in PreBind (upstream's binder.go), driven through
SchedulerCore with a fake API client."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from scheduler.clock import FakeClock
from scheduler.config import ConfigError, SchedulerConfig, parse_config
from scheduler.decode import Document
from scheduler.framework.interface import Code, CycleState
from scheduler.framework.plugins.volumebinding import VolumeBinding, VolumeObjects
from scheduler.metrics import Metrics
from scheduler.schedule_one import BindingCycle, SchedulerCore
from scheduler.simulate import simulate
from scheduler.types import (
    ParseError,
    PVCInfo,
    PVInfo,
    pv_from_dict,
    pvc_from_dict,
    storage_class_from_dict,
)
from tests.builders import make_node, make_pod
from tests.unit.fakes import RecordingBinder, RecordingRecorder


def claim(
    name: str,
    *,
    size: str = "1Gi",
    storage_class: str = "local",
    selected_node: str | None = None,
    volume: str = "",
    completed: bool = False,
    rv: int = 10,
    modes: tuple[str, ...] = ("ReadWriteOnce",),
    selector: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    annotations = {}
    if selected_node is not None:
        annotations["volume.kubernetes.io/selected-node"] = selected_node
    if completed:
        annotations["pv.kubernetes.io/bind-completed"] = "yes"
    spec: dict[str, Any] = {
        "accessModes": list(modes),
        "storageClassName": storage_class,
        "resources": {"requests": {"storage": size}},
    }
    if volume:
        spec["volumeName"] = volume
    if selector is not None:
        spec["selector"] = {"matchLabels": dict(selector)}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "resourceVersion": str(rv),
            "annotations": annotations,
        },
        "spec": spec,
    }


def volume(
    name: str,
    *,
    on_node: str | None = None,
    size: str = "1Gi",
    storage_class: str = "local",
    phase: str = "Available",
    claim_ref: tuple[str, str, str] | None = None,
    rv: int = 10,
    modes: tuple[str, ...] = ("ReadWriteOnce",),
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "capacity": {"storage": size},
        "accessModes": list(modes),
        "storageClassName": storage_class,
        "local": {"path": "/mnt/x"},
    }
    if on_node is not None:
        term = {"key": "kubernetes.io/hostname", "operator": "In", "values": [on_node]}
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [term]}]}}
    if claim_ref is not None:
        spec["claimRef"] = {"namespace": claim_ref[0], "name": claim_ref[1], "uid": claim_ref[2]}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "resourceVersion": str(rv), "labels": dict(labels or {})},
        "spec": spec,
        "status": {"phase": phase},
    }


def klass(
    name: str = "local",
    provisioner: str = "kubernetes.io/no-provisioner",
    zones: tuple[str, ...] | None = None,
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": "WaitForFirstConsumer",
    }
    if zones is not None:
        obj["allowedTopologies"] = [
            {"matchLabelExpressions": [{"key": "zone", "values": list(zones)}]}
        ]
    return obj


PARSE: dict[str, Callable[[dict[str, Any]], Any]] = {
    "PersistentVolumeClaim": pvc_from_dict,
    "PersistentVolume": pv_from_dict,
    "StorageClass": storage_class_from_dict,
}


class FakeClient:
    """Answers PATCHes with the object's next resourceVersion; ``fail`` makes one fail."""

    def __init__(self) -> None:
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
        self.rv += 1
        return {"metadata": {"resourceVersion": str(self.rv)}}


def _core(
    *objs: dict[str, Any],
    client: FakeClient | None = None,
    config: SchedulerConfig | None = None,
    metrics: Metrics | None = None,
) -> tuple[SchedulerCore, RecordingBinder, RecordingRecorder]:
    binder, recorder = RecordingBinder(), RecordingRecorder()
    core = SchedulerCore(
        config or SchedulerConfig(),
        FakeClock(),
        binder,
        recorder,
        rng=random.Random(0),
        api_client=client,
        observer=metrics,
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
        core.on_volume_object_set(PARSE[o["kind"]](o))
    return core, binder, recorder


def with_claims(name: str, *claims: str) -> Any:
    vols = [
        {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)
    ]
    return make_pod(name).req(cpu="1").spec_field("volumes", vols)


def _one(core: SchedulerCore, pod: Any) -> Any:
    core.on_pod_add(pod.info())
    r = core.schedule_one()
    assert r is not None
    return r


def _plugin(core: SchedulerCore) -> VolumeBinding:
    (p,) = [p for p in core.framework.pre_bind_plugins if isinstance(p, VolumeBinding)]
    return p


def test_a_claim_takes_the_available_volume_on_its_node() -> None:
    core, binder, _ = _core(claim("data"), klass(), volume("pv-3", on_node="n3"))
    r = _one(core, with_claims("p", "data"))
    assert (r.outcome, r.node, r.feasible_nodes) == ("assumed", "n3", 1)
    # Reserve assumed the volume's claimRef; the API objects are unchanged.
    assumed = core.volumes.volume("pv-3")
    assert assumed is not None and assumed.claim_ref == ("default", "data", "uid-data")
    assert assumed.bound_by_controller
    assert core.volumes.volumes["pv-3"].claim_ref is None
    cycle = binder.cycles["default/p"]
    assert cycle.pre_flight().is_success()  # the pod's nominatedNodeName is set first


def test_no_volume_and_no_provisioner_rules_every_node_out() -> None:
    core, _, _ = _core(claim("data"), klass(), volume("pv-3", on_node="n3", size="512Mi"))
    r = _one(core, with_claims("p", "data"))
    assert r.outcome == "unschedulable"
    assert r.message == (
        "0/3 nodes are available: 3 node(s) didn't find available persistent volumes to "
        "bind. preemption: 0/3 nodes are available: 3 Preemption is not helpful for "
        "scheduling."
    )


@pytest.mark.parametrize(
    "other",
    [
        pytest.param(volume("pv-x", on_node="n1", storage_class="other"), id="another class"),
        pytest.param(volume("pv-x", on_node="n1", size="512Mi"), id="too small"),
        pytest.param(volume("pv-x", on_node="n1", modes=("ReadOnlyMany",)), id="access modes"),
        pytest.param(volume("pv-x", on_node="n1", phase="Released"), id="not available"),
        pytest.param(
            volume("pv-x", on_node="n1", claim_ref=("default", "other", "u")), id="someone else's"
        ),
    ],
)
def test_volumes_that_do_not_fit_the_claim_are_passed_over(other: dict[str, Any]) -> None:
    core, _, _ = _core(claim("data"), klass(), other, volume("pv-3", on_node="n3"))
    r = _one(core, with_claims("p", "data"))
    assert (r.outcome, r.node, r.feasible_nodes) == ("assumed", "n3", 1)


def test_the_claim_s_selector_picks_among_volumes() -> None:
    core, _, _ = _core(
        claim("data", selector={"tier": "fast"}),
        klass(),
        volume("pv-1", on_node="n1", labels={"tier": "slow"}),
        volume("pv-2", on_node="n2", labels={"tier": "fast"}),
    )
    r = _one(core, with_claims("p", "data"))
    assert (r.outcome, r.node) == ("assumed", "n2")


def test_the_smallest_fitting_volume_is_taken_and_nodes_with_emptier_volumes_score_higher() -> None:
    """Per node the smallest volume that fits; across nodes StorageCapacityScoring's default
    shape prefers the node whose volume the claim fills least."""
    core, _, _ = _core(
        claim("data", size="1Gi"),
        klass(),
        volume("pv-1-small", on_node="n1", size="2Gi"),
        volume("pv-1-big", on_node="n1", size="100Gi"),
        volume("pv-2", on_node="n2", size="10Gi"),
    )
    r = _one(core, with_claims("p", "data"))
    assert (r.outcome, r.node, r.feasible_nodes) == ("assumed", "n2", 2)
    taken = core.volumes.volume("pv-2")
    assert taken is not None and taken.claim_ref is not None


def test_a_volume_pre_bound_to_the_claim_wins_over_smaller_ones() -> None:
    core, _, _ = _core(
        claim("data"),
        klass(),
        volume("pv-1", on_node="n1", size="1Gi"),
        volume("pv-2", on_node="n2", size="50Gi", claim_ref=("default", "data", "")),
    )
    r = _one(core, with_claims("p", "data"))
    assert (r.outcome, r.node, r.feasible_nodes) == ("assumed", "n2", 1)


def test_an_assumed_volume_is_not_given_to_the_next_pod() -> None:
    core, _, _ = _core(
        claim("a"),
        claim("b"),
        klass(),
        volume("pv-1", on_node="n1"),
        volume("pv-2", on_node="n2"),
    )
    first = _one(core, with_claims("p", "a"))
    second = _one(core, with_claims("q", "b"))
    assert {first.node, second.node} == {"n1", "n2"}
    assert second.feasible_nodes == 1


def test_two_claims_of_one_pod_take_two_volumes() -> None:
    core, _, _ = _core(
        claim("a"),
        claim("b", size="5Gi"),
        klass(),
        volume("pv-1a", on_node="n1", size="5Gi"),
        volume("pv-2a", on_node="n2", size="5Gi"),
        volume("pv-2b", on_node="n2", size="5Gi"),
    )
    r = _one(core, with_claims("p", "a", "b"))
    assert (r.outcome, r.node, r.feasible_nodes) == ("assumed", "n2", 1)


def test_a_claim_is_provisioned_where_its_class_allows() -> None:
    core, _, _ = _core(claim("data"), klass(provisioner="example.com/csi", zones=("b",)))
    r = _one(core, with_claims("p", "data"))
    assert (r.outcome, r.node, r.feasible_nodes) == ("assumed", "n3", 1)
    assumed = core.volumes.claim("default/data")
    assert assumed is not None and assumed.selected_node == "n3"
    assert core.volumes.claims["default/data"].selected_node is None


def test_a_claim_being_provisioned_for_a_node_keeps_its_pods_there() -> None:
    core, _, _ = _core(claim("data", selected_node="n2"), klass(provisioner="example.com/csi"))
    r = _one(core, with_claims("p", "data"))
    assert (r.outcome, r.node, r.feasible_nodes) == ("assumed", "n2", 1)


def test_a_failed_binding_takes_the_assumption_back() -> None:
    core, _, recorder = _core(claim("data"), klass(), volume("pv-3", on_node="n3"))
    _one(core, with_claims("p", "data"))
    assert core.volumes.volume("pv-3").claim_ref is not None  # type: ignore[union-attr]
    core.on_bind_result("default/p", "prebind", "running PreBind plugin VolumeBinding: boom")
    assert core.volumes.volume("pv-3").claim_ref is None  # type: ignore[union-attr]
    assert [f.message for f in recorder.failed_calls] == [
        "running PreBind plugin VolumeBinding: boom"
    ]


def test_an_assumption_gives_way_to_a_newer_version_only() -> None:
    objects = VolumeObjects()
    objects.set(pvc_from_dict(claim("data", rv=5)))
    objects.assumed_claims["default/data"] = pvc_from_dict(claim("data", rv=5, selected_node="n1"))
    objects.set(pvc_from_dict(claim("data", rv=5)))  # a relist: the same version
    assert objects.claim("default/data").selected_node == "n1"  # type: ignore[union-attr]
    objects.set(pvc_from_dict(claim("data", rv=6, selected_node="n1")))
    assert "default/data" not in objects.assumed_claims
    objects.delete(pvc_from_dict(claim("data")))
    assert objects.claim("default/data") is None


def _prebind(core: SchedulerCore, cycle: BindingCycle, updates: list[list[dict[str, Any]]]) -> Any:
    """Run the cycle's PreBind; each poll first applies the next list of informer
    updates (as the watch would deliver them)."""
    plugin = _plugin(core)
    polls = list(updates)

    async def sleep(seconds: float) -> None:
        if polls:
            for o in polls.pop(0):
                core.on_volume_object_set(PARSE[o["kind"]](o))
        else:
            await asyncio.sleep(0)

    plugin.sleep = sleep
    plugin.poll_interval = 0.001
    assert cycle.begin() == (None, True)
    return asyncio.run(cycle.finish_async())


def test_pre_bind_writes_the_volume_s_claim_ref_and_waits_for_the_pv_controller() -> None:
    client = FakeClient()
    core, binder, _ = _core(claim("data"), klass(), volume("pv-3", on_node="n3"), client=client)
    _one(core, with_claims("p", "data"))
    failed = _prebind(
        core,
        binder.cycles["default/p"],
        [
            [],  # nothing yet
            [volume("pv-3", on_node="n3", rv=101, claim_ref=("default", "data", "uid-data"))],
            [claim("data", volume="pv-3", completed=True, rv=102)],
        ],
    )
    assert failed is None
    ((method, path, body, ctype),) = client.calls
    assert (method, path, ctype) == (
        "PATCH",
        "/api/v1/persistentvolumes/pv-3",
        "application/merge-patch+json",
    )
    assert body["metadata"]["resourceVersion"] == "10"
    assert body["metadata"]["annotations"] == {"pv.kubernetes.io/bound-by-controller": "yes"}
    assert body["spec"]["claimRef"] == {
        "kind": "PersistentVolumeClaim",
        "apiVersion": "v1",
        "namespace": "default",
        "name": "data",
        "uid": "uid-data",
        "resourceVersion": "10",
    }


def test_pre_bind_writes_the_selected_node_and_waits_for_the_provisioner() -> None:
    client = FakeClient()
    core, binder, _ = _core(claim("data"), klass(provisioner="example.com/csi"), client=client)
    r = _one(core, with_claims("p", "data"))
    node = r.node
    failed = _prebind(
        core,
        binder.cycles["default/p"],
        [
            [claim("data", selected_node=node, rv=101)],
            [volume("pv-new", on_node=node, rv=102, claim_ref=("default", "data", "uid-data"))],
            [claim("data", selected_node=node, volume="pv-new", completed=True, rv=103)],
        ],
    )
    assert failed is None
    ((_, path, body, _),) = client.calls
    assert path == "/api/v1/namespaces/default/persistentvolumeclaims/data"
    assert body == {
        "metadata": {
            "resourceVersion": "10",
            "annotations": {"volume.kubernetes.io/selected-node": node},
        }
    }


@pytest.mark.parametrize(
    ("updates", "message"),
    [
        pytest.param(
            [[claim("data", rv=101)]],
            'binding volumes: provisioning failed for PVC "data"',
            id="the provisioner gave the claim back",
        ),
    ],
)
def test_pre_bind_fails_when_the_provisioner_gives_up(
    updates: list[list[dict[str, Any]]], message: str
) -> None:
    client = FakeClient()
    core, binder, _ = _core(claim("data"), klass(provisioner="example.com/csi"), client=client)
    _one(core, with_claims("p", "data"))
    failed = _prebind(core, binder.cycles["default/p"], updates)
    assert failed is not None and failed.code is Code.ERROR
    assert failed.message() == f"running PreBind plugin VolumeBinding: {message}"


def test_pre_bind_fails_when_the_claim_ref_is_reset() -> None:
    client = FakeClient()
    core, binder, _ = _core(claim("data"), klass(), volume("pv-3", on_node="n3"), client=client)
    _one(core, with_claims("p", "data"))
    failed = _prebind(core, binder.cycles["default/p"], [[volume("pv-3", on_node="n3", rv=101)]])
    assert failed is not None
    assert failed.message() == (
        'running PreBind plugin VolumeBinding: binding volumes: ClaimRef got reset for pv "pv-3"'
    )


def test_pre_bind_gives_up_after_the_bind_timeout() -> None:
    client = FakeClient()
    config = parse_config(
        {
            "profiles": [
                {"pluginConfig": [{"name": "VolumeBinding", "args": {"bindTimeoutSeconds": 0}}]}
            ]
        },
        "sched.yaml",
    )
    metrics = Metrics()
    core, binder, _ = _core(
        claim("data"),
        klass(provisioner="example.com/csi"),
        client=client,
        config=config,
        metrics=metrics,
    )
    _one(core, with_claims("p", "data"))
    failed = _prebind(core, binder.cycles["default/p"], [])
    assert failed is not None
    assert failed.message() == (
        "running PreBind plugin VolumeBinding: binding volumes: context deadline exceeded"
    )
    # Upstream's scheduler_volume_scheduling_stage_error_total{operation="bind"}.
    errors = "scheduler_volume_scheduling_stage_error_total"
    assert metrics.registry.get_sample_value(errors, {"operation": "bind"}) == 1


def test_a_refused_write_fails_the_binding_and_is_not_assumed_any_more() -> None:
    client = FakeClient()
    client.fail["/api/v1/persistentvolumes/pv-3"] = RuntimeError("409 Conflict: changed")
    core, binder, _ = _core(claim("data"), klass(), volume("pv-3", on_node="n3"), client=client)
    _one(core, with_claims("p", "data"))
    failed = _prebind(core, binder.cycles["default/p"], [])
    assert failed is not None
    assert failed.message() == "running PreBind plugin VolumeBinding: 409 Conflict: changed"
    assert core.volumes.volume("pv-3").claim_ref is None  # type: ignore[union-attr]


def test_a_pod_deleted_during_pre_bind_stops_the_wait() -> None:
    client = FakeClient()
    core, binder, _ = _core(claim("data"), klass(provisioner="example.com/csi"), client=client)
    pod = with_claims("p", "data")
    _one(core, pod)
    cycle = binder.cycles["default/p"]
    assert cycle.enter_pre_bind is not None
    cancelled: list[str] = []
    cycle.enter_pre_bind(cancelled.append)
    core.on_pod_delete(pod.info())
    assert cancelled == ["pod does not exist any more"]
    assert core.volumes.claim("default/data").selected_node is None  # type: ignore[union-attr]


def test_pods_without_claims_to_bind_skip_the_binding_cycle() -> None:
    core, binder, _ = _core(
        claim("data", volume="pv-3", completed=True),
        klass(),
        volume("pv-3", on_node="n3", claim_ref=("default", "data", "uid-data"), phase="Bound"),
    )
    _one(core, make_pod("plain").req(cpu="1"))
    r = _one(core, with_claims("p", "data"))
    assert r.node == "n3"
    assert binder.cycles == {}
    assert [pod.name for pod, _ in binder.calls] == ["plain", "p"]


def test_simulate_s_pre_bind_makes_the_choice_the_state() -> None:
    core, binder, _ = _core(claim("data"), klass(), volume("pv-3", on_node="n3"))
    _one(core, with_claims("p", "data"))
    failed = _prebind(core, binder.cycles["default/p"], [])
    assert failed is None
    bound = core.volumes.claims["default/data"]
    assert (bound.volume_name, bound.bound) == ("pv-3", True)
    assert core.volumes.volumes["pv-3"].claim_ref == ("default", "data", "uid-data")


def test_volume_binding_args() -> None:
    config = parse_config(
        {
            "profiles": [
                {
                    "pluginConfig": [
                        {
                            "name": "VolumeBinding",
                            "args": {
                                "bindTimeoutSeconds": 30,
                                "shape": [
                                    {"utilization": 0, "score": 0},
                                    {"utilization": 100, "score": 10},
                                ],
                            },
                        }
                    ]
                }
            ]
        },
        "sched.yaml",
    )
    assert config.volume_binding.bind_timeout_seconds == 30
    assert config.volume_binding.shape == ((0, 0), (100, 10))
    for args, match in [
        ({"bindTimeoutSeconds": -1}, r"args\.bindTimeoutSeconds: -1: should not be negative"),
        ({"shape": []}, r"args\.shape: at least one point must be specified"),
        (
            {"shape": [{"utilization": 50, "score": 1}, {"utilization": 10, "score": 2}]},
            r"args\.shape\[1\]\.utilization: values must be sorted",
        ),
        ({"bindTimeout": 3}, r"bindTimeout"),
    ]:
        with pytest.raises(ConfigError, match=match):
            parse_config(
                {"profiles": [{"pluginConfig": [{"name": "VolumeBinding", "args": args}]}]},
                "sched.yaml",
            )


def test_a_packing_shape_prefers_the_fullest_volume() -> None:
    config = parse_config(
        {
            "profiles": [
                {
                    "pluginConfig": [
                        {
                            "name": "VolumeBinding",
                            "args": {
                                "shape": [
                                    {"utilization": 0, "score": 0},
                                    {"utilization": 100, "score": 10},
                                ]
                            },
                        }
                    ]
                }
            ]
        },
        "sched.yaml",
    )
    core, _, _ = _core(
        claim("data"),
        klass(),
        volume("pv-1", on_node="n1", size="2Gi"),
        volume("pv-2", on_node="n2", size="10Gi"),
        config=config,
    )
    r = _one(core, with_claims("p", "data"))
    assert (r.outcome, r.node) == ("assumed", "n1")


def test_parsing_the_new_fields_names_the_object_and_the_field() -> None:
    c = pvc_from_dict(claim("data", size="1500Mi", selected_node="n1"))
    assert isinstance(c, PVCInfo)
    assert (c.uid, c.resource_version, c.selected_node) == ("uid-data", 10, "n1")
    assert c.storage_nanos == 1500 * 2**20 * 10**9
    v = pv_from_dict(volume("pv", claim_ref=("ns", "c", "u"), labels={"a": "b"}))
    assert isinstance(v, PVInfo)
    assert (v.claim_ref, v.phase, v.labels, v.storage_class) == (
        ("ns", "c", "u"),
        "Available",
        {"a": "b"},
        "local",
    )
    bad = claim("data")
    bad["spec"]["resources"]["requests"]["storage"] = "lots"
    with pytest.raises(ParseError, match=r"default/data.*spec\.resources\.requests\.storage"):
        pvc_from_dict(bad)
    bad_class = klass()
    bad_class["allowedTopologies"] = {"zone": "a"}
    with pytest.raises(ParseError, match=r"StorageClass local.*allowedTopologies"):
        storage_class_from_dict(bad_class)
    empty_term = storage_class_from_dict({**klass(), "allowedTopologies": [{}]})
    assert not empty_term.allows({"zone": "a"})  # an empty term matches nothing
    assert storage_class_from_dict(klass()).allows({})


def test_unreserve_without_a_choice_is_a_no_op() -> None:
    plugin = VolumeBinding(VolumeObjects())
    pod = make_pod("p").info()
    plugin.unreserve(CycleState(), pod, "n1")
    assert plugin.reserve(CycleState(), pod, "n1").is_success()
    assert not plugin.pre_bind_needed(CycleState())


def test_simulate_binds_claims_that_wait_and_keeps_each_volume_for_one_claim() -> None:
    nodes = [
        make_node(n).alloc(cpu="4", memory="8Gi", pods=110).label("kubernetes.io/hostname", n)
        for n in ("n1", "n2", "n3")
    ]
    objs = [
        *(n.obj() for n in nodes),
        klass(),
        claim("a"),
        claim("b"),
        claim("c"),
        volume("pv-1", on_node="n1"),
        volume("pv-2", on_node="n2"),
        *(with_claims(p, c).scheduler("py-scheduler").obj() for p, c in (("p", "a"), ("q", "b"))),
        with_claims("r", "c").scheduler("py-scheduler").obj(),
    ]
    docs = [Document("dump.yaml", i + 1, o) for i, o in enumerate(objs)]
    result = simulate(docs, SchedulerConfig())
    placed = {result.placements["default/p"], result.placements["default/q"]}
    assert placed == {"n1", "n2"}
    assert result.placements["default/r"] is None  # no volume left, none to provision
