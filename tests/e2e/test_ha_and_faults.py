"""Two replicas with leader election (scenario 10), churn (12) and bad input (13)."""

from __future__ import annotations

import random
import subprocess
import time
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from tests.e2e.conftest import Cluster, wait_for
from tests.e2e.kit import Kit, restart_api_server, settle
from tests.e2e.procs import SchedulerProcess, py_scheduler_command


def _leader(procs: list[SchedulerProcess]) -> SchedulerProcess | None:
    leaders = [p for p in procs if p.alive and p.metric("py_scheduler_leader") == 1.0]
    assert len(leaders) <= 1, "two replicas believe they lead"
    return leaders[0] if leaders else None


def _scheduled_counts(k: Kit) -> dict[str, int]:
    counts: dict[str, int] = {}
    for e in k.events(reason="Scheduled"):
        name = e["involvedObject"]["name"]
        # events.k8s.io/v1: a repeat is a series (series.count), no core/v1 count.
        counts[name] = counts.get(name, 0) + int((e.get("series") or {}).get("count") or 1)
    return counts


def _settled_scheduled_counts(k: Kit, names: list[str]) -> dict[str, int]:
    """The Scheduled events per pod, once every pod of ``names`` has one and a little
    longer (a second binding, if any, would show as a second event). The event is sent
    after the Binding succeeds, as kube-scheduler's, so a pod can be bound before its
    event exists: waiting for it is waiting for what the scheduler promises, not a retry."""
    wait_for(
        lambda: set(names) <= set(_scheduled_counts(k)),
        30,
        f"a Scheduled event for each of {names}",
    )
    settle(2)
    return _scheduled_counts(k)


def test_two_replicas_only_the_leader_binds_and_the_standby_takes_over(
    kit: Kit,
    spawn_scheduler: Any,
) -> None:
    """Scenario 10: no pod is double-bound or lost across a leader crash."""
    name = f"ha-{kit.ns}"
    lease = f"lease-{kit.ns}"
    replicas = [spawn_scheduler(name=name, leader_elect=True, lease_name=lease) for _ in range(2)]
    leader = wait_for(lambda: _leader(replicas), 20, "a leader")
    kit.nodes(2, cpu="8")
    for i in range(10):
        kit.create(f"a-{i}", scheduler=name)
    for i in range(10):
        kit.wait_bound(f"a-{i}")
    wait_for(
        lambda: {f"a-{i}" for i in range(10)} <= set(_scheduled_counts(kit)),
        30,
        "a Scheduled event for each a- pod",
    )
    coord = k8s.CoordinationV1Api(kit.cluster.api)
    holder = coord.read_namespaced_lease(lease, "kube-system").spec.holder_identity
    instances = {e.get("reportingInstance") for e in kit.events(reason="Scheduled")}
    assert instances == {holder}, f"only the leader {holder} may bind, saw {instances}"

    leader.kill()  # a crash: the lease is not released
    killed_at = time.monotonic()
    for i in range(10):
        kit.create(f"b-{i}", scheduler=name)
    standby = next(p for p in replicas if p is not leader)
    wait_for(lambda: _leader([standby]), 6 + 10, "the standby to take the lease")
    assert time.monotonic() - killed_at < 6 + 10  # lease duration + a few retry periods
    for i in range(10):
        kit.wait_bound(f"b-{i}", timeout=30)
    counts = _settled_scheduled_counts(kit, [f"{g}-{i}" for g in "ab" for i in range(10)])
    pods = {p["metadata"]["name"]: p for p in kit.pods()}
    for group in ("a", "b"):
        for i in range(10):
            n = f"{group}-{i}"
            assert pods[n]["spec"].get("nodeName"), f"{n} lost"
            assert counts.get(n) == 1, f"{n} bound {counts.get(n)} times"


