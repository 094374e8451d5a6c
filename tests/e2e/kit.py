"""Helpers for the scheduler e2e scenarios: manifests, reads, bounded waits, and the
fixtures that run py-scheduler as a separate process.

Isolation: every test gets its own namespace and its own kwok nodes carrying the label
``e2e-test=<namespace>``; its pods select those nodes with a nodeSelector. Other tests'
nodes then fail NodeAffinity (UNSCHEDULABLE_AND_UNRESOLVABLE), so no test can place pods
on, or preempt pods from, another test's nodes, and scenarios can share one scheduler.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from tests.e2e.conftest import Cluster, wait_for
from tests.e2e.procs import SchedulerProcess

# Terminating pods stay for min(their grace period, this cap) before kwok removes them;
# scenarios that race against termination choose each pod's grace period.
os.environ.setdefault("PY_SCHEDULER_KWOK_DELETE_DELAY", "10s")

SCHEDULER = "py-scheduler"
TEST_LABEL = "e2e-test"


def pod_manifest(
    name: str,
    *,
    cpu: str = "100m",
    memory: str = "64Mi",
    scheduler: str = SCHEDULER,
    priority_class: str | None = None,
    preemption_policy: str | None = None,
    node_selector: dict[str, str] | None = None,
    node_name: str | None = None,
    labels: dict[str, str] | None = None,
    grace: int | None = None,
    tolerations: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [
            {
                "name": "app",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": cpu, "memory": memory}},
            }
        ],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    if preemption_policy:
        spec["preemptionPolicy"] = preemption_policy
    if node_selector:
        spec["nodeSelector"] = node_selector
    if node_name:
        spec["nodeName"] = node_name
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    if tolerations:
        spec["tolerations"] = tolerations
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
    }


class Kit:
    """One test's view: its namespace, its nodes, and helpers over the API."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        self.cluster = cluster
        self.ns = namespace
        self.core = k8s.CoreV1Api(cluster.api)
        self.sched_api = k8s.SchedulingV1Api(cluster.api)
        self.policy = k8s.PolicyV1Api(cluster.api)
        self.priority_classes: list[str] = []

    @property
    def selector(self) -> dict[str, str]:
        return {TEST_LABEL: self.ns}

    def nodes(self, count: int = 1, **kw: Any) -> list[str]:
        labels = {**self.selector, **kw.pop("labels", {})}
        return self.cluster.create_nodes(count, labels=labels, **kw)

    def priority_class(self, value: int, *, policy: str | None = None) -> str:
        name = f"{self.ns}-p{value}".replace("_", "-")[:60]
        body: dict[str, Any] = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
        if policy:
            body["preemptionPolicy"] = policy
        self.sched_api.create_priority_class(body=body)
        self.priority_classes.append(name)
        return name

    def create(self, name: str, **kw: Any) -> dict[str, Any]:
        if "node_name" not in kw:
            kw.setdefault("node_selector", self.selector)
        body = pod_manifest(name, **kw)
        deadline = time.monotonic() + 10
        while True:
            try:
                created = self.core.create_namespaced_pod(self.ns, body)
                return dict(self.cluster.api.sanitize_for_serialization(created))
            except ApiException as e:
                # The Priority admission plugin reads classes from an informer: a class
                # created a moment ago may not be visible to it yet.
                racing = e.status == 403 and "no PriorityClass" in str(e.body)
                if not racing or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def pod(self, name: str) -> dict[str, Any] | None:
        try:
            p = self.core.read_namespaced_pod(name, self.ns)
        except ApiException as e:
            if e.status == 404:
                return None
            raise
        return dict(self.cluster.api.sanitize_for_serialization(p))

    def pods(self) -> list[dict[str, Any]]:
        out = self.core.list_namespaced_pod(self.ns)
        return [dict(self.cluster.api.sanitize_for_serialization(p)) for p in out.items]

    def describe(self, max_pods: int = 100) -> str:
        """The namespace as the API sees it: one line per pod (the first ``max_pods`` by
        name), then the last events."""
        lines = []
        pods = sorted(self.pods(), key=lambda p: str(p["metadata"]["name"]))
        for p in pods[:max_pods]:
            meta, spec, status = p["metadata"], p.get("spec") or {}, p.get("status") or {}
            conditions = ",".join(
                f"{c['type']}={c['status']}" for c in status.get("conditions") or []
            )
            lines.append(
                f"pod {meta['name']} uid={meta.get('uid')} rv={meta.get('resourceVersion')} "
                f"node={spec.get('nodeName') or '-'} phase={status.get('phase')} "
                f"deletion={meta.get('deletionTimestamp') or '-'} "
                f"grace={meta.get('deletionGracePeriodSeconds')} "
                f"nominated={status.get('nominatedNodeName') or '-'} "
                f"gates={len(spec.get('schedulingGates') or [])} conditions={conditions}"
            )
        if len(pods) > max_pods:
            lines.append(f"... and {len(pods) - max_pods} more pods")
        events = [(str(e.get("lastTimestamp") or e.get("eventTime")), e) for e in self.events()]
        for when, e in sorted(events, key=lambda pair: pair[0])[-30:]:
            obj = (e.get("involvedObject") or {}).get("name")
            lines.append(f"event {when} {obj} {e.get('reason')}: {e.get('message')}")
        return "\n".join(lines) or "(no pods, no events)"

    def node_of(self, name: str) -> str:
        p = self.pod(name)
        return str(((p or {}).get("spec") or {}).get("nodeName") or "")

    def wait_bound(self, name: str, timeout: float = 30.0) -> str:
        return str(wait_for(lambda: self.node_of(name), timeout, f"pod {self.ns}/{name} bound"))

    def wait_running(self, name: str, timeout: float = 30.0) -> dict[str, Any]:
        def running() -> dict[str, Any] | None:
            p = self.pod(name)
            return p if p and (p.get("status") or {}).get("phase") == "Running" else None

        return dict(wait_for(running, timeout, f"pod {self.ns}/{name} Running"))

    def wait_gone(self, name: str, timeout: float = 60.0) -> None:
        wait_for(lambda: self.pod(name) is None, timeout, f"pod {self.ns}/{name} deleted")

    def events(self, name: str | None = None, reason: str | None = None) -> list[dict[str, Any]]:
        evs = self.core.list_namespaced_event(self.ns).items
        out = []
        for e in evs:
            d = dict(self.cluster.api.sanitize_for_serialization(e))
            io = d.get("involvedObject") or {}
            if name is not None and io.get("name") != name:
                continue
            if reason is not None and d.get("reason") != reason:
                continue
            out.append(d)
        return out

    def wait_event(self, name: str, reason: str, timeout: float = 30.0) -> dict[str, Any]:
        evs = wait_for(lambda: self.events(name, reason), timeout, f"{reason} event on {name}")
        return dict(evs[0])

    def wait_failed_with(self, pod: str, text: str, timeout: float = 30.0) -> str:
        """Wait for a FailedScheduling event of ``pod`` whose message has ``text`` (an
        earlier one may tell of an earlier state: the scheduler's watch may see the pod
        before an object it names); that message."""

        def found() -> str | None:
            for ev in self.events(pod, "FailedScheduling"):
                if text in str(ev.get("message")):
                    return str(ev["message"])
            return None

        return str(wait_for(found, timeout, f"FailedScheduling of {pod} saying {text!r}"))

    def condition(self, name: str, ctype: str) -> dict[str, Any] | None:
        p = self.pod(name) or {}
        for c in (p.get("status") or {}).get("conditions") or []:
            if c.get("type") == ctype:
                return dict(c)
        return None

    def wait_condition(
        self, name: str, ctype: str, pred: Callable[[dict[str, Any]], bool], timeout: float = 30.0
    ) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            c = self.condition(name, ctype)
            return c if c is not None and pred(c) else None

        return dict(wait_for(check, timeout, f"condition {ctype} on {self.ns}/{name}"))

    def pdb(self, name: str, match_labels: dict[str, str], *, min_available: int) -> None:
        body = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name},
            "spec": {"minAvailable": min_available, "selector": {"matchLabels": match_labels}},
        }
        self.policy.create_namespaced_pod_disruption_budget(self.ns, body)

    def wait_pdb_allowed(self, name: str, value: int, timeout: float = 60.0) -> None:
        def ok() -> bool:
            p = self.policy.read_namespaced_pod_disruption_budget(name, self.ns)
            st = p.status
            return (
                st is not None
                and st.disruptions_allowed == value
                and (st.observed_generation or 0) >= (p.metadata.generation or 0)
            )

        wait_for(ok, timeout, f"PDB {self.ns}/{name} disruptionsAllowed={value}")

    def delete(self, name: str, grace: int | None = None) -> None:
        try:
            self.core.delete_namespaced_pod(name, self.ns, grace_period_seconds=grace)
        except ApiException as e:
            if e.status != 404:
                raise

    def cleanup(self) -> None:
        for pc in self.priority_classes:
            try:
                self.sched_api.delete_priority_class(pc)
            except ApiException as e:
                if e.status != 404:
                    raise

    def node_usage_ok(self, nodes: list[str]) -> bool:
        """Every node's summed cpu requests of non-terminal pods <= allocatable."""
        return not self.overcommitted(nodes)

    def overcommitted(self, nodes: list[str]) -> dict[str, list[str]]:
        """Nodes whose summed cpu requests of non-terminal pods exceed allocatable, with
        their pods (name, cpu, deletionTimestamp) for the failure message."""
        from scheduler.quantity import milli_value

        pods = self.core.list_pod_for_all_namespaces().items
        bad: dict[str, list[str]] = {}
        for n in nodes:
            node = self.core.read_node(n)
            alloc = milli_value(node.status.allocatable["cpu"])
            used = 0
            here: list[str] = []
            for p in pods:
                if p.spec.node_name != n or p.status.phase in ("Succeeded", "Failed"):
                    continue
                cpu = 0
                for c in p.spec.containers:
                    req = (c.resources.requests or {}) if c.resources else {}
                    cpu += milli_value(req.get("cpu", "0"))
                used += cpu
                here.append(
                    f"{p.metadata.namespace}/{p.metadata.name} cpu={cpu}m "
                    f"deleting={p.metadata.deletion_timestamp} "
                    f"sched={p.spec.scheduler_name} prio={p.spec.priority}"
                )
            if used > alloc:
                bad[n] = [f"used {used}m > {alloc}m", *here]
        return bad


