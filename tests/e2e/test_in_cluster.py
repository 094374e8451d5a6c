"""py-scheduler as its Deployment really runs: the image, in kube-system, with the
ServiceAccount token and in-cluster configuration, on a real kubelet.

Everything else in the suite runs the scheduler as a host process; here the module starts its
own local control plane with the real node (`localcluster.py up --real-node`: kubelet,
containerd, runc; see docs/control-plane.md), imports the image `make image` built into the
node's containerd, and applies `manifests/` through an overlay that only pins the
Deployment's pods to the real node (kwok nodes fake their pods). The scheduler then binds and
preempts pods on kwok nodes of that cluster. Its own cluster, because the suite's host-process
schedulers use the same scheduler name and lease.

Prerequisites are installed by the fixture (hack/node-deps.sh: Debian's containerd, runc, CNI
plugins, iptables; hack/build-k8s.sh kubelet; hack/image.sh, which installs Docker and builds
a Debian base when needed). If one cannot be installed the tests fail with one line that says
what and how to fix it; they never skip.
"""

from __future__ import annotations

import json
import os
import secrets
import ssl
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import REPO_ROOT, Cluster, _reap_stale_sessions, localcluster, wait_for
from tests.e2e.kit import Kit, new_namespace

IMAGE = "py-scheduler:dev"
NAMESPACE = "kube-system"
DEPLOYMENT = "py-scheduler"
APP_SELECTOR = "app.kubernetes.io/name=py-scheduler"
REAL_NODE = "real-node"  # hack/realnode.py NODE_NAME
REAL_NODE_LABEL = "py-scheduler.dev/real-node"
ROLLOUT_TIMEOUT = 240.0

# Pins the scheduler's pods to the real node, and stands in for cluster DNS (the real node has
# none): kopf's in-cluster login uses https://kubernetes.default.svc, which CoreDNS would
# resolve to the Service IP. Nothing else differs from manifests/.
OVERLAY = """\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - {manifests}
patches:
  - target: {{kind: Deployment, name: py-scheduler}}
    patch: |-
      - op: add
        path: /spec/template/spec/nodeSelector
        value: {{{label}: "true"}}
      - op: add
        path: /spec/template/spec/tolerations
        value: [{{key: {label}, operator: Exists, effect: NoSchedule}}]
      - op: add
        path: /spec/template/spec/hostAliases
        value: [{{ip: {service_ip}, hostnames: [kubernetes.default.svc, kubernetes.default]}}]
"""


def _fail(message: str) -> None:
    pytest.fail(f"in-cluster e2e: {message}", pytrace=False)


def _prepare(image_tar: Path) -> Path:
    """Install/build what the real node and the image need; returns the kubelet's bin dir."""
    version = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
    revision = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    env = {**os.environ, "PIP": f"{sys.executable} -m pip"}
    steps = [
        (
            "the real node's Debian packages (containerd, runc, CNI plugins, iptables)",
            ["hack/node-deps.sh"],
            "run hack/node-deps.sh as root (apt-get install containerd runc "
            "containernetworking-plugins iptables iproute2)",
        ),
        (
            "the kubelet",
            ["hack/build-k8s.sh", "kubelet"],
            "run hack/build-k8s.sh kubelet (Go >= 1.26 and the Go module proxy)",
        ),
        (
            f"the image {IMAGE}",
            ["hack/image.sh", IMAGE, version, revision or "unknown", str(image_tar)],
            "run make image (root with apt-get, or a running Docker engine)",
        ),
    ]
    bin_dir = ""
    for what, argv, fix in steps:
        started = time.monotonic()
        proc = subprocess.run(
            argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=False
        )
        sys.stderr.write(proc.stderr)
        if proc.returncode != 0:
            lines = proc.stderr.strip().splitlines() or ["(no output)"]
            last = ([line for line in lines if "ERROR" in line] or lines)[-1].strip()
            _fail(f"{what} could not be installed ({last}); fix: {fix}")
        print(f"{what}: ready in {time.monotonic() - started:.0f}s", file=sys.stderr)
        if argv[0] == "hack/build-k8s.sh":
            bin_dir = proc.stdout.strip().splitlines()[-1]
    return Path(bin_dir)


