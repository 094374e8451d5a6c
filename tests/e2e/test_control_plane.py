"""Acceptance of the e2e foundation: the real admission plugins and controllers py-scheduler
relies on are there, and kwok plays the kubelet (Running pods, graceful deletion)."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from .conftest import REPO_ROOT, Cluster, localcluster, unique, wait_for

PRIORITY = 1_000_000


def _pod(name: str, *, node: str | None = None, labels: dict[str, str] | None = None) -> k8s.V1Pod:
    return k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name=name, labels=labels or {}),
        spec=k8s.V1PodSpec(
            node_name=node,
            containers=[
                k8s.V1Container(
                    name="main",
                    image="registry.k8s.io/pause:3.10",
                    resources=k8s.V1ResourceRequirements(requests={"cpu": "100m"}),
                )
            ],
        ),
    )


def _read_pod_or_none(core: k8s.CoreV1Api, name: str, namespace: str) -> k8s.V1Pod | None:
    try:
        return core.read_namespaced_pod(name, namespace)
    except ApiException as err:
        if err.status == 404:
            return None
        raise


def _running(core: k8s.CoreV1Api, name: str, namespace: str) -> bool:
    pod = core.read_namespaced_pod(name, namespace)
    return pod.status.phase == "Running"


def test_priority_admission_resolves_priority_class(cluster: Cluster, namespace: str) -> None:
    scheduling = k8s.SchedulingV1Api(cluster.api)
    pc_name = unique("e2e-priority")
    scheduling.create_priority_class(
        k8s.V1PriorityClass(metadata=k8s.V1ObjectMeta(name=pc_name), value=PRIORITY)
    )
    try:
        pod = _pod("prioritized")
        pod.spec.scheduler_name = "py-scheduler"  # nothing needs to schedule it
        pod.spec.priority_class_name = pc_name
        created = cluster.core.create_namespaced_pod(namespace, pod)
        assert created.spec.priority == PRIORITY
        read_back = cluster.core.read_namespaced_pod("prioritized", namespace)
        assert read_back.spec.priority == PRIORITY
        assert read_back.spec.priority_class_name == pc_name
        assert read_back.spec.preemption_policy == "PreemptLowerPriority"
    finally:
        scheduling.delete_priority_class(pc_name)


def test_disruption_controller_fills_pdb_status(
    cluster: Cluster, namespace: str, kwok_node: str
) -> None:
    labels = {"app": "guarded"}
    names = [f"guarded-{i}" for i in range(3)]
    for name in names:
        cluster.core.create_namespaced_pod(namespace, _pod(name, node=kwok_node, labels=labels))
    for name in names:
        wait_for(lambda n=name: _running(cluster.core, n, namespace), 60, f"pod {name} Running")

    policy = k8s.PolicyV1Api(cluster.api)
    policy.create_namespaced_pod_disruption_budget(
        namespace,
        k8s.V1PodDisruptionBudget(
            metadata=k8s.V1ObjectMeta(name="guard"),
            spec=k8s.V1PodDisruptionBudgetSpec(
                min_available=1, selector=k8s.V1LabelSelector(match_labels=labels)
            ),
        ),
    )

    def settled() -> k8s.V1PodDisruptionBudgetStatus | None:
        pdb = policy.read_namespaced_pod_disruption_budget("guard", namespace)
        status = pdb.status
        if status is None or status.observed_generation != pdb.metadata.generation:
            return None
        return status if status.current_healthy == len(names) else None

    status = wait_for(settled, 60, "the disruption controller to fill the PDB status")
    assert status.expected_pods == len(names)
    assert status.desired_healthy == 1
    assert status.disruptions_allowed == len(names) - 1


def test_graceful_deletion_keeps_pod_terminating_then_removes_it(
    cluster: Cluster, namespace: str, kwok_node: str
) -> None:
    core = cluster.core
    core.create_namespaced_pod(namespace, _pod("graceful", node=kwok_node))
    wait_for(lambda: _running(core, "graceful", namespace), 60, "pod graceful Running")

    core.delete_namespaced_pod("graceful", namespace)  # default grace period: 30s
    terminating = _read_pod_or_none(core, "graceful", namespace)
    assert terminating is not None, "pod vanished at once: deletion was not graceful"
    assert terminating.metadata.deletion_timestamp is not None
    assert terminating.metadata.deletion_grace_period_seconds == 30

    # kwok finishes the deletion after min(grace period, PY_SCHEDULER_KWOK_DELETE_DELAY).
    wait_for(
        lambda: _read_pod_or_none(core, "graceful", namespace) is None,
        45,
        "kwok to finish the graceful deletion",
    )


def test_helper_nodes_are_ready_with_requested_allocatable(cluster: Cluster) -> None:
    names = cluster.create_nodes(
        2,
        cpu="8",
        memory="16Gi",
        pods=50,
        labels={"pool": "e2e"},
        taints=["dedicated=e2e:NoSchedule"],
    )
    assert len(names) == 2
    for name in names:
        node = cluster.core.read_node(name)
        ready = [c for c in node.status.conditions if c.type == "Ready"]
        assert ready and ready[0].status == "True", node.status.conditions
        assert node.status.allocatable["cpu"] == "8"
        assert node.status.allocatable["memory"] == "16Gi"
        assert node.status.allocatable["pods"] == "50"
        assert node.metadata.labels["pool"] == "e2e"
        assert node.metadata.labels["type"] == "kwok"
        assert node.metadata.annotations["kwok.x-k8s.io/node"] == "fake"
        taints = [(t.key, t.value, t.effect) for t in node.spec.taints or []]
        assert taints == [("dedicated", "e2e", "NoSchedule")]


# --- start-up errors (no cluster needed) ---------------------------------------------------


def _stub(path: Path, script: str) -> None:
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_wrong_kube_bin_dir_names_the_variable_and_the_binary(tmp_path: Path) -> None:
    for name in localcluster.BINARIES:
        if name != "kwok":
            _stub(tmp_path / name, "exit 0\n")
    with pytest.raises(localcluster.ClusterError) as err:
        localcluster.resolve_bin_dir({"KUBE_BIN_DIR": str(tmp_path)})
    assert "KUBE_BIN_DIR" in str(err.value)
    assert "'kwok'" in str(err.value)

    env = {**os.environ, "KUBE_BIN_DIR": str(tmp_path / "nope")}
    script = str(REPO_ROOT / "hack" / "localcluster.py")
    result = subprocess.run(
        [sys.executable, script, "up", "--state-dir", str(tmp_path / "state")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert f"KUBE_BIN_DIR={tmp_path / 'nope'} is not a directory" in result.stderr


def test_pinned_port_in_use_is_reported(unused_tcp_listener: int) -> None:
    env = {"PY_SCHEDULER_APISERVER_PORT": str(unused_tcp_listener)}
    with pytest.raises(localcluster.ClusterError) as err:
        localcluster.allocate_ports(env)
    assert f"kube-apiserver: port 127.0.0.1:{unused_tcp_listener} is in use" in str(err.value)


def test_component_exiting_during_start_up_is_reported(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in localcluster.BINARIES:
        _stub(bin_dir / name, "echo 'etcd: cannot start: boom' >&2\nexit 3\n")
    local = localcluster.LocalCluster(tmp_path / "state", bin_dir=bin_dir)
    with pytest.raises(localcluster.ClusterError) as err:
        local.up()
    message = str(err.value)
    log_path = tmp_path / "state" / "logs" / "etcd.log"
    assert f"etcd exited with code 3 during start-up; see {log_path}" in message
    assert "cannot start: boom" in message
    assert not (tmp_path / "state" / "pids.json").exists()


@pytest.fixture
def unused_tcp_listener() -> Iterator[int]:
    """A port something listens on (the port is busy until the test ends)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_node_lease_setting_reaches_kwok_and_the_node_lifecycle_controller(
    tmp_path: Path,
) -> None:
    """PY_SCHEDULER_NODE_LEASE_SECONDS: kwok's lease and, past the default, a node monitor
    grace period that outlasts a renewal interval; bad values name the variable."""
    assert localcluster.node_lease_seconds({}) == 40
    local = localcluster.LocalCluster(
        tmp_path, env={"PY_SCHEDULER_NODE_LEASE_SECONDS": "240"}, bin_dir=tmp_path
    )
    argv = {c.name: c.argv for c in local._components(tmp_path, localcluster.allocate_ports({}))}
    assert "--node-lease-duration-seconds=240" in argv["kwok"]
    assert "--node-monitor-grace-period=360s" in argv["kube-controller-manager"]
    default = localcluster.LocalCluster(tmp_path, env={}, bin_dir=tmp_path)
    argv = {c.name: c.argv for c in default._components(tmp_path, localcluster.allocate_ports({}))}
    assert "--node-lease-duration-seconds=40" in argv["kwok"]
    assert not any("grace-period" in a for a in argv["kube-controller-manager"])
    for bad in ("5", "1m", "-3"):
        with pytest.raises(localcluster.ClusterError, match="PY_SCHEDULER_NODE_LEASE_SECONDS"):
            localcluster.node_lease_seconds({"PY_SCHEDULER_NODE_LEASE_SECONDS": bad})