def test_delay_cache_until_active_the_standby_lists_nothing_until_it_leads(
    kit: Kit,
    spawn_scheduler: Any,
) -> None:
    """Upstream's delayCacheUntilActive: the standby starts no informer (so holds no
    cache and is not ready) until it takes the lease; then it lists and schedules."""
    name = f"lazy-{kit.ns}"
    lease = f"lease-lazy-{kit.ns}"
    cfg = {"delayCacheUntilActive": True}
    first = spawn_scheduler(
        name=name, leader_elect=True, lease_name=lease, config=cfg, wait_ready=False
    )
    wait_for(lambda: _leader([first]), 20, "the first replica to lead")
    first.wait_ready()
    second = spawn_scheduler(
        name=name, leader_elect=True, lease_name=lease, config=cfg, wait_ready=False
    )
    wait_for(lambda: second.get("/healthz")[0] == 200, 30, "the standby serving /healthz")
    wait_for(lambda: second.log_events("informers_wait_for_leadership"), 10, "the standby waiting")
    nodes = kit.nodes(2, cpu="8")
    for i in range(5):
        kit.create(f"a-{i}", scheduler=name)
    for i in range(5):
        kit.wait_bound(f"a-{i}")
    # The leader's cache has the nodes and pods; the standby's nothing, as it listed nothing.
    assert first.metric("scheduler_cache_size", {"type": "nodes"}) >= 2
    assert second.metric("scheduler_cache_size", {"type": "nodes"}) == 0
    assert second.metric("py_scheduler_cache_pods") == 0
    assert second.get("/readyz")[0] == 503
    assert not second.log_events("initial_state_listed")

    first.kill()  # a crash: the lease is not released
    for i in range(5):
        kit.create(f"b-{i}", scheduler=name)
    wait_for(lambda: _leader([second]), 6 + 10, "the standby to take the lease")
    for i in range(5):
        kit.wait_bound(f"b-{i}", timeout=30)
    second.wait_ready()
    assert second.log_events("informers_starting")
    assert second.metric("scheduler_cache_size", {"type": "nodes"}) >= 2
    counts = _settled_scheduled_counts(kit, [f"{g}-{i}" for g in "ab" for i in range(5)])
    assert all(counts[f"{g}-{i}"] == 1 for g in "ab" for i in range(5)), counts
    assert kit.overcommitted(nodes) == {}


def test_api_server_restart_while_pods_are_pending_the_scheduler_reconnects_and_finishes(
    kit: Kit,
    spawn_scheduler: Any,
) -> None:
    """Scenario 11: pods are pending (their scheduler has no room), the API server goes
    away for a few seconds and comes back; room appears; every pod gets bound."""
    if kit.cluster.local is None:
        raise AssertionError("this scenario restarts the local control plane's API server")
    name = f"apirestart-{kit.ns}"
    sched = spawn_scheduler(name=name)
    kit.nodes(1, cpu="1")
    for i in range(6):
        kit.create(f"p-{i}", cpu="500m", scheduler=name)
    wait_for(
        lambda: sum(1 for p in kit.pods() if p["spec"].get("nodeName")) == 2,
        30,
        "two pods bound, four pending",
    )
    restart_api_server(kit.cluster, down_seconds=5)
    assert sched.alive, "the scheduler must survive the API server going away"
    kit.nodes(2, cpu="1")  # room for the four pending pods, created after the restart
    for i in range(6):
        kit.wait_bound(f"p-{i}", timeout=90)
    assert sched.alive and sched.get("/healthz")[0] == 200
    counts = _settled_scheduled_counts(kit, [f"p-{i}" for i in range(6)])
    assert all(counts.get(f"p-{i}") == 1 for i in range(6)), counts


def test_churn_never_overcommits_and_never_preempts_upwards(
    kit: Kit,
    py_scheduler: SchedulerProcess,
) -> None:
    """Scenario 12: 200 pods of mixed priorities created and deleted at random on 20 nodes
    for 60 s; node usage never exceeds allocatable at any sampled point; no pod of priority
    P is preempted for a pod of priority <= P; at the end every pending pod truly does not
    fit anywhere."""
    rng = random.Random(12)
    nodes = kit.nodes(20, cpu="2", memory="8Gi")
    classes = {v: kit.priority_class(v) for v in (0, 10, 100, 1000)}
    prio_of_uid: dict[str, int] = {}
    live: list[str] = []
    created = 0
    deadline = time.monotonic() + 60
    next_sample = 0.0
    samples = 0
    while time.monotonic() < deadline:
        if created < 200 and (not live or rng.random() < 0.75):
            value = rng.choice(list(classes))
            name = f"c-{created}"
            pod = kit.create(
                name, cpu=rng.choice(["250m", "500m", "1"]), grace=1, priority_class=classes[value]
            )
            prio_of_uid[pod["metadata"]["uid"]] = value
            live.append(name)
            created += 1
        elif live:
            kit.delete(live.pop(rng.randrange(len(live))), grace=0)
        if time.monotonic() >= next_sample:
            over = kit.overcommitted(nodes)
            assert not over, f"node usage exceeded allocatable: {over}"
            samples += 1
            next_sample = time.monotonic() + 2
        time.sleep(0.15)
    assert samples >= 20 and created >= 150

    def steady() -> bool:
        pending = [p for p in kit.pods() if not p["spec"].get("nodeName")]
        return all(not _fits_anywhere(kit, p, nodes) for p in pending)

    wait_for(steady, 60, "every pending pod that fits to be bound")
    assert kit.node_usage_ok(nodes)
    for e in kit.events(reason="Preempted"):
        victim_uid = e["involvedObject"].get("uid")
        preemptor_uid = e["message"].split("Preempted by pod ", 1)[1].split(" ", 1)[0]
        if victim_uid in prio_of_uid and preemptor_uid in prio_of_uid:
            assert prio_of_uid[victim_uid] < prio_of_uid[preemptor_uid], e["message"]