@dataclass
class InCluster:
    cluster: Cluster
    kubectl: Path
    apps: k8s.AppsV1Api
    coord: k8s.CoordinationV1Api

    @property
    def core(self) -> k8s.CoreV1Api:
        return self.cluster.core

    def kubectl_run(self, *args: str, timeout: float = 60) -> str:
        proc = subprocess.run(
            [str(self.kubectl), "--kubeconfig", self.cluster.kubeconfig, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert proc.returncode == 0, f"kubectl {' '.join(args)}: {proc.stderr.strip()}"
        return proc.stdout

    def scheduler_pods(self) -> list[k8s.V1Pod]:
        pods = self.core.list_namespaced_pod(NAMESPACE, label_selector=APP_SELECTOR).items
        return [p for p in pods if not p.metadata.deletion_timestamp]

    def holder(self) -> str:
        lease = self.coord.read_namespaced_lease(DEPLOYMENT, NAMESPACE)
        return str(lease.spec.holder_identity or "")

    def leader_pod(self) -> k8s.V1Pod | None:
        """The pod whose name is the lease holder's identity prefix (hostname_uuid)."""
        holder = self.holder()
        for pod in self.scheduler_pods():
            if holder.startswith(f"{pod.metadata.name}_"):
                return pod
        return None

    def rolled_out(self) -> list[k8s.V1Pod] | None:
        """Two Ready pods on the real node and one of them holding the lease, else None."""
        dep = self.apps.read_namespaced_deployment(DEPLOYMENT, NAMESPACE)
        pods = self.scheduler_pods()
        ready = [
            p
            for p in pods
            if p.status.phase == "Running"
            and all(c.ready for c in p.status.container_statuses or [])
            and p.status.container_statuses
        ]
        if (dep.status.ready_replicas or 0) != 2 or len(ready) != 2 or len(pods) != 2:
            return None
        return ready if self.leader_pod() is not None else None

    def log_events(self, pod: str) -> list[dict[str, Any]]:
        out = []
        for line in self.kubectl_run("-n", NAMESPACE, "logs", pod).splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                out.append(record)
        return out


@pytest.fixture(scope="module")
def incluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InCluster]:
    image_tar = localcluster.cache_root() / "images" / "py-scheduler-dev.tar"
    bin_dir = _prepare(image_tar)
    # e2e/<pid>-...: the stale-session reaper stops it (and its node) if this session dies.
    parent = localcluster.cache_root() / "e2e"
    _reap_stale_sessions(parent)
    state_dir = parent / f"{os.getpid()}-incluster-{secrets.token_hex(3)}"
    local = localcluster.LocalCluster(state_dir, die_with_parent=True)
    failure = None
    started = time.monotonic()
    try:
        info = local.up(nodes=0, real_node=True, images=[image_tar])
    except (localcluster.ClusterError, OSError) as err:
        failure = str(err).strip().splitlines()[0]
    if failure is not None:
        local.down()
        _fail(f"could not start the control plane with the real node: {failure}")
    print(f"\nreal-node cluster up in {time.monotonic() - started:.0f}s", file=sys.stderr)
    api = k8s_config.new_client_from_config(config_file=str(info.kubeconfig))
    handle = InCluster(
        cluster=Cluster(kubeconfig=str(info.kubeconfig), api=api, local=local),
        kubectl=bin_dir / "kubectl",
        apps=k8s.AppsV1Api(api),
        coord=k8s.CoordinationV1Api(api),
    )
    try:
        overlay = tmp_path_factory.mktemp("overlay")
        manifests = os.path.relpath(REPO_ROOT / "manifests", overlay)
        (overlay / "kustomization.yaml").write_text(
            OVERLAY.format(
                manifests=manifests, label=REAL_NODE_LABEL, service_ip=localcluster.SERVICE_IP
            )
        )
        handle.kubectl_run("apply", "-k", str(overlay))
        wait_for(
            handle.rolled_out,
            ROLLOUT_TIMEOUT,
            "2 Ready py-scheduler pods on the real node, one holding the lease",
            interval=1.0,
        )
        yield handle
    finally:
        handle.cluster.delete_created_nodes()
        api.close()
        local.down()
        local.lock_path.unlink(missing_ok=True)


@pytest.fixture
def kit(incluster: InCluster) -> Iterator[Kit]:
    """The suite's Kit, on this module's cluster."""
    k = Kit(incluster.cluster, new_namespace(incluster.cluster, "incluster"))
    yield k
    k.cleanup()
    try:
        incluster.core.delete_namespace(k.ns)
    except ApiException as err:
        if err.status != 404:
            raise


def test_replicas_run_on_the_real_node_with_the_token_and_in_cluster_config(
    incluster: InCluster,
) -> None:
    pods = incluster.rolled_out()
    assert pods is not None
    for pod in pods:
        assert pod.spec.node_name == REAL_NODE
        assert pod.spec.service_account_name == "py-scheduler"
        (status,) = pod.status.container_statuses
        assert status.image.endswith(IMAGE) and status.ready and status.started
        # The projected ServiceAccount token, mounted where in-cluster config reads it.
        mounts = {m.mount_path for m in pod.spec.containers[0].volume_mounts}
        assert "/var/run/secrets/kubernetes.io/serviceaccount" in mounts
    leader = incluster.leader_pod()
    assert leader is not None
    # The structured logs through `kubectl logs`: JSON lines with upstream-like events.
    events = [r.get("event") for r in incluster.log_events(leader.metadata.name)]
    assert "caches_synced" in events and "leader_acquired" in events, events[:20]
    standby = next(p for p in pods if p.metadata.name != leader.metadata.name)
    standby_events = [r.get("event") for r in incluster.log_events(standby.metadata.name)]
    assert "caches_synced" in standby_events and "leader_acquired" not in standby_events


def test_the_in_cluster_scheduler_binds_and_preempts_on_kwok_nodes(
    incluster: InCluster, kit: Kit
) -> None:
    (node,) = kit.nodes(1, cpu="1")
    for i in range(2):
        kit.create(f"low-{i}", cpu="500m", grace=1)
    for i in range(2):
        assert kit.wait_bound(f"low-{i}", timeout=60) == node
        kit.wait_running(f"low-{i}")
    high = kit.priority_class(1000000)
    pre = kit.create("high", cpu="1", priority_class=high)
    uid = pre["metadata"]["uid"]
    for i in range(2):
        event = kit.wait_event(f"low-{i}", "Preempted", timeout=60)
        assert event["message"] == f"Preempted by pod {uid} on node {node}"
    assert kit.wait_bound("high", timeout=90) == node
    for i in range(2):
        kit.wait_gone(f"low-{i}")


def _scrape(url: str, token: str | None) -> tuple[int, str]:
    context = ssl.create_default_context()
    context.check_hostname = False  # a self-signed serving cert, as Prometheus' tls_config
    context.verify_mode = ssl.CERT_NONE  # insecure_skip_verify allows
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
    )
    try:
        with opener.open(request, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")


def test_metrics_are_scraped_as_prometheus_does_with_a_service_account_token(
    incluster: InCluster, kit: Kit
) -> None:
    """Prometheus' kubernetes_sd pod role with the conventional annotations: scheme, port and
    path from the pod, the bearer token of a ServiceAccount allowed `get` on /metrics."""
    (node,) = kit.nodes(1, cpu="1")
    kit.create("scraped", cpu="100m")
    assert kit.wait_bound("scraped", timeout=60) == node
    name = "e2e-prometheus"
    rbac = k8s.RbacAuthorizationV1Api(incluster.cluster.api)
    incluster.core.create_namespaced_service_account(kit.ns, {"metadata": {"name": name}})
    rbac.create_cluster_role(
        {
            "metadata": {"name": f"{kit.ns}-{name}"},
            "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
        }
    )
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": f"{kit.ns}-{name}"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": f"{kit.ns}-{name}",
            },
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": kit.ns}],
        }
    )
    try:
        token = incluster.core.create_namespaced_service_account_token(
            name, kit.ns, {"spec": {"expirationSeconds": 600}}
        ).status.token
        leader = incluster.leader_pod()
        assert leader is not None
        notes = leader.metadata.annotations or {}
        assert notes.get("prometheus.io/scrape") == "true"
        scheme = notes.get("prometheus.io/scheme", "http")
        url = (
            f"{scheme}://{leader.status.pod_ip}:{notes['prometheus.io/port']}"
            f"{notes.get('prometheus.io/path', '/metrics')}"
        )
        status, text = _scrape(url, token)
        assert status == 200, (url, status, text[:300])
        families = {f.name: f for f in text_string_to_metric_families(text)}
        attempts = families["scheduler_schedule_attempts"]
        scheduled = sum(
            s.value
            for s in attempts.samples
            if s.name.endswith("_total") and s.labels.get("result") == "scheduled"
        )
        assert scheduled >= 1, attempts.samples
        if scheme == "https":  # the secure port authenticates: no token, no metrics
            anonymous, _ = _scrape(url, None)
            assert anonymous in (401, 403), anonymous
    finally:
        rbac.delete_cluster_role_binding(f"{kit.ns}-{name}")
        rbac.delete_cluster_role(f"{kit.ns}-{name}")


