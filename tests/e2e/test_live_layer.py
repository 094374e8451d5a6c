"""The live layer's informer semantics under faults, against the real API server:

- the API server restarted in the middle of a preemption storm;
- a watch gap (the scheduler cut off by a loopback proxy) during which pods are deleted and
  created, ended by etcd compaction and an API server restart so that the resume gets 410;
- a gated pod (spec.schedulingGates) never preempts, and is bound once its gate is removed;
- a pending pod whose deletion waits for a finalizer is skipped with upstream's event;
- the leader keeps its lease through a 1000-pod binding burst at the default 50 QPS.

No test asserts speed: the deadlines are generous bounds on "eventually".
"""

from __future__ import annotations

import base64
import json
import os
import signal
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from tests.e2e.conftest import Cluster, wait_for
from tests.e2e.kit import Kit, pod_manifest, restart_api_server, settle
from tests.e2e.procs import SchedulerProcess
from tests.e2e.proxy import CuttableProxy


class OvercommitSampler:
    """Samples node usage every ``interval`` seconds in a thread; keeps every violation."""

    def __init__(self, kit: Kit, nodes: list[str], interval: float = 0.5) -> None:
        self.kit, self.nodes, self.interval = kit, nodes, interval
        self.violations: list[dict[str, list[str]]] = []
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                bad = self.kit.overcommitted(self.nodes)
            except Exception:  # the API server is down: nothing to sample
                continue
            self.samples += 1
            if bad:
                self.violations.append(bad)

    def __enter__(self) -> OvercommitSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


def _local(kit: Kit) -> Any:
    if kit.cluster.local is None:
        raise AssertionError("this scenario controls the local control plane's processes")
    return kit.cluster.local


def _dump(sched: SchedulerProcess) -> dict[str, Any]:
    """The scheduler's cache dump (SIGUSR2, as kube-scheduler), read from its log."""
    assert sched.proc is not None
    before = len(sched.log_events("cache_dump"))
    os.kill(sched.proc.pid, signal.SIGUSR2)
    wait_for(lambda: len(sched.log_events("cache_dump")) > before, 10, "a cache dump")
    return sched.log_events("cache_dump")[-1]


# ------------------------------------------------------------------------- storm


def test_api_server_restart_during_a_preemption_storm(kit: Kit, spawn_scheduler: Any) -> None:
    """10 nodes hold 4 low-priority pods each (full); 20 preemptors need one victim each. The
    API server goes away for 20 s while their preemptions run. Every preemptor is bound
    within 30 s of the API server answering again, exactly 20 victims are deleted (20 low
    pods survive), and no node is over capacity at any sample."""
    _local(kit)  # restarts the local control plane's API server
    name = f"storm-{kit.ns}"
    sched = spawn_scheduler(name=name)
    nodes = kit.nodes(10, cpu="4")
    low = kit.priority_class(10)
    high = kit.priority_class(1000)
    for i in range(40):
        kit.create(f"low-{i}", cpu="1", priority_class=low, scheduler=name, grace=3)
    for i in range(40):
        kit.wait_bound(f"low-{i}", timeout=60)
    with OvercommitSampler(kit, nodes) as sampler:
        for i in range(20):
            kit.create(f"high-{i}", cpu="1", priority_class=high, scheduler=name)
        wait_for(
            lambda: any(p["metadata"].get("deletionTimestamp") for p in kit.pods()),
            30,
            "the first victims",
        )
        wait_for(lambda: sampler.samples >= 1, 15, "a sample while the preemptions run")
        restart_api_server(kit.cluster, down_seconds=20)
        back = time.monotonic()
        for i in range(20):
            left = max(1.0, 30 - (time.monotonic() - back))
            kit.wait_bound(f"high-{i}", timeout=left)
        # Samples of the end state too (how many fall in between depends on how fast the
        # API server comes back and the preemptors are bound, so none are counted there).
        done = sampler.samples
        wait_for(lambda: sampler.samples >= done + 3, 15, "samples once every preemptor is bound")
    assert sched.alive, sched.tail()
    assert not sampler.violations, sampler.violations[:3]
    pods = {p["metadata"]["name"]: p for p in kit.pods()}
    survivors = [
        n
        for n, p in pods.items()
        if n.startswith("low-") and not p["metadata"].get("deletionTimestamp")
    ]
    assert len(survivors) == 20, f"{40 - len(survivors)} victims for 20 preemptors"
    preempted = kit.events(reason="Preempted")
    victims = {e["involvedObject"]["name"] for e in preempted}
    # (A victim may get a second Preempted event: a later preemptor can pick it again before
    # the watch shows the first DELETE, as upstream; the DELETE is uid-guarded and idempotent.)
    assert len(victims) == 20 and not victims & set(survivors), sorted(victims)