def test_ports_are_picked_below_the_ephemeral_range() -> None:
    """No outgoing connection can take a component's port while it restarts."""
    low, _ = localcluster._ephemeral_range()
    ports = localcluster.allocate_ports({})
    assert len(set(ports.values())) == len(ports)
    if low > 11000:  # room below the range (Linux's default starts at 32768)
        assert all(10000 <= p < low for p in ports.values()), ports


def test_a_restart_moves_kwok_off_a_held_port_but_never_a_pinned_or_api_port(
    tmp_path: Path, unused_tcp_listener: int
) -> None:
    held = unused_tcp_listener
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    local = localcluster.LocalCluster(state_dir, env={}, bin_dir=tmp_path)
    state = {"ports": {"kube-apiserver": held, "kwok": held}}
    assert not local._move_port_if_taken("kube-apiserver", state)  # clients know that one
    assert local._move_port_if_taken("kwok", state)
    moved = state["ports"]["kwok"]
    assert moved != held and localcluster.port_is_free(moved)
    assert f'"kwok": {moved}' in local.pids_file.read_text()  # recorded for `status`
    pinned = localcluster.LocalCluster(
        state_dir, env={"PY_SCHEDULER_KWOK_PORT": str(held)}, bin_dir=tmp_path
    )
    state = {"ports": {"kwok": held}}
    assert not pinned._move_port_if_taken("kwok", state) and state["ports"]["kwok"] == held