def _fits_anywhere(k: Kit, pod: dict[str, Any], nodes: list[str]) -> bool:
    from scheduler.quantity import milli_value

    want = milli_value(pod["spec"]["containers"][0]["resources"]["requests"]["cpu"])
    used = dict.fromkeys(nodes, 0)
    for p in k.pods():
        n = p["spec"].get("nodeName")
        if n in used and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            used[n] += milli_value(p["spec"]["containers"][0]["resources"]["requests"]["cpu"])
    return any(2000 - used[n] >= want for n in nodes)


def test_bad_input_breaks_nothing(
    kit: Kit,
    py_scheduler: SchedulerProcess,
) -> None:
    """Scenario 13 (in-cluster part): an unknown priorityClassName is rejected by admission;
    a pod bigger than any node gets a clear message and no preemption; a node with labels
    our affinity operators cannot read is just not a match; the scheduler keeps going."""
    (node,) = kit.nodes(1, cpu="2", labels={"cores": "lots"})
    try:
        kit.create("ghost", priority_class="no-such-class")
        raise AssertionError("admission must reject an unknown priorityClassName")
    except ApiException as e:
        assert e.status == 403 and "no-such-class" in str(e.body)
    kit.create("low", cpu="1", node_name=node)
    kit.wait_running("low")
    top = kit.priority_class(1000)
    kit.create("giant", cpu="64", priority_class=top)
    cond = kit.wait_condition("giant", "PodScheduled", lambda c: c.get("status") == "False")
    assert "Insufficient cpu" in cond["message"]
    assert "Preemption is not helpful for scheduling" in cond["message"]
    settle(2)
    assert not ((kit.pod("giant") or {}).get("status") or {}).get("nominatedNodeName")
    assert kit.events(reason="Preempted") == []
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "numeric"},
        "spec": {
            "schedulerName": "py-scheduler",
            "nodeSelector": kit.selector,
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "cores", "operator": "Gt", "values": ["1"]}
                                ]
                            }
                        ]
                    }
                }
            },
            "containers": [{"name": "c", "image": "x"}],
        },
    }
    kit.core.create_namespaced_pod(kit.ns, body)
    cond = kit.wait_condition("numeric", "PodScheduled", lambda c: c.get("status") == "False")
    assert "didn't match Pod's node affinity/selector" in cond["message"]
    kit.create("fine", cpu="500m")
    assert kit.wait_bound("fine") == node
    assert py_scheduler.alive and py_scheduler.get("/healthz")[0] == 200


def test_invalid_config_file_exits_2_naming_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles:\n- schedulerName: x\n  plugins:\n    score:\n      enabled:\n"
        "      - name: NoSuchPlugin\n"
    )
    out = subprocess.run(
        [*py_scheduler_command(), "run", "--config", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert str(bad) in out.stderr
    assert "profiles[0].plugins.score.enabled[0].name" in out.stderr
    assert "NoSuchPlugin" in out.stderr


def test_unreachable_api_server_at_start_up_is_a_clear_error_and_retried(
    tmp_path: Path, cluster: Cluster
) -> None:
    from tests.e2e.procs import SchedulerProcess, free_port

    port = free_port()  # nothing listens there
    kubeconfig = tmp_path / "unreachable.kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
        f"    server: https://127.0.0.1:{port}\n    insecure-skip-tls-verify: true\n"
        "users:\n- name: u\n  user:\n    token: nothing\ncontexts:\n- name: c\n"
        "  context: {cluster: c, user: u}\ncurrent-context: c\n"
    )
    proc = SchedulerProcess(str(kubeconfig), tmp_path, name="unreachable").start(wait_ready=False)
    try:

        def retried() -> bool:
            # An informer's listing (a watch list, or a LIST), retried.
            return len(proc.log_events("list_failed")) >= 2

        wait_for(retried, 30, "start-up sync to be retried")
        assert proc.alive
        assert proc.get("/readyz")[0] == 503
        errors = proc.log_events("list_failed")
        assert f"127.0.0.1:{port}" in errors[0]["error"]
    finally:
        assert proc.stop() == 0