# ------------------------------------------------------------------------- watch gap


def _etcd_compact(local: Any) -> int:
    """Compact etcd at its current revision through etcd's JSON gateway (loopback)."""
    port = local.read_state()["ports"]["etcd"]
    base = f"http://127.0.0.1:{port}/v3/kv"

    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        req = urllib.request.Request(
            f"{base}/{path}", data=json.dumps(body).encode(), method="POST"
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            return dict(json.loads(resp.read()))

    rev = int(post("range", {"key": base64.b64encode(b"/").decode()})["header"]["revision"])
    post("compaction", {"revision": str(rev), "physical": True})
    return rev


@pytest.fixture
def proxied(cluster: Cluster, scheduler_workdir: Path) -> Iterator[CuttableProxy]:
    cfg = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    host, port = cfg["clusters"][0]["cluster"]["server"].removeprefix("https://").split(":")
    proxy = CuttableProxy(host, int(port))
    yield proxy
    proxy.close()


@pytest.mark.parametrize(
    "watch_list",
    [
        pytest.param("true", id="watch list (client-go's default)"),
        pytest.param("false", id="paged LIST (KUBE_FEATURE_WatchListClient=false)"),
    ],
)
def test_a_watch_gap_ending_in_410_relists_and_delivers_what_changed(
    kit: Kit, proxied: CuttableProxy, scheduler_workdir: Path, watch_list: str
) -> None:
    """The scheduler is cut off; both pods on the only node are deleted and two new pods
    created; etcd is compacted and the API server restarted, so resuming the watches gets
    410 Gone. The relist must replace the cache: the new pods fit and are bound within
    30 s of reconnecting, and no deleted pod stays in the cache as a ghost. Both ways of
    getting the state: a streaming watch list, and a paged LIST."""
    local = _local(kit)
    name = f"gap-{kit.ns}"
    kubeconfig = proxied.kubeconfig(
        kit.cluster.kubeconfig, scheduler_workdir / f"{name}.kubeconfig"
    )
    sched = SchedulerProcess(
        kubeconfig,
        scheduler_workdir,
        name=name,
        extra_env={"KUBE_FEATURE_WatchListClient": watch_list},
    ).start()
    try:
        (node,) = kit.nodes(1, cpu="2")
        for i in range(2):
            kit.create(f"old-{i}", cpu="1", scheduler=name, grace=0)
        for i in range(2):
            kit.wait_bound(f"old-{i}")
        proxied.cut()
        for i in range(2):
            kit.delete(f"old-{i}", grace=0)
        for i in range(2):
            kit.wait_gone(f"old-{i}")
        for i in range(2):
            kit.create(f"new-{i}", cpu="1", scheduler=name)
        _etcd_compact(local)
        restart_api_server(kit.cluster)  # a fresh watch cache: old versions are gone
        proxied.restore()
        for i in range(2):
            assert kit.wait_bound(f"new-{i}", timeout=30) == node
        relisted = {e.get("kind") for e in sched.log_events("watch_expired_relisting")}
        assert "Pod" in relisted, sched.tail(60)
        (listed,) = sched.log_events("initial_state_listed")
        how = "watch_list" if watch_list == "true" else "list"
        assert "pods" in listed[how] and "nodes" in listed[how], listed
        dump = _dump(sched)
        ours = sorted(k for k in dump["nodes"][node])
        assert ours == [f"{kit.ns}/new-0", f"{kit.ns}/new-1"], dump["nodes"][node]
        assert dump["ghosts"] == [] and dump["missing"] == [], dump
        assert sched.alive
    finally:
        sched.stop()


# ------------------------------------------------------------------------- gates


def test_a_gated_pod_never_preempts_and_is_bound_once_ungated(
    kit: Kit, spawn_scheduler: Any
) -> None:
    name = f"gates-{kit.ns}"
    sched = spawn_scheduler(name=name)
    kit.nodes(1, cpu="1")
    low = kit.priority_class(10)
    high = kit.priority_class(1000)
    kit.create("low", cpu="1", priority_class=low, scheduler=name, grace=1)
    kit.wait_bound("low")
    body = pod_manifest(
        "gated", cpu="1", priority_class=high, scheduler=name, node_selector=kit.selector
    )
    body["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    kit.core.create_namespaced_pod(kit.ns, body)
    wait_for(
        lambda: sched.metric("scheduler_pending_pods", {"queue": "gated"}) == 1,
        15,
        "the pod in the gated set",
    )
    settle(5)
    low_pod = kit.pod("low")
    assert low_pod is not None and not low_pod["metadata"].get("deletionTimestamp")
    gated = kit.pod("gated")
    assert gated is not None and not gated["status"].get("nominatedNodeName")
    assert not kit.events("gated", reason="FailedScheduling")
    assert sched.metric("scheduler_preemption_attempts_total") == 0
    kit.core.patch_namespaced_pod(
        "gated", kit.ns, [{"op": "remove", "path": "/spec/schedulingGates"}]
    )
    # Two halves, reported apart: the victim must go (kwok finishes a 1-s graceful delete),
    # then its deletion event must bring the preemptor back and bind it.
    kit.wait_gone("low", timeout=30)
    kit.wait_bound("gated", timeout=30)
    # Read once: the gauges are set from the queue right before each scrape.
    assert sched.metric("scheduler_pending_pods", {"queue": "gated"}) == 0


def test_a_pending_pod_being_deleted_is_skipped_with_upstreams_event(
    kit: Kit, py_scheduler: SchedulerProcess
) -> None:
    """A pending pod whose deletion waits for a finalizer stays queued, as upstream's, and
    when its turn comes it gets kube-scheduler's "skip schedule deleting pod" warning, no
    Binding and no PodScheduled condition of ours. Held by a gate until its deletion has begun, so
    that its first turn comes after it."""
    kit.nodes(1, cpu="4")
    body = pod_manifest("held", cpu="1", node_selector=kit.selector)
    body["metadata"]["finalizers"] = ["example.com/hold"]
    body["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
    kit.core.create_namespaced_pod(kit.ns, body)
    try:
        kit.delete("held")
        deleting = kit.pod("held")
        assert deleting is not None and deleting["metadata"].get("deletionTimestamp")
        kit.core.patch_namespaced_pod(
            "held", kit.ns, [{"op": "remove", "path": "/spec/schedulingGates"}]
        )
        ev = kit.wait_failed_with("held", "skip schedule deleting pod")
        assert ev == f"skip schedule deleting pod: {kit.ns}/held"
        (event,) = kit.events("held", "FailedScheduling")
        assert event["type"] == "Warning"
        pod = kit.pod("held")
        assert pod is not None and not pod["spec"].get("nodeName")
        # The API server's condition from the pod's creation, none of ours after it.
        cond = kit.condition("held", "PodScheduled")
        assert cond is not None and cond["reason"] == "SchedulingGated", cond
    finally:
        kit.core.patch_namespaced_pod(
            "held", kit.ns, [{"op": "remove", "path": "/metadata/finalizers"}]
        )
    kit.wait_gone("held", timeout=30)


# ------------------------------------------------------------------------- lease


def test_the_leader_keeps_its_lease_through_a_1000_pod_binding_burst(
    kit: Kit, spawn_scheduler: Any
) -> None:
    """At the default 50 QPS, 1000 Bindings take 20 s or more; the lease (6 s, renewed
    every 1 s, deadline 4 s in this test) is renewed on its own client all along."""
    name = f"burst-{kit.ns}"
    lease = f"lease-{kit.ns}"
    sched = spawn_scheduler(name=name, leader_elect=True, lease_name=lease)
    wait_for(lambda: sched.metric("py_scheduler_leader") == 1.0, 20, "leadership")
    coord = k8s.CoordinationV1Api(kit.cluster.api)
    before = coord.read_namespaced_lease(lease, "kube-system").spec
    kit.nodes(10, cpu="64", pods=120)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: kit.create(f"b-{i}", cpu="10m", scheduler=name), range(1000)))
    wait_for(
        lambda: sum(1 for p in kit.pods() if p["spec"].get("nodeName")) == 1000,
        300,
        "1000 pods bound",
        interval=2,
    )
    after = coord.read_namespaced_lease(lease, "kube-system").spec
    assert sched.alive, sched.tail()
    assert after.holder_identity == before.holder_identity
    assert (after.lease_transitions or 0) == (before.lease_transitions or 0)
    assert not sched.log_events("leader_lost"), sched.tail()
    assert not sched.log_events("lease_error"), sched.log_events("lease_error")[:3]
