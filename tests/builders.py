"""Fluent builders for API objects in tests: pods, nodes, PDBs, PriorityClasses.

make_pod("p").req(cpu="1").priority(10).node("n1").obj()   -> raw API dict
make_pod("p").req(cpu="1").info()                          -> scheduler.types.PodInfo
make_node("n1").alloc(cpu="4", memory="8Gi").record()      -> NodeRecord
"""

from __future__ import annotations

import copy
import datetime as dt
import itertools
from typing import Any

from scheduler.types import (
    NodeInfo,
    NodeRecord,
    PDBInfo,
    PodInfo,
    PriorityClassInfo,
    node_from_dict,
    pdb_from_dict,
    pod_from_dict,
    priority_class_from_dict,
)

_uid = itertools.count(1)
EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def ts(seconds: float) -> str:
    """An RFC 3339 timestamp `seconds` after a fixed epoch."""
    return (EPOCH + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


class PodBuilder:
    def __init__(self, name: str, namespace: str = "default") -> None:
        self._o: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": f"uid-{name}-{next(_uid)}",
                "creationTimestamp": ts(0),
            },
            "spec": {
                "schedulerName": "py-scheduler",
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
            },
            "status": {"phase": "Pending"},
        }

    @property
    def _spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self._o["spec"]
        return spec

    def namespace(self, ns: str) -> PodBuilder:
        self._o["metadata"]["namespace"] = ns
        return self

    def req(self, **resources: str | int) -> PodBuilder:
        """Requests of the (single) container; ``ephemeral_storage`` and ``gpu`` map to
        ephemeral-storage and nvidia.com/gpu."""
        names = {"ephemeral_storage": "ephemeral-storage", "gpu": "nvidia.com/gpu"}
        reqs = {names.get(k, k): v for k, v in resources.items()}
        self._spec["containers"][0].setdefault("resources", {})["requests"] = reqs
        return self

    def images(self, *names: str) -> PodBuilder:
        """Replace the containers by one per image."""
        self._spec["containers"] = [{"name": f"c{i}", "image": n} for i, n in enumerate(names)]
        return self

    def image_volume(self, reference: str) -> PodBuilder:
        vols = self._spec.setdefault("volumes", [])
        vols.append({"name": f"v{len(vols)}", "image": {"reference": reference}})
        return self

    def requests(self, *per_container: dict[str, Any]) -> PodBuilder:
        """Replace the containers by one per request list, as upstream's
        ``st.MakePod().Req(a).Req(b)``; no argument leaves the pod without containers."""
        self._spec["containers"] = [
            {"name": f"c{i}", "image": "x", "resources": {"requests": dict(r)}}
            for i, r in enumerate(per_container)
        ]
        return self

    def container(self, requests: dict[str, Any] | None = None, image: str = "") -> PodBuilder:
        c: dict[str, Any] = {"name": f"c{len(self._spec['containers'])}", "image": image or "x"}
        if requests:
            c["resources"] = {"requests": requests}
        self._spec["containers"].append(c)
        return self

    def init_container(
        self, requests: dict[str, Any] | None = None, *, sidecar: bool = False, image: str = "x"
    ) -> PodBuilder:
        name = f"i{len(self._spec.get('initContainers', []))}"
        c: dict[str, Any] = {"name": name, "image": image}
        if requests:
            c["resources"] = {"requests": requests}
        if sidecar:
            c["restartPolicy"] = "Always"
        self._spec.setdefault("initContainers", []).append(c)
        return self

    def init_host_port(self, port: int, *, sidecar: bool) -> PodBuilder:
        """An init container (a sidecar or not) that asks for a host port."""
        self.init_container(sidecar=sidecar)
        c = self._spec["initContainers"][-1]
        c["ports"] = [{"containerPort": port, "hostPort": port, "protocol": "TCP"}]
        return self

    def pod_requests(self, **resources: str | int) -> PodBuilder:
        """Pod-level requests (``spec.resources.requests``)."""
        self._spec.setdefault("resources", {})["requests"] = _resources(resources)
        return self

    def container_status(
        self,
        name: str,
        *,
        allocated: dict[str, Any] | None = None,
        actual: dict[str, Any] | None = None,
        init: bool = False,
    ) -> PodBuilder:
        """A container status as the kubelet reports it for in-place resize: its
        ``allocatedResources`` and its actuated ``resources.requests``."""
        cs: dict[str, Any] = {"name": name}
        if allocated is not None:
            cs["allocatedResources"] = allocated
        if actual is not None:
            cs["resources"] = {"requests": actual}
        group = "initContainerStatuses" if init else "containerStatuses"
        self._o["status"].setdefault(group, []).append(cs)
        return self

    def status_resources(
        self, *, allocated: dict[str, Any] | None = None, actual: dict[str, Any] | None = None
    ) -> PodBuilder:
        """Pod-level ``status.allocatedResources`` / ``status.resources.requests``."""
        if allocated is not None:
            self._o["status"]["allocatedResources"] = allocated
        if actual is not None:
            self._o["status"]["resources"] = {"requests": actual}
        return self

    def overhead(self, **resources: str) -> PodBuilder:
        self._spec["overhead"] = resources
        return self

    def priority(self, p: int) -> PodBuilder:
        self._spec["priority"] = p
        return self

    def priority_class(self, name: str) -> PodBuilder:
        self._spec["priorityClassName"] = name
        return self

    def preemption_policy(self, policy: str) -> PodBuilder:
        self._spec["preemptionPolicy"] = policy
        return self

    def node(self, name: str) -> PodBuilder:
        self._spec["nodeName"] = name
        self._o["status"]["phase"] = "Running"
        return self

    def nominated(self, name: str) -> PodBuilder:
        self._o["status"]["nominatedNodeName"] = name
        return self

    def scheduler(self, name: str) -> PodBuilder:
        self._spec["schedulerName"] = name
        return self

    def label(self, key: str, value: str) -> PodBuilder:
        self._o["metadata"].setdefault("labels", {})[key] = value
        return self

    def annotation(self, key: str, value: str) -> PodBuilder:
        self._o["metadata"].setdefault("annotations", {})[key] = value
        return self

    def node_selector(self, **labels: str) -> PodBuilder:
        self._spec["nodeSelector"] = dict(labels)
        return self

    def affinity(self, affinity: dict[str, Any]) -> PodBuilder:
        self._spec["affinity"] = affinity
        return self

    def toleration(
        self, key: str = "", value: str = "", effect: str = "", operator: str = "Equal"
    ) -> PodBuilder:
        t = {"key": key, "operator": operator, "value": value, "effect": effect}
        self._spec.setdefault("tolerations", []).append({k: v for k, v in t.items() if v})
        return self

    def host_port(self, port: int, protocol: str = "TCP", ip: str = "") -> PodBuilder:
        p: dict[str, Any] = {"containerPort": port, "hostPort": port, "protocol": protocol}
        if ip:
            p["hostIP"] = ip
        self._spec["containers"][0].setdefault("ports", []).append(p)
        return self

    def spread(self, constraint: dict[str, Any]) -> PodBuilder:
        self._spec.setdefault("topologySpreadConstraints", []).append(constraint)
        return self

    def created(self, seconds: float) -> PodBuilder:
        self._o["metadata"]["creationTimestamp"] = ts(seconds)
        return self

    def started(self, seconds: float) -> PodBuilder:
        self._o["status"]["startTime"] = ts(seconds)
        return self

    def terminating(self, *, by_preemption: bool = False) -> PodBuilder:
        self._o["metadata"]["deletionTimestamp"] = ts(100)
        if by_preemption:
            self._o["status"].setdefault("conditions", []).append(
                {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
            )
        return self

    def condition(self, type_: str, status: str = "True", reason: str = "") -> PodBuilder:
        """A status condition, e.g. ``condition("DisruptionTarget", reason="...")``."""
        c = {"type": type_, "status": status}
        if reason:
            c["reason"] = reason
        self._o["status"].setdefault("conditions", []).append(c)
        return self

    def gates(self, *names: str) -> PodBuilder:
        """spec.schedulingGates."""
        self._o["spec"]["schedulingGates"] = [{"name": n} for n in names]
        return self

    def phase(self, phase: str) -> PodBuilder:
        self._o["status"]["phase"] = phase
        return self

    def spec_field(self, key: str, value: Any) -> PodBuilder:
        """Any spec field as it is (e.g. hostNetwork, ephemeralContainers)."""
        self._o["spec"][key] = value
        return self

    def status_field(self, key: str, value: Any) -> PodBuilder:
        """Any status field as it is (e.g. resourceClaimStatuses)."""
        self._o["status"][key] = value
        return self

    def uid(self, uid: str) -> PodBuilder:
        self._o["metadata"]["uid"] = uid
        return self

    def container_field(self, key: str, value: Any, index: int = 0) -> PodBuilder:
        """Any field of spec.containers[index] as it is (e.g. restartPolicyRules)."""
        self._o["spec"]["containers"][index][key] = value
        return self

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._o)

    def info(self, **kw: Any) -> PodInfo:
        return pod_from_dict(self._o, **kw)


