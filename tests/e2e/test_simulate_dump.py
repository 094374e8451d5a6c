"""``py-scheduler simulate`` on a real dump: nodes and running pods made on the local control
plane, dumped with its own kubectl (``kubectl get nodes,pods,pdb,priorityclasses -A -o
yaml``), plus a file of pending pods; the CLI runs as a subprocess.

The dump holds the whole cluster (other tests' nodes too); the pending pods select this
test's nodes with a nodeSelector, so only those nodes can take them."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.conftest import Cluster, localcluster
from tests.e2e.kit import Kit, pod_manifest
from tests.e2e.procs import py_scheduler_command


def kubectl(cluster: Cluster, *args: str) -> str:
    exe = Path(localcluster.resolve_bin_dir()) / "kubectl"
    out = subprocess.run(
        [str(exe), "--kubeconfig", cluster.kubeconfig, *args],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return out.stdout


def pending(k: Kit, name: str, **kw: Any) -> dict[str, Any]:
    """A pending pod as one would apply it: namespace set, no status."""
    body = pod_manifest(name, node_selector=k.selector, **kw)
    body["metadata"]["namespace"] = k.ns
    body["metadata"]["creationTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return body


def simulate(*files: Path) -> subprocess.CompletedProcess[str]:
    argv = [*py_scheduler_command(), "simulate"]
    for f in files:
        argv += ["-f", str(f)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def test_simulate_a_dump_of_the_cluster(
    kit: Kit,
    tmp_path: Path,
) -> None:
    a, b = kit.nodes(2, cpu="2")
    mid = kit.priority_class(500)
    high = kit.priority_class(1000000)
    polite = kit.priority_class(1000000 - 1, policy="Never")
    for i in range(2):
        kit.create(f"low-{i}", cpu="1", node_name=a, labels={"app": "low"})
        kit.wait_running(f"low-{i}")
        time.sleep(1.05)  # distinct start times: the later one is the cheaper victim
    kit.create("mid", cpu="2", node_name=b, priority_class=mid)
    kit.wait_running("mid")
    kit.pdb("low", {"app": "low"}, min_available=1)
    kit.wait_pdb_allowed("low", 1)

    dump = tmp_path / "dump.yaml"
    dump.write_text(
        kubectl(kit.cluster, "get", "nodes,pods,pdb,priorityclasses", "-A", "-o", "yaml")
    )
    assert yaml.safe_load(dump.read_text())["kind"] == "List"
    extra = tmp_path / "pending.yaml"
    extra.write_text(
        yaml.safe_dump_all(
            [
                pending(kit, "high", cpu="1", priority_class=high),
                pending(kit, "polite", cpu="1", priority_class=polite),
            ]
        )
    )
    # Priority comes from the dumped classes: the pending pods carry only their names.
    run = simulate(dump, extra)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    ns = kit.ns
    ours = [d for d in out["decisions"] if d["pod"].startswith(f"{ns}/")]
    # low-1 started last and would be the cheaper victim, but the PDB (one disruption
    # allowed) is spent on low-0 first (the more important pod): low-1 violates it, so it
    # is reprieved first, and low-0 goes.
    assert ours[0] == {
        "pod": f"{ns}/high",
        "outcome": "preempting",
        "node": a,
        "victims": [f"{ns}/low-0"],
    }
    assert ours[1]["pod"] == f"{ns}/polite" and ours[1]["outcome"] == "unschedulable"
    assert ours[1]["message"].startswith("0/")
    assert ours[1]["message"].endswith("preemption: not eligible due to preemptionPolicy=Never."), (
        ours[1]["message"]
    )
    assert ours[2:] == [{"pod": f"{ns}/high", "outcome": "scheduled", "node": a}]
    placements = {k: v for k, v in out["placements"].items() if k.startswith(f"{ns}/")}
    assert placements == {f"{ns}/high": a, f"{ns}/polite": None}
    assert f"{ns}/low-0" in out["evicted"]
    assert f"{ns}/low-1" not in out["evicted"] and f"{ns}/mid" not in out["evicted"]

    # Read-only: the cluster is as it was.
    assert kit.pod("low-0") is not None and kit.pod("high") is None
    # Same input, same output.
    assert simulate(dump, extra).stdout == run.stdout
