"""Several profiles in one live scheduler, against the real API server: each pod is
scheduled by the profile its ``spec.schedulerName`` names (here one packs nodes, the other
spreads over them), its Events name that profile as their reporting controller, its
attempts are counted under it, and a pod of one profile preempts a pod of the other."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.config import LeaderElectionConfig, SchedulerConfig, load_config
from tests.e2e.conftest import Cluster, localcluster, wait_for
from tests.e2e.kit import Kit, settle


def test_each_profile_schedules_its_own_pods_with_its_own_plugins(
    kit: Kit, spawn_scheduler: Any
) -> None:
    spread = f"spread-{kit.ns}"[:60]
    packed = f"packed-{kit.ns}"[:60]
    sched = spawn_scheduler(
        name=spread,
        config={
            "profiles": [
                {},
                {
                    "schedulerName": packed,
                    "pluginConfig": [
                        {
                            "name": "NodeResourcesFit",
                            "args": {"scoringStrategy": {"type": "MostAllocated"}},
                        }
                    ],
                },
            ]
        },
    )
    nodes = kit.nodes(2, cpu="4", memory="8Gi")
    # One pod at a time, each bound before the next: the packed profile's pods share a
    # node, the spread profile's take the emptier one.
    order = [("p0", packed), ("p1", packed), ("s0", spread), ("p2", packed), ("s1", spread)]
    for name, scheduler in order:
        kit.create(name, cpu="1", memory="2Gi", scheduler=scheduler)
        kit.wait_bound(name)
    where = {name: kit.node_of(name) for name, _ in order}
    assert where["p0"] == where["p1"] == where["p2"], where
    assert where["s0"] == where["s1"] != where["p0"], where
    assert set(where.values()) == set(nodes)
    # A pod of neither profile is not ours.
    kit.create("theirs", cpu="1", memory="2Gi", scheduler=f"nobody-{kit.ns}")

    def told(name: str, reason: str) -> str:
        ev = kit.wait_event(name, reason)
        return str(ev.get("reportingComponent") or ev.get("reportingController") or "")

    assert {name: told(name, "Scheduled") for name, _ in order} == {
        name: scheduler for name, scheduler in order
    }
    for profile, count in ((packed, 3), (spread, 2)):
        labels = {"result": "scheduled", "profile": profile}
        assert sched.metric("scheduler_schedule_attempts_total", labels) == count

    # The spread node is full (2 of 4 CPUs taken by s0, s1; the packed one by p0-p2): a
    # high-priority pod of the packed profile preempts a pod of the spread profile.
    high = kit.priority_class(1000)
    kit.create("big", cpu="3", memory="2Gi", scheduler=packed, priority_class=high)
    wait_for(
        lambda: kit.events(reason="Preempted"),
        30,
        "a Preempted event",
    )
    (victim_event,) = kit.events(reason="Preempted")
    victim = victim_event["involvedObject"]["name"]
    assert victim_event.get("reportingComponent") == packed
    assert kit.wait_bound("big", timeout=60) == where[victim]
    settle(1.0)
    assert kit.node_of("theirs") == ""
    assert not kit.events("theirs")
    assert kit.overcommitted(nodes) == {}


def test_plugin_args_shape_a_profile_s_decisions(kit: Kit, spawn_scheduler: Any) -> None:
    """Upstream's plugin args in the live scheduler: NodeAffinity's addedAffinity keeps the
    profile's pods on its pool (a node that joins the pool takes the pod that waited for
    it), and PodTopologySpread's List defaults spread the pods of a Service by zone."""
    name = f"args-{kit.ns}"[:60]
    pool = f"pool-{kit.ns}"[:63]
    zone = "topology.kubernetes.io/zone"
    (a,) = kit.nodes(1, cpu="4", labels={pool: "yes", zone: "a"})
    (b,) = kit.nodes(1, cpu="2", labels={pool: "yes", zone: "b"})
    (outside,) = kit.nodes(1, cpu="8", labels={zone: "b"})
    # Before the scheduler starts, so that its first listing has the Service: a pod is
    # never scheduled before the scheduler knows the Service that selects it.
    kit.core.create_namespaced_service(
        kit.ns,
        {
            "metadata": {"name": "web"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]},
        },
    )
    spawn_scheduler(
        name=name,
        config={
            "profiles": [
                {
                    "pluginConfig": [
                        {
                            "name": "NodeAffinity",
                            "args": {
                                "addedAffinity": {
                                    "requiredDuringSchedulingIgnoredDuringExecution": {
                                        "nodeSelectorTerms": [
                                            {
                                                "matchExpressions": [
                                                    {"key": pool, "operator": "Exists"}
                                                ]
                                            }
                                        ]
                                    }
                                }
                            },
                        },
                        {
                            "name": "PodTopologySpread",
                            "args": {
                                "defaultingType": "List",
                                "defaultConstraints": [
                                    {
                                        "maxSkew": 1,
                                        "topologyKey": zone,
                                        "whenUnsatisfiable": "DoNotSchedule",
                                    }
                                ],
                            },
                        },
                    ]
                }
            ]
        },
    )
    # b has room for two pods of 1 CPU, a for four: the Service's pods alternate zones
    # until b is full (2 and 2), a fifth goes to a (3 against 2), and a sixth there would
    # make the skew 2.
    for i in range(6):
        kit.create(f"web-{i}", cpu="1", scheduler=name, labels={"app": "web"})
    where = {i: kit.wait_bound(f"web-{i}") for i in range(5)}
    assert sorted(where.values()) == sorted([a, a, a, b, b]), where
    message = kit.wait_failed_with(
        "web-5", "1 node(s) didn't match pod topology spread constraints"
    )
    assert "1 Insufficient cpu" in message
    # The node outside the pool (and every other test's) fails the added affinity.
    assert "didn't match scheduler-enforced node affinity" in message
    # A pod that names the node outside the pool waits for it to join.
    kit.create(
        "there",
        cpu="1",
        scheduler=name,
        node_selector={**kit.selector, "kubernetes.io/hostname": outside},
    )
    kit.wait_failed_with("there", "didn't match scheduler-enforced node affinity")
    kit.core.patch_node(outside, {"metadata": {"labels": {pool: "yes"}}})
    assert kit.wait_bound("there", timeout=30) == outside
    assert kit.overcommitted([a, b, outside]) == {}


