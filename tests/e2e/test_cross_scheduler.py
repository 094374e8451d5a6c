"""py-scheduler next to kube-scheduler on the same nodes (kubernetes/kubernetes#130429 is a
preemption loop between two schedulers, each evicting the other's pods for its own).

With DefaultPreemption's ``victimSchedulerNames: [<our name>]``, py-scheduler only ever
preempts its own pods: both schedulers' high-priority pods get bound, no py-scheduler
``Preempted`` event names a kube-scheduler pod, and the preemptions stop (no loop).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import Cluster
from tests.e2e.kit import Kit, settle
from tests.e2e.procs import free_port


@pytest.fixture
def kube_scheduler(cluster: Cluster, tmp_path: Path) -> Iterator[None]:
    """The upstream scheduler (profile default-scheduler) of the local control plane's
    binaries; a cluster given by E2E_KUBECONFIG (kind) runs its own already."""
    if cluster.local is None:
        yield
        return
    bin_dir = Path(cluster.local.read_state()["bin_dir"])
    binary = bin_dir / "kube-scheduler"
    if not binary.exists():
        raise AssertionError(f"{binary} is missing: run `make binaries` to build kube-scheduler")
    config = tmp_path / "kube-scheduler.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "clientConnection": {"kubeconfig": cluster.kubeconfig},
                "leaderElection": {"leaderElect": False},
                "profiles": [{"schedulerName": "default-scheduler"}],
            }
        )
    )
    log = (tmp_path / "kube-scheduler.log").open("wb")
    proc = subprocess.Popen(
        [
            str(binary),
            f"--config={config}",
            "--bind-address=127.0.0.1",
            f"--secure-port={free_port()}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        time.sleep(0.5)
        if proc.poll() is not None:
            raise AssertionError(
                "kube-scheduler exited at once: "
                + (tmp_path / "kube-scheduler.log").read_text()[-2000:]
            )
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_side_by_side_neither_evicts_the_other_in_a_loop(
    kit: Kit, spawn_scheduler: Any, kube_scheduler: None
) -> None:
    name = f"side-{kit.ns}"
    spawn_scheduler(
        name=name,
        config={
            "profiles": [
                {
                    "pluginConfig": [
                        {"name": "DefaultPreemption", "args": {"victimSchedulerNames": [name]}}
                    ]
                }
            ]
        },
    )
    kit.nodes(2, cpu="2")
    low = kit.priority_class(10)
    high = kit.priority_class(1000)
    # Each node: one pod of each scheduler, full.
    for i in range(2):
        kit.create(f"py-low-{i}", cpu="1", priority_class=low, scheduler=name, grace=1)
        kit.create(
            f"kube-low-{i}", cpu="1", priority_class=low, scheduler="default-scheduler", grace=1
        )
    for i in range(2):
        kit.wait_bound(f"py-low-{i}", timeout=60)
        kit.wait_bound(f"kube-low-{i}", timeout=60)
    # Both schedulers' high-priority pods arrive at once.
    kit.create("py-high", cpu="1", priority_class=high, scheduler=name)
    kit.create("kube-high", cpu="1", priority_class=high, scheduler="default-scheduler")
    kit.wait_bound("py-high", timeout=90)
    kit.wait_bound("kube-high", timeout=90)

    def preempted() -> list[dict[str, Any]]:
        return kit.events(reason="Preempted")

    settle(10)
    first = len(preempted())
    settle(10)
    events = preempted()
    assert len(events) == first, "preemptions went on after both pods were bound (a loop)"
    # Ours: reportingController (reportingComponent in core/v1) is the scheduler's name.
    ours = [e for e in events if e.get("reportingComponent") == name]
    victims = {e["involvedObject"]["name"] for e in ours}
    # py-scheduler evicted only its own pods (none of kube-scheduler's), and both highs stay.
    assert all(v.startswith("py-low-") for v in victims), victims
    for n in ("py-high", "kube-high"):
        p = kit.pod(n)
        assert p is not None and not p["metadata"].get("deletionTimestamp"), n
