"""``py-scheduler explain`` against the local control plane, as a subprocess: a pending pod
that would preempt, one that cannot fit anywhere, a bound pod, and the error exits.

The pending pods name a profile no running scheduler serves (``explain-e2e``), so they
stay pending whatever else runs on the cluster; explain is given that profile with
--config. Other tests' nodes fail this test's nodeSelector (NodeAffinity)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.kit import Kit
from tests.e2e.procs import py_scheduler_command

PROFILE = "explain-e2e"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [{"schedulerName": PROFILE}],
            }
        )
    )
    return path


def explain(k: Kit, ref: str, config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [
        *py_scheduler_command(),
        "explain",
        ref,
        "--kubeconfig",
        k.cluster.kubeconfig,
        "--config",
        str(config),
        *args,
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def explain_json(k: Kit, ref: str, config: Path) -> dict[str, Any]:
    run = explain(k, ref, config, "-o", "json")
    assert run.returncode == 0, run.stderr
    out: dict[str, Any] = json.loads(run.stdout)
    return out


def _setup(k: Kit) -> tuple[str, str]:
    """a: two priority-0 pods (1 cpu each); b: one 2-cpu pod of priority 500."""
    a, b = k.nodes(2, cpu="2")
    mid = k.priority_class(500)
    for i in range(2):
        k.create(f"low-{i}", cpu="1", node_name=a, node_selector=k.selector)
        k.wait_running(f"low-{i}")
        time.sleep(1.05)  # distinct start times: the later one is the cheaper victim
    k.create("mid", cpu="2", node_name=b, priority_class=mid, node_selector=k.selector)
    k.wait_running("mid")
    return a, b


def test_pending_pod_that_would_preempt(kit: Kit, config: Path) -> None:
    a, b = _setup(kit)
    high = kit.priority_class(1000000)
    kit.create("high", cpu="1", priority_class=high, scheduler=PROFILE)
    out = explain_json(kit, f"{kit.ns}/high", config)
    assert out["state"] == "pending" and out["priority"] == 1000000
    verdicts = {v["node"]: v for v in out["nodes"]}
    for n in (a, b):
        assert verdicts[n]["fits"] is False
        assert (verdicts[n]["plugin"], verdicts[n]["reasons"]) == (
            "NodeResourcesFit",
            ["Insufficient cpu"],
        )
    # Other tests' nodes fail our nodeSelector, or an earlier filter (a taint, cordon).
    others = [v for name, v in verdicts.items() if name not in (a, b)]
    assert all(v["code"] == "UnschedulableAndUnresolvable" for v in others), others
    assert all(v["plugin"] != "NodeResourcesFit" for v in others), others
    pre = out["preemption"]
    assert pre["outcome"] == "would preempt"
    assert pre["node"] == a
    assert pre["victims"] == [
        {
            "pod": f"{kit.ns}/low-1",
            "priority": 0,
            "schedulerName": "py-scheduler",
            "pdbs": [],
            "violates": [],
        }
    ]
    assert pre["decidedBy"] == "lowest highest-priority victim"
    # The victims were placed under the shared py-scheduler profile, not this config's: the
    # warning says so (victimSchedulerNames would keep them out).
    assert pre["warnings"] == [
        f"victim {kit.ns}/low-1 belongs to scheduler py-scheduler; DefaultPreemption's "
        "victimSchedulerNames limits victims to the schedulers it names"
    ]
    (cand,) = pre["candidates"]
    assert cand["node"] == b and cand["lostAt"] == "lowest highest-priority victim"
    assert cand["victims"][0]["pod"] == f"{kit.ns}/mid"
    assert out["message"].endswith(
        f"preemption: found a potential placement for pod on node {a}, preempting 1 victims"
    )
    # Read-only: nothing was preempted, nothing nominated.
    assert kit.pod("low-1") is not None
    assert not ((kit.pod("high") or {}).get("status") or {}).get("nominatedNodeName")

    text = explain(kit, f"{kit.ns}/high", config)
    assert text.returncode == 0, text.stderr
    assert "PREEMPTION: would preempt" in text.stdout
    assert f"node {a}; victims: {kit.ns}/low-1 (priority 0)" in text.stdout


def test_pending_pod_that_cannot_fit_anywhere(kit: Kit, config: Path) -> None:
    a, b = _setup(kit)
    high = kit.priority_class(1000000)
    kit.create("huge", cpu="16", priority_class=high, scheduler=PROFILE)
    out = explain_json(kit, f"{kit.ns}/huge", config)
    verdicts = {v["node"]: v for v in out["nodes"]}
    assert not any(v["fits"] for v in verdicts.values())
    # More than a node's allocatable: no eviction can help (UnschedulableAndUnresolvable).
    for n in (a, b):
        assert verdicts[n]["reasons"] == ["Insufficient cpu"]
        assert verdicts[n]["code"] == "UnschedulableAndUnresolvable"
    pre = out["preemption"]
    assert pre["outcome"] == "not helpful" and pre["node"] is None
    assert pre["candidates"] == []
    not_candidates = {n["node"]: n["reason"] for n in pre["notCandidates"]}
    assert set(not_candidates) == set(verdicts)
    assert not_candidates[a] == not_candidates[b] == "preemption cannot help: Insufficient cpu"
    assert all(r.startswith("preemption cannot help: ") for r in not_candidates.values())
    assert out["message"].startswith("0/") and " Insufficient cpu" in out["message"]
    assert "preemption: 0/" in out["message"]


def test_bound_pod(kit: Kit, config: Path) -> None:
    a, b = _setup(kit)
    out = explain_json(kit, f"{kit.ns}/low-0", config)
    assert out["state"] == "bound" and out["node"] == a
    verdicts = {v["node"]: v for v in out["nodes"]}
    assert verdicts[a]["fits"] is True
    assert verdicts[b]["fits"] is False
    assert [s["node"] for s in out["scores"]] == [a]
    assert any(f"taken off {a}" in n for n in out["notes"])


def test_missing_pod_and_bad_name_exit_2(kit: Kit, config: Path) -> None:
    missing = explain(kit, f"{kit.ns}/nope", config)
    assert missing.returncode == 2 and missing.stdout == ""
    assert missing.stderr == f"py-scheduler explain: pod {kit.ns}/nope not found\n"
    bad = explain(kit, "a/b/c", config)
    assert bad.returncode == 2 and bad.stdout == ""
    assert "expected [NAMESPACE/]POD, got 'a/b/c'" in bad.stderr
    # Without a namespace: the kubeconfig context's (the admin kubeconfig names none: default).
    plain = explain(kit, "no-slash", config)
    assert plain.returncode == 2 and plain.stdout == ""
    assert plain.stderr == "py-scheduler explain: pod default/no-slash not found\n"


def test_the_configuration_s_kubeconfig_is_used_without_the_flag(kit: Kit, tmp_path: Path) -> None:
    """clientConnection.kubeconfig names the cluster when --kubeconfig is not given (as
    kube-scheduler reads it), even with $KUBECONFIG unset."""
    a, _ = _setup(kit)
    config = tmp_path / "with-kubeconfig.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "clientConnection": {"kubeconfig": kit.cluster.kubeconfig},
                "profiles": [{"schedulerName": PROFILE}],
            }
        )
    )
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    ref = f"{kit.ns}/low-0"
    argv = [*py_scheduler_command(), "explain", ref, "--config", str(config), "-o", "json"]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["node"] == a