def test_deleting_the_leaders_pod_hands_over_and_the_deployment_replaces_it(
    incluster: InCluster, kit: Kit
) -> None:
    """The old leader releases the lease on SIGTERM; then every live replica races for it
    every retryPeriod, as client-go's leader election does: the standby, or the replacement
    the Deployment starts at once (it tries as soon as it starts, and has been seen to win).
    Either way another replica leads and schedules, and the Deployment is back at 2."""
    before = incluster.rolled_out()
    assert before is not None
    leader = incluster.leader_pod()
    assert leader is not None
    old = leader.metadata.name
    (standby,) = [p.metadata.name for p in before if p.metadata.name != old]
    incluster.core.delete_namespaced_pod(old, NAMESPACE)
    # Bound: released at SIGTERM (seconds); without the release, the grace period (30 s)
    # plus the lease duration (15 s) would still fit.
    new_leader = wait_for(
        lambda: (pod := incluster.leader_pod()) is not None and pod.metadata.name != old and pod,
        75,
        f"a replica other than {old} to hold the lease",
        interval=0.5,
    )
    after = wait_for(incluster.rolled_out, ROLLOUT_TIMEOUT, "the Deployment back at 2 Ready")
    names = {p.metadata.name for p in after}
    assert old not in names and standby in names and len(names) == 2, names
    assert new_leader.metadata.name in names
    # The new leader schedules.
    (node,) = kit.nodes(1, cpu="1")
    kit.create("after-handover", cpu="100m")
    assert kit.wait_bound("after-handover", timeout=60) == node
    events = [r.get("event") for r in incluster.log_events(new_leader.metadata.name)]
    assert "leader_acquired" in events
    standby_events = [r.get("event") for r in incluster.log_events(standby)]
    assert "caches_synced" in standby_events