def test_kube_scheduler_s_written_out_configuration_reads_as_our_defaults(
    cluster: Cluster, tmp_path: Path
) -> None:
    """The real kube-scheduler (the one the control plane's binaries came with) writes its
    defaulted configuration; py-scheduler reads it as its own defaults, but for the names
    (tests/unit/configs/ keeps a copy for the unit tests; this one checks it has not
    drifted from the binary)."""
    if cluster.local is None:
        pytest.skip("E2E_KUBECONFIG: no kube-scheduler binary comes with an outside cluster")
    kube_scheduler = localcluster.resolve_bin_dir() / "kube-scheduler"
    out = tmp_path / "kube-scheduler.yaml"
    subprocess.run(
        [str(kube_scheduler), "--kubeconfig", cluster.kubeconfig, f"--write-config-to={out}"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    cfg = load_config(out)
    assert cfg == replace(
        SchedulerConfig(),
        scheduler_name="default-scheduler",
        leader_election=replace(LeaderElectionConfig(), resource_name="kube-scheduler"),
        profiling_requested="enableProfiling",
        kubeconfig=cluster.kubeconfig,
    )
    kept = Path(__file__).parents[1] / "unit" / "configs" / "kube-scheduler-v1.37-defaults.yaml"
    written = yaml.safe_load(out.read_text())
    written["clientConnection"]["kubeconfig"] = "/etc/kubernetes/scheduler.conf"
    assert yaml.safe_load(kept.read_text()) == written