class NodeBuilder:
    def __init__(self, name: str) -> None:
        self._o: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {},
            "status": {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"}},
        }

    def alloc(self, **resources: str | int) -> NodeBuilder:
        names = {"ephemeral_storage": "ephemeral-storage", "gpu": "nvidia.com/gpu"}
        self._o["status"]["allocatable"] = {names.get(k, k): v for k, v in resources.items()}
        return self

    def label(self, key: str, value: str) -> NodeBuilder:
        self._o["metadata"]["labels"][key] = value
        return self

    def taint(self, key: str, value: str = "", effect: str = "NoSchedule") -> NodeBuilder:
        t = {"key": key, "effect": effect}
        if value:
            t["value"] = value
        self._o["spec"].setdefault("taints", []).append(t)
        return self

    def unschedulable(self) -> NodeBuilder:
        self._o["spec"]["unschedulable"] = True
        return self

    def declared_features(self, *names: str) -> NodeBuilder:
        """status.declaredFeatures (kept sorted, as the API server requires)."""
        self._o["status"]["declaredFeatures"] = sorted(names)
        return self

    def image(self, name: str, size: int, *aliases: str) -> NodeBuilder:
        """An image in status.images, known under ``name`` and any ``aliases``."""
        entry = {"names": [name, *aliases], "sizeBytes": size}
        self._o["status"].setdefault("images", []).append(entry)
        return self

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._o)

    def record(self) -> NodeRecord:
        return node_from_dict(self._o)

    def info(self, *pods: PodInfo) -> NodeInfo:
        ni = NodeInfo(self.record())
        for p in pods:
            ni.add_pod(p)
        return ni