def new_namespace(cluster: Cluster, prefix: str = "e2e") -> str:
    """A fresh namespace, returned once its ``default`` ServiceAccount exists (pods cannot be
    created before: admission looks it up). After a test restarted the API server, the
    controller manager's informers take up to a minute to resume; this waits for them."""
    name = f"{prefix}-{secrets.token_hex(3)}"
    core = k8s.CoreV1Api(cluster.api)
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    def has_default_sa() -> bool:
        try:
            core.read_namespaced_service_account("default", name)
        except ApiException as e:
            if e.status != 404:
                raise
            return False
        return True

    wait_for(has_default_sa, 120, f"the default ServiceAccount of namespace {name}")
    return name


@pytest.fixture
def kit(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[Kit]:
    ns = new_namespace(cluster)
    k = Kit(cluster, ns)
    yield k
    k.cleanup()
    try:
        k8s.CoreV1Api(cluster.api).delete_namespace(ns)
    except ApiException as e:
        if e.status != 404:
            raise


@pytest.fixture(scope="session")
def scheduler_workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("py-scheduler")


@pytest.fixture(scope="session")
def py_scheduler(cluster: Cluster, scheduler_workdir: Path) -> Iterator[SchedulerProcess]:
    """The shared scheduler under test (profile ``py-scheduler``, preemption on)."""
    proc = SchedulerProcess(cluster.kubeconfig, scheduler_workdir).start()
    yield proc
    code = proc.stop()
    if code not in (0, None):
        print(f"py-scheduler exited with {code}:\n{proc.tail()}")


@pytest.fixture
def spawn_scheduler(
    cluster: Cluster, scheduler_workdir: Path
) -> Iterator[Callable[..., SchedulerProcess]]:
    """Start extra schedulers (their own profile names) for a test; stopped afterwards."""
    started: list[SchedulerProcess] = []

    def spawn(**kw: Any) -> SchedulerProcess:
        kw.setdefault("name", f"py-sched-{secrets.token_hex(3)}")
        wait = kw.pop("wait_ready", True)
        p = SchedulerProcess(cluster.kubeconfig, scheduler_workdir, **kw)
        started.append(p)
        return p.start(wait_ready=wait)

    spawn.started = started  # type: ignore[attr-defined]  # for the failure report
    yield spawn
    for p in started:
        p.stop()


def settle(seconds: float) -> None:
    """A deliberate pause before asserting that something did NOT happen."""
    time.sleep(seconds)


def restart_api_server(cluster: Cluster, *, down_seconds: float = 0.0) -> None:
    """Restart the local control plane's kube-apiserver, then kwok.

    kwok (v0.8) can miss pods created after its watches were cut by an API-server restart
    (it then never runs or deletes them, for good), so the fake kubelet restarts too, as a
    node agent would reconnect; the scheduler under test is left alone."""
    local = cluster.local
    local.restart("kube-apiserver", down_seconds=down_seconds)
    local.restart("kwok")