def _resources(resources: dict[str, str | int]) -> dict[str, str | int]:
    names = {"ephemeral_storage": "ephemeral-storage", "gpu": "nvidia.com/gpu"}
    return {names.get(k, k): v for k, v in resources.items()}


def make_pod(name: str, namespace: str = "default") -> PodBuilder:
    return PodBuilder(name, namespace)


def make_node(name: str) -> NodeBuilder:
    return NodeBuilder(name)


def make_pdb(
    name: str,
    *,
    namespace: str = "default",
    match_labels: dict[str, str] | None = None,
    allowed: int | None = None,
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
    disrupted: tuple[str, ...] = (),
) -> PDBInfo:
    return pdb_from_dict(make_pdb_obj(**locals()))


def make_pdb_obj(
    name: str,
    *,
    namespace: str = "default",
    match_labels: dict[str, str] | None = None,
    allowed: int | None = None,
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
    disrupted: tuple[str, ...] = (),
) -> dict[str, Any]:
    spec: dict[str, Any] = {"selector": {"matchLabels": match_labels or {}}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    o: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
    if allowed is not None:
        o["status"] = {
            "disruptionsAllowed": allowed,
            "disruptedPods": dict.fromkeys(disrupted, ts(0)),
        }
    return o


def make_priority_class(
    name: str, value: int, *, global_default: bool = False, policy: str = ""
) -> PriorityClassInfo:
    o: dict[str, Any] = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "globalDefault": global_default,
    }
    if policy:
        o["preemptionPolicy"] = policy
    return priority_class_from_dict(o)
